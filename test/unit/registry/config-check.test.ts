/**
 * @module test/unit/registry/config-check
 * checkConfigAgainstGraph: config.pbtxt must agree with the ONNX graph
 * (names, datatypes, shapes with the implicit batch dim and reshape); every
 * problem is reported in one INVALID_MODEL error.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { GraphTensor } from '../../../src/config/auto-complete.js';
import { modelConfigFromJson } from '../../../src/config/model-config.js';
import type { ModelConfig } from '../../../src/config/model-config-types.js';
import { ServingError } from '../../../src/errors.js';
import { checkConfigAgainstGraph, modelShapeOf } from '../../../src/registry/config-check.js';

type TensorJson = { name: string; data_type: string; dims: number[]; reshape?: { shape: number[] }; optional?: boolean };

function config(maxBatchSize: number, input: TensorJson[], output: TensorJson[]): ModelConfig {
  return modelConfigFromJson(
    { name: 'm', platform: 'onnxruntime_onnx', max_batch_size: maxBatchSize, input, output },
    { sourceName: 'm/config.pbtxt', directoryName: 'm' },
  );
}

function g(name: string, datatype: GraphTensor['datatype'], shape: number[] | undefined): GraphTensor {
  return { name, datatype, shape };
}

const fp32 = (name: string, dims: number[], extra: Partial<TensorJson> = {}): TensorJson => ({ name, data_type: 'TYPE_FP32', dims, ...extra });

const PREFIX = "'m' version 1: config.pbtxt does not match the ONNX model: ";

function mismatch(cfg: ModelConfig, graph: { inputs: GraphTensor[]; outputs: GraphTensor[] }, problems: string[]): void {
  assert.throws(
    () => checkConfigAgainstGraph(cfg, graph, 1),
    (err: unknown) => {
      assert.ok(err instanceof ServingError);
      assert.equal(err.code, 'INVALID_MODEL');
      assert.equal(err.model, undefined);
      assert.equal(err.message, PREFIX + problems.join('; '));
      return true;
    },
  );
}

describe('modelShapeOf', () => {
  test('adds -1 for the batch dim when max_batch_size > 0; reshape replaces dims', () => {
    const cfg = config(8, [fp32('a', [4, 2]), fp32('s', [1], { reshape: { shape: [] } }), fp32('r', [6], { reshape: { shape: [2, 3] } })], [fp32('y', [1])]);
    assert.deepEqual(modelShapeOf(cfg.input[0]!, 8), [-1, 4, 2]);
    assert.deepEqual(modelShapeOf(cfg.input[1]!, 8), [-1]);
    assert.deepEqual(modelShapeOf(cfg.input[2]!, 8), [-1, 2, 3]);
    assert.deepEqual(modelShapeOf(cfg.input[0]!, 0), [4, 2]);
  });
});

describe('checkConfigAgainstGraph: agreement', () => {
  test('matching names, datatypes and shapes pass (batching)', () => {
    const cfg = config(8, [fp32('x', [4]), { name: 'ids', data_type: 'TYPE_INT64', dims: [-1] }], [fp32('y', [2])]);
    assert.doesNotThrow(() =>
      checkConfigAgainstGraph(cfg, { inputs: [g('ids', 'INT64', [-1, -1]), g('x', 'FP32', [-1, 4])], outputs: [g('y', 'FP32', [-1, 2])] }, 1),
    );
  });

  test('matching shapes pass (no batching)', () => {
    const cfg = config(0, [fp32('x', [3, 4])], [fp32('y', [3])]);
    assert.doesNotThrow(() => checkConfigAgainstGraph(cfg, { inputs: [g('x', 'FP32', [3, 4])], outputs: [g('y', 'FP32', [3])] }, 1));
  });

  test('a config may be stricter than the model: fixed config dim vs model -1 passes', () => {
    const cfg = config(0, [fp32('x', [4, 4])], [fp32('y', [4])]);
    assert.doesNotThrow(() => checkConfigAgainstGraph(cfg, { inputs: [g('x', 'FP32', [4, -1])], outputs: [g('y', 'FP32', [-1])] }, 1));
  });

  test('a reshape is compared, not the dims', () => {
    const cfg = config(8, [fp32('s', [1], { reshape: { shape: [] } }), fp32('img', [12], { reshape: { shape: [3, 4] } })], [fp32('y', [1])]);
    assert.doesNotThrow(() =>
      checkConfigAgainstGraph(cfg, { inputs: [g('s', 'FP32', [-1]), g('img', 'FP32', [-1, 3, 4])], outputs: [g('y', 'FP32', [-1, 1])] }, 1),
    );
  });

  test('a graph tensor without a declared shape is not shape-checked', () => {
    const cfg = config(8, [fp32('x', [4])], [fp32('y', [2])]);
    assert.doesNotThrow(() => checkConfigAgainstGraph(cfg, { inputs: [g('x', 'FP32', undefined)], outputs: [g('y', 'FP32', undefined)] }, 1));
  });

  test('extra ONNX outputs that the config leaves out are allowed', () => {
    const cfg = config(0, [fp32('x', [2])], [fp32('y', [2])]);
    assert.doesNotThrow(() => checkConfigAgainstGraph(cfg, { inputs: [g('x', 'FP32', [2])], outputs: [g('y', 'FP32', [2]), g('debug', 'FP32', [2])] }, 1));
  });
});

describe('checkConfigAgainstGraph: problems', () => {
  test('a config tensor missing from the graph names the graph tensors', () => {
    const cfg = config(0, [fp32('x', [2]), fp32('extra', [2])], [fp32('y', [2]), fp32('nope', [2])]);
    mismatch(cfg, { inputs: [g('x', 'FP32', [2])], outputs: [g('y', 'FP32', [2]), g('z', 'FP32', [2])] }, [
      "input 'extra' is in config.pbtxt but not in the ONNX model (model inputs: x)",
      "output 'nope' is in config.pbtxt but not in the ONNX model (model outputs: y, z)",
    ]);
  });

  test("a graph with no outputs is listed as 'none'", () => {
    const cfg = config(0, [fp32('x', [2])], [fp32('y', [2])]);
    mismatch(cfg, { inputs: [g('x', 'FP32', [2])], outputs: [] }, ["output 'y' is in config.pbtxt but not in the ONNX model (model outputs: none)"]);
  });

  test('datatype mismatch, and a non-tensor graph type', () => {
    const cfg = config(0, [fp32('x', [2])], [fp32('y', [2])]);
    mismatch(cfg, { inputs: [g('x', 'INT32', [2])], outputs: [{ ...g('y', undefined, [2]), declared: 'seq(tensor(float))' }] }, [
      "input 'x': config.pbtxt says FP32 but the ONNX model has INT32",
      "output 'y': config.pbtxt says FP32 but the ONNX model has a sequence (seq(tensor(float))), not a tensor",
    ]);
  });

  test('rank mismatch with max_batch_size > 0 carries the batch-dimension hint', () => {
    const cfg = config(8, [fp32('x', [4])], [fp32('y', [2])]);
    mismatch(cfg, { inputs: [g('x', 'FP32', [4])], outputs: [g('y', 'FP32', [-1, 2])] }, [
      "input 'x': rank differs, config [-1,4] vs model [4] (max_batch_size > 0 adds a leading batch dimension)",
    ]);
  });

  test('rank mismatch with max_batch_size 0 has no hint', () => {
    const cfg = config(0, [fp32('x', [4])], [fp32('y', [2])]);
    mismatch(cfg, { inputs: [g('x', 'FP32', [1, 4])], outputs: [g('y', 'FP32', [2])] }, ["input 'x': rank differs, config [4] vs model [1,4]"]);
  });

  test('a fixed first dim in the model with max_batch_size > 0', () => {
    const cfg = config(8, [fp32('x', [4])], [fp32('y', [2])]);
    mismatch(cfg, { inputs: [g('x', 'FP32', [1, 4])], outputs: [g('y', 'FP32', [8, 2])] }, [
      "input 'x': max_batch_size is 8 but the model's first dimension is fixed at 1 (config [-1,4] vs model [1,4]); set max_batch_size: 0",
      "output 'y': max_batch_size is 8 but the model's first dimension is fixed at 8 (config [-1,2] vs model [8,2]); set max_batch_size: 0",
    ]);
  });

  test('a different fixed dimension names its index (batch dim counted)', () => {
    const cfg = config(8, [fp32('x', [4, 3])], [fp32('y', [2])]);
    mismatch(cfg, { inputs: [g('x', 'FP32', [-1, 4, 5])], outputs: [g('y', 'FP32', [-1, 2])] }, [
      "input 'x': dimension 2 differs, config [-1,4,3] vs model [-1,4,5]",
    ]);
  });

  test('config -1 where the model is fixed is not allowed (the config would accept shapes the model rejects)', () => {
    const cfg = config(0, [fp32('x', [-1, 4])], [fp32('y', [2])]);
    mismatch(cfg, { inputs: [g('x', 'FP32', [3, 4])], outputs: [g('y', 'FP32', [2])] }, ["input 'x': dimension 0 differs, config [-1,4] vs model [3,4]"]);
  });

  test('a reshape that disagrees with the model is reported with the reshaped shape', () => {
    const cfg = config(8, [fp32('x', [12], { reshape: { shape: [3, 4] } })], [fp32('y', [1])]);
    mismatch(cfg, { inputs: [g('x', 'FP32', [-1, 12])], outputs: [g('y', 'FP32', [-1, 1])] }, [
      "input 'x': rank differs, config [-1,3,4] vs model [-1,12] (max_batch_size > 0 adds a leading batch dimension)",
    ]);
  });

  test('an ONNX input missing from the config', () => {
    const cfg = config(0, [fp32('x', [2])], [fp32('y', [2])]);
    mismatch(cfg, { inputs: [g('x', 'FP32', [2]), g('mask', 'BOOL', [2])], outputs: [g('y', 'FP32', [2])] }, [
      "ONNX model input 'mask' is missing from config.pbtxt",
    ]);
  });

  test('dtype and shape problems of one tensor are both reported; only the first shape problem per tensor', () => {
    const cfg = config(0, [{ name: 'x', data_type: 'TYPE_INT8', dims: [2, 3] }], [fp32('y', [2])]);
    mismatch(cfg, { inputs: [g('x', 'FP32', [5, 6])], outputs: [g('y', 'FP32', [2])] }, [
      "input 'x': config.pbtxt says INT8 but the ONNX model has FP32",
      "input 'x': dimension 0 differs, config [2,3] vs model [5,6]",
    ]);
  });

  test('all problems in one message, in order: config inputs, config outputs, then unconfigured ONNX inputs', () => {
    const cfg = config(4, [fp32('a', [2]), fp32('b', [3]), fp32('ghost', [1])], [fp32('y', [2]), { name: 'z', data_type: 'TYPE_INT32', dims: [1] }]);
    mismatch(
      cfg,
      {
        inputs: [g('a', 'FP16', [-1, 2]), g('b', 'FP32', [-1, 4]), g('c', 'FP32', [-1]), g('d', 'FP32', [-1])],
        outputs: [g('y', 'FP32', [2]), g('z', 'INT64', [-1, 1])],
      },
      [
        "input 'a': config.pbtxt says FP32 but the ONNX model has FP16",
        "input 'b': dimension 1 differs, config [-1,3] vs model [-1,4]",
        "input 'ghost' is in config.pbtxt but not in the ONNX model (model inputs: a, b, c, d)",
        "output 'y': rank differs, config [-1,2] vs model [2] (max_batch_size > 0 adds a leading batch dimension)",
        "output 'z': config.pbtxt says INT32 but the ONNX model has INT64",
        "ONNX model input 'c' is missing from config.pbtxt",
        "ONNX model input 'd' is missing from config.pbtxt",
      ],
    );
  });
});
