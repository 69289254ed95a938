/**
 * @module test/unit/scheduler/batch-merge
 * Concatenating requests along the batch dim and splitting results back,
 * for every datatype the server carries (typed arrays, BigInt arrays, FP16
 * bit patterns, BOOL bytes, BYTES strings), plus the batch signature.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DATA_TYPES, type DataType, type Tensor, type TensorData } from '../../../src/protocol/tensor.js';
import { batchSignature, concatInputs, requestRows, splitOutputs } from '../../../src/scheduler/batch-merge.js';
import { isServingError } from '../../support/serving-error.js';

/** Two elements per row; element values encode (request, row, column). */
function rowsOf(datatype: DataType, request: number, rows: number): Tensor {
  const v = Array.from({ length: rows * 2 }, (_, i) => request * 10 + i);
  const data: Record<DataType, () => TensorData> = {
    BOOL: () => Uint8Array.from(v, (x) => x % 2),
    UINT8: () => Uint8Array.from(v),
    UINT16: () => Uint16Array.from(v),
    UINT32: () => Uint32Array.from(v, (x) => x + 2 ** 31),
    UINT64: () => BigUint64Array.from(v, (x) => BigInt(x) + 2n ** 60n),
    INT8: () => Int8Array.from(v, (x) => -x),
    INT16: () => Int16Array.from(v, (x) => -x),
    INT32: () => Int32Array.from(v, (x) => -x),
    INT64: () => BigInt64Array.from(v, (x) => BigInt(x) - 2n ** 40n),
    FP16: () => Uint16Array.from(v, (x) => 0x3c00 + x),
    FP32: () => Float32Array.from(v, (x) => x / 3),
    FP64: () => Float64Array.from(v, (x) => x / 7),
    BYTES: () => v.map((x) => `s${x}`),
    BF16: () => Uint16Array.from(v, (x) => 0x3f80 + x),
  };
  return { datatype, shape: [rows, 2], data: data[datatype]() };
}

describe('concatInputs / splitOutputs', () => {
  for (const datatype of DATA_TYPES) {
    test(`${datatype}: rows concatenate in request order and split back exactly`, () => {
      const requests = [rowsOf(datatype, 1, 2), rowsOf(datatype, 2, 1), rowsOf(datatype, 3, 3)];
      const merged = concatInputs(requests.map((t) => new Map([['X', t]])));
      const x = merged.get('X')!;
      assert.deepEqual(x.shape, [6, 2]);
      assert.equal(x.datatype, datatype);
      assert.equal(x.data.constructor, requests[0]!.data.constructor, 'same array type as the requests');
      assert.deepEqual(
        Array.from(x.data as ArrayLike<unknown>),
        requests.flatMap((t) => Array.from(t.data as ArrayLike<unknown>)),
      );
      const back = splitOutputs(new Map([['X', x]]), [2, 1, 3], [['X'], ['X'], ['X']], 'm');
      back.forEach((m, i) => {
        const t = m.get('X')!;
        assert.deepEqual(t.shape, requests[i]!.shape);
        assert.deepEqual(Array.from(t.data as ArrayLike<unknown>), Array.from(requests[i]!.data as ArrayLike<unknown>));
      });
    });
  }

  test('one request passes through untouched (no copy)', () => {
    const t = rowsOf('FP32', 1, 2);
    assert.equal(concatInputs([new Map([['X', t]])]).get('X'), t);
  });

  test('numeric results are views of the batch output, not copies', () => {
    const out: Tensor = { datatype: 'FP32', shape: [3, 1], data: Float32Array.from([1, 2, 3]) };
    const [a, b] = splitOutputs(new Map([['Y', out]]), [1, 2], [['Y'], ['Y']], 'm');
    assert.equal((a!.get('Y')!.data as Float32Array).buffer, (out.data as Float32Array).buffer);
    assert.deepEqual(Array.from(b!.get('Y')!.data as Float32Array), [2, 3]);
    assert.deepEqual(b!.get('Y')!.shape, [2, 1]);
  });

  test('each request gets only the outputs it asked for; inner dims of any rank are kept', () => {
    const y: Tensor = { datatype: 'INT32', shape: [2, 2, 2], data: Int32Array.from([1, 2, 3, 4, 5, 6, 7, 8]) };
    const z: Tensor = { datatype: 'BYTES', shape: [2], data: ['a', 'b'] };
    const [a, b] = splitOutputs(
      new Map([
        ['Y', y],
        ['Z', z],
      ]),
      [1, 1],
      [['Y'], ['Z', 'Y']],
      'm',
    );
    assert.deepEqual([...a!.keys()], ['Y']);
    assert.deepEqual(Array.from(a!.get('Y')!.data as Int32Array), [1, 2, 3, 4]);
    assert.deepEqual(a!.get('Y')!.shape, [1, 2, 2]);
    assert.deepEqual([...b!.keys()], ['Z', 'Y']);
    assert.deepEqual(b!.get('Z')!.data, ['b']);
    assert.deepEqual(b!.get('Z')!.shape, [1]);
  });

  test('an output without one row per input row is an INTERNAL error naming the model and the output', () => {
    const y: Tensor = { datatype: 'FP32', shape: [1, 4], data: new Float32Array(4) };
    assert.throws(
      () => splitOutputs(new Map([['Y', y]]), [1, 1], [['Y'], ['Y']], 'team/m'),
      isServingError('INTERNAL', /model 'team\/m': output 'Y' has shape \[1,4\] for a batch of 2 rows/),
    );
  });
});

describe('batchSignature and requestRows', () => {
  const t = (datatype: DataType, shape: number[]): Tensor => ({ datatype, shape, data: new Float32Array(shape.reduce((a, b) => a * b, 1)) });

  test('equal for the same inputs in any order and any row count; different for dims, datatype or input set', () => {
    const a = batchSignature(
      new Map([
        ['A', t('FP32', [1, 3])],
        ['B', t('FP32', [1, 2, 2])],
      ]),
    );
    const b = batchSignature(
      new Map([
        ['B', t('FP32', [5, 2, 2])],
        ['A', t('FP32', [5, 3])],
      ]),
    );
    assert.equal(a, b);
    assert.notEqual(
      a,
      batchSignature(
        new Map([
          ['A', t('FP32', [1, 3])],
          ['B', t('FP32', [1, 2, 3])],
        ]),
      ),
    );
    assert.notEqual(
      a,
      batchSignature(
        new Map([
          ['A', t('FP64', [1, 3])],
          ['B', t('FP32', [1, 2, 2])],
        ]),
      ),
    );
    assert.notEqual(a, batchSignature(new Map([['A', t('FP32', [1, 3])]])));
  });

  test('rows: the shared first dim, within [1, max_batch_size]', () => {
    assert.equal(
      requestRows(
        new Map([
          ['A', t('FP32', [3, 2])],
          ['B', t('FP32', [3])],
        ]),
        4,
        'm',
      ),
      3,
    );
    assert.throws(() => requestRows(new Map([['A', t('FP32', [0, 2])]]), 4, 'm'), isServingError('INVALID_INPUT', /between 1 and 4.*got 0/));
    assert.throws(() => requestRows(new Map([['A', t('FP32', [])]]), 4, 'm'), isServingError('INVALID_INPUT', /input 'A' has shape \[\]/));
  });
});
