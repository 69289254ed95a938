/**
 * @module test/unit/protocol/binary-tensor
 * The binary tensor extension's building blocks, against bytes written here
 * with DataView (an encoder independent of the server's): header lengths,
 * every numeric datatype as a zero-copy view when aligned and a correct copy
 * when not, BYTES framing, and each malformed input as a ServingError that
 * names the model and the input — never a read past the bytes given.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ServingError, type ErrorCode } from '../../../src/errors.js';
import { decodeBinaryTensorData, decodeBytesElements, encodeBinaryTensorData, parseHeaderLength, rawBinaryShape } from '../../../src/protocol/binary-tensor.js';
import type { DataType, Tensor } from '../../../src/protocol/tensor.js';

const MODEL = 'm';

function expectError(fn: () => unknown, code: ErrorCode, pattern: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ServingError, `expected ServingError, got ${String(err)}`);
    assert.equal(err.code, code);
    assert.match(err.message, pattern);
    assert.equal(err.model, MODEL);
    return true;
  });
}

/** Little-endian bytes of `values` for `dt`, written element by element with DataView. */
function leBytes(dt: DataType, values: readonly (number | bigint)[]): Uint8Array {
  const width: Record<string, number> = {
    BOOL: 1,
    UINT8: 1,
    INT8: 1,
    UINT16: 2,
    INT16: 2,
    FP16: 2,
    UINT32: 4,
    INT32: 4,
    FP32: 4,
    UINT64: 8,
    INT64: 8,
    FP64: 8,
  };
  const w = width[dt]!;
  const out = new Uint8Array(values.length * w);
  const view = new DataView(out.buffer);
  values.forEach((v, i) => {
    const o = i * w;
    switch (dt) {
      case 'BOOL':
      case 'UINT8':
        view.setUint8(o, Number(v));
        break;
      case 'INT8':
        view.setInt8(o, Number(v));
        break;
      case 'UINT16':
      case 'FP16':
        view.setUint16(o, Number(v), true);
        break;
      case 'INT16':
        view.setInt16(o, Number(v), true);
        break;
      case 'UINT32':
        view.setUint32(o, Number(v), true);
        break;
      case 'INT32':
        view.setInt32(o, Number(v), true);
        break;
      case 'FP32':
        view.setFloat32(o, Number(v), true);
        break;
      case 'FP64':
        view.setFloat64(o, Number(v), true);
        break;
      case 'UINT64':
        view.setBigUint64(o, BigInt(v), true);
        break;
      case 'INT64':
        view.setBigInt64(o, BigInt(v), true);
        break;
      default:
        throw new Error(dt);
    }
  });
  return out;
}

/** Copy `bytes` into a larger buffer at `offset`, so the tensor starts (mis)aligned. */
function placedAt(bytes: Uint8Array, offset: number): Uint8Array {
  const backing = new Uint8Array(offset + bytes.length + 3);
  backing.set(bytes, offset);
  return backing.subarray(offset, offset + bytes.length);
}

const SAMPLES: ReadonlyArray<readonly [DataType, readonly (number | bigint)[]]> = [
  ['BOOL', [1, 0, 1]],
  ['UINT8', [0, 7, 255]],
  ['INT8', [-128, 0, 127]],
  ['UINT16', [0, 1234, 65535]],
  ['INT16', [-32768, -1, 32767]],
  ['FP16', [0x3c00, 0xc000, 0x7bff]],
  ['UINT32', [0, 123456789, 4294967295]],
  ['INT32', [-2147483648, -5, 2147483647]],
  ['FP32', [1.5, -0.25, 3.4028234663852886e38]],
  ['UINT64', [0n, 2n ** 63n + 5n, 2n ** 64n - 1n]],
  ['INT64', [-(2n ** 63n), -1n, 2n ** 63n - 1n]],
  ['FP64', [Math.PI, -1e-300, Number.MAX_VALUE]],
];

