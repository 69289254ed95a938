/**
 * @module test/unit/config/auto-complete
 * Triton's ONNX auto-complete (triton-compat §1.7) on the JSON form: batching
 * detection, default max_batch_size 4, dynamic_batching {}, scalars as
 * dims [1] (+ reshape [] when batching), the cannot-batch error, and configs
 * with inputs and outputs left alone.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { autoCompleteConfig, DEFAULT_MAX_BATCH_SIZE, graphCanBatch, type GraphTensor } from '../../../src/config/auto-complete.js';
import { modelConfigFromJson } from '../../../src/config/model-config.js';
import { ServingError } from '../../../src/errors.js';

function t(name: string, datatype: GraphTensor['datatype'], shape: number[] | undefined): GraphTensor {
  return { name, datatype, shape };
}

const BATCHING_GRAPH = {
  inputs: [t('INPUT0', 'FP32', [-1, 16]), t('INPUT1', 'INT64', [-1, 3, 4])],
  outputs: [t('OUTPUT0', 'FP32', [-1, 2])],
};

const FIXED_GRAPH = {
  inputs: [t('x', 'FP32', [1, 16])],
  outputs: [t('y', 'FP32', [1, 2])],
};

function throwsInvalidModel(fn: () => unknown, message: string): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ServingError);
    assert.equal(err.code, 'INVALID_MODEL');
    assert.equal(err.message, message);
    assert.equal(err.model, undefined); // the load names the model (errors.ts withModel)
    return true;
  });
}

describe('graphCanBatch', () => {
  test('true only when every input and output has a symbolic first dim', () => {
    assert.equal(graphCanBatch(BATCHING_GRAPH.inputs, BATCHING_GRAPH.outputs), true);
    assert.equal(graphCanBatch([t('a', 'FP32', [-1])], [t('b', 'FP32', [-1, -1])]), true);
    assert.equal(graphCanBatch(FIXED_GRAPH.inputs, FIXED_GRAPH.outputs), false);
    // One fixed first dim anywhere (input or output) is enough to say no.
    assert.equal(graphCanBatch([t('a', 'FP32', [-1, 4])], [t('b', 'FP32', [4, -1])]), false);
    assert.equal(graphCanBatch([t('a', 'FP32', [2, 4]), t('c', 'FP32', [-1])], [t('b', 'FP32', [-1])]), false);
  });

  test('a scalar or a tensor without a declared shape cannot batch', () => {
    assert.equal(graphCanBatch([t('a', 'FP32', [])], [t('b', 'FP32', [-1])]), false);
    assert.equal(graphCanBatch([t('a', 'FP32', [-1])], [t('b', 'FP32', undefined)]), false);
  });
});

describe('autoCompleteConfig', () => {
  test('DEFAULT_MAX_BATCH_SIZE is 4 (Triton onnxruntime backend default)', () => {
    assert.equal(DEFAULT_MAX_BATCH_SIZE, 4);
  });

  test('empty config + batching graph → platform, max_batch_size 4, dynamic_batching {}, dims without the batch dim', () => {
    assert.deepEqual(autoCompleteConfig({}, BATCHING_GRAPH), {
      platform: 'onnxruntime_onnx',
      max_batch_size: 4,
      dynamic_batching: {},
      input: [
        { name: 'INPUT0', data_type: 'TYPE_FP32', dims: [16] },
        { name: 'INPUT1', data_type: 'TYPE_INT64', dims: [3, 4] },
      ],
      output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [2] }],
    });
  });

  test('MME_DEFAULT_MAX_BATCH_SIZE: another default max_batch_size for a graph that can batch; 0 keeps the batch dimension and adds no batching', () => {
    const raised = autoCompleteConfig({}, BATCHING_GRAPH, 32);
    assert.equal(raised['max_batch_size'], 32);
    assert.deepEqual(raised['dynamic_batching'], {});
    assert.deepEqual((raised['input'] as { dims: number[] }[])[0]!.dims, [16]);
    const none = autoCompleteConfig({}, BATCHING_GRAPH, 0);
    assert.equal(none['max_batch_size'], undefined);
    assert.equal(none['dynamic_batching'], undefined);
    assert.deepEqual((none['input'] as { dims: number[] }[])[0]!.dims, [-1, 16]);
    assert.equal(autoCompleteConfig({ max_batch_size: 2 }, BATCHING_GRAPH, 32)['max_batch_size'], 2, 'a config that sets it keeps it');
    assert.equal(autoCompleteConfig({}, FIXED_GRAPH, 32)['max_batch_size'], undefined, 'a graph that cannot batch never gets one');
  });

  test('a given max_batch_size is kept; dynamic_batching added when it is > 1', () => {
    const out = autoCompleteConfig({ name: 'm', max_batch_size: 16 }, BATCHING_GRAPH);
    assert.equal(out['max_batch_size'], 16);
    assert.deepEqual(out['dynamic_batching'], {});
    assert.equal(out['name'], 'm');
  });

  test('max_batch_size 1 gets no dynamic_batching', () => {
    const out = autoCompleteConfig({ max_batch_size: 1 }, BATCHING_GRAPH);
    assert.equal(out['max_batch_size'], 1);
    assert.equal('dynamic_batching' in out, false);
    assert.deepEqual((out['input'] as Array<{ dims: number[] }>)[0]!.dims, [16]);
  });

  test('existing dynamic_batching or sequence_batching is kept, not replaced', () => {
    const dyn = { max_queue_delay_microseconds: 100 };
    assert.equal(autoCompleteConfig({ dynamic_batching: dyn }, BATCHING_GRAPH)['dynamic_batching'], dyn);
    const out = autoCompleteConfig({ sequence_batching: {} }, BATCHING_GRAPH);
    assert.equal('dynamic_batching' in out, false);
    assert.deepEqual(out['sequence_batching'], {});
  });

  test('graph that cannot batch + no max_batch_size → full dims, no max_batch_size, no dynamic_batching', () => {
    assert.deepEqual(autoCompleteConfig({}, FIXED_GRAPH), {
      platform: 'onnxruntime_onnx',
      input: [{ name: 'x', data_type: 'TYPE_FP32', dims: [1, 16] }],
      output: [{ name: 'y', data_type: 'TYPE_FP32', dims: [1, 2] }],
    });
  });

  test('graph that cannot batch + explicit max_batch_size 0 → max_batch_size stays 0', () => {
    const out = autoCompleteConfig({ max_batch_size: 0 }, FIXED_GRAPH);
    assert.equal(out['max_batch_size'], 0);
    assert.deepEqual((out['input'] as Array<{ dims: number[] }>)[0]!.dims, [1, 16]);
  });

  test('graph that cannot batch + non-zero max_batch_size → INVALID_MODEL (Triton autofill error)', () => {
    throwsInvalidModel(
      () => autoCompleteConfig({ max_batch_size: 8 }, FIXED_GRAPH),
      'autofill failed: model does not support batching while non-zero max_batch_size is specified',
    );
    throwsInvalidModel(
      () => autoCompleteConfig({ max_batch_size: 1 }, { inputs: [t('s', 'FP32', [])], outputs: [t('o', 'FP32', [-1])] }),
      'autofill failed: model does not support batching while non-zero max_batch_size is specified',
    );
  });

  test('per-item scalar of a batching graph ([-1]) → dims [1] + reshape { shape: [] }', () => {
    const out = autoCompleteConfig({}, { inputs: [t('s', 'FP32', [-1])], outputs: [t('o', 'INT32', [-1, 3])] });
    assert.deepEqual(out['input'], [{ name: 's', data_type: 'TYPE_FP32', dims: [1], reshape: { shape: [] } }]);
    assert.deepEqual(out['output'], [{ name: 'o', data_type: 'TYPE_INT32', dims: [3] }]);
  });

  test('true scalar ([]) of a non-batching graph → dims [1] without reshape', () => {
    const out = autoCompleteConfig({}, { inputs: [t('s', 'FP64', [])], outputs: [t('o', 'FP64', [])] });
    assert.equal('max_batch_size' in out, false);
    assert.deepEqual(out['input'], [{ name: 's', data_type: 'TYPE_FP64', dims: [1] }]);
    assert.deepEqual(out['output'], [{ name: 'o', data_type: 'TYPE_FP64', dims: [1] }]);
  });

  test('a tensor without a declared shape → dims [-1] (cannot batch)', () => {
    const out = autoCompleteConfig({}, { inputs: [t('x', 'FP32', undefined)], outputs: [t('y', 'FP32', [-1])] });
    assert.deepEqual(out['input'], [{ name: 'x', data_type: 'TYPE_FP32', dims: [-1] }]);
    assert.deepEqual(out['output'], [{ name: 'y', data_type: 'TYPE_FP32', dims: [-1] }]);
  });

  test('every datatype maps to its config name (BYTES → TYPE_STRING)', () => {
    const types = ['BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP16', 'FP32', 'FP64', 'BYTES', 'BF16'] as const;
    const out = autoCompleteConfig({}, { inputs: types.map((d) => t(`in_${d}`, d, [-1, 2])), outputs: [t('o', 'FP32', [-1])] });
    assert.deepEqual(
      (out['input'] as Array<{ data_type: string }>).map((i) => i.data_type),
      [
        'TYPE_BOOL',
        'TYPE_UINT8',
        'TYPE_UINT16',
        'TYPE_UINT32',
        'TYPE_UINT64',
        'TYPE_INT8',
        'TYPE_INT16',
        'TYPE_INT32',
        'TYPE_INT64',
        'TYPE_FP16',
        'TYPE_FP32',
        'TYPE_FP64',
        'TYPE_STRING',
        'TYPE_BF16',
      ],
    );
  });

  test('a non-tensor input or output is INVALID_MODEL naming it and its kind', () => {
    throwsInvalidModel(
      () => autoCompleteConfig({}, { inputs: [t('seq', undefined, undefined)], outputs: [t('y', 'FP32', [1])] }),
      "input 'seq' is not a tensor; onnx-mme serves tensors only",
    );
    throwsInvalidModel(
      () => autoCompleteConfig({}, { inputs: [{ ...t('seq', undefined, undefined), declared: 'seq(tensor(float))' }], outputs: [t('y', 'FP32', [1])] }),
      "input 'seq' is a sequence (seq(tensor(float))), not a tensor; onnx-mme serves tensors only",
    );
    throwsInvalidModel(
      () => autoCompleteConfig({}, { inputs: [t('x', 'FP32', [1])], outputs: [{ ...t('opt', undefined, undefined), declared: 'optional(tensor(int64))' }] }),
      "output 'opt' is an optional (optional(tensor(int64))), not a tensor; onnx-mme serves tensors only",
    );
    throwsInvalidModel(
      () => autoCompleteConfig({}, { inputs: [t('x', 'FP32', [1])], outputs: [{ ...t('map', undefined, [1]), declared: 'map(int64,tensor(float))' }] }),
      "output 'map' is a map (map(int64,tensor(float))), not a tensor; onnx-mme serves tensors only",
    );
  });

  test('a config with inputs and outputs is left untouched (graph ignored, no max_batch_size or dynamic_batching)', () => {
    const config = Object.freeze({
      platform: 'onnxruntime_onnx',
      input: [Object.freeze({ name: 'x', data_type: 'TYPE_FP32', dims: [3] })],
      output: [Object.freeze({ name: 'y', data_type: 'TYPE_FP32', dims: [3] })],
    });
    const out = autoCompleteConfig(config, BATCHING_GRAPH);
    assert.deepEqual(out, config);
    assert.notEqual(out, config);
    // Even a graph the config cannot describe is not looked at.
    assert.deepEqual(autoCompleteConfig({ ...config, max_batch_size: 8 }, FIXED_GRAPH), { ...config, max_batch_size: 8 });
  });

  test('a config with inputs and outputs but no platform or backend only gets the platform', () => {
    const config = { input: [{ name: 'x', data_type: 'TYPE_FP32', dims: [3] }], output: [{ name: 'y', data_type: 'TYPE_FP32', dims: [3] }] };
    assert.deepEqual(autoCompleteConfig(config, BATCHING_GRAPH), { platform: 'onnxruntime_onnx', ...config });
  });

  test('backend given → no platform is added', () => {
    const out = autoCompleteConfig({ backend: 'onnxruntime' }, BATCHING_GRAPH);
    assert.equal('platform' in out, false);
    assert.equal(out['backend'], 'onnxruntime');
  });

  test('only the missing list is generated: existing inputs kept, outputs generated', () => {
    const input = [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [-1] }];
    const out = autoCompleteConfig({ max_batch_size: 2, input }, BATCHING_GRAPH);
    assert.equal(out['input'], input);
    assert.deepEqual(out['output'], [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [2] }]);
  });

  test('only the missing list is generated: existing outputs kept, inputs generated', () => {
    const output = [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [2] }];
    const out = autoCompleteConfig({ output }, BATCHING_GRAPH);
    assert.equal(out['output'], output);
    assert.equal(out['max_batch_size'], 4);
    assert.deepEqual((out['input'] as unknown[]).length, 2);
  });

  test('the given config object is not modified', () => {
    const config = Object.freeze({ name: 'm' });
    const out = autoCompleteConfig(config, BATCHING_GRAPH);
    assert.deepEqual(config, { name: 'm' });
    assert.equal(out['max_batch_size'], 4);
  });

  test('the completed config passes modelConfigFromJson and normalises as Triton does', () => {
    const graph = { inputs: [t('s', 'FP32', [-1]), t('v', 'FP32', [-1, 8])], outputs: [t('o', 'FP32', [-1, 2])] };
    const config = modelConfigFromJson(autoCompleteConfig({}, graph), { sourceName: 'm (auto-complete)', directoryName: 'm' });
    assert.equal(config.name, 'm');
    assert.equal(config.platform, 'onnxruntime_onnx');
    assert.equal(config.backend, 'onnxruntime');
    assert.equal(config.maxBatchSize, 4);
    assert.deepEqual(config.dynamicBatching?.preferredBatchSize, [4]);
    assert.deepEqual(
      config.input.map((i) => [i.name, i.dataType, i.dims, i.reshape]),
      [
        ['s', 'FP32', [1], []],
        ['v', 'FP32', [8], undefined],
      ],
    );
    assert.deepEqual(
      config.output.map((o) => [o.name, o.dims]),
      [['o', [2]]],
    );
  });
});
