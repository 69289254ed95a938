/**
 * Session placement (runtime/session-placement.ts) through the real server:
 * a small CPU model gets a main-thread copy beside its worker session and
 * answers the same whichever runs; one cheaper than the hop to a worker runs
 * on the main thread only; MME_MAIN_THREAD_MAX_RUN_US,
 * MME_MAIN_THREAD_ONLY_MAX_RUN_US and the `execution_thread` parameter
 * decide, from a run estimated from the model's graph (no timing); models
 * whose cost cannot be bounded stay in their worker; the copy is counted in
 * the model's memory; and over 10 starts each model lands the same way
 * every time.
 */
import os from 'node:os';
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { buildModel, node, valueInfo } from '../../examples/models/onnx-builder.js';
import { configText, mlp, scale, tiny, writeModelDir } from '../../examples/models/zoo.js';
import type { ModelSession } from '../../src/runtime/onnx-session.js';
import { tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer, type TestServer } from '../support/test-server.js';

const cleanups: (() => Promise<void>)[] = [];
const ctx = { after: (fn: () => Promise<void>) => cleanups.push(fn) };
after(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

const SCALE_CONFIG = (extra = ''): string =>
  configText({
    maxBatchSize: 8,
    inputs: [{ name: 'INPUT0', dataType: 'FP32', dims: [4] }],
    outputs: [{ name: 'OUTPUT0', dataType: 'FP32', dims: [4] }],
    extra,
  });

const parameter = (value: string): string => `parameters { key: "execution_thread" value: { string_value: "${value}" } }`;

async function server(models: Record<string, { onnx: Uint8Array; config?: string }>, env: Record<string, string> = {}): Promise<TestServer> {
  const root = await tempDir(ctx);
  for (const [name, m] of Object.entries(models)) await writeModelDir(root, name, m);
  const s = await startTestServer({ modelSource: root, cacheDir: path.join(await tempDir(ctx), 'cache'), env });
  cleanups.push(() => s.close());
  return s;
}

function invoke(s: TestServer, target: string, rows: number[][]) {
  return request(`${s.url}/invocations`, {
    method: 'POST',
    headers: { 'X-Amzn-SageMaker-Target-Model': target },
    json: { inputs: [input('INPUT0', 'FP32', [rows.length, rows[0]!.length], rows.flat())] },
  });
}

function sessionOf(s: TestServer, target: string): ModelSession {
  const pkg = s.running.registry.resolve({ kind: 'target', target: target }).resident()?.pkg;
  assert.ok(pkg, `${target} is resident`);
  const session = pkg.entry.versions.get(1)?.session;
  assert.ok(session, `${target} has a session`);
  return session;
}

/** No model is cheap enough to leave its worker entirely: the copy rule alone decides. */
const COPY_ONLY = { MME_MAIN_THREAD_ONLY_MAX_RUN_US: '0' };

/** Quiet requests until the model's main-thread copy exists (it is made after COPY_AFTER_QUIET_RUNS quiet runs). */
async function madeCopy(s: TestServer, target: string): Promise<void> {
  for (let i = 0; i < 20 && sessionOf(s, target).copies < 2; i++) {
    assert.equal((await invoke(s, target, [[1, 1, 1, 1]])).status, 200);
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(sessionOf(s, target).copies, 2, `${target} has its main-thread copy`);
}

const placed = (s: TestServer, model: string) => s.logs.filter((l) => l['msg'] === 'session placed' && l['model'] === model);

describe('session placement', () => {
  it('a small CPU model gets a main-thread copy; lone and concurrent requests get their own rows either way', async () => {
    const s = await server({ small: { onnx: scale(3).onnx, config: SCALE_CONFIG() } }, COPY_ONLY);
    const first = await invoke(s, 'small', [[1, 2, 3, 4]]);
    assert.equal(first.status, 200, first.text);
    assert.deepEqual(first.body.outputs[0].data, [3, 6, 9, 12]);
    const session = sessionOf(s, 'small');
    assert.equal(session.copies, 1, 'a copy is made once the model is used again, not at its load');
    await madeCopy(s, 'small');
    assert.equal(session.copies, 2);
    assert.ok(session.worker >= 0, 'the worker copy stays for busy batches');
    const line = placed(s, 'small')[0];
    assert.ok(line, 'the placement is logged');
    assert.equal(line['placement'], 'main thread when the server is quiet (a copy, once used, among the most often used), worker when busy');
    assert.equal(line['intraOpThreads'], Math.min(2, os.availableParallelism()), 'the copy runs only while the server is quiet, on the cores (at most 2)');
    assert.equal(line['batch'], 8, 'measured at max_batch_size rows');
    assert.ok(typeof line['estimatedRunUs'] === 'number' && line['estimatedRunUs'] <= 1000, String(line['estimatedRunUs']));

    // 64 at once: batches formed while others queue run in the worker, the rest on the main thread.
    const replies = await Promise.all(Array.from({ length: 64 }, (_, i) => invoke(s, 'small', [[i, i + 1, i + 2, i + 3]])));
    replies.forEach((r, i) => {
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.body.outputs[0].data, [3 * i, 3 * (i + 1), 3 * (i + 2), 3 * (i + 3)], `request ${i}`);
    });
  });

  it('the copy is counted while it exists, and copies are bounded by MME_MAIN_THREAD_COPIES (least recently used dropped)', async () => {
    const s = await server(
      { a: { onnx: scale(2).onnx, config: SCALE_CONFIG() }, b: { onnx: scale(3).onnx, config: SCALE_CONFIG() } },
      { ...COPY_ONLY, MME_MAIN_THREAD_COPIES: '1' },
    );
    assert.equal((await invoke(s, 'a', [[1, 1, 1, 1]])).status, 200);
    const reserved = (target: string): number => s.running.registry.resolve({ kind: 'target', target }).resident()!.bytes;
    const alone = reserved('a');
    await madeCopy(s, 'a');
    const withCopy = reserved('a');
    assert.ok(withCopy > alone, `booked on top while it exists: ${withCopy} > ${alone}`);
    assert.equal((await invoke(s, 'b', [[1, 1, 1, 1]])).status, 200);
    await madeCopy(s, 'b');
    assert.equal(sessionOf(s, 'a').copies, 1, "one copy at most: a's went to b, the more recently used");
    assert.ok(reserved('a') < withCopy, `and its booking with it: ${reserved('a')} < ${withCopy}`);
    const off = await server({ m: { onnx: scale(2).onnx, config: SCALE_CONFIG() } }, { MME_MAIN_THREAD_MAX_RUN_US: '0' });
    for (let i = 0; i < 3; i++) assert.equal((await invoke(off, 'm', [[1, 1, 1, 1]])).status, 200);
    assert.equal(sessionOf(off, 'm').copies, 1);
    assert.equal(placed(off, 'm')[0]?.['placement'], 'runtime worker only', 'MME_MAIN_THREAD_MAX_RUN_US=0: no copy');
    assert.equal(placed(off, 'm')[0]?.['reason'], 'MME_MAIN_THREAD_MAX_RUN_US is 0');
  });

  it('a model whose batch runs in less than MME_MAIN_THREAD_ONLY_MAX_RUN_US runs on the main thread only, busy or not', async () => {
    // 1000 µs: this model's estimate is far under it (the limit is capped by MME_MAIN_THREAD_MAX_RUN_US, 1000 by default).
    const s = await server({ cheap: { onnx: scale(3).onnx, config: SCALE_CONFIG() } }, { MME_MAIN_THREAD_ONLY_MAX_RUN_US: '1000' });
    const first = await invoke(s, 'cheap', [[1, 2, 3, 4]]);
    assert.equal(first.status, 200, first.text);
    assert.deepEqual(first.body.outputs[0].data, [3, 6, 9, 12]);
    const session = sessionOf(s, 'cheap');
    assert.equal(session.worker, -1, 'on the main thread');
    assert.equal(session.copies, 1, 'no worker copy: the weights are held once');
    // Decided before the session existed: created there, no worker session made (and warmed up, and released) first.
    const created = s.logs.find((l) => l['msg'] === 'model sessions created' && l['model'] === 'cheap');
    assert.deepEqual(created?.['workers'], [-1], JSON.stringify(created));
    const line = placed(s, 'cheap')[0];
    assert.ok(line, 'the placement is logged');
    assert.equal(line['placement'], 'main thread only (a batch runs in less than a hop to a worker costs)');
    assert.equal(line['batch'], 8);
    assert.ok(typeof line['estimatedRunUs'] === 'number' && line['estimatedRunUs'] <= 1000, String(line['estimatedRunUs']));
    const replies = await Promise.all(Array.from({ length: 64 }, (_, i) => invoke(s, 'cheap', [[i, i + 1, i + 2, i + 3]])));
    replies.forEach((r, i) => {
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.body.outputs[0].data, [3 * i, 3 * (i + 1), 3 * (i + 2), 3 * (i + 3)], `request ${i}`);
    });

    // The copy rule's own limit still bounds it: with MME_MAIN_THREAD_MAX_RUN_US=1 nothing leaves the worker.
    const capped = await server(
      { m: { onnx: scale(2).onnx, config: SCALE_CONFIG() } },
      { MME_MAIN_THREAD_ONLY_MAX_RUN_US: '1000', MME_MAIN_THREAD_MAX_RUN_US: '1' },
    );
    assert.equal((await invoke(capped, 'm', [[1, 1, 1, 1]])).status, 200);
    assert.ok(sessionOf(capped, 'm').worker >= 0, 'still in its worker');
    assert.equal(placed(capped, 'm')[0]?.['reason'], 'estimated run over MME_MAIN_THREAD_MAX_RUN_US');
  });

  it('execution_thread "main" runs on the main thread only; "worker" keeps the worker only', async () => {
    const s = await server({
      main_only: { onnx: scale(2).onnx, config: SCALE_CONFIG(parameter('main')) },
      worker_only: { onnx: scale(2).onnx, config: SCALE_CONFIG(parameter('worker')) },
    });
    for (const [target, copies, onMain] of [
      ['main_only', 1, true],
      ['worker_only', 1, false],
    ] as const) {
      const r = await invoke(s, target, [[1, 2, 3, 4]]);
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.body.outputs[0].data, [2, 4, 6, 8]);
      const session = sessionOf(s, target);
      assert.equal(session.copies, copies, target);
      assert.equal(session.worker === -1, onMain, target);
    }
    assert.equal(placed(s, 'main_only')[0]?.['placement'], 'main thread only (execution_thread "main")');
    assert.equal(placed(s, 'worker_only')[0]?.['placement'], 'runtime worker only');
    assert.equal(placed(s, 'worker_only')[0]?.['reason'], 'execution_thread "worker"');
  });

  it('a bad execution_thread fails the load with 400 naming the model and the parameter', async () => {
    const s = await server({ bad: { onnx: scale(2).onnx, config: SCALE_CONFIG(parameter('gpu')) } });
    const r = await invoke(s, 'bad', [[1, 2, 3, 4]]);
    assert.equal(r.status, 400, r.text);
    assert.equal(r.body.code, 'INVALID_MODEL');
    assert.match(r.body.error, /model 'bad': parameter execution_thread must be "auto", "main" or "worker", got "gpu"/);
    assert.equal(s.running.registry.loadedCount(), 0);
  });

  it('stays in its worker when the estimate cannot bound the cost or the run is too slow for the setting', async () => {
    // A variable non-batch dimension: the cost depends on the request.
    const variable = buildModel({
      inputs: [valueInfo('INPUT0', 'FP32', ['batch', 'n'])],
      outputs: [valueInfo('OUTPUT0', 'FP32', ['batch', 'n'])],
      nodes: [node('Relu', ['INPUT0'], ['OUTPUT0'])],
    });
    const s = await server({
      variable: {
        onnx: variable,
        config: configText({
          maxBatchSize: 8,
          inputs: [{ name: 'INPUT0', dataType: 'FP32', dims: [-1] }],
          outputs: [{ name: 'OUTPUT0', dataType: 'FP32', dims: [-1] }],
        }),
      },
    });
    assert.equal((await invoke(s, 'variable', [[-1, 2]])).status, 200);
    assert.equal(sessionOf(s, 'variable').copies, 1);
    assert.match(String(placed(s, 'variable')[0]?.['reason']), /variable dimension/);

    // No run is estimated under 1 µs (a call alone costs more).
    const strict = await server({ m: { onnx: scale(2).onnx, config: SCALE_CONFIG() } }, { MME_MAIN_THREAD_MAX_RUN_US: '1' });
    assert.equal((await invoke(strict, 'm', [[1, 1, 1, 1]])).status, 200);
    assert.equal(sessionOf(strict, 'm').copies, 1);
  });

  it('the same model lands the same way on every start: 10 starts, the bench models', async () => {
    // The invocations bench's models: tiny 16→4 batching (max_batch_size 64), without a batch dimension and with no config, the MLP at 8 rows.
    const t = tiny({ in: 16, out: 4 });
    const tensors = (dims: number[], out: number[]) => ({
      inputs: [{ name: 'INPUT0', dataType: 'FP32' as const, dims }],
      outputs: [{ name: 'OUTPUT0', dataType: 'FP32' as const, dims: out }],
    });
    const root = await tempDir(ctx);
    await writeModelDir(root, 'tiny', { onnx: t.onnx, config: configText({ maxBatchSize: 64, ...tensors([16], [4]) }) });
    await writeModelDir(root, 'tiny_mbs0', { onnx: t.onnx, config: configText({ maxBatchSize: 0, ...tensors([1, 16], [1, 4]) }) });
    await writeModelDir(root, 'tiny_auto', { onnx: t.onnx });
    await writeModelDir(root, 'mlp', mlp({ in: 256, hidden: [1024, 1024], out: 16 }));
    const ones = (n: number) => [new Array<number>(n).fill(1)];
    const rows: Record<string, number[][]> = { tiny: ones(16), tiny_mbs0: ones(16), tiny_auto: ones(16), mlp: ones(256) };
    const seen: Record<string, Set<string>> = {};
    for (let start = 0; start < 10; start++) {
      const s = await startTestServer({ modelSource: root, cacheDir: path.join(await tempDir(ctx), 'cache') });
      try {
        for (const [target, data] of Object.entries(rows)) {
          const r = await invoke(s, target, data);
          assert.equal(r.status, 200, r.text);
          const line = placed(s, target)[0];
          assert.ok(line, `start ${start}: ${target}'s placement is logged`);
          const created = s.logs.find((l) => l['msg'] === 'model sessions created' && l['model'] === target)?.['workers'] as number[] | undefined;
          const where =
            `${String(line['placement'])} at ${String(line['estimatedRunUs'])} µs, worker ${sessionOf(s, target).worker === -1 ? 'none' : 'kept'}, ` +
            `created ${created?.[0] === -1 ? 'on the main thread' : 'in a worker'}`;
          (seen[target] ??= new Set()).add(where);
        }
      } finally {
        await s.close();
      }
    }
    const one = (target: string): string => {
      assert.equal(seen[target]?.size, 1, `${target}: ${JSON.stringify([...(seen[target] ?? [])])}`);
      return [...seen[target]!][0]!;
    };
    // The hop to a worker costs more than these runs: main thread only, no worker session.
    // Decided before their sessions exist: created on the main thread, no worker session made for them.
    assert.match(one('tiny'), /^main thread only .* worker none, created on the main thread$/);
    assert.match(one('tiny_mbs0'), /^main thread only .* worker none, created on the main thread$/);
    assert.match(one('tiny_auto'), /^main thread only .* worker none, created on the main thread$/);
    assert.match(one('mlp'), /^main thread when the server is quiet .* worker kept, created in a worker$/);
  });
});
