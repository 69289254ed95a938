/**
 * @module protocol/v2-json-codec
 * KServe v2 JSON ⇄ InferRequest / InferResponse. Model-agnostic: it checks
 * that each tensor is self-consistent (datatype known, shape valid, element
 * count and value types right) and leaves "does it fit the model" to the
 * service. Errors name the model and the input, since they reach the client.
 */
import { ServingError } from '../errors.js';
import { decodeBinaryTensorData, encodeBinaryTensorData } from './binary-tensor.js';
import { jsonValueText, parseJsonExact } from './exact-json.js';
import { fromBFloat16Bits, fromFloat16Bits, toBFloat16Bits, toFloat16Bits } from './float16.js';
import type { InferRequest, InferResponse, Parameters, ParameterValue, RequestedOutput } from './infer-types.js';
import { DATA_TYPE_INFO, elementCount, formatShape, isDataType, unknownDataTypeMessage, type DataType, type Tensor, type TensorData } from './tensor.js';

/** Triton's HTTP_MAX_JSON_NESTING_DEPTH. */
const MAX_NESTING = 100;

const INT_RANGES: Partial<Record<DataType, readonly [number, number]>> = {
  INT8: [-128, 127],
  INT16: [-32768, 32767],
  INT32: [-2147483648, 2147483647],
  UINT8: [0, 255],
  UINT16: [0, 65535],
  UINT32: [0, 4294967295],
};

function bad(model: string, message: string): ServingError {
  return new ServingError('INVALID_INPUT', `model '${model}': ${message}`, { model });
}

function badRequest(model: string, message: string): ServingError {
  return new ServingError('INVALID_REQUEST', `model '${model}': ${message}`, { model });
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Parse a body as JSON with a message that names the model and the position. */
export function parseJsonBody(body: Buffer | string, model: string, exact = false): unknown {
  const text = typeof body === 'string' ? body : body.toString('utf8');
  try {
    return exact ? parseJsonExact(text) : JSON.parse(text);
  } catch (err) {
    // Only a body that failed to parse is looked at again (an empty one fails too).
    if (text.trim() === '') throw badRequest(model, 'request body is empty; expected a KServe v2 JSON inference request');
    throw badRequest(model, `request body is not valid JSON: ${(err as Error).message}`);
  }
}

/**
 * A 64-bit integer that JSON.parse read as a float beyond ±(2^53 − 1), where
 * floats skip integers: its digits may be gone. Decoders throw it; a body
 * read with JSON.parse is then read again exactly (exactRetry), where an
 * integer literal is a BigInt, so what still throws it was written with a
 * fraction or an exponent (9.007199254740997e15) and is refused, never rounded.
 */
export class InexactIntegerError extends ServingError {}

/**
 * `first()` (a decode of the JSON.parse reading), or `exact()` (the same
 * decode of the exact reading, protocol/exact-json) when the first met an
 * integer JSON.parse may have rounded. Float bodies never read twice.
 */
export function exactRetry<T>(first: () => T, exact: () => T): T {
  try {
    return first();
  } catch (err) {
    if (err instanceof InexactIntegerError) return exact();
    throw err;
  }
}

function parseParameters(model: string, where: string, raw: unknown): Parameters {
  if (raw === undefined || raw === null) return {};
  if (!isRecord(raw)) throw badRequest(model, `${where}: 'parameters' must be an object`);
  const out: Record<string, ParameterValue> = {};
  for (const [k, v] of Object.entries(raw)) {
    if (typeof v === 'bigint') {
      // An exact reading (exactRetry) of a long integer: the number JSON.parse gives, so parameters read alike both ways
      // (whoever takes an integer parameter refuses one beyond 2^53, e.g. sequence_id).
      out[k] = Number(v);
      continue;
    }
    if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') {
      throw badRequest(model, `${where}: parameter '${k}' must be a string, number or boolean`);
    }
    out[k] = v;
  }
  return Object.freeze(out);
}

function flatten(model: string, input: string, data: unknown, out: unknown[], depth: number): void {
  if (depth > MAX_NESTING) throw bad(model, `input '${input}': 'data' is nested deeper than ${MAX_NESTING} levels`);
  if (Array.isArray(data)) {
    for (const d of data) {
      if (Array.isArray(d)) flatten(model, input, d, out, depth + 1);
      else out.push(d);
    }
  } else {
    out.push(data);
  }
}

