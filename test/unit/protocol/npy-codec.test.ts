/**
 * @module test/unit/protocol/npy-codec
 * .npy reading and writing: files built byte by byte here the way NumPy
 * writes them (an independent writer), every supported dtype, big-endian
 * input, both header versions, and each unsupported or malformed file as a
 * 400 that says what is wrong (Fortran order, dtype, sizes, header).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ServingError } from '../../../src/errors.js';
import { decodeNpy, encodeNpy } from '../../../src/protocol/npy-codec.js';
import type { DataType, Tensor } from '../../../src/protocol/tensor.js';

const MODEL = 'np';

/** A .npy file as NumPy 1.x writes it: magic, version, header length, padded dict, data. */
function npyFile(header: string, data: Uint8Array, version: 1 | 2 = 1): Buffer {
  const pre = version === 1 ? 10 : 12;
  const padded = header + ' '.repeat((64 - ((pre + header.length + 1) % 64)) % 64) + '\n';
  const out = Buffer.alloc(pre + padded.length + data.length);
  out.write('\x93NUMPY', 0, 'latin1');
  out[6] = version;
  out[7] = 0;
  if (version === 1) out.writeUInt16LE(padded.length, 8);
  else out.writeUInt32LE(padded.length, 8);
  out.write(padded, pre, 'latin1');
  out.set(data, pre + padded.length);
  return out;
}

function f32le(values: number[]): Uint8Array {
  const b = Buffer.alloc(values.length * 4);
  values.forEach((v, i) => b.writeFloatLE(v, i * 4));
  return b;
}

function expect400(fn: () => unknown, pattern: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ServingError, String(err));
    assert.equal(err.code, 'INVALID_INPUT');
    assert.match(err.message, /^model 'np': application\/x-npy: /);
    assert.match(err.message, pattern);
    return true;
  });
}

