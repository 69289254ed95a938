/**
 * The lifecycle core (registry/lifecycle.ts) on its own, with fakes and a
 * fake clock: keys of two provenances never collide, one load per key for
 * everyone who asks meanwhile, what a load hangs on its entry goes with it
 * (after a failure too), an eviction tells the provenance, and the resident
 * count is kept as entries come and go. No source, no records: the core
 * knows nothing of where a model came from.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ServingError } from '../../../src/errors.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { KeySpace, ModelLifecycle, type LoadFn } from '../../../src/registry/lifecycle.js';
import { MemoryManager } from '../../../src/registry/memory-manager.js';
import { FakeClock } from '../scheduler/fakes.js';
import { deferred, FakeLoader, settle } from './fake-loader.js';
import { isServingError } from '../../support/serving-error.js';

function fixture(budgetBytes = 1000) {
  const logger = silentLogger();
  const metrics = createMetrics();
  const memory = new MemoryManager({ budgetBytes, maxModels: undefined, waitMs: 50, logger, metrics });
  const loader = new FakeLoader(memory);
  const clock = new FakeClock();
  const lifecycle = new ModelLifecycle({ loader, memory, logger, metrics, clock });
  return { lifecycle, loader, memory, metrics, clock };
}

/** A load of `dir` that hangs `log` entries on the entry's release. */
function loadOf(dir: string, log: string[] = []): LoadFn {
  return async (ctx) => {
    ctx.onRelease(() => log.push(`released ${dir}`));
    return ctx.load({ dir, label: dir, fallbackName: dir, seriesTarget: dir });
  };
}

describe('ModelLifecycle', () => {
  test('keys of two provenances never collide, even for one name', async () => {
    const { lifecycle, loader } = fixture();
    const targets = new KeySpace('target');
    const managed = new KeySpace('managed');
    const a = await lifecycle.acquire(targets.id('m'), undefined, loadOf('/t/m'));
    const b = await lifecycle.acquire(managed.id('m'), undefined, loadOf('/s/m'));
    assert.notEqual(a.pkg, b.pkg);
    assert.equal(loader.calls.length, 2);
    assert.equal(lifecycle.loadedCount(), 2);
    a.release();
    b.release();
  });

  test('one load per key for everyone who asks meanwhile; nothing to lease at once while it loads; the wait is clocked', async () => {
    const { lifecycle, loader, clock, metrics } = fixture();
    const key = new KeySpace('x').key('a');
    loader.hold = true;
    const first = lifecycle.acquire({ key, label: 'a' }, undefined, loadOf('/a'));
    const second = lifecycle.acquire({ key, label: 'a' }, undefined, loadOf('/a-other'));
    await settle();
    assert.equal(loader.calls.length, 1);
    assert.equal(lifecycle.tryLease(lifecycle.find(key)), undefined, 'LOADING: no lease at once');
    assert.equal(lifecycle.view(key)?.state, 'LOADING');
    await clock.advance(250_000);
    loader.calls[0]!.gate.resolve();
    const [l1, l2] = await Promise.all([first, second]);
    assert.equal(l1.pkg, l2.pkg);
    assert.equal(l1.pkg.dir, '/a', 'the first load is the one');
    const hot = lifecycle.tryLease(lifecycle.find(key));
    assert.equal(hot?.pkg, l1.pkg);
    const waited = await metrics.modelLoadingWait.get();
    const sum = waited.values.find((v) => v.metricName === 'onnx_mme_model_loading_wait_seconds_sum')?.value;
    assert.ok(sum !== undefined && Math.abs(sum - 0.5) < 1e-9, `two waits of 0.25 s on the fake clock, got ${sum}`);
    for (const l of [l1, l2, hot!]) l.release();
  });

  test('what a load hangs on its entry is released after the package, and after a failed load too', async () => {
    const { lifecycle, loader, memory } = fixture();
    const key = new KeySpace('x').key('a');
    const log: string[] = [];
    loader.failures.set('/bad', new Error('bad graph'));
    await assert.rejects(lifecycle.acquire({ key, label: 'bad' }, undefined, loadOf('/bad', log)), /bad graph/);
    assert.deepEqual(log, ['released /bad']);
    assert.equal(lifecycle.find(key), undefined, 'a failed load leaves no entry');
    const lease = await lifecycle.acquire({ key, label: 'a' }, undefined, loadOf('/a', log));
    const pkg = await loader.calls[1]!.result;
    const unloading = lifecycle.unload(lifecycle.find(key)!);
    await settle();
    assert.equal(pkg.released(), false, 'a lease still holds it');
    lease.release();
    await unloading;
    assert.equal(pkg.released(), true);
    assert.deepEqual(log, ['released /bad', 'released /a']);
    assert.equal(memory.usedBytes, 0);
    assert.equal(lifecycle.loadedCount(), 0);
  });

  test('an entry unloaded while it loads: its load is aborted with the reason, waiters get it', async () => {
    const { lifecycle, loader } = fixture();
    const key = new KeySpace('x').key('a');
    loader.hold = true;
    const waiting = lifecycle.acquire({ key, label: 'a' }, undefined, loadOf('/a'));
    waiting.catch(() => undefined);
    await settle();
    const signal = loader.calls[0]!.request.signal!;
    const gone = new ServingError('MODEL_NOT_FOUND', "model 'a' was unloaded while it was loading", { model: 'a' });
    const unloading = lifecycle.unload(lifecycle.find(key)!, gone);
    assert.equal(signal.aborted, true);
    assert.equal(signal.reason, gone);
    loader.calls[0]!.gate.resolve();
    await unloading;
    await assert.rejects(waiting, isServingError('MODEL_NOT_FOUND', /was unloaded/));
    assert.equal(lifecycle.find(key), undefined);
  });

  test('the memory manager evicts an idle entry through the core, which tells its provenance first', async () => {
    const { lifecycle } = fixture(20);
    const keys = new KeySpace('x');
    const evicted: string[] = [];
    const hooks = { onEvict: (e: { label: string }) => void evicted.push(e.label) };
    (await lifecycle.acquire(keys.id('a'), undefined, loadOf('/a'), hooks)).release();
    (await lifecycle.acquire(keys.id('b'), undefined, loadOf('/b'), hooks)).release();
    const held = await lifecycle.acquire(keys.id('c'), undefined, loadOf('/c'), hooks);
    assert.deepEqual(evicted, ['a'], 'least recently used first');
    assert.equal(lifecycle.find(keys.key('a')), undefined);
    assert.equal(lifecycle.loadedCount(), 2);
    held.release();
  });

  test('close refuses new work and waits for the last lease', async () => {
    const { lifecycle } = fixture();
    const key = new KeySpace('x').key('a');
    const lease = await lifecycle.acquire({ key, label: 'a' }, undefined, loadOf('/a'));
    const gate = deferred();
    const closing = lifecycle.close().then(() => gate.resolve());
    await settle();
    await assert.rejects(lifecycle.acquire(new KeySpace('x').id('b'), undefined, loadOf('/b')), isServingError('SHUTTING_DOWN', /shutting down/));
    assert.equal(lifecycle.tryLease(lifecycle.find(key)), undefined);
    lease.release();
    await closing;
    await gate.promise;
    assert.equal(lifecycle.loadedCount(), 0);
  });
});