function toNumber(model: string, input: string, dt: DataType, v: unknown, i: number): number {
  if (typeof v === 'number') return v;
  // A long integer literal (exact-json): the nearest float, as JSON.parse would have read it.
  if (typeof v === 'bigint') return Number(v);
  if (typeof v === 'string' && (dt === 'FP16' || dt === 'FP32' || dt === 'FP64' || dt === 'BF16')) {
    if (v === 'NaN') return Number.NaN;
    if (v === 'Infinity' || v === 'inf') return Infinity;
    if (v === '-Infinity' || v === '-inf') return -Infinity;
  }
  throw bad(model, `input '${input}': element ${i} is ${jsonValueText(v)}, expected a number for datatype ${dt}`);
}

/**
 * A 64-bit integer that arrived as a float beyond ±2^53 (a fraction or an
 * exponent in the text, e.g. 9.007199254740997e15): the digits it was
 * written with are gone, so it is refused rather than rounded.
 */
function inexact(model: string, input: string, dt: DataType, v: number, i: number, lo: bigint, hi: bigint): ServingError {
  const message =
    BigInt(v) < lo || BigInt(v) > hi
      ? `input '${input}': element ${i} (${v}) is out of range for ${dt}`
      : `input '${input}': element ${i} is ${v} written with a fraction or an exponent: beyond ±2^53 such a number is not exact, and ${dt} needs the exact integer; write it as a plain integer (9007199254740993) or a decimal string ("9007199254740993")`;
  return new InexactIntegerError('INVALID_INPUT', `model '${model}': ${message}`, { model });
}

/** Decode flat JSON values into the typed payload for `dt`. Values may be BigInts (exact-json's long integers). */
export function decodeTensorData(model: string, input: string, dt: DataType, values: readonly unknown[]): TensorData {
  const n = values.length;
  switch (dt) {
    case 'BYTES': {
      const out = new Array<string>(n);
      for (let i = 0; i < n; i++) {
        const v = values[i];
        if (typeof v !== 'string') {
          throw bad(model, `input '${input}': element ${i} is ${jsonValueText(v)}, expected a string for datatype BYTES`);
        }
        out[i] = v;
      }
      return out;
    }
    case 'BOOL': {
      const out = new Uint8Array(n);
      for (let i = 0; i < n; i++) {
        const v = values[i];
        if (v === true || v === 1) out[i] = 1;
        else if (v === false || v === 0) out[i] = 0;
        else throw bad(model, `input '${input}': element ${i} is ${jsonValueText(v)}, expected true or false for datatype BOOL`);
      }
      return out;
    }
    case 'FP32':
    case 'FP64': {
      const out = dt === 'FP32' ? new Float32Array(n) : new Float64Array(n);
      for (let i = 0; i < n; i++) {
        const v = values[i];
        out[i] = typeof v === 'number' ? v : toNumber(model, input, dt, v, i);
      }
      return out;
    }
    case 'FP16':
    case 'BF16': {
      const out = new Uint16Array(n);
      const conv = dt === 'FP16' ? toFloat16Bits : toBFloat16Bits;
      for (let i = 0; i < n; i++) out[i] = conv(toNumber(model, input, dt, values[i], i));
      return out;
    }
    case 'INT64':
    case 'UINT64': {
      const out = dt === 'INT64' ? new BigInt64Array(n) : new BigUint64Array(n);
      const [lo, hi] = dt === 'INT64' ? [-(2n ** 63n), 2n ** 63n - 1n] : [0n, 2n ** 64n - 1n];
      for (let i = 0; i < n; i++) {
        const v = values[i];
        let b: bigint;
        if (typeof v === 'bigint') b = v;
        else if (typeof v === 'number' && Number.isSafeInteger(v)) b = BigInt(v);
        else if (typeof v === 'string' && /^-?\d+$/.test(v)) b = BigInt(v);
        else if (typeof v === 'number' && Number.isInteger(v)) throw inexact(model, input, dt, v, i, lo, hi);
        else throw bad(model, `input '${input}': element ${i} is ${jsonValueText(v)}, expected an integer for datatype ${dt}`);
        if (b < lo || b > hi) throw bad(model, `input '${input}': element ${i} (${String(v)}) is out of range for ${dt}`);
        out[i] = b;
      }
      return out;
    }
    default: {
      const info = DATA_TYPE_INFO[dt];
      const range = INT_RANGES[dt];
      const Ctor = info.arrayType;
      if (!Ctor || !range) throw bad(model, `input '${input}': datatype ${dt} cannot be sent as JSON`);
      const out = new Ctor(n);
      const [lo, hi] = range;
      for (let i = 0; i < n; i++) {
        const v = values[i];
        if (typeof v === 'bigint') throw bad(model, `input '${input}': element ${i} (${v}) is out of range for ${dt}`);
        if (typeof v !== 'number' || !Number.isInteger(v)) {
          throw bad(model, `input '${input}': element ${i} is ${jsonValueText(v)}, expected an integer for datatype ${dt}`);
        }
        if (v < lo || v > hi) throw bad(model, `input '${input}': element ${i} (${v}) is out of range for ${dt}`);
        out[i] = v;
      }
      return out;
    }
  }
}

