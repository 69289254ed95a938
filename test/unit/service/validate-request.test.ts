/**
 * @module test/unit/service/validate-request
 * validateRequest against the entry model's config: input names, optional
 * inputs, datatypes, shapes with -1 wildcards and the implicit batch dim,
 * batch size limits and consistency, requested outputs; returns the batch size.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { modelConfigFromJson } from '../../../src/config/model-config.js';
import type { ModelConfig } from '../../../src/config/model-config-types.js';
import { ServingError } from '../../../src/errors.js';
import type { InferRequest } from '../../../src/protocol/infer-types.js';
import type { DataType, Tensor } from '../../../src/protocol/tensor.js';
import { validateRequest } from '../../../src/service/validate-request.js';

function config(maxBatchSize: number, input: Array<Record<string, unknown>>, output: Array<Record<string, unknown>>): ModelConfig {
  return modelConfigFromJson(
    { name: 'm', platform: 'onnxruntime_onnx', max_batch_size: maxBatchSize, input, output },
    { sourceName: 'm/config.pbtxt', directoryName: 'm' },
  );
}

/** max_batch_size 8; x: FP32 [4], ids: INT64 [-1], mask: BOOL [4] optional; outputs y, z. */
const BATCHING = config(
  8,
  [
    { name: 'x', data_type: 'TYPE_FP32', dims: [4] },
    { name: 'ids', data_type: 'TYPE_INT64', dims: [-1] },
    { name: 'mask', data_type: 'TYPE_BOOL', dims: [4], optional: true },
  ],
  [
    { name: 'y', data_type: 'TYPE_FP32', dims: [2] },
    { name: 'z', data_type: 'TYPE_FP32', dims: [1] },
  ],
);

/** max_batch_size 0; img: UINT8 [2, -1, 3]; output out. */
const FIXED = config(0, [{ name: 'img', data_type: 'TYPE_UINT8', dims: [2, -1, 3] }], [{ name: 'out', data_type: 'TYPE_FP32', dims: [-1] }]);

function tensor(datatype: DataType, shape: number[]): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  const data = datatype === 'INT64' ? new BigInt64Array(n) : datatype === 'FP32' ? new Float32Array(n) : new Uint8Array(n);
  return { datatype, shape, data };
}

function request(inputs: Array<[string, Tensor]>, outputs?: string[]): InferRequest {
  return { id: undefined, inputs: new Map(inputs), outputs: outputs?.map((name) => ({ name, parameters: {} })), parameters: {} };
}

function batchRequest(batch: number, extra: Array<[string, Tensor]> = []): InferRequest {
  return request([['x', tensor('FP32', [batch, 4])], ['ids', tensor('INT64', [batch, 7])], ...extra]);
}

function rejects(req: InferRequest, cfg: ModelConfig, message: string): void {
  assert.throws(
    () => validateRequest(req, cfg),
    (err: unknown) => {
      assert.ok(err instanceof ServingError);
      assert.equal(err.code, 'INVALID_INPUT');
      // Thrown without the model: InferenceService names it (errors.ts inModel; test/unit/service/inference-service.test.ts).
      assert.equal(err.model, undefined);
      assert.equal(err.message, message);
      return true;
    },
  );
}

describe('validateRequest: accepted requests', () => {
  test('returns the batch size (the shared first dim) for a batching model', () => {
    assert.equal(validateRequest(batchRequest(3), BATCHING), 3);
    assert.equal(validateRequest(batchRequest(1), BATCHING), 1);
    assert.equal(validateRequest(batchRequest(8), BATCHING), 8);
  });

  test('returns 1 for a model that does not batch; -1 dims match any size', () => {
    assert.equal(validateRequest(request([['img', tensor('UINT8', [2, 5, 3])]]), FIXED), 1);
    assert.equal(validateRequest(request([['img', tensor('UINT8', [2, 0, 3])]]), FIXED), 1);
  });

  test('an optional input may be omitted or given', () => {
    assert.equal(validateRequest(batchRequest(2), BATCHING), 2);
    assert.equal(validateRequest(batchRequest(2, [['mask', tensor('BOOL', [2, 4])]]), BATCHING), 2);
  });

  test('inputs in any order; requested outputs that exist are fine', () => {
    const req = request(
      [
        ['ids', tensor('INT64', [2, 1])],
        ['x', tensor('FP32', [2, 4])],
      ],
      ['z', 'y'],
    );
    assert.equal(validateRequest(req, BATCHING), 2);
  });

  test('an optional input carries the batch size when a model has only optional inputs given', () => {
    const cfg = config(
      4,
      [
        { name: 'a', data_type: 'TYPE_FP32', dims: [1], optional: true },
        { name: 'b', data_type: 'TYPE_FP32', dims: [1], optional: true },
      ],
      [{ name: 'y', data_type: 'TYPE_FP32', dims: [1] }],
    );
    assert.equal(validateRequest(request([['b', tensor('FP32', [3, 1])]]), cfg), 3);
  });
});

