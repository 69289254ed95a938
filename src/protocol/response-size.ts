/**
 * @module protocol/response-size
 * The most bytes an answer's encoding can take, computed from its output
 * tensors before anything is encoded (MME_MAX_RESPONSE_BYTES is checked
 * against it, so an oversized answer costs no encoded copy). Binary forms
 * (KServe binary outputs, .npy, gRPC raw contents) are exact up to a fixed
 * header allowance; text forms (JSON, CSV, TF Serving) take each element at
 * the widest its datatype prints, with its separator and any nesting.
 */
import { DATA_TYPE_INFO, type DataType, type Tensor } from './tensor.js';

/** Widest printing of one element, without its separator. */
const TEXT_WIDTH: Readonly<Record<DataType, number>> = Object.freeze({
  BOOL: 5, // false
  UINT8: 3,
  INT8: 4,
  UINT16: 5,
  INT16: 6,
  UINT32: 10,
  INT32: 11,
  UINT64: 20,
  INT64: 20, // -9223372036854775808
  // A float printed as the shortest double that reads back (e.g. -1.2345678901234567e-308), or a quoted "-Infinity".
  FP16: 24,
  BF16: 24,
  FP32: 24,
  FP64: 24,
  BYTES: 0, // per string, below
});

/** Separator plus the brackets a nested (TF Serving, CSV row) layout may add around one element. */
const PER_ELEMENT_OVERHEAD = 3;
/** Name, datatype, shape and punctuation of one output, plus the answer's own fields (model name, id, version). */
const PER_TENSOR_OVERHEAD = 512;

function stringLength(s: string): number {
  return s.length;
}

/** The most bytes `tensor` takes in a text answer. */
export function textBytesBound(name: string, tensor: Tensor): number {
  let bytes = PER_TENSOR_OVERHEAD + 2 * name.length + 21 * tensor.shape.length;
  if (tensor.datatype === 'BYTES') {
    // Every UTF-16 unit escaped as \uXXXX at worst, plus quotes (base64 in TF Serving's {"b64"} is smaller).
    for (const s of tensor.data as string[]) bytes += 6 * stringLength(s) + 2 + PER_ELEMENT_OVERHEAD;
    return bytes;
  }
  return bytes + tensor.data.length * (TEXT_WIDTH[tensor.datatype] + PER_ELEMENT_OVERHEAD);
}

/** The exact payload bytes of `tensor` in binary form (BYTES: a 4-byte length and the UTF-8 bytes per element), plus its header allowance. */
export function binaryBytesBound(name: string, tensor: Tensor): number {
  let bytes = PER_TENSOR_OVERHEAD + 2 * name.length + 21 * tensor.shape.length;
  if (tensor.datatype === 'BYTES') {
    for (const s of tensor.data as string[]) bytes += 4 + Buffer.byteLength(s, 'utf8');
    return bytes;
  }
  return bytes + tensor.data.length * DATA_TYPE_INFO[tensor.datatype].byteSize;
}

/** A .npy answer: fixed-width elements (BYTES as UTF-32 of the longest string) after a header of at most a few hundred bytes. */
export function npyBytesBound(name: string, tensor: Tensor): number {
  if (tensor.datatype !== 'BYTES') return binaryBytesBound(name, tensor);
  let longest = 0;
  for (const s of tensor.data as string[]) longest = Math.max(longest, s.length);
  return PER_TENSOR_OVERHEAD + tensor.data.length * 4 * Math.max(1, longest);
}