/**
 * The common case straight into the typed array: a flat `data` array of
 * exactly `count` plain numbers for a float or 8-32-bit integer datatype,
 * each in range. No intermediate array and no per-element dispatch. Anything
 * else (nesting, strings such as "NaN", BOOL, 64-bit or half types, a wrong
 * count, a bad value) returns undefined and takes the general path, which
 * gives the exact error.
 */
function decodeFlatNumbers(dt: DataType, data: unknown, count: number): TensorData | undefined {
  if (!Array.isArray(data) || data.length !== count) return undefined;
  switch (dt) {
    case 'FP32':
    case 'FP64': {
      const out = dt === 'FP32' ? new Float32Array(count) : new Float64Array(count);
      for (let i = 0; i < count; i++) {
        const v: unknown = data[i];
        if (typeof v !== 'number') return undefined;
        out[i] = v;
      }
      return out;
    }
    case 'INT8':
    case 'INT16':
    case 'INT32':
    case 'UINT8':
    case 'UINT16':
    case 'UINT32': {
      const [lo, hi] = INT_RANGES[dt]!;
      const out = new DATA_TYPE_INFO[dt].arrayType!(count);
      for (let i = 0; i < count; i++) {
        const v: unknown = data[i];
        // v === Math.trunc(v) within [lo, hi]: an integer in range (NaN and ±Infinity fail the comparisons).
        if (typeof v !== 'number' || !(v >= lo && v <= hi) || Math.trunc(v) !== v) return undefined;
        out[i] = v;
      }
      return out;
    }
    default:
      return undefined;
  }
}

function parseShape(model: string, input: string, raw: unknown): number[] {
  if (!Array.isArray(raw)) throw bad(model, `input '${input}': 'shape' must be an array of non-negative integers`);
  for (const d of raw) {
    if (typeof d !== 'number' || !Number.isSafeInteger(d) || d < 0) {
      throw bad(model, `input '${input}': 'shape' must be an array of non-negative integers, got [${raw.map(jsonValueText).join(',')}]`);
    }
  }
  return raw as number[];
}

/** The binary section of a request (bytes after the JSON header) and how far the inputs have consumed it. */
interface BinaryCursor {
  readonly bytes: Uint8Array;
  offset: number;
}

function binaryDataSize(model: string, input: string, parameters: Parameters): number | undefined {
  const v = parameters['binary_data_size'];
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    throw badRequest(model, `input '${input}': parameter 'binary_data_size' must be a non-negative integer, got ${JSON.stringify(v)}`);
  }
  return v;
}

function decodeInput(model: string, raw: unknown, index: number, binary: BinaryCursor | undefined): [string, Tensor] {
  if (!isRecord(raw)) throw badRequest(model, `inputs[${index}] must be an object`);
  const name = raw['name'];
  if (typeof name !== 'string' || name === '') throw badRequest(model, `inputs[${index}]: 'name' must be a non-empty string`);
  const datatype = raw['datatype'];
  if (!isDataType(datatype)) {
    throw bad(model, `input '${name}': ${unknownDataTypeMessage(datatype)}`);
  }
  const shape = parseShape(model, name, raw['shape']);
  let count: number;
  try {
    count = elementCount(shape);
  } catch (err) {
    throw bad(model, `input '${name}': ${(err as Error).message}`);
  }
  const size = binaryDataSize(model, name, parseParameters(model, `input '${name}'`, raw['parameters']));
  if (size !== undefined) {
    if (binary === undefined) {
      throw badRequest(
        model,
        `input '${name}' has parameter 'binary_data_size' but the request has no binary data: send the JSON length in the Inference-Header-Content-Length header (or content type application/vnd.sagemaker-triton.binary+json;json-header-size=N)`,
      );
    }
    if ('data' in raw) throw badRequest(model, `input '${name}' has both 'data' and 'binary_data_size'; send one or the other`);
    const left = binary.bytes.length - binary.offset;
    if (size > left) {
      throw bad(model, `input '${name}': binary_data_size ${size} runs past the end of the body (${left} bytes of binary data left)`);
    }
    const bytes = binary.bytes.subarray(binary.offset, binary.offset + size);
    binary.offset += size;
    const data = decodeBinaryTensorData(model, name, datatype, shape, bytes);
    return [name, Object.freeze({ datatype, shape: Object.freeze(shape.slice()), data })];
  }
  if (!('data' in raw)) {
    throw bad(
      model,
      binary === undefined
        ? `input '${name}': 'data' is missing (binary tensor data needs the binary protocol)`
        : `input '${name}': 'data' is missing and there is no 'binary_data_size' parameter`,
    );
  }
  const fast = decodeFlatNumbers(datatype, raw['data'], count);
  if (fast !== undefined) return [name, Object.freeze({ datatype, shape: Object.freeze(shape.slice()), data: fast })];
  const values: unknown[] = [];
  flatten(model, name, raw['data'], values, 0);
  if (values.length !== count) {
    throw bad(model, `input '${name}': shape ${formatShape(shape)} needs ${count} elements but 'data' has ${values.length}`);
  }
  const data = decodeTensorData(model, name, datatype, values);
  return [name, Object.freeze({ datatype, shape: Object.freeze(shape.slice()), data })];
}

