/**
 * Issue 19, JS steps isolated: a user's `backend: "js"` step that throws from
 * a timer, leaves a promise rejection unhandled or loops for ever fails the
 * request it was running (and, when it keeps happening, the model) with an
 * error naming the model; the server process survives, /ping keeps answering
 * and every other model keeps serving. The server is `serve` as a process
 * (before this change the first two ended it with exit code 1 and the third
 * froze it, /ping included); the steps are real model.mjs files in a local
 * model repository; deadlines are set per model with `js_timeout_seconds`.
 */
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { addSub, writeModelDir } from '../../examples/models/zoo.js';
import { startServe, type ServeProcess } from '../support/serve-process.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { explicitControl, input, request, type JsonReply } from '../support/test-server.js';

const ctx = new Cleanups();
let server: ServeProcess;
let exitCode: number | null | undefined;

/** A js step: x (FP32 [4]) → y = x + 1, and `bad` (JS run when x[0] is 13) before it answers. */
function jsStep(bad: string, extra = '', parameters: Record<string, string> = {}, configExtra = ''): { config: string; mjs: string } {
  const params = Object.entries(parameters)
    .map(([k, v]) => `parameters { key: "${k}" value: { string_value: "${v}" } }\n`)
    .join('');
  return {
    config: `backend: "js"
max_batch_size: 16
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { max_queue_delay_microseconds: 20000 }
${params}${configExtra}`,
    mjs: `${extra}
export async function execute(batch) {
  const x = batch.inputs.x.data;
  for (let r = 0; r < batch.rows; r++) if (x[r * 4] === 13) { ${bad} }
  return { y: { datatype: 'FP32', shape: batch.inputs.x.shape, data: x.map((v) => v + 1) } };
}
`,
  };
}

const STEPS: Record<string, { config: string; mjs: string }> = {
  // An exception thrown from a timer: nothing can catch it; in the main process it is fatal.
  timer_throw: jsStep(`await new Promise(() => setTimeout(() => { throw new Error('thrown from a timer'); }, 5));`),
  // A rejection nobody handles (the execute itself still answers, a little later).
  unhandled: jsStep(`Promise.reject(new Error('a promise nobody awaits')); await new Promise((r) => setTimeout(r, 50));`),
  // An endless loop, with a 1 s call deadline; two batches in flight on its one worker.
  loops: jsStep('while (true) {}', '', { js_timeout_seconds: '1' }, 'instance_group [ { count: 2 kind: KIND_CPU } ]\n'),
  // Crashes on 13, for the repeated-crash case.
  crashy: jsStep(`await new Promise(() => setTimeout(() => { throw new Error('crash again'); }, 1));`),
  // finalize() never returns.
  stuck_finalize: jsStep('', 'export function finalize() { while (true) {} }', { js_timeout_seconds: '1' }),
};

before(async () => {
  const root = await tempDir(ctx);
  const models = path.join(root, 'models');
  await writeModelDir(models, 'add_sub', addSub());
  for (const [name, step] of Object.entries(STEPS)) {
    await mkdir(path.join(models, name, '1'), { recursive: true });
    await writeFile(path.join(models, name, 'config.pbtxt'), `name: "${name}"\n${step.config}`);
    await writeFile(path.join(models, name, '1', 'model.mjs'), step.mjs);
  }
  server = await startServe({ MME_MODEL_SOURCE: models, MME_CACHE_DIR: path.join(root, 'cache'), MME_RUNTIME_WORKERS: '1', ...explicitControl(root) });
  void server.exited.then((code) => (exitCode = code));
  ctx.after(() => server.kill());
});

after(() => ctx.run());

/** Every request has its own deadline: against a frozen server the test fails instead of hanging. */
const invoke = (target: string, first: number, timeoutMs = 15_000): Promise<JsonReply> =>
  request(`${server.url}/invocations`, {
    method: 'POST',
    headers: { 'X-Amzn-SageMaker-Target-Model': target },
    json: { inputs: [input('x', 'FP32', [1, 4], [first, 1, 2, 3])] },
    signal: AbortSignal.timeout(timeoutMs),
  });

const steady = (): Promise<JsonReply> =>
  request(`${server.url}/invocations`, {
    method: 'POST',
    headers: { 'X-Amzn-SageMaker-Target-Model': 'add_sub' },
    json: { inputs: [input('INPUT0', 'FP32', [1, 16], new Array(16).fill(2)), input('INPUT1', 'FP32', [1, 16], new Array(16).fill(1))] },
    signal: AbortSignal.timeout(15_000),
  });