describe('decodeNpy', () => {
  test("a NumPy float32 (2, 3) array: values, shape, and a view on the body's memory", () => {
    const body = npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f32le([1, 2, 3, 4, 5, 6.5]));
    const a = decodeNpy(MODEL, body);
    assert.equal(a.datatype, 'FP32');
    assert.deepEqual(a.shape, [2, 3]);
    assert.deepEqual(Array.from(a.data as Float32Array), [1, 2, 3, 4, 5, 6.5]);
    assert.equal((a.data as Float32Array).buffer, body.buffer);
  });

  test('version 2 headers, 1-d and 0-d shapes, double quotes', () => {
    assert.deepEqual(decodeNpy(MODEL, npyFile('{"descr": "<f4", "fortran_order": False, "shape": (3,)}', f32le([1, 2, 3]), 2)).shape, [3]);
    const scalar = decodeNpy(MODEL, npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", f32le([7])));
    assert.deepEqual(scalar.shape, []);
    assert.deepEqual(Array.from(scalar.data as Float32Array), [7]);
  });

  test('big-endian data is byte-swapped', () => {
    const be = Buffer.alloc(8);
    be.writeInt32BE(-2, 0);
    be.writeInt32BE(70000, 4);
    const a = decodeNpy(MODEL, npyFile("{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", be));
    assert.equal(a.datatype, 'INT32');
    assert.deepEqual(Array.from(a.data as Int32Array), [-2, 70000]);
  });

  test('bool, uint8, int64 and fixed-width bytes', () => {
    assert.deepEqual(
      Array.from(decodeNpy(MODEL, npyFile("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", new Uint8Array([1, 0]))).data as Uint8Array),
      [1, 0],
    );
    const i64 = Buffer.alloc(8);
    i64.writeBigInt64LE(-(2n ** 62n));
    assert.deepEqual(Array.from(decodeNpy(MODEL, npyFile("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", i64)).data as BigInt64Array), [
      -(2n ** 62n),
    ]);
    const s = decodeNpy(MODEL, npyFile("{'descr': '|S3', 'fortran_order': False, 'shape': (2,), }", Buffer.from('ab\0xyz', 'latin1')));
    assert.equal(s.datatype, 'BYTES');
    assert.deepEqual(s.data, ['ab', 'xyz']);
  });

  test('Fortran order is refused with the fix', () => {
    expect400(
      () => decodeNpy(MODEL, npyFile("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", f32le([1, 2, 3, 4]))),
      /Fortran-order .* not supported; send a C-order array/,
    );
  });

  for (const descr of ['<c8', '<U3', '|O', '<M8', '<f16', '<V4']) {
    test(`dtype '${descr}' is refused, naming it`, () => {
      expect400(
        () => decodeNpy(MODEL, npyFile(`{'descr': '${descr}', 'fortran_order': False, 'shape': (1,), }`, new Uint8Array(16))),
        new RegExp(`unsupported dtype '${descr.replace(/[|]/g, '\\|')}'`),
      );
    });
  }

  test('structured dtypes are refused', () => {
    expect400(() => decodeNpy(MODEL, npyFile("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", new Uint8Array(4))), /structured arrays/);
  });

  test('data shorter or longer than the shape needs', () => {
    expect400(
      () => decodeNpy(MODEL, npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", f32le([1, 2]))),
      /needs 12 bytes of data, but the body has 8/,
    );
    expect400(
      () => decodeNpy(MODEL, npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f32le([1, 2]))),
      /needs 4 bytes of data, but the body has 8/,
    );
  });

  test('a shape whose element count overflows', () => {
    expect400(
      () => decodeNpy(MODEL, npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", f32le([1]))),
      /too many elements/,
    );
  });

  test('malformed files: magic, version, header length, header text, keys', () => {
    expect400(() => decodeNpy(MODEL, Buffer.from('PK\x03\x04 not npy at all')), /missing the \\x93NUMPY magic/);
    const v9 = npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f32le([1]));
    v9[6] = 9;
    expect400(() => decodeNpy(MODEL, v9), /unsupported format version 9/);
    const long = npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f32le([1]));
    long.writeUInt16LE(60000, 8);
    expect400(() => decodeNpy(MODEL, long), /the header claims 60000 bytes/);
    expect400(() => decodeNpy(MODEL, npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), '__import__': 1}", f32le([1]))), /exactly the keys/);
    expect400(() => decodeNpy(MODEL, npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", f32le([1]))), /'shape' must be a tuple/);
    expect400(() => decodeNpy(MODEL, npyFile("{'descr': '<f4' 'fortran_order': False}", f32le([1]))), /malformed header/);
    expect400(() => decodeNpy(MODEL, npyFile("__import__('os').system('x')", f32le([1]))), /malformed header/);
  });
});

describe('encodeNpy', () => {
  const cases: ReadonlyArray<readonly [DataType, Tensor['data'], string]> = [
    ['FP32', new Float32Array([1.5, -2]), '<f4'],
    ['FP64', new Float64Array([Math.E, 0]), '<f8'],
    ['FP16', new Uint16Array([0x3c00, 0x4000]), '<f2'],
    ['INT8', new Int8Array([-1, 2]), '|i1'],
    ['UINT8', new Uint8Array([0, 255]), '|u1'],
    ['INT16', new Int16Array([-300, 300]), '<i2'],
    ['UINT16', new Uint16Array([1, 65535]), '<u2'],
    ['INT32', new Int32Array([-7, 7]), '<i4'],
    ['UINT32', new Uint32Array([0, 4294967295]), '<u4'],
    ['INT64', new BigInt64Array([-(2n ** 63n), 1n]), '<i8'],
    ['UINT64', new BigUint64Array([2n ** 64n - 1n, 0n]), '<u8'],
    ['BOOL', new Uint8Array([1, 0]), '|b1'],
  ];
  for (const [datatype, data, descr] of cases) {
    test(`${datatype} → '${descr}', 64-byte aligned data, read back unchanged`, () => {
      const file = Buffer.concat(encodeNpy({ datatype, shape: [1, 2], data }));
      const headerLen = file.readUInt16LE(8);
      assert.equal((10 + headerLen) % 64, 0);
      const header = file.subarray(10, 10 + headerLen).toString('latin1');
      assert.equal(header.trimEnd(), `{'descr': '${descr}', 'fortran_order': False, 'shape': (1, 2), }`);
      assert.ok(header.endsWith('\n'));
      const back = decodeNpy(MODEL, file);
      assert.equal(back.datatype, datatype);
      assert.deepEqual(back.shape, [1, 2]);
      assert.deepEqual(Array.from(back.data as ArrayLike<number | bigint>), Array.from(data as ArrayLike<number | bigint>));
    });
  }

  test("1-d shapes are written as '(n,)'; BYTES as '|S<longest>'", () => {
    const file = Buffer.concat(encodeNpy({ datatype: 'BYTES', shape: [2], data: ['a', 'xyz'] }));
    assert.match(file.toString('latin1'), /'descr': '\|S3', 'fortran_order': False, 'shape': \(2,\)/);
    assert.deepEqual(decodeNpy(MODEL, file).data, ['a', 'xyz']);
  });
});
