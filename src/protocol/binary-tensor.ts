/**
 * @module protocol/binary-tensor
 * The KServe v2 binary tensor data extension: tensor bytes travel raw
 * (little-endian, row-major, no padding) after the JSON header; BOOL is one
 * byte per element; BYTES is, per element, a uint32 LE length and the bytes.
 *
 * Numeric tensors become typed-array views on the request buffer (no copy,
 * no per-element work) whenever the offset is aligned for the element size;
 * only a misaligned tensor (or a big-endian host) is copied. Every length is
 * checked against the bytes that are really there before anything is read,
 * so a hostile body is a 400, never a read outside the buffer.
 */
import os from 'node:os';
import { ServingError } from '../errors.js';
import { DATA_TYPE_INFO, elementCount, formatShape, type DataType, type NumericArray, type Tensor, type TensorData } from './tensor.js';

/** The wire is little-endian; typed arrays use the host's order. */
export const LITTLE_ENDIAN_HOST = os.endianness() === 'LE';

/** Request header that gives the JSON header's length (Triton, KServe). */
export const HEADER_LENGTH_HEADER = 'Inference-Header-Content-Length';

/** SageMaker strips custom headers, so Triton carries the length in the content type instead. */
export const SAGEMAKER_BINARY_CONTENT_TYPE = 'application/vnd.sagemaker-triton.binary+json';
export const SAGEMAKER_HEADER_SIZE_PARAM = 'json-header-size';

// BYTES elements are text in onnxruntime-node (JS strings): refuse bytes that are not UTF-8 rather than mangle them.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function invalidInput(model: string, message: string): ServingError {
  return new ServingError('INVALID_INPUT', `model '${model}': ${message}`, { model });
}

function invalidRequest(model: string, message: string): ServingError {
  return new ServingError('INVALID_REQUEST', `model '${model}': ${message}`, { model });
}

/**
 * Parse a JSON-header length (the Inference-Header-Content-Length header, or
 * the json-header-size content-type parameter): a plain decimal integer in
 * [0, bodyLength]. Anything else — negative, fractional, hex, exponent,
 * blank, or longer than the body — is a 400 naming where it came from.
 */
export function parseHeaderLength(raw: string, bodyLength: number, where: string, model: string): number {
  const text = raw.trim();
  const n = /^\d{1,16}$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(n) || n > bodyLength) {
    throw invalidRequest(model, `${where} must be an integer in [0, ${bodyLength}] (the body has ${bodyLength} bytes), got '${raw.slice(0, 64)}'`);
  }
  return n;
}

function swapInPlace(bytes: Uint8Array, width: number): void {
  for (let i = 0; i + width <= bytes.length; i += width) bytes.subarray(i, i + width).reverse();
}

/**
 * A typed array over `bytes` for a numeric datatype: a view when the offset is
 * aligned (and the host is little-endian), else an aligned copy.
 */
function numericView(dt: DataType, bytes: Uint8Array, count: number): NumericArray {
  const info = DATA_TYPE_INFO[dt];
  const Ctor = info.arrayType!;
  const width = info.byteSize;
  if ((LITTLE_ENDIAN_HOST || width === 1) && bytes.byteOffset % width === 0) {
    return new Ctor(bytes.buffer, bytes.byteOffset, count);
  }
  // Misaligned (or big-endian host): one copy into fresh, aligned memory.
  const out = new Ctor(count);
  const raw = new Uint8Array(out.buffer, out.byteOffset, count * width);
  raw.set(bytes.subarray(0, count * width));
  if (!LITTLE_ENDIAN_HOST && width > 1) swapInPlace(raw, width);
  return out;
}

