/**
 * MemoryManager with plain residents (no sessions): LRU victims, pinned
 * residents never evicted, loads waiting for pins to drop, the count cap, and
 * 507 when a model is larger than the budget or room never comes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { MemoryManager, type Reservation, type Resident } from '../../../src/registry/memory-manager.js';
import { isServingError } from '../../support/serving-error.js';
import { FakeClock } from '../scheduler/fakes.js';

function manager(budgetBytes: number, options: { maxModels?: number; waitMs?: number; clock?: FakeClock } = {}) {
  const metrics = createMetrics();
  const memory = new MemoryManager({
    budgetBytes,
    maxModels: options.maxModels,
    waitMs: options.waitMs ?? 5_000,
    logger: silentLogger(),
    metrics,
    ...(options.clock ? { clock: options.clock } : {}),
  });
  return { memory, metrics };
}

interface FakeResident extends Resident {
  inflight: number;
  evicted: boolean;
  reservation: Reservation;
}

/** Reserve and register a resident the way the registry does. */
async function resident(memory: MemoryManager, key: string, bytes: number): Promise<FakeResident> {
  const reservation = await memory.reserve({ label: key }, bytes);
  const r: FakeResident = {
    key,
    label: key,
    reservation,
    inflight: 0,
    evicted: false,
    get bytes() {
      return reservation.bytes;
    },
    pinned: () => r.inflight > 0,
    evict: async () => {
      r.evicted = true;
      reservation.release();
    },
  };
  memory.track(r);
  return r;
}

describe('MemoryManager', () => {
  it('evicts idle residents least recently used first, only as many as needed', async () => {
    const { memory } = manager(300);
    const a = await resident(memory, 'a', 100);
    const b = await resident(memory, 'b', 100);
    const c = await resident(memory, 'c', 100);
    memory.touch('a'); // b is now the least recently used
    const d = await resident(memory, 'd', 100);
    assert.deepEqual([a.evicted, b.evicted, c.evicted, d.evicted], [false, true, false, false]);
    assert.equal(memory.usedBytes, 300);
    await resident(memory, 'e', 150); // needs two: c then a
    assert.deepEqual([a.evicted, c.evicted, d.evicted], [true, true, false]);
    assert.equal(memory.usedBytes, 250);
  });

  it('tracking a resident again makes it the most recently used; forgetting a replaced one keeps its successor', async () => {
    const { memory } = manager(300);
    const a = await resident(memory, 'a', 100);
    const b = await resident(memory, 'b', 100);
    memory.track(a); // a again, as after a revalidation: b is now the least recently used
    const stale = { ...b, key: 'b' };
    memory.forget(stale); // not the resident tracked under 'b': nothing changes
    await resident(memory, 'c', 100);
    await resident(memory, 'd', 100);
    assert.deepEqual([a.evicted, b.evicted], [false, true]);
    memory.touch('gone'); // a key never tracked is no use to record
    await resident(memory, 'e', 100);
    assert.equal(a.evicted, true);
  });

  it('never evicts a pinned resident; a load waits until its request finishes', async () => {
    const { memory } = manager(200);
    const a = await resident(memory, 'a', 100);
    const b = await resident(memory, 'b', 100);
    a.inflight = 1;
    b.inflight = 1;
    let granted = false;
    const waiting = memory.reserve({ label: 'c' }, 100).then((r) => {
      granted = true;
      return r;
    });
    await new Promise((r) => setImmediate(r));
    assert.equal(granted, false, 'both are in use: the load waits');
    assert.equal(a.evicted || b.evicted, false);
    b.inflight = 0;
    memory.notify(); // the registry does this when a lease is released
    const c = await waiting;
    assert.equal(b.evicted, true);
    assert.equal(a.evicted, false, 'the pinned one is still there');
    c.release();
  });

  it('the count cap evicts like the byte budget', async () => {
    const { memory } = manager(1_000_000, { maxModels: 2 });
    const a = await resident(memory, 'a', 1);
    await resident(memory, 'b', 1);
    await resident(memory, 'c', 1);
    assert.equal(a.evicted, true);
    assert.equal(memory.reservations, 2);
  });

  it('a model larger than the whole budget is refused at once with both sizes', async () => {
    const { memory } = manager(1000);
    await assert.rejects(
      memory.reserve({ label: 'huge' }, 5000),
      isServingError('INSUFFICIENT_MEMORY', /model 'huge' needs about 5000 bytes of memory, more than the whole memory budget of 1000 bytes/),
    );
    assert.equal(memory.usedBytes, 0);
  });

  it('when room never comes (everything pinned) the wait ends in 507 naming the holders', async () => {
    const { memory } = manager(100, { waitMs: 30 });
    const a = await resident(memory, 'a', 100);
    a.inflight = 1;
    await assert.rejects(
      memory.reserve({ label: 'b' }, 50),
      isServingError(
        'INSUFFICIENT_MEMORY',
        /model 'b' needs about 50 bytes but 100 of the 100-byte memory budget .* held by models with requests in flight or loading/,
      ),
    );
    assert.equal(a.evicted, false);
  });

  it('resize corrects a reservation to the measured size; trim then evicts idle ones to get back within budget', async () => {
    const { memory, metrics } = manager(300);
    const a = await resident(memory, 'a', 100);
    const b = await resident(memory, 'b', 100);
    b.reservation.resize(250);
    assert.equal(memory.usedBytes, 350);
    await memory.trim();
    assert.equal(a.evicted, true);
    assert.equal(memory.usedBytes, 250);
    assert.match(await metrics.registry.metrics(), /onnx_mme_loaded_model_bytes 250/);
    assert.match(await metrics.registry.metrics(), /onnx_mme_model_evictions_total 1/);
  });

  it('release is idempotent and forget() does not drop a newer resident under the same key', async () => {
    const { memory } = manager(200);
    const old = await resident(memory, 'k', 100);
    const newer = await resident(memory, 'k', 100);
    memory.forget(old);
    old.reservation.release();
    old.reservation.release();
    assert.equal(memory.usedBytes, 100);
    await resident(memory, 'x', 150); // must find `newer` to evict
    assert.equal(newer.evicted, true);
  });

  it('the memory wait runs on the injected clock: 507 exactly when MME_MEMORY_WAIT_SECONDS has passed, not before', async () => {
    const clock = new FakeClock();
    const { memory } = manager(100, { waitMs: 30_000, clock });
    const a = await resident(memory, 'a', 100);
    a.inflight = 1;
    let outcome: unknown;
    const waiting = memory.reserve({ label: 'b' }, 50).then(
      () => (outcome = 'granted'),
      (err: unknown) => (outcome = err),
    );
    await clock.advance(29_999_000);
    assert.equal(outcome, undefined, 'still waiting 1 ms before the deadline');
    await clock.advance(1_000);
    await waiting;
    assert.ok(isServingError('INSUFFICIENT_MEMORY', /model 'b' needs about 50 bytes/)(outcome), String(outcome));
    assert.equal(clock.pendingTimers, 0, 'no timer left behind');
  });

  it('a wait ends as soon as the pinned model is released, whatever the clock says', async () => {
    const clock = new FakeClock();
    const { memory } = manager(100, { waitMs: 30_000, clock });
    const a = await resident(memory, 'a', 100);
    a.inflight = 1;
    const waiting = memory.reserve({ label: 'b' }, 50);
    await clock.advance(1_000);
    a.inflight = 0;
    memory.notify();
    const grant = await waiting;
    assert.equal(grant.bytes, 50);
    assert.equal(a.evicted, true, 'the now idle model made room');
    assert.equal(clock.pendingTimers, 0);
  });
});
