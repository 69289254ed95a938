/**
 * @module test/unit/protocol/binary-request
 * KServe v2 requests and responses under the binary tensor extension:
 * inputs take their bytes from the binary section in order (mixed with JSON
 * inputs), every byte is accounted for, output parameters are checked, and
 * binary responses put each binary output's bytes after the JSON in order.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ServingError, type ErrorCode } from '../../../src/errors.js';
import type { InferResponse } from '../../../src/protocol/infer-types.js';
import { decodeInferRequest, encodeInferResponseBinary, wantsBinaryOutput } from '../../../src/protocol/v2-json-codec.js';

const MODEL = 'm';

function expectError(fn: () => unknown, code: ErrorCode, pattern: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ServingError, String(err));
    assert.equal(err.code, code);
    assert.match(err.message, pattern);
    return true;
  });
}

function f32(values: number[]): Uint8Array {
  const out = new Uint8Array(values.length * 4);
  const v = new DataView(out.buffer);
  values.forEach((x, i) => v.setFloat32(i * 4, x, true));
  return out;
}

function i32(values: number[]): Uint8Array {
  const out = new Uint8Array(values.length * 4);
  const v = new DataView(out.buffer);
  values.forEach((x, i) => v.setInt32(i * 4, x, true));
  return out;
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

describe('decodeInferRequest with a binary section', () => {
  test('binary inputs are read in input order; JSON inputs mix in', () => {
    const body = {
      inputs: [
        { name: 'a', datatype: 'FP32', shape: [1, 2], parameters: { binary_data_size: 8 } },
        { name: 'b', datatype: 'INT32', shape: [2], data: [5, 6] },
        { name: 'c', datatype: 'INT32', shape: [3], parameters: { binary_data_size: 12 } },
      ],
    };
    const r = decodeInferRequest(body, MODEL, concat(f32([1.5, -2]), i32([7, 8, 9])));
    assert.deepEqual(Array.from(r.inputs.get('a')!.data as Float32Array), [1.5, -2]);
    assert.deepEqual(Array.from(r.inputs.get('b')!.data as Int32Array), [5, 6]);
    assert.deepEqual(Array.from(r.inputs.get('c')!.data as Int32Array), [7, 8, 9]);
    assert.deepEqual(r.inputs.get('c')!.shape, [3]);
  });

  test('binary_data_size past the end of the body', () => {
    const body = { inputs: [{ name: 'a', datatype: 'FP32', shape: [4], parameters: { binary_data_size: 16 } }] };
    expectError(
      () => decodeInferRequest(body, MODEL, f32([1, 2])),
      'INVALID_INPUT',
      /input 'a': binary_data_size 16 runs past the end of the body \(8 bytes of binary data left\)/,
    );
  });

  test('binary_data_size that does not match datatype × shape', () => {
    const body = { inputs: [{ name: 'a', datatype: 'FP32', shape: [3], parameters: { binary_data_size: 8 } }] };
    expectError(
      () => decodeInferRequest(body, MODEL, f32([1, 2])),
      'INVALID_INPUT',
      /binary_data_size is 8 bytes but datatype FP32 with shape \[3\] needs 3 × 4 = 12 bytes/,
    );
  });

  test('bytes left after the last binary input', () => {
    const body = { inputs: [{ name: 'a', datatype: 'FP32', shape: [1], parameters: { binary_data_size: 4 } }] };
    expectError(
      () => decodeInferRequest(body, MODEL, f32([1, 2])),
      'INVALID_REQUEST',
      /unexpected additional input data: 4 bytes follow the last binary input/,
    );
  });

  for (const size of [-1, 1.5, '8', null, true]) {
    test(`binary_data_size ${JSON.stringify(size)} is refused`, () => {
      const body = { inputs: [{ name: 'a', datatype: 'FP32', shape: [2], parameters: { binary_data_size: size } }] };
      assert.throws(() => decodeInferRequest(body, MODEL, f32([1, 2])), ServingError);
    });
  }

  test('both data and binary_data_size', () => {
    const body = { inputs: [{ name: 'a', datatype: 'FP32', shape: [2], data: [1, 2], parameters: { binary_data_size: 8 } }] };
    expectError(() => decodeInferRequest(body, MODEL, f32([1, 2])), 'INVALID_REQUEST', /has both 'data' and 'binary_data_size'/);
  });

  test('binary_data_size without a binary section says how to send one', () => {
    const body = { inputs: [{ name: 'a', datatype: 'FP32', shape: [2], parameters: { binary_data_size: 8 } }] };
    expectError(() => decodeInferRequest(body, MODEL), 'INVALID_REQUEST', /Inference-Header-Content-Length/);
  });

  test('an input with neither data nor binary_data_size', () => {
    const body = { inputs: [{ name: 'a', datatype: 'FP32', shape: [2] }] };
    expectError(() => decodeInferRequest(body, MODEL, new Uint8Array(0)), 'INVALID_INPUT', /'data' is missing and there is no 'binary_data_size'/);
  });
});

describe('output parameters', () => {
  const input = { name: 'a', datatype: 'FP32', shape: [1], data: [1] };

  test('binary_data must be a boolean, classification a positive integer, binary_data_output a boolean', () => {
    expectError(
      () => decodeInferRequest({ inputs: [input], outputs: [{ name: 'y', parameters: { binary_data: 'yes' } }] }, MODEL),
      'INVALID_REQUEST',
      /'binary_data' must be true or false/,
    );
    expectError(
      () => decodeInferRequest({ inputs: [input], outputs: [{ name: 'y', parameters: { classification: 0 } }] }, MODEL),
      'INVALID_REQUEST',
      /'classification' must be a positive integer/,
    );
    expectError(
      () => decodeInferRequest({ inputs: [input], outputs: [{ name: 'y', parameters: { classification: 2.5 } }] }, MODEL),
      'INVALID_REQUEST',
      /'classification' must be a positive integer/,
    );
    expectError(
      () => decodeInferRequest({ inputs: [input], parameters: { binary_data_output: 1 } }, MODEL),
      'INVALID_REQUEST',
      /'binary_data_output' must be true or false/,
    );
  });

  test('wantsBinaryOutput: the output’s own binary_data wins over binary_data_output', () => {
    const r = decodeInferRequest(
      { inputs: [input], parameters: { binary_data_output: true }, outputs: [{ name: 'x', parameters: { binary_data: false } }, { name: 'y' }] },
      MODEL,
    );
    assert.equal(wantsBinaryOutput(r, 'x'), false);
    assert.equal(wantsBinaryOutput(r, 'y'), true);
    const plain = decodeInferRequest({ inputs: [input], outputs: [{ name: 'x', parameters: { binary_data: true } }, { name: 'y' }] }, MODEL);
    assert.equal(wantsBinaryOutput(plain, 'x'), true);
    assert.equal(wantsBinaryOutput(plain, 'y'), false);
  });
});

describe('encodeInferResponseBinary', () => {
  test('binary outputs carry binary_data_size and no data; their bytes follow in output order', () => {
    const response: InferResponse = {
      id: 'r1',
      modelName: 'm',
      modelVersion: '2',
      outputs: new Map([
        ['p', { datatype: 'FP32', shape: [2], data: new Float32Array([1, 2]) }],
        ['q', { datatype: 'INT32', shape: [1], data: new Int32Array([7]) }],
        ['s', { datatype: 'BYTES', shape: [1], data: ['hi'] }],
      ]),
    };
    const out = encodeInferResponseBinary(response, (n) => n !== 'q');
    assert.deepEqual(JSON.parse(out.json), {
      id: 'r1',
      model_name: 'm',
      model_version: '2',
      outputs: [
        { name: 'p', datatype: 'FP32', shape: [2], parameters: { binary_data_size: 8 } },
        { name: 'q', datatype: 'INT32', shape: [1], data: [7] },
        { name: 's', datatype: 'BYTES', shape: [1], parameters: { binary_data_size: 6 } },
      ],
    });
    assert.equal(out.chunks.length, 2);
    assert.deepEqual(Array.from(out.chunks[0]!), Array.from(f32([1, 2])));
    assert.deepEqual(Array.from(out.chunks[1]!), [2, 0, 0, 0, 0x68, 0x69]);
  });
});