/** Decode BYTES elements (uint32 LE length + bytes each), every length checked against `bytes`. */
export function decodeBytesElements(model: string, input: string, bytes: Uint8Array, count: number): string[] {
  // Each element needs at least its 4-byte length: reject impossible counts before allocating for them.
  if (count > Math.floor(bytes.length / 4)) {
    throw invalidInput(
      model,
      `input '${input}': ${count} BYTES elements need at least ${count * 4} bytes of length prefixes, but only ${bytes.length} bytes were sent`,
    );
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Array<string>(count);
  let offset = 0;
  for (let i = 0; i < count; i++) {
    if (offset + 4 > bytes.length) {
      throw invalidInput(model, `input '${input}': BYTES element ${i}: its 4-byte length prefix runs past the end of the tensor data (${bytes.length} bytes)`);
    }
    const len = view.getUint32(offset, true);
    offset += 4;
    if (len > bytes.length - offset) {
      throw invalidInput(model, `input '${input}': BYTES element ${i} claims ${len} bytes but only ${bytes.length - offset} remain in the tensor data`);
    }
    try {
      out[i] = utf8.decode(bytes.subarray(offset, offset + len));
    } catch {
      throw invalidInput(model, `input '${input}': BYTES element ${i} is not valid UTF-8 (onnxruntime-node string tensors hold text)`);
    }
    offset += len;
  }
  if (offset !== bytes.length) {
    throw invalidInput(model, `input '${input}': binary_data_size is ${bytes.length} but its ${count} BYTES elements take ${offset} bytes`);
  }
  return out;
}

/**
 * The tensor payload for `dt` and `shape` from exactly `bytes` (one input's
 * binary_data_size bytes). Throws INVALID_INPUT when the size does not match
 * the datatype and shape.
 */
export function decodeBinaryTensorData(model: string, input: string, dt: DataType, shape: readonly number[], bytes: Uint8Array): TensorData {
  let count: number;
  try {
    count = elementCount(shape);
  } catch (err) {
    throw invalidInput(model, `input '${input}': ${(err as Error).message}`);
  }
  if (dt === 'BYTES') return decodeBytesElements(model, input, bytes, count);
  const width = DATA_TYPE_INFO[dt].byteSize;
  const expected = count * width;
  if (expected !== bytes.length) {
    throw invalidInput(
      model,
      `input '${input}': binary_data_size is ${bytes.length} bytes but datatype ${dt} with shape ${formatShape(shape)} needs ${count} × ${width} = ${expected} bytes`,
    );
  }
  return numericView(dt, bytes, count);
}

/** Bytes of one BYTES element: its UTF-8 length prefix then the text. */
function encodeBytesElements(values: readonly string[]): Buffer {
  const encoded = values.map((s) => Buffer.from(s, 'utf8'));
  const total = encoded.reduce((a, b) => a + 4 + b.length, 0);
  const out = Buffer.allocUnsafe(total);
  let offset = 0;
  for (const b of encoded) {
    out.writeUInt32LE(b.length, offset);
    offset += 4;
    b.copy(out, offset);
    offset += b.length;
  }
  return out;
}

/**
 * The wire bytes of a tensor. Numeric tensors are returned as a Buffer over
 * the tensor's own memory (no copy) on little-endian hosts.
 */
export function encodeBinaryTensorData(tensor: Tensor): Buffer {
  const { data } = tensor;
  if (Array.isArray(data)) return encodeBytesElements(data);
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (LITTLE_ENDIAN_HOST || data.BYTES_PER_ELEMENT === 1) return bytes;
  const copy = Buffer.from(bytes);
  swapInPlace(copy, data.BYTES_PER_ELEMENT);
  return copy;
}

/**
 * The shape of a raw binary request (Inference-Header-Content-Length: 0, no
 * JSON at all): Triton allows it for a model with exactly one input with at
 * most one variable dimension, as a batch of one. `dims` is the full shape the
 * model accepts (batch dim included, -1 = variable).
 */
export function rawBinaryShape(model: string, input: string, dt: DataType, dims: readonly number[], bytes: Uint8Array): number[] {
  const variable = dims.filter((d) => d < 0).length;
  if (variable > 1) {
    throw invalidRequest(
      model,
      `a raw binary request (header length 0) needs input '${input}' to have at most one variable dimension besides the batch; it has shape ${formatShape(dims)}`,
    );
  }
  if (dt === 'BYTES') {
    const fixed = dims.map((d) => (d < 0 ? 1 : d));
    if (elementCount(fixed) !== 1) {
      throw invalidRequest(model, `a raw binary request with a BYTES input needs shape [1]; input '${input}' has shape ${formatShape(dims)}`);
    }
    return fixed;
  }
  const width = DATA_TYPE_INFO[dt].byteSize;
  const known = dims.reduce((a, d) => (d < 0 ? a : a * d), 1);
  if (variable === 0) return [...dims];
  const perSlot = known * width;
  if (perSlot === 0 || bytes.length % perSlot !== 0) {
    throw invalidInput(model, `input '${input}': ${bytes.length} raw bytes do not fill datatype ${dt} with shape ${formatShape(dims)}`);
  }
  return dims.map((d) => (d < 0 ? bytes.length / perSlot : d));
}
