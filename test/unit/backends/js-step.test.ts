/**
 * @module test/unit/backends/js-step
 * `backend: "js"`: a model.mjs written by the test, loaded by the real
 * loader and scheduled by the real DynamicBatcher. Proves: initialize gets
 * the config and parameters, execute gets merged batches of typed tensors
 * and its outputs go back row by row; a throwing execute fails only the
 * request that makes it throw (its batch-mates are answered); an error with
 * `code: 'INVALID_INPUT'` is a 400; returned tensors are checked against the
 * config; finalize runs at release; a module without execute, or any js step
 * when MME_ALLOW_JS_BACKEND is false, is refused at load. The step runs in a
 * process of its own (js-step-host.ts): Maps, BYTES and INT64 cross to it
 * intact, a load past its deadline or crashing is a load error, and (as
 * root) a package file its user could not read is one too. Load and run
 * errors name files within the package, never the host path of the cache.
 */
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { loadStep, type LoadedStep } from '../../../src/backends/step-backend.js';
import { parseModelConfig } from '../../../src/config/model-config.js';
import { ServingError } from '../../../src/errors.js';
import { createLogger } from '../../../src/observability/logger.js';
import type { Tensor } from '../../../src/protocol/tensor.js';
import { DEFAULT_BATCHING, resolveBatchPolicy } from '../../../src/scheduler/batch-policy.js';
import { DynamicBatcher } from '../../../src/scheduler/dynamic-batcher.js';
import { f32, loadError, loadStepFromText, numbers } from './step-harness.js';

const CONFIG = `
backend: "js"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 2 ] }, { name: "n" data_type: TYPE_INT64 dims: [ 1 ] } ]
dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 5000000 }
parameters { key: "factor" value: { string_value: "3" } }
`;

const MODEL = `
let factor = 0;
export const calls = [];
export function initialize(args) {
  factor = Number(args.parameters.factor);
  if (args.config.name !== 'js' || args.version !== 1) throw new Error('unexpected initialize args');
}
export async function execute(batch) {
  const x = batch.inputs.x.data;
  // The step runs in a process of its own: the test asks it how many batches it ran (77: the count so far).
  if (x.includes(77)) return { y: { datatype: 'FP32', shape: batch.inputs.x.shape, data: new Float32Array(x.length).fill(calls.length) } };
  calls.push(batch.rows);
  if (!(x instanceof Float32Array)) throw new Error('x is not a Float32Array');
  if (x.includes(13)) throw new Error('unlucky 13');
  if (x.includes(-1)) throw Object.assign(new Error('negative values are not allowed'), { code: 'INVALID_INPUT' });
  if (x.includes(99)) return { y: { datatype: 'FP32', shape: [batch.rows, 3], data: new Float32Array(batch.rows * 3) } };
  const out = {};
  if (batch.outputs.includes('y')) out.y = { datatype: 'FP32', shape: batch.inputs.x.shape, data: x.map((v) => v * factor) };
  if (batch.outputs.includes('n')) out.n = { datatype: 'INT64', shape: [batch.rows, 1], data: Array.from({ length: batch.rows }, (_, i) => i) };
  return out;
}
export function finalize() {
  throw new Error('finalize ran');
}
`;