/** ms until /ping answered (or its 5 s deadline passed: Infinity). */
async function timedPing(): Promise<number> {
  const started = performance.now();
  try {
    const r = await request(`${server.url}/ping`, { signal: AbortSignal.timeout(5000) });
    return r.status === 200 ? performance.now() - started : Number.POSITIVE_INFINITY;
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

function assertAlive(): void {
  assert.equal(exitCode, undefined, `the server process exited with code ${exitCode}`);
}

/** Concurrent requests to `target` (one of them the bad one) beside requests to another model. */
async function underLoad(target: string): Promise<void> {
  assert.equal((await invoke(target, 0)).status, 200);
  const firsts = Array.from({ length: 12 }, (_, i) => (i === 5 ? 13 : i));
  const [replies, others] = await Promise.all([
    Promise.allSettled(firsts.map((f) => invoke(target, f))),
    Promise.allSettled(Array.from({ length: 12 }, steady)),
  ]);
  assertAlive();
  replies.forEach((r, i) => {
    assert.equal(r.status, 'fulfilled', `request ${i} got no answer: ${(r as PromiseRejectedResult).reason}`);
    const reply = (r as PromiseFulfilledResult<JsonReply>).value;
    if (i === 5) {
      assert.equal(reply.status, 500, reply.text);
      assert.equal(reply.body.code, 'INTERNAL');
      assert.match(reply.body.error, new RegExp(`^model '${target}': the js step crashed: `));
      assert.equal(reply.headers.get('retry-after'), null, 'the request crashed its step: the same request would again');
    } else {
      // Its batch-mates are re-run one by one on the restarted worker and answered.
      assert.equal(reply.status, 200, `request ${i}: ${reply.text}`);
      assert.deepEqual(reply.body.outputs[0].data, [firsts[i]! + 1, 2, 3, 4]);
    }
  });
  for (const o of others) assert.equal(o.status === 'fulfilled' && o.value.status, 200, 'the other model kept answering');
  // The step answers again, and the process is still there.
  const again = await invoke(target, 7);
  assert.equal(again.status, 200, again.text);
  assert.deepEqual(again.body.outputs[0].data, [8, 2, 3, 4]);
  assert.equal((await request(`${server.url}/ping`)).status, 200);
  assertAlive();
}

describe('a js step that fails outside its execute() promise', () => {
  it('(a) an exception thrown from a timer under concurrent load fails only its request; the process, the other model and the step carry on', async () => {
    await underLoad('timer_throw');
    const bad = await invoke('timer_throw', 13);
    assert.match(
      bad.body.error,
      /^model 'timer_throw': the js step crashed: an uncaught exception: thrown from a timer; its worker is restarted for the next request$/,
    );
  });

  it('(b) an unhandled rejection under concurrent load fails only its request; the process, the other model and the step carry on', async () => {
    await underLoad('unhandled');
    const bad = await invoke('unhandled', 13);
    assert.match(bad.body.error, /^model 'unhandled': the js step crashed: an unhandled promise rejection: a promise nobody awaits; its worker is restarted/);
  });

  it('(c) an endless loop fails its request with 504 at the deadline, /ping answers meanwhile, the next request works', async () => {
    assert.equal((await invoke('loops', 0)).status, 200);
    const started = performance.now();
    const looping = invoke('loops', 13);
    // Another call on the same worker, in the instance's other batch slot: it loses its worker with the loop.
    await new Promise((r) => setTimeout(r, 300));
    const lost = invoke('loops', 4);
    const pings: number[] = [];
    const pinging = (async () => {
      // While the step loops (its deadline is 1 s): a fresh /ping every 100 ms.
      while (performance.now() - started < 1500) {
        pings.push(await timedPing());
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const reply = await looping;
    const tookMs = performance.now() - started;
    await pinging;
    assertAlive();
    assert.equal(reply.status, 504, reply.text);
    assert.equal(reply.body.code, 'TIMEOUT');
    assert.equal(reply.headers.get('retry-after'), null, 'its own deadline: the same request would loop again');
    const other = await lost;
    assert.equal(other.status, 503, other.text);
    assert.equal(other.body.code, 'RUNTIME_UNAVAILABLE');
    assert.equal(other.headers.get('retry-after'), '1', 'the worker is restarted now: retry at once');
    assert.equal(reply.body.error, "model 'loops': execute() did not return within 1 s; its worker was stopped and is restarted for the next request");
    // At the deadline, not long after it (generous: a shared, slow machine).
    assert.ok(tookMs >= 900 && tookMs < 8000, `the looping request failed after ${Math.round(tookMs)} ms`);
    assert.ok(pings.length >= 3, `${pings.length} pings`);
    // SageMaker's health check allows 2 s; the event loop was never blocked.
    assert.ok(Math.max(...pings) < 2000, `/ping took ${pings.map(Math.round).join(', ')} ms while the step looped`);
    const next = await invoke('loops', 4);
    assert.equal(next.status, 200, next.text);
    assert.deepEqual(next.body.outputs[0].data, [5, 2, 3, 4]);
    assert.equal((await steady()).status, 200);
  });
});

describe('a js step that keeps failing, and unloads', () => {
  it('(d) five crashes in a row fail the model with a clear error until it is loaded again (an explicit load, or unload + load)', async () => {
    assert.equal((await invoke('crashy', 0)).status, 200);
    for (let i = 1; i <= 5; i++) {
      const r = await invoke('crashy', 13);
      assert.equal(r.status, 500, r.text);
      assert.match(r.body.error, /^model 'crashy': the js step crashed: an uncaught exception: crash again; /);
      if (i < 5) assert.match(r.body.error, /its worker is restarted for the next request$/);
      else assert.match(r.body.error, /its js step crashed or timed out 5 times in a row \(last: .*\); it is stopped until the model is loaded again$/);
    }
    // Failed: even a good request gets the error at once, and no worker is started for it.
    const started = performance.now();
    const failed = await invoke('crashy', 1);
    assert.equal(failed.status, 500, failed.text);
    assert.equal(failed.body.code, 'INTERNAL');
    assert.match(
      failed.body.error,
      /^model 'crashy': its js step crashed or timed out 5 times in a row \(last: the js step crashed: an uncaught exception: crash again\); it is stopped until the model is loaded again$/,
    );
    assert.ok(performance.now() - started < 2000);
    assertAlive();
    // An explicit load of the resident, stopped model loads it afresh (as Triton reloads on load).
    assert.equal((await request(`${server.url}/v2/repository/models/crashy/load`, { method: 'POST' })).status, 200);
    const back = await invoke('crashy', 1);
    assert.equal(back.status, 200, back.text);
    // So does an unload and a load, after it failed again.
    for (let i = 0; i < 5; i++) assert.equal((await invoke('crashy', 13)).status, 500);
    assert.match((await invoke('crashy', 1)).body.error, /stopped until the model is loaded again$/);
    assert.equal((await request(`${server.url}/v2/repository/models/crashy/unload`, { method: 'POST' })).status, 200);
    assert.equal((await request(`${server.url}/v2/repository/models/crashy/load`, { method: 'POST' })).status, 200);
    assert.equal((await invoke('crashy', 1)).status, 200);
  });

  it('(e) unloading a step whose finalize() never returns, and one stuck in execute(), finishes within the deadlines', async () => {
    assert.equal((await invoke('stuck_finalize', 0)).status, 200);
    let started = performance.now();
    const unload = await request(`${server.url}/v2/repository/models/stuck_finalize/unload`, { method: 'POST', signal: AbortSignal.timeout(15_000) });
    let took = performance.now() - started;
    assert.equal(unload.status, 200, unload.text);
    assert.ok(took >= 900 && took < 8000, `unload took ${Math.round(took)} ms (finalize() deadline 1 s)`);
    assertAlive();
    assert.ok((await timedPing()) < 2000);

    // An unload while execute() loops: the request fails at its deadline, then the unload finishes.
    assert.equal((await invoke('loops', 0)).status, 200);
    const looping = invoke('loops', 13);
    await new Promise((r) => setTimeout(r, 100));
    started = performance.now();
    const unloadLoops = await request(`${server.url}/v2/repository/models/loops/unload`, { method: 'POST', signal: AbortSignal.timeout(15_000) });
    took = performance.now() - started;
    assert.equal(unloadLoops.status, 200, unloadLoops.text);
    assert.equal((await looping).status, 504);
    assert.ok(took < 8000, `unload took ${Math.round(took)} ms`);
    assertAlive();
    // They load again on the next request.
    assert.equal((await invoke('stuck_finalize', 2)).status, 200);
    assert.equal((await invoke('loops', 2)).status, 200);
  });
});
