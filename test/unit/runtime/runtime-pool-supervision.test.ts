/**
 * @module test/unit/runtime/runtime-pool-supervision
 * Issue 19, supervision, the in-flight path: calls waiting on a runtime worker
 * when it dies (an uncaught exception in it, or an exit) fail at once with 503
 * RUNTIME_UNAVAILABLE (retryable; the server's fault, not the model's), not
 * never; the worker is replaced at the same index and the replacement serves;
 * the listeners hear which index died; MAX_DEATHS deaths make the pool
 * unhealthy. The worker is a stand-in (test/support/dying-runtime-worker.ts)
 * that dies on cue; the integration test (faults-workers) kills a real idle one.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { ServingError } from '../../../src/errors.js';
import { DEATH_WINDOW_MS, MAX_DEATHS, RuntimePool, type PooledSession } from '../../../src/runtime/runtime-pool.js';
import type { CreateSessionOptions } from '../../../src/runtime/worker-protocol.js';
import type { Tensor } from '../../../src/protocol/tensor.js';

const OPTIONS: CreateSessionOptions = { providers: ['cpu'], deviceId: 0, graphOptimizationLevel: 'all', intraOpThreads: 1, interOpThreads: 1 };
const STANDIN = new URL('../../support/dying-runtime-worker.js', import.meta.url);
const pool = new RuntimePool(2, {}, STANDIN);
after(() => pool.close());

const lost: { index: number; cause: string }[] = [];
pool.onWorkerLost((index, cause) => lost.push({ index, cause }));

const feed = (name: string): Map<string, Tensor> => new Map([[name, { datatype: 'FP32', shape: [1], data: new Float32Array(1) }]]);

function isUnavailable(err: unknown): boolean {
  assert.ok(err instanceof ServingError, String(err));
  assert.equal(err.code, 'RUNTIME_UNAVAILABLE');
  assert.match(err.message, /stopped .*replaced, retry the request/);
  // Its replacement is already starting: retry after the smallest Retry-After.
  assert.deepEqual(err.details, { retryAfterSeconds: 1 });
  return true;
}

test('calls in flight on a worker that throws fail with RUNTIME_UNAVAILABLE, the worker is replaced and the other worker is untouched', async () => {
  const a: PooledSession = await pool.createSession('a.onnx', OPTIONS);
  const b: PooledSession = await pool.createSession('b.onnx', OPTIONS, new Set([a.worker]));
  assert.notEqual(a.worker, b.worker);
  const hung = a.run(feed('hang'), []);
  const hung2 = a.run(feed('hang'), []);
  const other = b.run(feed('hang'), []);
  const crash = a.run(feed('crash'), []);
  const started = performance.now();
  await assert.rejects(hung, isUnavailable);
  await assert.rejects(hung2, isUnavailable);
  await assert.rejects(crash, isUnavailable);
  // At once, not after some timeout: the death itself rejects them.
  assert.ok(performance.now() - started < 5_000);
  assert.deepEqual(
    lost.map((l) => l.index),
    [a.worker],
  );
  assert.match(lost[0]!.cause, /crashed: step fault/);
  // The dead worker's sessions are gone: calls on them fail the same way, release is a no-op.
  await assert.rejects(a.run(feed('ok'), []), isUnavailable);
  await a.release();
  // The replacement at the same index takes new sessions and answers.
  const c = await pool.createSession('c.onnx', OPTIONS, new Set([b.worker]));
  assert.equal(c.worker, a.worker);
  assert.deepEqual(await c.run(feed('ok'), []), new Map());
  assert.ok(pool.healthy);
  // The other worker never died: its call is still waiting (it is a 'hang'), not rejected.
  const settled = await Promise.race([
    other.then(
      () => 'resolved',
      () => 'rejected',
    ),
    new Promise((r) => setTimeout(() => r('pending'), 100)),
  ]);
  assert.equal(settled, 'pending');
});

test('a worker that exits is replaced too; MAX_DEATHS deaths make the pool unhealthy', async () => {
  while (pool.recentDeaths < MAX_DEATHS) {
    const s = await pool.createSession('x.onnx', OPTIONS);
    await assert.rejects(s.run(feed('exit'), []), (err) => isUnavailable(err) && /exited with code 3/.test((err as Error).message));
  }
  assert.equal(pool.healthy, false);
  // Why /ping says 503, and when it would say 200 again were no other worker to die: the window (10 min) from the
  // oldest death that still counts.
  assert.equal(pool.unhealthy?.code, 'RUNTIME_UNAVAILABLE');
  const retryAfter = pool.unhealthy.details?.['retryAfterSeconds'] as number;
  assert.ok(retryAfter > DEATH_WINDOW_MS / 1000 - 60 && retryAfter <= DEATH_WINDOW_MS / 1000, `retryAfterSeconds ${retryAfter}`);
  // Unhealthy, but it still serves what it can.
  const s = await pool.createSession('y.onnx', OPTIONS);
  assert.deepEqual(await s.run(feed('ok'), []), new Map());
});
