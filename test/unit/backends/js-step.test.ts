/**
 * @module test/unit/backends/js-step
 * `backend: "js"`: a model.mjs written by the test, loaded by the real
 * loader and scheduled by the real DynamicBatcher. Proves: initialize gets
 * the config and parameters, execute gets merged batches of typed tensors
 * and its outputs go back row by row; a throwing execute fails only the
 * request that makes it throw (its batch-mates are answered); an error with
 * `code: 'INVALID_INPUT'` is a 400; returned tensors are checked against the
 * config; finalize runs at release; a module without execute, or any js step
 * when MME_ALLOW_JS_BACKEND is false, is refused at load.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { parseModelConfig } from '../../../src/config/model-config.js';
import { ServingError } from '../../../src/errors.js';
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
import { writeFileSync } from 'node:fs';
import path from 'node:path';
let factor = 0;
let dir = '';
export const calls = [];
export function initialize(args) {
  factor = Number(args.parameters.factor);
  dir = args.versionDir;
  if (args.config.name !== 'js' || args.version !== 1) throw new Error('unexpected initialize args');
}
export async function execute(batch) {
  calls.push(batch.rows);
  globalThis.__jsStepBatches = (globalThis.__jsStepBatches ?? 0) + 1;
  const x = batch.inputs.x.data;
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
  writeFileSync(path.join(dir, 'finalized'), 'yes');
}
`;

const globals = globalThis as { __jsStepBatches?: number };

describe('js step', () => {
  test('batched through the DynamicBatcher: rows go back to their requests; a throwing execute fails only its request', async () => {
    const f = await loadStepFromText('js', CONFIG, { version: { 'model.mjs': MODEL } });
    const config = parseModelConfig(CONFIG, { sourceName: 'js/config.pbtxt', directoryName: 'js' });
    const batcher = new DynamicBatcher({ model: 'js', policy: resolveBatchPolicy(config, true, DEFAULT_BATCHING), instances: [f.step] });
    try {
      globals.__jsStepBatches = 0;
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
      assert.equal(globals.__jsStepBatches, 5);
      // The step keeps serving.
      assert.deepEqual(numbers((await send([1, 1])).get('y')), [3, 3]);
      await batcher.close();
      await f.step.release();
      assert.ok(existsSync(path.join(f.dir, '1', 'finalized')), 'finalize() ran at release');
    } finally {
      await batcher.close();
      await f.close();
    }
  });

  test('an error with code INVALID_INPUT is a 400; returned tensors are checked against the config', async () => {
    const f = await loadStepFromText('js', CONFIG, { version: { 'model.mjs': MODEL } });
    try {
      await assert.rejects(f.run({ x: f32([1, 2], [-1, 0]) }), (err: ServingError) => err.code === 'INVALID_INPUT' && /negative values are not allowed/.test(err.message));
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
    const badInit = await loadError('js', CONFIG, { version: { 'model.mjs': 'export function initialize() { throw new Error("no GPU here"); }\nexport function execute() { return {}; }' } });
    assert.equal(badInit.message, "model 'js': initialize() failed: no GPU here");
    const missing = await loadError('js', CONFIG);
    assert.equal(missing.message, "model 'js': version 1 has no model.mjs");
    const disabled = await loadError('js', CONFIG, { version: { 'model.mjs': MODEL } }, false);
    assert.equal(disabled.code, 'UNSUPPORTED');
    assert.equal(disabled.message, "model 'js': the js backend is disabled on this server (MME_ALLOW_JS_BACKEND=false)");
  });
});
