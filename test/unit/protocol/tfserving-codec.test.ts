/**
 * @module test/unit/protocol/tfserving-codec
 * TF Serving JSON: telling it from KServe v2, row and columnar requests for
 * one or several inputs, ragged lists as 400s, b64 strings, and the answers
 * ({"predictions"} per instance, {"outputs"} columnar).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ServingError } from '../../../src/errors.js';
import type { Tensor } from '../../../src/protocol/tensor.js';
import { detectTfServing, encodeTfServingResponse, tfServingInputs } from '../../../src/protocol/tfserving-codec.js';

const MODEL = 'tf';
const ONE = [{ name: 'x', dataType: 'FP32' as const }];
const TWO = [
  { name: 'a', dataType: 'INT32' as const },
  { name: 'b', dataType: 'BYTES' as const },
];

function expect400(fn: () => unknown, pattern: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ServingError, String(err));
    assert.equal(err.code, 'INVALID_INPUT');
    assert.match(err.message, pattern);
    return true;
  });
}

describe('detectTfServing', () => {
  test('instances → row; inputs that are not tensor objects → columnar; KServe v2 → undefined', () => {
    assert.equal(detectTfServing({ instances: [[1]] }), 'row');
    assert.equal(detectTfServing({ inputs: [[1, 2]] }), 'columnar');
    assert.equal(detectTfServing({ inputs: { x: [1] } }), 'columnar');
    assert.equal(detectTfServing({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1], data: [1] }] }), undefined);
    assert.equal(detectTfServing({ inputs: [] }), undefined);
    assert.equal(detectTfServing([1, 2]), undefined);
  });
});

describe('tfServingInputs', () => {
  test('row format, one input: the list is the batch', () => {
    const t = tfServingInputs(
      MODEL,
      'row',
      {
        instances: [
          [1, 2],
          [3, 4],
          [5, 6],
        ],
      },
      ONE,
    ).get('x')!;
    assert.deepEqual(t.shape, [3, 2]);
    assert.deepEqual(Array.from(t.data as Float32Array), [1, 2, 3, 4, 5, 6]);
  });

  test('row format, named inputs: one column per input; b64 for BYTES', () => {
    const m = tfServingInputs(
      MODEL,
      'row',
      {
        instances: [
          { a: [1, 2], b: 'x' },
          { a: [3, 4], b: { b64: Buffer.from('yz').toString('base64') } },
        ],
      },
      TWO,
    );
    assert.deepEqual(m.get('a')!.shape, [2, 2]);
    assert.deepEqual(Array.from(m.get('a')!.data as Int32Array), [1, 2, 3, 4]);
    assert.deepEqual(m.get('b')!.data, ['x', 'yz']);
  });

  test('columnar format, bare value and named map', () => {
    assert.deepEqual(tfServingInputs(MODEL, 'columnar', { inputs: [[1, 2, 3]] }, ONE).get('x')!.shape, [1, 3]);
    const m = tfServingInputs(MODEL, 'columnar', { inputs: { a: [[1]], b: [['s']] } }, TWO);
    assert.deepEqual(m.get('b')!.data, ['s']);
  });

  test('ragged lists are a 400 that points at the entry', () => {
    expect400(() => tfServingInputs(MODEL, 'row', { instances: [[1, 2], [3]] }, ONE), /ragged values: value\[1\] has 1 entries where 2 entries are expected/);
    expect400(
      () =>
        tfServingInputs(
          MODEL,
          'row',
          {
            instances: [
              [1, 2],
              [3, [4]],
            ],
          },
          ONE,
        ),
      /ragged values: value\[1\]\[1\] is a list/,
    );
  });

  test('wrong leaf types, unknown inputs, missing names, several inputs without names', () => {
    expect400(() => tfServingInputs(MODEL, 'row', { instances: [['a']] }, ONE), /expected a number for datatype FP32/);
    expect400(() => tfServingInputs(MODEL, 'columnar', { inputs: { nope: [1] } }, ONE), /unexpected input 'nope'/);
    expect400(() => tfServingInputs(MODEL, 'row', { instances: [{ a: [1], b: 'x' }, { a: [2] }] }, TWO), /instances\[1\] has no 'b'/);
    expect400(() => tfServingInputs(MODEL, 'row', { instances: [[1]] }, TWO), /needs a model with exactly one input/);
    expect400(() => tfServingInputs(MODEL, 'row', { instances: [] }, ONE), /non-empty list/);
    expect400(() => tfServingInputs(MODEL, 'row', { instances: [[1]], inputs: [[1]] }, ONE), /not both/);
  });
});

describe('encodeTfServingResponse', () => {
  const y: Tensor = { datatype: 'FP32', shape: [2, 2], data: new Float32Array([1, 2, 3, Number.NaN]) };
  const z: Tensor = { datatype: 'INT64', shape: [2], data: new BigInt64Array([2n ** 60n, -1n]) };

  test('row: predictions per instance; several outputs → an object per instance', () => {
    assert.equal(encodeTfServingResponse(MODEL, 'row', new Map([['y', y]])), '{"predictions":[[1,2],[3,"NaN"]]}');
    assert.deepEqual(
      JSON.parse(
        encodeTfServingResponse(
          MODEL,
          'row',
          new Map([
            ['y', y],
            ['z', z],
          ]),
        ),
      ),
      {
        predictions: [
          { y: [1, 2], z: 1152921504606846976 },
          { y: [3, 'NaN'], z: -1 },
        ],
      },
    );
    assert.match(encodeTfServingResponse(MODEL, 'row', new Map([['z', z]])), /1152921504606846976/);
  });

  test('columnar: the whole tensors', () => {
    assert.equal(encodeTfServingResponse(MODEL, 'columnar', new Map([['y', y]])), '{"outputs":[[1,2],[3,"NaN"]]}');
    assert.equal(
      encodeTfServingResponse(
        MODEL,
        'columnar',
        new Map([
          ['y', y],
          ['s', { datatype: 'BYTES', shape: [1], data: ['q"'] }],
        ]),
      ),
      '{"outputs":{"y":[[1,2],[3,"NaN"]],"s":["q\\""]}}',
    );
  });
});
