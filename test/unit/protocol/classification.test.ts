/**
 * @module test/unit/protocol/classification
 * Triton's classification extension: top-k per batch item in descending
 * order (ties by lower index), "value:index:label" with C's %f formatting for
 * floats and plain digits for integers, labels only where a line exists, and
 * the datatypes it refuses.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ServingError } from '../../../src/errors.js';
import { classify } from '../../../src/protocol/classification.js';

describe('classify', () => {
  test('top-k per batch item, labels by class index, shape [batch, k]', () => {
    const t = classify('m', 'y', { datatype: 'FP32', shape: [2, 4], data: new Float32Array([0.1, 3.3, 0.5, 2, 9, 8, 7, 6]) }, 2, true, ['cat', 'dog', 'eel']);
    assert.equal(t.datatype, 'BYTES');
    assert.deepEqual(t.shape, [2, 2]);
    assert.deepEqual(t.data, ['3.300000:1:dog', '2.000000:3', '9.000000:0:cat', '8.000000:1:dog']);
  });

  test('without batching the whole tensor is one set of classes; k larger than classes is capped', () => {
    const t = classify('m', 'y', { datatype: 'INT32', shape: [3], data: new Int32Array([5, -1, 7]) }, 10, false, undefined);
    assert.deepEqual(t.shape, [3]);
    assert.deepEqual(t.data, ['7:2', '5:0', '-1:1']);
  });

  test('ties keep the lower index first; NaN sorts last; INT64 and FP16 values', () => {
    assert.deepEqual(classify('m', 'y', { datatype: 'FP64', shape: [1, 4], data: new Float64Array([1, Number.NaN, 1, 2]) }, 4, true, undefined).data, [
      '2.000000:3',
      '1.000000:0',
      '1.000000:2',
      'nan:1',
    ]);
    assert.deepEqual(classify('m', 'y', { datatype: 'INT64', shape: [2], data: new BigInt64Array([2n ** 60n, 3n]) }, 1, false, undefined).data, [
      '1152921504606846976:0',
    ]);
    assert.deepEqual(classify('m', 'y', { datatype: 'FP16', shape: [2], data: new Uint16Array([0x3c00, 0x4000]) }, 1, false, ['one', 'two']).data, [
      '2.000000:1:two',
    ]);
  });

  for (const datatype of ['BYTES', 'BOOL'] as const) {
    test(`${datatype} outputs cannot be classified`, () => {
      const data = datatype === 'BYTES' ? ['a'] : new Uint8Array([1]);
      assert.throws(
        () => classify('m', 'y', { datatype, shape: [1], data }, 1, false, undefined),
        (err: unknown) => {
          assert.ok(err instanceof ServingError);
          assert.equal(err.code, 'INVALID_INPUT');
          assert.match(err.message, /output 'y' is .*; classification needs a numeric output/);
          return true;
        },
      );
    });
  }
});
