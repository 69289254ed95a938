/**
 * @module test/unit/protocol/v2-json-fast-path
 * The flat-numbers fast path of the KServe v2 JSON decoder agrees with the
 * general path: flat data decodes to exactly what the same values nested
 * (which take the general path) decode to, for every datatype it covers, and
 * data it does not take (strings such as "NaN", a bad value, a wrong count)
 * still decodes or fails exactly as before.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ServingError } from '../../../src/errors.js';
import type { Tensor } from '../../../src/protocol/tensor.js';
import { decodeInferRequest } from '../../../src/protocol/v2-json-codec.js';

function decode(datatype: string, shape: number[], data: unknown): Tensor {
  const t = decodeInferRequest({ inputs: [{ name: 'x', datatype, shape, data }] }, 'm').inputs.get('x');
  assert.ok(t);
  return t;
}

function errorOf(datatype: string, shape: number[], data: unknown): string {
  try {
    decode(datatype, shape, data);
  } catch (err) {
    assert.ok(err instanceof ServingError);
    return `${err.code}: ${err.message}`;
  }
  assert.fail('expected an error');
}

/** rows × 4 values, as flat and as nested arrays. */
function both(values: number[]): { flat: number[]; nested: number[][] } {
  const nested: number[][] = [];
  for (let i = 0; i < values.length; i += 4) nested.push(values.slice(i, i + 4));
  return { flat: values, nested };
}

const CASES: Array<{ dt: string; values: number[] }> = [
  { dt: 'FP32', values: [0, -0, 1.5, -2.25, 0.1, 3.4e38, -1e-45, 123456.789] },
  { dt: 'FP64', values: [0, -0, 0.1, -1e308, 5e-324, Math.PI, 1 / 3, 2 ** 53 + 2] },
  { dt: 'INT8', values: [-128, 127, 0, -1, 5, -0, 100, -100] },
  { dt: 'INT16', values: [-32768, 32767, 0, -1, 300, 7, -7, 1] },
  { dt: 'INT32', values: [-2147483648, 2147483647, 0, -1, 65536, 9, 8, 7] },
  { dt: 'UINT8', values: [0, 255, 1, 2, 128, 3, 4, 5] },
  { dt: 'UINT16', values: [0, 65535, 1, 2, 256, 3, 4, 5] },
  { dt: 'UINT32', values: [0, 4294967295, 1, 2, 65536, 3, 4, 5] },
];

describe('v2 JSON: flat numeric data fast path', () => {
  for (const { dt, values } of CASES) {
    test(`${dt}: flat data decodes exactly like the same values nested`, () => {
      const { flat, nested } = both(values);
      const a = decode(dt, [2, 4], flat);
      const b = decode(dt, [2, 4], nested);
      assert.equal(a.datatype, dt);
      assert.equal(a.data.constructor, b.data.constructor);
      assert.deepEqual(Array.from(a.data as ArrayLike<number>), Array.from(b.data as ArrayLike<number>));
      assert.deepEqual(a.shape, [2, 4]);
      assert.ok(Object.isFrozen(a) && Object.isFrozen(a.shape));
    });
  }

  test('values the fast path does not take still decode as before (NaN and Infinity strings)', () => {
    const t = decode('FP32', [3], [1, 'NaN', '-Infinity']);
    const v = Array.from(t.data as Float32Array);
    assert.equal(v[0], 1);
    assert.ok(Number.isNaN(v[1]));
    assert.equal(v[2], -Infinity);
  });

  test("bad values and wrong counts give the general path's exact errors", () => {
    assert.equal(errorOf('INT8', [2], [1, 128]), "INVALID_INPUT: model 'm': input 'x': element 1 (128) is out of range for INT8");
    assert.equal(errorOf('UINT8', [2], [1, -1]), "INVALID_INPUT: model 'm': input 'x': element 1 (-1) is out of range for UINT8");
    assert.equal(errorOf('INT32', [2], [1, 2.5]), "INVALID_INPUT: model 'm': input 'x': element 1 is 2.5, expected an integer for datatype INT32");
    assert.equal(errorOf('FP32', [2], [1, true]), "INVALID_INPUT: model 'm': input 'x': element 1 is true, expected a number for datatype FP32");
    assert.equal(errorOf('FP32', [1, 3], [1, 2]), "INVALID_INPUT: model 'm': input 'x': shape [1,3] needs 3 elements but 'data' has 2");
    assert.equal(errorOf('FP64', [2], [1, null]), "INVALID_INPUT: model 'm': input 'x': element 1 is null, expected a number for datatype FP64");
  });
});
