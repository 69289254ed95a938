/**
 * @module test/support/raw-tensor
 * Tensor bytes as clients send and read them: little-endian, row-major, BYTES
 * as uint32 LE length + UTF-8, FP16/BF16 given as their 16-bit patterns
 * (tritonclient's serialize_byte_tensor / ndarray.tobytes, and back). One copy
 * for the HTTP binary-extension tests and the gRPC raw_input_contents tests.
 */
import { DATA_TYPE_INFO, type DataType } from '../../src/protocol/tensor.js';

export type Value = number | bigint | boolean | string;

/** Bytes per element: the server's own table (0 for BYTES, which is length-prefixed instead). */
const width = (datatype: string): number => DATA_TYPE_INFO[datatype as DataType]!.byteSize;

/** serialize_byte_tensor / ndarray.tobytes(): FP16 values are given as their 16-bit patterns. */
export function rawBytes(datatype: string, values: readonly Value[]): Buffer {
  if (datatype === 'BYTES') {
    return Buffer.concat(
      values.map((v) => {
        const text = Buffer.from(String(v), 'utf8');
        const len = Buffer.alloc(4);
        len.writeUInt32LE(text.length);
        return Buffer.concat([len, text]);
      }),
    );
  }
  const w = width(datatype);
  const out = Buffer.alloc(values.length * w);
  values.forEach((v, i) => {
    const o = i * w;
    switch (datatype) {
      case 'BOOL':
        out.writeUInt8(v ? 1 : 0, o);
        break;
      case 'UINT8':
        out.writeUInt8(Number(v), o);
        break;
      case 'INT8':
        out.writeInt8(Number(v), o);
        break;
      case 'UINT16':
      case 'FP16':
      case 'BF16':
        out.writeUInt16LE(Number(v), o);
        break;
      case 'INT16':
        out.writeInt16LE(Number(v), o);
        break;
      case 'UINT32':
        out.writeUInt32LE(Number(v), o);
        break;
      case 'INT32':
        out.writeInt32LE(Number(v), o);
        break;
      case 'FP32':
        out.writeFloatLE(Number(v), o);
        break;
      case 'FP64':
        out.writeDoubleLE(Number(v), o);
        break;
      case 'UINT64':
        out.writeBigUInt64LE(BigInt(v), o);
        break;
      case 'INT64':
        out.writeBigInt64LE(BigInt(v), o);
        break;
      default:
        throw new Error(datatype);
    }
  });
  return out;
}

/** deserialize_bytes_tensor / np.frombuffer. */
export function readRaw(datatype: string, bytes: Buffer): Value[] {
  if (datatype === 'BYTES') {
    const out: string[] = [];
    for (let o = 0; o < bytes.length;) {
      const len = bytes.readUInt32LE(o);
      out.push(bytes.subarray(o + 4, o + 4 + len).toString('utf8'));
      o += 4 + len;
    }
    return out;
  }
  const w = width(datatype);
  const out: Value[] = [];
  for (let o = 0; o < bytes.length; o += w) {
    switch (datatype) {
      case 'BOOL':
        out.push(bytes.readUInt8(o) !== 0);
        break;
      case 'UINT8':
        out.push(bytes.readUInt8(o));
        break;
      case 'INT8':
        out.push(bytes.readInt8(o));
        break;
      case 'UINT16':
      case 'FP16':
      case 'BF16':
        out.push(bytes.readUInt16LE(o));
        break;
      case 'INT16':
        out.push(bytes.readInt16LE(o));
        break;
      case 'UINT32':
        out.push(bytes.readUInt32LE(o));
        break;
      case 'INT32':
        out.push(bytes.readInt32LE(o));
        break;
      case 'FP32':
        out.push(bytes.readFloatLE(o));
        break;
      case 'FP64':
        out.push(bytes.readDoubleLE(o));
        break;
      case 'UINT64':
        out.push(bytes.readBigUInt64LE(o));
        break;
      case 'INT64':
        out.push(bytes.readBigInt64LE(o));
        break;
      default:
        throw new Error(datatype);
    }
  }
  return out;
}
