/**
 * @module test/unit/ensemble/plan-validation
 * The cross-model checks of ensemblePlan that need the step models' shapes
 * and batching: shape agreement between producer and consumer (with -1
 * wildcards and the implicit batch dim of batching models), at ensemble
 * inputs and outputs, Triton's max_batch_size rule, every problem in one
 * error, and the `wiring: false` mode used when config validation already
 * reported the ensemble's own wiring problems.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { modelConfigFromJson } from '../../../src/config/model-config.js';
import type { ModelConfig } from '../../../src/config/model-config-types.js';
import { ensemblePlan, ensembleProblems, fullShape, shapesCompatible, type StepModel } from '../../../src/ensemble/execution-plan.js';
import { ensembleSpecFromJson } from '../../../src/ensemble/ensemble-spec.js';
import { ServingError } from '../../../src/errors.js';
import type { ModelScheduler } from '../../../src/scheduler/model-scheduler.js';

type Io = [name: string, type: string, dims: number[]];

function config(name: string, mbs: number, inputs: Io[], outputs: Io[], extra: Record<string, unknown> = {}): ModelConfig {
  const t = ([n, data_type, dims]: Io): Record<string, unknown> => ({ name: n, data_type, dims });
  return modelConfigFromJson(
    { name, max_batch_size: mbs, input: inputs.map(t), output: outputs.map(t), ...extra },
    { sourceName: `${name}/config.pbtxt`, directoryName: name },
  );
}

const idle: ModelScheduler = {
  schedule: async () => {
    throw new Error('not run in validation tests');
  },
  close: async () => {},
};

function model(c: ModelConfig): StepModel {
  return { config: c, version: 1, scheduler: idle };
}

const onnx = { platform: 'onnxruntime_onnx' };
// Batching models (max_batch_size 8): full shapes get a leading -1.
const MODELS = new Map<string, StepModel>([
  ['embed', model(config('embed', 8, [['x', 'TYPE_FP32', [4]]], [['y', 'TYPE_FP32', [16]]], onnx))],
  ['head3', model(config('head3', 8, [['h', 'TYPE_FP32', [3]]], [['p', 'TYPE_FP32', [2]]], onnx))],
  ['anyw', model(config('anyw', 8, [['h', 'TYPE_FP32', [-1]]], [['p', 'TYPE_FP32', [-1]]], onnx))],
  ['small', model(config('small', 2, [['x', 'TYPE_FP32', [4]]], [['y', 'TYPE_FP32', [4]]], onnx))],
  // Not batching: dims spell out the batch dim.
  ['flat', model(config('flat', 0, [['x', 'TYPE_FP32', [-1, 4]]], [['y', 'TYPE_FP32', [-1, 4]]], onnx))],
  ['flat3', model(config('flat3', 0, [['x', 'TYPE_FP32', [2, 4]]], [['y', 'TYPE_FP32', [2, 4]]], onnx))],
  ['rank1', model(config('rank1', 0, [['x', 'TYPE_FP32', [4]]], [['y', 'TYPE_FP32', [4]]], onnx))],
]);

const resolve = (name: string): StepModel | undefined => MODELS.get(name);

type Step = [model: string, inputMap: Record<string, string>, outputMap: Record<string, string>];

function ensemble(mbs: number, inputs: Io[], outputs: Io[], steps: Step[]): ModelConfig {
  return config('ens', mbs, inputs, outputs, {
    platform: 'ensemble',
    ensemble_scheduling: { step: steps.map(([model_name, input_map, output_map]) => ({ model_name, model_version: -1, input_map, output_map })) },
  });
}

function problemsOf(c: ModelConfig): string[] {
  try {
    ensemblePlan(c, resolve);
    return [];
  } catch (err) {
    assert.ok(err instanceof ServingError);
    assert.equal(err.code, 'INVALID_MODEL');
    const prefix = `ensemble 'ens' is invalid: `;
    assert.ok(err.message.startsWith(prefix), err.message);
    return err.message.slice(prefix.length).split('; ');
  }
}

describe('shape helpers', () => {
  test('fullShape adds the batch dim only for batching models', () => {
    assert.deepEqual(fullShape([3, 4], 8), [-1, 3, 4]);
    assert.deepEqual(fullShape([3, 4], 0), [3, 4]);
  });
  test('shapesCompatible: same rank, -1 matches anything on either side', () => {
    assert.ok(shapesCompatible([-1, 4], [2, 4]));
    assert.ok(shapesCompatible([2, -1], [-1, 7]));
    assert.ok(!shapesCompatible([2, 4], [2, 5]));
    assert.ok(!shapesCompatible([-1, 4], [4]));
  });
});

describe('ensemblePlan: shapes and batching', () => {
  test('matching shapes through batching steps are accepted', () => {
    const c = ensemble(8, [['IN', 'TYPE_FP32', [4]]], [['OUT', 'TYPE_FP32', [16]]], [['embed', { x: 'IN' }, { y: 'OUT' }]]);
    assert.deepEqual(problemsOf(c), []);
  });

  test('a producer/consumer dim mismatch names the tensor, both ends and both full shapes', () => {
    const c = ensemble(
      8,
      [['IN', 'TYPE_FP32', [4]]],
      [['OUT', 'TYPE_FP32', [2]]],
      [
        ['embed', { x: 'IN' }, { y: 'MID' }],
        ['head3', { h: 'MID' }, { p: 'OUT' }],
      ],
    );
    assert.deepEqual(problemsOf(c), [
      "ensemble tensor 'MID': inconsistent shape, step 0 (model 'embed') gives [-1,16] but step 1 (model 'head3') input 'h' expects [-1,3]",
    ]);
  });

  test('-1 on the consumer side accepts any size', () => {
    const c = ensemble(
      8,
      [['IN', 'TYPE_FP32', [4]]],
      [['OUT', 'TYPE_FP32', [-1]]],
      [
        ['embed', { x: 'IN' }, { y: 'MID' }],
        ['anyw', { h: 'MID' }, { p: 'OUT' }],
      ],
    );
    assert.deepEqual(problemsOf(c), []);
  });

  test('an ensemble input whose dims do not fit the step', () => {
    const c = ensemble(8, [['IN', 'TYPE_FP32', [5]]], [['OUT', 'TYPE_FP32', [16]]], [['embed', { x: 'IN' }, { y: 'OUT' }]]);
    assert.deepEqual(problemsOf(c), [
      "ensemble tensor 'IN': inconsistent shape, ensemble input 'IN' gives [-1,5] but step 0 (model 'embed') input 'x' expects [-1,4]",
    ]);
  });

  test('an ensemble output declared with another shape than its producer gives', () => {
    const c = ensemble(8, [['IN', 'TYPE_FP32', [4]]], [['OUT', 'TYPE_FP32', [8]]], [['embed', { x: 'IN' }, { y: 'OUT' }]]);
    assert.deepEqual(problemsOf(c), ["output 'OUT': inconsistent shape, step 0 (model 'embed') gives [-1,16] but the ensemble declares [-1,8]"]);
  });

  test('a non-batching step fits a batching ensemble when its dims spell out the batch dim', () => {
    const c = ensemble(8, [['IN', 'TYPE_FP32', [4]]], [['OUT', 'TYPE_FP32', [4]]], [['flat', { x: 'IN' }, { y: 'OUT' }]]);
    assert.deepEqual(problemsOf(c), []);
  });

  test('a non-batching step whose rank lacks the batch dim does not', () => {
    const c = ensemble(8, [['IN', 'TYPE_FP32', [4]]], [['OUT', 'TYPE_FP32', [4]]], [['rank1', { x: 'IN' }, { y: 'OUT' }]]);
    assert.deepEqual(problemsOf(c), [
      "ensemble tensor 'IN': inconsistent shape, ensemble input 'IN' gives [-1,4] but step 0 (model 'rank1') input 'x' expects [4]",
      "output 'OUT': inconsistent shape, step 0 (model 'rank1') gives [4] but the ensemble declares [-1,4]",
    ]);
  });

  test('a non-batching ensemble may feed a batching step a fixed batch', () => {
    const c = ensemble(0, [['IN', 'TYPE_FP32', [2, 4]]], [['OUT', 'TYPE_FP32', [2, 16]]], [['embed', { x: 'IN' }, { y: 'OUT' }]]);
    assert.deepEqual(problemsOf(c), []);
    const fixed = ensemble(0, [['IN', 'TYPE_FP32', [2, 4]]], [['OUT', 'TYPE_FP32', [2, 4]]], [['flat3', { x: 'IN' }, { y: 'OUT' }]]);
    assert.deepEqual(problemsOf(fixed), []);
  });

  test("the ensemble's max_batch_size must not exceed a batching step's (Triton's rule)", () => {
    const c = ensemble(8, [['IN', 'TYPE_FP32', [4]]], [['OUT', 'TYPE_FP32', [4]]], [['small', { x: 'IN' }, { y: 'OUT' }]]);
    assert.deepEqual(problemsOf(c), ["step 0 (model 'small'): ensemble 'ens' allows max_batch_size 8, but model 'small' only allows 2"]);
    const ok = ensemble(2, [['IN', 'TYPE_FP32', [4]]], [['OUT', 'TYPE_FP32', [4]]], [['small', { x: 'IN' }, { y: 'OUT' }]]);
    assert.deepEqual(problemsOf(ok), []);
  });

  test('datatype, shape and batch-size problems of several steps are reported together', () => {
    const c = ensemble(
      8,
      [['IN', 'TYPE_INT32', [4]]],
      [['OUT', 'TYPE_FP32', [2]]],
      [
        ['small', { x: 'IN' }, { y: 'MID' }],
        ['head3', { h: 'MID' }, { p: 'OUT' }],
      ],
    );
    assert.deepEqual(problemsOf(c), [
      "step 0 (model 'small'): ensemble 'ens' allows max_batch_size 8, but model 'small' only allows 2",
      "ensemble tensor 'IN': inconsistent data type, ensemble input 'IN' gives INT32 but step 0 (model 'small') input 'x' expects FP32",
      "ensemble tensor 'MID': inconsistent shape, step 0 (model 'small') gives [-1,4] but step 1 (model 'head3') input 'h' expects [-1,3]",
    ]);
  });
});

describe('ensembleProblems without wiring checks (lenient spec of a refused config)', () => {
  test('only the checks that need the step models are made; the spec is read from the raw JSON form', () => {
    // An unused ensemble input and an unknown tensor are config-level wiring problems: not repeated here.
    const spec = ensembleSpecFromJson(
      {
        name: 'ens',
        platform: 'ensemble',
        max_batch_size: 8,
        input: [
          { name: 'IN', data_type: 'TYPE_FP32', dims: [4] },
          { name: 'UNUSED', data_type: 'TYPE_FP32', dims: [1] },
        ],
        output: [{ name: 'OUT', data_type: 'TYPE_FP32', dims: [2] }],
        ensemble_scheduling: {
          step: [
            { model_name: 'embed', model_version: -1, input_map: { x: 'IN' }, output_map: { y: 'MID' } },
            { model_name: 'head3', model_version: -1, input_map: { h: 'MID' }, output_map: { p: 'OUT' } },
            { model_name: 'ghost', model_version: -1, input_map: { a: 'NOWHERE' }, output_map: { b: 'X' } },
          ],
        },
      },
      'ens',
    );
    assert.equal(spec.maxBatchSize, 8);
    assert.deepEqual(
      spec.ensembleSteps?.map((s) => s.modelName),
      ['embed', 'head3', 'ghost'],
    );
    const { problems } = ensembleProblems(spec, resolve, { wiring: false });
    assert.deepEqual(problems, [
      "step 2 (model 'ghost'): the package has no model 'ghost'",
      "ensemble tensor 'MID': inconsistent shape, step 0 (model 'embed') gives [-1,16] but step 1 (model 'head3') input 'h' expects [-1,3]",
    ]);
  });
});