describe('parseHeaderLength', () => {
  test('plain decimal integers up to the body length', () => {
    assert.equal(parseHeaderLength('0', 10, 'h', MODEL), 0);
    assert.equal(parseHeaderLength('10', 10, 'h', MODEL), 10);
    assert.equal(parseHeaderLength(' 7 ', 10, 'h', MODEL), 7);
  });

  for (const raw of ['-1', '-123', 'abc', '', '1e3', '0x10', '3.5', '+4', '11', '99999999999999999999', '12abc']) {
    test(`'${raw}' is a 400 naming the header`, () => {
      expectError(
        () => parseHeaderLength(raw, 10, 'Inference-Header-Content-Length', MODEL),
        'INVALID_REQUEST',
        /Inference-Header-Content-Length must be an integer in \[0, 10\]/,
      );
    });
  }
});

describe('decodeBinaryTensorData: numeric datatypes', () => {
  for (const [dt, values] of SAMPLES) {
    test(`${dt}: aligned → a view on the same memory; misaligned → an aligned copy; same values`, () => {
      const bytes = leBytes(dt, values);
      const aligned = placedAt(bytes, 8);
      const a = decodeBinaryTensorData(MODEL, 'x', dt, [3], aligned) as ArrayBufferView;
      assert.ok(!Array.isArray(a));
      assert.deepEqual(Array.from(a as unknown as ArrayLike<number | bigint>), [...values]);
      assert.equal(a.buffer, aligned.buffer, 'aligned data is not copied');
      const misaligned = placedAt(bytes, 1);
      const b = decodeBinaryTensorData(MODEL, 'x', dt, [3], misaligned) as ArrayBufferView;
      assert.deepEqual(Array.from(b as unknown as ArrayLike<number | bigint>), [...values]);
      if (bytes.length / 3 > 1) assert.notEqual(b.buffer, misaligned.buffer, 'misaligned data is copied');
    });
  }

  test('multi-dimensional shapes count every element', () => {
    const bytes = leBytes('FP32', [1, 2, 3, 4, 5, 6]);
    assert.deepEqual(Array.from(decodeBinaryTensorData(MODEL, 'x', 'FP32', [2, 3], bytes) as Float32Array), [1, 2, 3, 4, 5, 6]);
  });

  test('a size that does not match datatype × shape is INVALID_INPUT with both numbers', () => {
    expectError(
      () => decodeBinaryTensorData(MODEL, 'x', 'FP32', [2, 3], new Uint8Array(20)),
      'INVALID_INPUT',
      /input 'x': binary_data_size is 20 bytes but datatype FP32 with shape \[2,3\] needs 6 × 4 = 24 bytes/,
    );
    expectError(() => decodeBinaryTensorData(MODEL, 'x', 'INT64', [1], new Uint8Array(9)), 'INVALID_INPUT', /needs 1 × 8 = 8 bytes/);
  });

  test('a shape whose element count overflows is INVALID_INPUT, not an allocation', () => {
    expectError(() => decodeBinaryTensorData(MODEL, 'x', 'FP32', [2 ** 40, 2 ** 40], new Uint8Array(16)), 'INVALID_INPUT', /too many elements/);
    expectError(() => decodeBinaryTensorData(MODEL, 'x', 'BYTES', [2 ** 40, 2 ** 40], new Uint8Array(16)), 'INVALID_INPUT', /too many elements/);
  });

  test('zero-element tensors are allowed', () => {
    assert.equal((decodeBinaryTensorData(MODEL, 'x', 'FP32', [0, 4], new Uint8Array(0)) as Float32Array).length, 0);
  });
});

/** BYTES framing written by hand: uint32 LE length, then the bytes. */
function framed(parts: readonly (string | Uint8Array)[]): Uint8Array {
  const chunks = parts.map((p) => (typeof p === 'string' ? new TextEncoder().encode(p) : p));
  const out = new Uint8Array(chunks.reduce((n, c) => n + 4 + c.length, 0));
  const view = new DataView(out.buffer);
  let o = 0;
  for (const c of chunks) {
    view.setUint32(o, c.length, true);
    out.set(c, o + 4);
    o += 4 + c.length;
  }
  return out;
}