describe('validateRequest: rejected requests', () => {
  test('an input the model does not have', () => {
    rejects(batchRequest(2, [['extra', tensor('FP32', [2, 4])]]), BATCHING, "unexpected inference input 'extra'; the model's inputs are 'x', 'ids', 'mask'");
  });

  test('a required input that is missing', () => {
    rejects(request([['x', tensor('FP32', [2, 4])]]), BATCHING, "expected input 'ids' (INT64 [-1,-1]) but the request does not have it");
    rejects(request([]), FIXED, "expected input 'img' (UINT8 [2,-1,3]) but the request does not have it");
  });

  test('a datatype mismatch (Triton message)', () => {
    rejects(
      request([
        ['x', tensor('FP64', [2, 4])],
        ['ids', tensor('INT64', [2, 1])],
      ]),
      BATCHING,
      "inference input 'x' data-type is 'FP64', but the model expects 'FP32'",
    );
    rejects(batchRequest(2, [['mask', tensor('UINT8', [2, 4])]]), BATCHING, "inference input 'mask' data-type is 'UINT8', but the model expects 'BOOL'");
  });

  test('a shape mismatch (Triton message): wrong dim, wrong rank, missing batch dim', () => {
    rejects(
      request([
        ['x', tensor('FP32', [2, 5])],
        ['ids', tensor('INT64', [2, 1])],
      ]),
      BATCHING,
      "unexpected shape for input 'x'. Expected [-1,4], got [2,5]",
    );
    rejects(
      request([
        ['x', tensor('FP32', [4])],
        ['ids', tensor('INT64', [1, 1])],
      ]),
      BATCHING,
      "unexpected shape for input 'x'. Expected [-1,4], got [4]",
    );
    rejects(request([['img', tensor('UINT8', [1, 2, 5, 3])]]), FIXED, "unexpected shape for input 'img'. Expected [2,-1,3], got [1,2,5,3]");
    rejects(request([['img', tensor('UINT8', [3, 5, 3])]]), FIXED, "unexpected shape for input 'img'. Expected [2,-1,3], got [3,5,3]");
  });

  test('batch size 0 and batch size above max_batch_size', () => {
    rejects(batchRequest(0), BATCHING, 'inference request batch-size must be between 1 and 8, got 0');
    rejects(batchRequest(9), BATCHING, 'inference request batch-size must be between 1 and 8, got 9');
  });

  test('inputs that disagree on the batch size', () => {
    rejects(
      request([
        ['x', tensor('FP32', [2, 4])],
        ['ids', tensor('INT64', [3, 1])],
      ]),
      BATCHING,
      "input 'ids' batch size 3 does not match input 'x' batch size 2",
    );
    rejects(batchRequest(2, [['mask', tensor('BOOL', [1, 4])]]), BATCHING, "input 'mask' batch size 1 does not match input 'x' batch size 2");
  });

  test('a requested output the model does not have', () => {
    const req = request(
      [
        ['x', tensor('FP32', [1, 4])],
        ['ids', tensor('INT64', [1, 1])],
      ],
      ['y', 'nope'],
    );
    rejects(req, BATCHING, "unexpected inference output 'nope'; the model's outputs are 'y', 'z'");
  });

  test('checks run in order: unknown input before missing input before datatype', () => {
    rejects(request([['zzz', tensor('FP32', [1])]]), BATCHING, "unexpected inference input 'zzz'; the model's inputs are 'x', 'ids', 'mask'");
    rejects(request([['ids', tensor('FP32', [1, 1])]]), BATCHING, "expected input 'x' (FP32 [-1,4]) but the request does not have it");
  });
});
