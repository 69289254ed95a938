/**
 * Concurrent loads' accounting (registry/load-slots.ts, registry/load-measurement.ts)
 * on a fake resident set: the slots bound and order loads and let cancelled
 * waiters go; a load alone is measured exactly, overlapping loads share
 * their group's growth by estimate, releases during a load are added back,
 * and the per-session estimate follows what was measured.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { INITIAL_SESSION_OVERHEAD_BYTES, LoadMeasurement } from '../../../src/registry/load-measurement.js';
import { LoadSlots } from '../../../src/registry/load-slots.js';

const KB = 1024;

describe('load slots', () => {
  test('at most `size` at once, first come first served; a cancelled waiter leaves the queue', async () => {
    const slots = new LoadSlots(2);
    const order: string[] = [];
    const a = await slots.acquire();
    const b = await slots.acquire();
    assert.equal(slots.inUse, 2);
    const abort = new AbortController();
    const c = slots.acquire().then((free) => (order.push('c'), free));
    const gone = slots.acquire(abort.signal);
    const d = slots.acquire().then((free) => (order.push('d'), free));
    assert.equal(slots.queued, 3);
    abort.abort(new Error('unloaded'));
    await assert.rejects(gone, /unloaded/);
    assert.equal(slots.queued, 2);
    a();
    a(); // idempotent: frees one slot, once
    const freeC = await c;
    assert.deepEqual(order, ['c']);
    b();
    const freeD = await d;
    assert.deepEqual(order, ['c', 'd']);
    assert.equal(slots.inUse, 2);
    freeC();
    freeD();
    assert.equal(slots.inUse, 0);
  });
});

describe('load measurement', () => {
  const footprint = { fileBytes: 100 * KB, sessions: 1 };

  test('a load alone reads its own growth exactly, and calibrates the per-session estimate', async () => {
    let rss = 1_000 * KB;
    const m = new LoadMeasurement(() => rss);
    assert.equal(m.estimate(footprint), 100 * KB + INITIAL_SESSION_OVERHEAD_BYTES);
    const t = m.begin();
    rss += 150 * KB;
    assert.equal(m.end(t, footprint), 150 * KB);
    assert.equal(await t.settled, 150 * KB);
    assert.equal(m.sessionOverheadBytes, 50 * KB, 'measured beyond its files');
    assert.equal(m.estimate(footprint), 150 * KB);
  });

  test('overlapping loads read nothing alone, then share the group growth by estimate when the last ends', async () => {
    let rss = 0;
    const m = new LoadMeasurement(() => rss);
    const big = { fileBytes: 300 * KB, sessions: 1 };
    const a = m.begin();
    rss += 100 * KB;
    const b = m.begin();
    rss += 500 * KB;
    assert.equal(m.end(a, footprint), undefined, 'b was loading too');
    rss += 100 * KB;
    assert.equal(m.end(b, big), undefined);
    const [sa, sb] = await Promise.all([a.settled, b.settled]);
    // 700 KB grown; estimates 100 KB + 1 MiB and 300 KB + 1 MiB.
    const ea = 100 * KB + INITIAL_SESSION_OVERHEAD_BYTES;
    const eb = 300 * KB + INITIAL_SESSION_OVERHEAD_BYTES;
    assert.ok(Math.abs(sa! - (700 * KB * ea) / (ea + eb)) <= 1);
    assert.ok(Math.abs(sb! - (700 * KB * eb) / (ea + eb)) <= 1);
    const c = m.begin();
    rss += 10 * KB;
    assert.equal(m.end(c, footprint), 10 * KB, 'the group is over: the next load is alone');
  });

  test('memory released during a load (an eviction making room) is added back; a failed load settles undefined', async () => {
    let rss = 0;
    const m = new LoadMeasurement(() => rss);
    const t = m.begin();
    m.released(400 * KB);
    rss += 120 * KB - 400 * KB;
    assert.equal(m.end(t, footprint), 120 * KB);
    const failed = m.begin();
    assert.equal(m.end(failed, undefined), 0);
    assert.equal(await failed.settled, undefined);
  });
});