describe('js step', () => {
  test('batched through the DynamicBatcher: rows go back to their requests; a throwing execute fails only its request', async () => {
    const logged: string[] = [];
    const logger = createLogger('warn', { write: (line: string) => void logged.push(line) });
    const f = await loadStepFromText('js', CONFIG, { version: { 'model.mjs': MODEL } }, true, logger);
    const config = parseModelConfig(CONFIG, { sourceName: 'js/config.pbtxt', directoryName: 'js' });
    const batcher = new DynamicBatcher({ model: 'js', policy: resolveBatchPolicy(config, true, DEFAULT_BATCHING), instances: [f.step] });
    try {
      const send = (values: number[]): Promise<Map<string, Tensor>> => batcher.schedule(new Map([['x', f32([1, 2], values)]]), ['y']);
      const results = await Promise.allSettled([send([1, 2]), send([13, 0]), send([3, 4]), send([5, 6])]);
      assert.equal(results[0]!.status, 'fulfilled');
      assert.deepEqual(numbers((results[0] as PromiseFulfilledResult<Map<string, Tensor>>).value.get('y')), [3, 6]);
      assert.deepEqual(numbers((results[2] as PromiseFulfilledResult<Map<string, Tensor>>).value.get('y')), [9, 12]);
      assert.deepEqual(numbers((results[3] as PromiseFulfilledResult<Map<string, Tensor>>).value.get('y')), [15, 18]);
      const failed = results[1]!;
      assert.equal(failed.status, 'rejected');
      const err = (failed as PromiseRejectedResult).reason as ServingError;
      assert.ok(err instanceof ServingError);
      assert.equal(err.code, 'INTERNAL');
      assert.equal(err.message, "model 'js': execute() failed: unlucky 13");
      // One merged batch of 4 that threw, then the 4 requests alone.
      assert.deepEqual(numbers((await f.run({ x: f32([1, 2], [77, 77]) }, ['y'])).get('y')), [5, 5]);
      // The step keeps serving.
      assert.deepEqual(numbers((await send([1, 1])).get('y')), [3, 3]);
      await batcher.close();
      await f.step.release();
      assert.ok(
        logged.some((l) => l.includes('finalize ran')),
        'finalize() ran at release (its error is logged)',
      );
    } finally {
      await batcher.close();
      await f.close();
    }
  });

  test('an error with code INVALID_INPUT is a 400; returned tensors are checked against the config', async () => {
    const f = await loadStepFromText('js', CONFIG, { version: { 'model.mjs': MODEL } });
    try {
      await assert.rejects(
        f.run({ x: f32([1, 2], [-1, 0]) }),
        (err: ServingError) => err.code === 'INVALID_INPUT' && /negative values are not allowed/.test(err.message),
      );
      await assert.rejects(f.run({ x: f32([1, 2], [99, 0]) }, ['y']), (err: ServingError) => {
        assert.equal(err.code, 'INTERNAL');
        assert.equal(err.message, "model 'js': execute() returned output 'y' with shape [1,3], but the config declares [-1,2]");
        return true;
      });
      await assert.rejects(f.run({ x: f32([1, 2], [99, 0]) }, ['y', 'n']), /execute\(\) (returned output 'y'|did not return output 'n')/);
      // A plain array of numbers for an INT64 output is converted.
      const out = await f.run({ x: f32([2, 2], [1, 2, 3, 4]) });
      assert.equal(out.get('n')!.data instanceof BigInt64Array, true);
      assert.deepEqual(numbers(out.get('n')), [0, 1]);
    } finally {
      await f.close();
    }
  });

  test('load errors: no execute export, a throwing initialize, no model.mjs, and the backend disabled', async () => {
    const noExecute = await loadError('js', CONFIG, { version: { 'model.mjs': 'export const x = 1;' } });
    assert.equal(noExecute.code, 'INVALID_MODEL');
    assert.equal(noExecute.message, "model 'js': model.mjs does not export an execute(batch) function");
    const badInit = await loadError('js', CONFIG, {
      version: { 'model.mjs': 'export function initialize() { throw new Error("no GPU here"); }\nexport function execute() { return {}; }' },
    });
    assert.equal(badInit.message, "model 'js': initialize() failed: no GPU here");
    const missing = await loadError('js', CONFIG);
    assert.equal(missing.message, "model 'js': version 1 has no model.mjs");
    const disabled = await loadError('js', CONFIG, { version: { 'model.mjs': MODEL } }, false);
    assert.equal(disabled.code, 'UNSUPPORTED');
    assert.equal(disabled.message, "model 'js': the js backend is disabled on this server (MME_ALLOW_JS_BACKEND=false)");
  });
  test('load and run errors name files within the package, never the host path of the cache (messages reach clients)', async () => {
    const hostPath = /\/tmp\/|file:\/\/|\/var\//;
    const missingImport = await loadError('js', CONFIG, {
      version: { 'model.mjs': "import 'no-such-package-onnx-mme';\nexport function execute() { return {}; }" },
    });
    assert.equal(missingImport.code, 'INVALID_MODEL');
    assert.match(missingImport.message, /^model 'js': model\.mjs cannot be imported: .*no-such-package-onnx-mme/);
    assert.doesNotMatch(missingImport.message, hostPath, missingImport.message);
    assert.match(missingImport.message, /1\/model\.mjs/, 'the importing file, named within the package');
    const missingFile = await loadError('js', CONFIG, { version: { 'model.mjs': "import './helpers.mjs';\nexport function execute() { return {}; }" } });
    assert.doesNotMatch(missingFile.message, hostPath, missingFile.message);
    assert.match(missingFile.message, /1\/helpers\.mjs/);
    const syntax = await loadError('js', CONFIG, { version: { 'model.mjs': 'export function execute( { return {}; }' } });
    assert.doesNotMatch(syntax.message, hostPath, syntax.message);
    const readsMissing = await loadError('js', CONFIG, {
      version: {
        'model.mjs':
          "import { readFileSync } from 'node:fs';\nexport function initialize(args) { readFileSync(args.versionDir + '/vocab.txt'); }\nexport function execute() { return {}; }",
      },
    });
    assert.doesNotMatch(readsMissing.message, hostPath, readsMissing.message);
    assert.match(readsMissing.message, /initialize\(\) failed: ENOENT.*1\/vocab\.txt/);
    const f = await loadStepFromText('js', CONFIG, {
      version: {
        'model.mjs':
          "import { readFileSync } from 'node:fs';\nlet dir;\nexport function initialize(args) { dir = args.versionDir; }\nexport function execute() { readFileSync(dir + '/gone.bin'); }",
      },
    });
    try {
      const err = await f.run({ x: f32([1, 2], [1, 2]) }).then(
        () => undefined,
        (e: unknown) => e as ServingError,
      );
      assert.ok(err instanceof ServingError);
      assert.doesNotMatch(err.message, hostPath, err.message);
      assert.match(err.message, /execute\(\) failed: ENOENT.*1\/gone\.bin/);
    } finally {
      await f.close();
    }
  });

  test('across to its process and back: a Map return, BYTES string arrays and INT64 BigInt64Arrays arrive intact, and the input tensors stay usable', async () => {
    const config = `
backend: "js"
max_batch_size: 4
input [ { name: "s" data_type: TYPE_STRING dims: [ 2 ] }, { name: "i" data_type: TYPE_INT64 dims: [ 1 ] } ]
output [ { name: "upper" data_type: TYPE_STRING dims: [ 2 ] }, { name: "twice" data_type: TYPE_INT64 dims: [ 1 ] } ]
`;
    const model = `
export function execute({ inputs, rows }) {
  if (!(inputs.i.data instanceof BigInt64Array)) throw new Error('i is not a BigInt64Array');
  return new Map([
    ['upper', { datatype: 'BYTES', shape: [rows, 2], data: inputs.s.data.map((v) => v.toUpperCase()) }],
    ['twice', { datatype: 'INT64', shape: [rows, 1], data: inputs.i.data.map((v) => v * 2n) }],
  ]);
}
`;
    const f = await loadStepFromText('strings', config, { version: { 'model.mjs': model } });
    try {
      const i: Tensor = { datatype: 'INT64', shape: [2, 1], data: BigInt64Array.from([2n ** 40n, -3n]) };
      const out = await f.run({ s: { datatype: 'BYTES', shape: [2, 2], data: ['a', 'bé', 'c', 'd'] }, i });
      assert.deepEqual(out.get('upper'), { datatype: 'BYTES', shape: [2, 2], data: ['A', 'BÉ', 'C', 'D'] });
      assert.ok(out.get('twice')!.data instanceof BigInt64Array);
      assert.deepEqual([...(out.get('twice')!.data as BigInt64Array)], [2n ** 41n, -6n]);
      // The request's own tensor was copied, not moved, into the worker.
      assert.deepEqual([...(i.data as BigInt64Array)], [2n ** 40n, -3n]);
    } finally {
      await f.close();
    }
  });
  test('4 MiB tensors cross through the bulk files both ways, several batches in flight at once, each answer its own', async () => {
    const config = `
backend: "js"
max_batch_size: 1
input [ { name: "x" data_type: TYPE_FP32 dims: [ 1048576 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 1048576 ] } ]
`;
    const model = `
export async function execute({ inputs }) {
  await new Promise((r) => setTimeout(r, 5));
  return { y: { datatype: 'FP32', shape: inputs.x.shape, data: inputs.x.data.map((v) => v + 1) } };
}
`;
    const f = await loadStepFromText('big', config, { version: { 'model.mjs': model } });
    try {
      const sent = [0, 1, 2, 3, 4, 5].map((k) => Float32Array.from({ length: 1 << 20 }, (_, i) => (i % 1000) + k * 1000));
      for (let round = 0; round < 2; round++) {
        const outs = await Promise.all(sent.map((x) => f.run({ x: { datatype: 'FP32', shape: [1, 1 << 20], data: x } })));
        for (const [k, out] of outs.entries()) {
          const y = out.get('y')!.data as Float32Array;
          assert.equal(y.length, 1 << 20);
          assert.ok(
            y.every((v, i) => v === sent[k]![i]! + 1),
            `answer ${k} of round ${round} is its own input + 1`,
          );
        }
      }
    } finally {
      await f.close();
    }
  });

  test('an answer holds what execute() returned, even when the step overwrites its output array right after', async () => {
    const config = `
backend: "js"
max_batch_size: 1
input [ { name: "x" data_type: TYPE_FP32 dims: [ 8192 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 8192 ] } ]
`;
    // 32 KiB: inline in the frame (under the bulk files' 64 KiB). The array is overwritten some microtasks after
    // execute() returned: after its process took the answer, before the next turn of its event loop.
    const model = `
const out = new Float32Array(8192);
export async function execute({ inputs }) {
  out.set(inputs.x.data);
  let hops = 20;
  const later = () => (--hops > 0 ? queueMicrotask(later) : out.fill(-1));
  queueMicrotask(later);
  return { y: { datatype: 'FP32', shape: inputs.x.shape, data: out } };
}
`;
    const f = await loadStepFromText('reuse', config, { version: { 'model.mjs': model } });
    try {
      for (const k of [1, 2, 3]) {
        const y = (await f.run({ x: { datatype: 'FP32', shape: [1, 8192], data: new Float32Array(8192).fill(k) } })).get('y')!.data as Float32Array;
        assert.ok(
          y.every((v) => v === k),
          `answer ${k} holds its batch (${y[0]})`,
        );
      }
    } finally {
      await f.close();
    }
  });

  test('load deadlines: an initialize() that never returns, one that crashes from a timer, and a bad js_timeout_seconds fail the load with INVALID_MODEL', async () => {
    const fast = `${CONFIG}parameters { key: "js_timeout_seconds" value: { string_value: "0.5" } }\n`;
    const started = performance.now();
    const hangs = await loadError('js', fast, {
      version: { 'model.mjs': 'export function initialize() { while (true) {} }\nexport function execute() { return {}; }' },
    });
    assert.equal(hangs.code, 'INVALID_MODEL');
    assert.equal(hangs.message, "model 'js': model.mjs did not finish loading (import and initialize()) within 0.5 s");
    assert.ok(performance.now() - started < 10_000);
    const crashes = await loadError('js', CONFIG, {
      version: {
        'model.mjs':
          'export async function initialize() { await new Promise(() => setTimeout(() => { throw new Error("late") }, 1)); }\nexport function execute() { return {}; }',
      },
    });
    assert.equal(crashes.code, 'INVALID_MODEL');
    assert.equal(crashes.message, "model 'js': the js step crashed: an uncaught exception: late (while loading)");
    const bad = await loadError('js', `${CONFIG}parameters { key: "js_timeout_seconds" value: { string_value: "soon" } }\n`, {
      version: { 'model.mjs': MODEL },
    });
    assert.equal(bad.message, "model 'js': parameter js_timeout_seconds must be a number of seconds above 0 and at most 3600, got 'soon'");
  });
  test('a worker whose restart fails (initialize() throws the second time) counts as a fault: the step is stopped after 5, with the cause', async () => {
    const model = `
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
export function initialize({ scratchDir }) {
  const marker = path.join(scratchDir, 'started');
  if (existsSync(marker)) throw new Error('the GPU is gone');
  writeFileSync(marker, '1');
}
export async function execute({ inputs }) {
  if (inputs.x.data[0] === 13) await new Promise(() => setTimeout(() => { throw new Error('boom'); }, 1));
  return { y: { datatype: 'FP32', shape: inputs.x.shape, data: inputs.x.data }, n: { datatype: 'INT64', shape: [1, 1], data: [0] } };
}
`;
    const f = await loadStepFromText('js', CONFIG, { version: { 'model.mjs': model } });
    try {
      await assert.rejects(
        f.run({ x: f32([1, 2], [13, 0]) }),
        (err: ServingError) =>
          err.code === 'INTERNAL' && /^model 'js': the js step crashed: an uncaught exception: boom; its worker is restarted/.test(err.message),
      );
      let last: ServingError | undefined;
      for (let i = 0; i < 20 && !/stopped until/.test(last?.message ?? ''); i++) {
        last = await f.run({ x: f32([1, 2], [1, 0]) }).then(
          () => undefined,
          (err: ServingError) => err,
        );
        assert.ok(last, 'no worker can start: every request fails');
      }
      assert.equal(last!.code, 'INTERNAL');
      assert.equal(
        last!.message,
        "model 'js': its js step crashed or timed out 5 times in a row (last: its worker did not restart: initialize() failed: the GPU is gone); it is stopped until the model is loaded again",
      );
    } finally {
      await f.close();
    }
  });
  test('js_heap_limit_mb: a step that fills its heap loses its worker, not the process; the request fails naming the limit and the next one works', async () => {
    const config = `${CONFIG}parameters { key: "js_heap_limit_mb" value: { string_value: "32" } }\n`;
    const model = `
export function execute({ inputs }) {
  if (inputs.x.data[0] === 13) { const keep = []; for (;;) keep.push(new Array(100000).fill(Math.random())); }
  return { y: { datatype: 'FP32', shape: inputs.x.shape, data: inputs.x.data }, n: { datatype: 'INT64', shape: [1, 1], data: [0] } };
}
`;
    const f = await loadStepFromText('js', config, { version: { 'model.mjs': model } });
    try {
      await assert.rejects(f.run({ x: f32([1, 2], [13, 0]) }), (err: ServingError) => {
        assert.equal(err.code, 'INTERNAL');
        assert.equal(err.message, "model 'js': the js step crashed: its heap is full (js_heap_limit_mb 32); its worker is restarted for the next request");
        return true;
      });
      assert.deepEqual(numbers((await f.run({ x: f32([1, 2], [4, 5]) })).get('y')), [4, 5]);
    } finally {
      await f.close();
    }
    const bad = await loadError('js', `${CONFIG}parameters { key: "js_heap_limit_mb" value: { string_value: "8" } }\n`, { version: { 'model.mjs': MODEL } });
    assert.equal(bad.message, "model 'js': parameter js_heap_limit_mb must be a whole number of MiB from 16, got '8'");
  });

  test('a package file the step could not read as its own user is a load error naming the file and its mode (when the server is root)', async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-step-'));
    try {
      const dir = path.join(root, 'js');
      await mkdir(path.join(dir, '1'), { recursive: true });
      await writeFile(path.join(dir, '1', 'model.mjs'), MODEL);
      await chmod(path.join(dir, '1', 'model.mjs'), 0o600);
      const config = parseModelConfig(CONFIG, { sourceName: 'js/config.pbtxt', directoryName: 'js' });
      const load = (): Promise<LoadedStep> =>
        loadStep({ config, modelDir: dir, versionDir: path.join(dir, '1'), version: 1, label: 'js', logger: createLogger('silent'), allowJs: true });
      if (process.getuid?.() !== 0) {
        // Not root: the step runs as this user, who can read it.
        await (await load()).release();
        return;
      }
      await assert.rejects(load(), (err: ServingError) => {
        assert.equal(err.code, 'INVALID_MODEL');
        assert.equal(
          err.message,
          "model 'js': its file '1/model.mjs' is not readable by others (mode 0600): the js step runs as another user and could not read it",
        );
        return true;
      });
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
