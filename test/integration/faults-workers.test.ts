/**
 * Issue 19, supervision: a runtime worker thread that dies (stopped from
 * outside, as an exception or a native crash would end it, exit code 1) is
 * replaced. Requests in flight on it fail with 503 RUNTIME_UNAVAILABLE
 * (retryable, the server's fault, not the model's), the model is reloaded on
 * the next request, and a worker that keeps dying turns /ping to 503 so the
 * platform replaces the container.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, it } from 'node:test';
import { writeModelDir } from '../../examples/models/zoo.js';
import { slowModel } from '../support/slow-model.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer } from '../support/test-server.js';

const ctx = new Cleanups();
after(() => ctx.run());

const body = { inputs: [input('INPUT0', 'FP32', [1, 512], new Array(512).fill(1))] };

it('a dead runtime worker: in-flight 503 RUNTIME_UNAVAILABLE, the model reloads on the next request, repeated deaths make /ping 503', async () => {
  const root = await tempDir(ctx);
  await writeModelDir(path.join(root, 'models'), 'slow', slowModel({ layers: 64 }));
  // One worker, no main-thread copies: every run is in the worker.
  const s = await startTestServer({
    modelSource: path.join(root, 'models'),
    cacheDir: path.join(root, 'cache'),
    env: { MME_RUNTIME_WORKERS: '1', MME_MAIN_THREAD_MAX_RUN_US: '0', MME_MAIN_THREAD_ONLY_MAX_RUN_US: '0' },
  });
  ctx.after(() => s.close());
  const invoke = () => request(`${s.url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': 'slow' }, json: body });
  assert.equal((await invoke()).status, 200);

  // Stop the worker (idle: stopping a thread inside a native onnxruntime run aborts the whole process,
  // which no supervision can survive; an exception or an out-of-memory in the worker's own code ends it like this).
  await s.running.pool.threadOf(0).terminate();
  await new Promise((r) => setTimeout(r, 50));
  assert.ok(s.logs.some((l) => l['msg'] === 'runtime worker died; replaced'));
  assert.ok(s.logs.some((l) => l['msg'] === 'runtime worker died: unloading the model; the next request loads it again' && l['model'] === 'slow'));
  // The next request loads the model again on the new worker; /ping stays healthy after one death.
  const again = await invoke();
  assert.equal(again.status, 200, again.text);
  assert.equal((await request(`${s.url}/ping`)).status, 200);
  assert.equal(s.logs.filter((l) => l['msg'] === 'model loaded').length, 2);

  // A worker that keeps dying: /ping and /v2/health/live say so.
  for (let i = 0; i < 2; i++) {
    assert.equal((await invoke()).status, 200);
    await s.running.pool.threadOf(0).terminate();
  }
  const ping = await request(`${s.url}/ping`);
  assert.equal(ping.status, 503, ping.text);
  assert.equal(ping.body.code, 'RUNTIME_UNAVAILABLE');
  assert.match(ping.body.error, /runtime workers keep dying/);
  // When it would answer 200 again were no other worker to die: the oldest of the deaths, 10 min on.
  const retryAfter = Number(ping.headers.get('retry-after'));
  assert.ok(retryAfter > 540 && retryAfter <= 600, `Retry-After ${ping.headers.get('retry-after')}`);
  assert.equal(ping.body.details.retryAfterSeconds, retryAfter);
  assert.equal((await request(`${s.url}/v2/health/live`)).status, 400);
  // It still serves what it can meanwhile.
  assert.equal((await invoke()).status, 200);
});