function decodeRequestedOutput(model: string, raw: unknown, index: number): RequestedOutput {
  if (!isRecord(raw) || typeof raw['name'] !== 'string' || raw['name'] === '') {
    throw badRequest(model, `outputs[${index}] must be an object with a non-empty 'name'`);
  }
  const name = raw['name'];
  const parameters = parseParameters(model, `output '${name}'`, raw['parameters']);
  const binary = parameters['binary_data'];
  if (binary !== undefined && typeof binary !== 'boolean') {
    throw badRequest(model, `output '${name}': parameter 'binary_data' must be true or false, got ${JSON.stringify(binary)}`);
  }
  const k = parameters['classification'];
  if (k !== undefined && (typeof k !== 'number' || !Number.isSafeInteger(k) || k < 1)) {
    throw badRequest(model, `output '${name}': parameter 'classification' must be a positive integer, got ${JSON.stringify(k)}`);
  }
  return Object.freeze({ name, parameters });
}

/**
 * Decode a parsed KServe v2 JSON request body. `binary` is the body after the
 * JSON header when the binary tensor extension is in use: inputs with
 * `parameters.binary_data_size` take their bytes from it, in input order,
 * and every byte must be used.
 */
export function decodeInferRequest(body: unknown, model: string, binary?: Uint8Array): InferRequest {
  if (!isRecord(body)) throw badRequest(model, 'request body must be a JSON object with an "inputs" array');
  const rawInputs = body['inputs'];
  // Empty for a model that declares no inputs (a constant, or outputs from initializers only); the service checks the list against the model.
  if (!Array.isArray(rawInputs)) throw badRequest(model, "request must have an 'inputs' array");
  const inputs = new Map<string, Tensor>();
  const cursor: BinaryCursor | undefined = binary === undefined ? undefined : { bytes: binary, offset: 0 };
  rawInputs.forEach((raw, i) => {
    const [name, tensor] = decodeInput(model, raw, i, cursor);
    if (inputs.has(name)) throw bad(model, `input '${name}' appears more than once`);
    inputs.set(name, tensor);
  });
  if (cursor && cursor.offset !== cursor.bytes.length) {
    throw badRequest(
      model,
      `unexpected additional input data: ${cursor.bytes.length - cursor.offset} bytes follow the last binary input (the inputs' binary_data_size add up to ${cursor.offset})`,
    );
  }
  let outputs: RequestedOutput[] | undefined;
  if (body['outputs'] !== undefined && body['outputs'] !== null) {
    if (!Array.isArray(body['outputs'])) throw badRequest(model, "'outputs' must be an array");
    outputs = body['outputs'].map((o, i) => decodeRequestedOutput(model, o, i));
  }
  const id = body['id'];
  if (id !== undefined && typeof id !== 'string') throw badRequest(model, "'id' must be a string");
  const parameters = parseParameters(model, 'request', body['parameters']);
  const all = parameters['binary_data_output'];
  if (all !== undefined && typeof all !== 'boolean') {
    throw badRequest(model, `request parameter 'binary_data_output' must be true or false, got ${JSON.stringify(all)}`);
  }
  return Object.freeze({
    id,
    inputs,
    outputs: outputs && Object.freeze(outputs),
    parameters,
  });
}