describe('BYTES elements', () => {
  test('decode strings, including empty and multi-byte UTF-8', () => {
    assert.deepEqual(decodeBinaryTensorData(MODEL, 's', 'BYTES', [3], framed(['hello', '', 'naïve ✓'])), ['hello', '', 'naïve ✓']);
  });

  test('a length running past the tensor data is INVALID_INPUT', () => {
    const bytes = framed(['abc']);
    new DataView(bytes.buffer).setUint32(0, 1000, true);
    expectError(() => decodeBytesElements(MODEL, 's', bytes, 1), 'INVALID_INPUT', /BYTES element 0 claims 1000 bytes but only 3 remain/);
  });

  test('a length prefix cut short is INVALID_INPUT', () => {
    const bytes = new Uint8Array([...framed(['ab']), 1, 0]);
    expectError(() => decodeBytesElements(MODEL, 's', bytes, 2), 'INVALID_INPUT', /element 1: its 4-byte length prefix runs past the end/);
  });

  test('more elements than 4-byte prefixes could fit is refused before allocating', () => {
    expectError(
      () => decodeBinaryTensorData(MODEL, 's', 'BYTES', [1e12], new Uint8Array(8)),
      'INVALID_INPUT',
      /1000000000000 BYTES elements need at least 4000000000000 bytes/,
    );
  });

  test('bytes left over after the last element are INVALID_INPUT', () => {
    const bytes = new Uint8Array([...framed(['ab']), 0]);
    expectError(() => decodeBytesElements(MODEL, 's', bytes, 1), 'INVALID_INPUT', /binary_data_size is 7 but its 1 BYTES elements take 6 bytes/);
  });

  test('invalid UTF-8 is INVALID_INPUT', () => {
    expectError(() => decodeBytesElements(MODEL, 's', framed([new Uint8Array([0xff, 0xfe])]), 1), 'INVALID_INPUT', /not valid UTF-8/);
  });
});

describe('encodeBinaryTensorData', () => {
  test('numeric tensors are their own memory, little-endian', () => {
    const data = new Float32Array([1, -2, 0.5]);
    const t: Tensor = { datatype: 'FP32', shape: [3], data };
    const bytes = encodeBinaryTensorData(t);
    assert.equal(bytes.buffer, data.buffer);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    assert.deepEqual(
      [0, 4, 8].map((o) => view.getFloat32(o, true)),
      [1, -2, 0.5],
    );
  });

  test('BYTES tensors are framed with uint32 LE lengths (readable by the decoder)', () => {
    const bytes = encodeBinaryTensorData({ datatype: 'BYTES', shape: [2], data: ['a', 'ünï'] });
    assert.deepEqual(Array.from(bytes), Array.from(framed(['a', 'ünï'])));
  });
});

describe('rawBinaryShape (Inference-Header-Content-Length: 0)', () => {
  test('fixed shapes are used as they are; one variable dim is filled from the byte count', () => {
    assert.deepEqual(rawBinaryShape(MODEL, 'x', 'FP32', [1, 4], new Uint8Array(16)), [1, 4]);
    assert.deepEqual(rawBinaryShape(MODEL, 'x', 'FP32', [1, -1], new Uint8Array(24)), [1, 6]);
  });

  test('two variable dims, BYTES beyond one element, or a ragged byte count are refused', () => {
    expectError(() => rawBinaryShape(MODEL, 'x', 'FP32', [1, -1, -1], new Uint8Array(16)), 'INVALID_REQUEST', /at most one variable dimension/);
    expectError(() => rawBinaryShape(MODEL, 'x', 'BYTES', [1, 3], new Uint8Array(16)), 'INVALID_REQUEST', /BYTES input needs shape \[1\]/);
    expectError(() => rawBinaryShape(MODEL, 'x', 'FP32', [1, -1], new Uint8Array(10)), 'INVALID_INPUT', /10 raw bytes do not fill/);
  });
});
