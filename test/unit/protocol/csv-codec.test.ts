/**
 * @module test/unit/protocol/csv-codec
 * text/csv: rows and columns (quotes, CRLF, BOM, blank lines), ragged rows
 * and non-numbers as 400s naming the line and column, conversion into each
 * datatype (int64 exact, integer ranges), and the CSV answer per rank.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ServingError } from '../../../src/errors.js';
import { csvToTensor, encodeCsv, parseCsv } from '../../../src/protocol/csv-codec.js';

const MODEL = 'tab';
const csv = (text: string) => parseCsv(MODEL, Buffer.from(text, 'utf8'));

function expect400(fn: () => unknown, pattern: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ServingError, String(err));
    assert.equal(err.code, 'INVALID_INPUT');
    assert.match(err.message, /^model 'tab': /);
    assert.match(err.message, pattern);
    return true;
  });
}

describe('parseCsv', () => {
  test('rows and columns; CRLF, a BOM, a trailing newline and blank lines are fine', () => {
    const t = csv('\ufeff1,2,3\r\n4,5,6\r\n\r\n7,8,9\n');
    assert.equal(t.rows, 3);
    assert.equal(t.columns, 3);
    assert.deepEqual(t.fields, ['1', '2', '3', '4', '5', '6', '7', '8', '9']);
  });

  test('quoted fields, with commas and doubled quotes inside', () => {
    const t = csv('"1.5","a,b","say ""hi"""\n');
    assert.deepEqual(t.fields, ['1.5', 'a,b', 'say "hi"']);
  });

  test('ragged rows are a 400 naming both lines', () => {
    expect400(() => csv('1,2,3\n4,5\n'), /line 2 has 2 values but line 1 has 3/);
  });

  test('an empty body, an unterminated quote, text after a quote', () => {
    expect400(() => csv('\n\n'), /no rows/);
    expect400(() => csv('"1,2\n'), /line 1: unterminated quoted field/);
    expect400(() => csv('"1"x,2\n'), /line 1: unexpected text after a quoted field/);
  });
});

describe('csvToTensor', () => {
  test('FP32 with the given shape; NaN and infinities spelled the usual ways', () => {
    const t = csvToTensor(MODEL, 'x', 'FP32', [2, 3], csv('1,-2.5,3e2\nnan,inf,-Infinity\n'));
    assert.deepEqual(t.shape, [2, 3]);
    assert.deepEqual(Array.from(t.data as Float32Array), [1, -2.5, 300, Number.NaN, Infinity, -Infinity]);
  });

  test('non-numbers and empty values are 400s naming the row and column', () => {
    expect400(() => csvToTensor(MODEL, 'x', 'FP32', [2, 2], csv('1,2\n3,abc\n')), /row 2, column 2: 'abc' is not a number/);
    expect400(() => csvToTensor(MODEL, 'x', 'FP64', [1, 3], csv('1,,3\n')), /row 1, column 2: empty value/);
    expect400(() => csvToTensor(MODEL, 'x', 'FP32', [1, 2], csv('1,0x10\n')), /'0x10' is not a number/);
  });

  test('integer types are range-checked; INT64 keeps every digit', () => {
    const t = csvToTensor(MODEL, 'x', 'INT64', [1, 2], csv('9007199254740993,-9223372036854775808\n'));
    assert.deepEqual(Array.from(t.data as BigInt64Array), [9007199254740993n, -9223372036854775808n]);
    assert.throws(() => csvToTensor(MODEL, 'x', 'INT8', [1, 1], csv('200\n')), /out of range for INT8/);
    assert.throws(() => csvToTensor(MODEL, 'x', 'INT32', [1, 1], csv('1.5\n')), /expected an integer/);
  });

  test('BYTES keeps the field texts', () => {
    assert.deepEqual(csvToTensor(MODEL, 'x', 'BYTES', [1, 2], csv('a,"b c"\n')).data, ['a', 'b c']);
  });
});

describe('encodeCsv', () => {
  test('rank 2: one line per row', () => {
    assert.equal(encodeCsv({ datatype: 'FP32', shape: [2, 2], data: new Float32Array([1, 0.5, -2, Number.NaN]) }), '1,0.5\n-2,NaN\n');
  });

  test('rank 3: the trailing dims flattened per row; rank 1: one value per line; rank 0: one value', () => {
    assert.equal(encodeCsv({ datatype: 'INT32', shape: [2, 1, 2], data: new Int32Array([1, 2, 3, 4]) }), '1,2\n3,4\n');
    assert.equal(encodeCsv({ datatype: 'INT64', shape: [2], data: new BigInt64Array([2n ** 62n, -1n]) }), '4611686018427387904\n-1\n');
    assert.equal(encodeCsv({ datatype: 'BOOL', shape: [], data: new Uint8Array([1]) }), 'true\n');
  });

  test('strings are quoted when they must be', () => {
    assert.equal(encodeCsv({ datatype: 'BYTES', shape: [1, 3], data: ['0.9:1:cat', 'a,b', 'say "x"'] }), '0.9:1:cat,"a,b","say ""x"""\n');
  });
});