/**
 * Whether an output goes back as binary data: its own `binary_data`
 * parameter, else the request's `binary_data_output` (Triton's rule).
 */
export function wantsBinaryOutput(request: Pick<InferRequest, 'outputs' | 'parameters'>, name: string): boolean {
  const own = request.outputs?.find((o) => o.name === name)?.parameters['binary_data'];
  if (typeof own === 'boolean') return own;
  return request.parameters['binary_data_output'] === true;
}

// ---------------------------------------------------------------- encoding

const NON_FINITE = /NaN|Infinity/;

/**
 * JSON text for a flat numeric array; NaN/±Infinity become the strings
 * "NaN"/"Infinity" (JSON has no such numbers). The values are copied into a
 * plain array first: join on a typed array takes V8's generic path (a
 * property lookup per element), on a plain array the fast one; measured 1.7×
 * faster with the copy, at 4 elements (150 against 260 ns) and at 1000.
 */
function numbersToJson(values: ArrayLike<number>): string {
  const n = values.length;
  const plain = new Array<number>(n);
  for (let i = 0; i < n; i++) plain[i] = values[i]!;
  const text = plain.join(',');
  if (!NON_FINITE.test(text)) return `[${text}]`;
  return `[${text.replace(/-?Infinity|NaN/g, (m) => `"${m}"`)}]`;
}

function halfToNumbers(bits: Uint16Array, bf16: boolean): Float64Array {
  const out = new Float64Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = bf16 ? fromBFloat16Bits(bits[i]!) : fromFloat16Bits(bits[i]!);
  return out;
}

/** The flat JSON `data` array of a tensor (row-major, as Triton writes it). */
export function tensorDataToJson(tensor: Tensor): string {
  const { datatype, data } = tensor;
  if (Array.isArray(data)) return JSON.stringify(data);
  switch (datatype) {
    case 'BOOL': {
      const parts = new Array<string>(data.length);
      for (let i = 0; i < data.length; i++) parts[i] = data[i] ? 'true' : 'false';
      return `[${parts.join(',')}]`;
    }
    case 'FP16':
    case 'BF16':
      return numbersToJson(halfToNumbers(data as Uint16Array, datatype === 'BF16'));
    case 'INT64':
    case 'UINT64':
      // BigInt join writes exact digits: no precision loss past 2^53.
      return `[${Array.prototype.join.call(data, ',')}]`;
    default:
      return numbersToJson(data as ArrayLike<number>);
  }
}

function outputJson(name: string, t: Tensor, binaryBytes: number | undefined): string {
  const head = `{"name":${JSON.stringify(name)},"datatype":"${t.datatype}","shape":[${t.shape.join(',')}]`;
  return binaryBytes === undefined ? `${head},"data":${tensorDataToJson(t)}}` : `${head},"parameters":{"binary_data_size":${binaryBytes}}}`;
}

function responseJson(response: InferResponse, outputs: readonly string[]): string {
  // Triton writes the id only when the request had a non-empty one.
  const id = response.id ? `"id":${JSON.stringify(response.id)},` : '';
  return `{${id}"model_name":${JSON.stringify(response.modelName)},"model_version":${JSON.stringify(response.modelVersion)},"outputs":[${outputs.join(',')}]}`;
}

/** Serialise a response as KServe v2 JSON text, built directly for speed and int64 exactness. */
export function encodeInferResponse(response: InferResponse): string {
  const parts: string[] = [];
  for (const [name, t] of response.outputs) parts.push(outputJson(name, t, undefined));
  return responseJson(response, parts);
}

/** A response under the binary tensor extension: the JSON header, then each binary output's bytes in output order. */
export interface BinaryInferResponse {
  readonly json: string;
  /** Raw tensor bytes, in the order the outputs appear in `json`. Empty when no output is binary. */
  readonly chunks: readonly Buffer[];
}

/**
 * Serialise a response, writing the outputs for which `binary(name)` is true
 * as raw bytes after the JSON (with `parameters.binary_data_size`), the rest
 * as JSON `data`.
 */
export function encodeInferResponseBinary(response: InferResponse, binary: (name: string) => boolean): BinaryInferResponse {
  const parts: string[] = [];
  const chunks: Buffer[] = [];
  for (const [name, t] of response.outputs) {
    if (binary(name)) {
      const bytes = encodeBinaryTensorData(t);
      chunks.push(bytes);
      parts.push(outputJson(name, t, bytes.length));
    } else {
      parts.push(outputJson(name, t, undefined));
    }
  }
  return { json: responseJson(response, parts), chunks };
}
