/**
 * @module perf/request-payloads
 * The request bodies a load run cycles through: random tensors shaped from the
 * model's metadata (GET /v2/models/{m}: `-1` dims filled from the command
 * line), or real requests from files (JSON lines of KServe v2 bodies, `.npy`
 * arrays); each sent as v2 JSON or with the binary tensor extension (JSON
 * header + raw bytes, outputs asked back binary too, as perf_analyzer does).
 *
 * A payload is target-neutral; the target (perf/http-target.ts) adds the
 * headers its protocol wants (Inference-Header-Content-Length, or
 * SageMaker's json-header-size content-type parameter).
 */
import { encodeBinaryTensorData } from '../protocol/binary-tensor.js';
import { decodeNpy } from '../protocol/npy-codec.js';
import { DATA_TYPE_INFO, elementCount, isDataType, type DataType, type Tensor, type TensorData } from '../protocol/tensor.js';
import { decodeTensorData, exactRetry, tensorDataToJson } from '../protocol/v2-json-codec.js';
import { parseJsonExact } from '../protocol/exact-json.js';

export interface RequestPayload {
  /** `v2`: a KServe v2 body (JSON, or JSON header + binary when jsonHeaderLength is set); `npy`: a raw .npy body. */
  readonly kind: 'v2' | 'npy';
  readonly body: Buffer;
  /** Binary extension: bytes of the JSON header at the front of `body`. */
  readonly jsonHeaderLength?: number;
}

/** An input as model metadata lists it (KServe v2 `inputs[]`). */
export interface InputMetadata {
  readonly name: string;
  readonly datatype: string;
  readonly shape: readonly number[];
}

export interface ShapeOptions {
  /** Full shapes by input name (`--shape NAME:1,16`), used as given. */
  readonly shapes: ReadonlyMap<string, readonly number[]>;
  /** Replaces a leading -1 (the batch dim of a batching model). */
  readonly batchSize: number;
  /** Replaces every other -1. */
  readonly fillDims: number;
}

/** Distinct random requests generated per run: enough that a response cache or branch predictor does not see one request repeated. */
export const RANDOM_VARIANTS = 8;

export function concreteShape(input: InputMetadata, options: ShapeOptions): number[] {
  const given = options.shapes.get(input.name);
  if (given !== undefined) {
    if (given.length !== input.shape.length)
      throw new Error(`--shape ${input.name}: the model's input has ${input.shape.length} dims [${input.shape.join(',')}], got ${given.length}`);
    given.forEach((d, i) => {
      const want = input.shape[i]!;
      if (want >= 0 && d !== want) throw new Error(`--shape ${input.name}: dim ${i} must be ${want}, got ${d}`);
    });
    return [...given];
  }
  return input.shape.map((d, i) => (d >= 0 ? d : i === 0 ? options.batchSize : options.fillDims));
}

/** Random values a model accepts for most inputs: [0,1) floats, small non-negative integers (valid indices for small tables), short strings. */
function randomData(datatype: DataType, count: number, rand: () => number): TensorData {
  if (datatype === 'BYTES') return Array.from({ length: count }, () => Math.floor(rand() * 1e9).toString(36));
  const Array_ = DATA_TYPE_INFO[datatype].arrayType!;
  const data = new Array_(count);
  if (data instanceof BigInt64Array || data instanceof BigUint64Array) {
    for (let i = 0; i < count; i++) data[i] = BigInt(Math.floor(rand() * 16));
  } else if (datatype === 'FP32' || datatype === 'FP64') {
    for (let i = 0; i < count; i++) data[i] = rand();
  } else if (datatype === 'FP16') {
    // Half-precision bit patterns of values in [0, 1): exponent below 15.
    for (let i = 0; i < count; i++) data[i] = Math.floor(rand() * 0x3bff);
  } else if (datatype === 'BF16') {
    for (let i = 0; i < count; i++) data[i] = Math.floor(rand() * 0x3f7f);
  } else if (datatype === 'BOOL') {
    for (let i = 0; i < count; i++) data[i] = rand() < 0.5 ? 0 : 1;
  } else {
    for (let i = 0; i < count; i++) (data as Int32Array)[i] = Math.floor(rand() * 16);
  }
  return data;
}

function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export type InputDataMode = 'random' | 'zero';

/** RANDOM_VARIANTS (or one, for zeros) requests shaped from the metadata. */
export function generatedTensors(inputs: readonly InputMetadata[], options: ShapeOptions, mode: InputDataMode): Map<string, Tensor>[] {
  const variants = mode === 'zero' ? 1 : RANDOM_VARIANTS;
  const out: Map<string, Tensor>[] = [];
  for (let v = 0; v < variants; v++) {
    const rand = mode === 'zero' ? () => 0 : seeded(0x5eed + v);
    const tensors = new Map<string, Tensor>();
    for (const input of inputs) {
      if (!isDataType(input.datatype)) throw new Error(`input '${input.name}' has datatype '${input.datatype}', which perf cannot generate`);
      const shape = concreteShape(input, options);
      tensors.set(input.name, { datatype: input.datatype, shape, data: randomData(input.datatype, elementCount(shape), rand) });
    }
    out.push(tensors);
  }
  return out;
}

/** Tensors as a v2 request body; binary puts every input's bytes after the JSON header and asks for binary outputs. */
export function encodeV2(tensors: ReadonlyMap<string, Tensor>, binary: boolean): RequestPayload {
  if (!binary) {
    const parts = [...tensors].map(
      ([name, t]) => `{"name":${JSON.stringify(name)},"datatype":"${t.datatype}","shape":[${t.shape.join(',')}],"data":${tensorDataToJson(t)}}`,
    );
    return { kind: 'v2', body: Buffer.from(`{"inputs":[${parts.join(',')}]}`) };
  }
  const chunks: Buffer[] = [];
  const parts = [...tensors].map(([name, t]) => {
    const bytes = encodeBinaryTensorData(t);
    chunks.push(bytes);
    return `{"name":${JSON.stringify(name)},"datatype":"${t.datatype}","shape":[${t.shape.join(',')}],"parameters":{"binary_data_size":${bytes.length}}}`;
  });
  const header = Buffer.from(`{"inputs":[${parts.join(',')}],"parameters":{"binary_data_output":true}}`);
  return { kind: 'v2', body: Buffer.concat([header, ...chunks]), jsonHeaderLength: header.length };
}

/** One JSON line (a v2 request body) as tensors, for re-encoding with --binary. */
function tensorsOfJsonRequest(body: unknown, where: string): Map<string, Tensor> {
  const inputs = (body as { inputs?: unknown })?.inputs;
  if (!Array.isArray(inputs) || inputs.length === 0) throw new Error(`${where}: expected a KServe v2 request {"inputs": [...]}`);
  const out = new Map<string, Tensor>();
  for (const raw of inputs as Record<string, unknown>[]) {
    const { name, datatype, shape, data } = raw;
    if (typeof name !== 'string' || !isDataType(datatype) || !Array.isArray(shape) || !Array.isArray(data)) {
      throw new Error(`${where}: every input needs name, datatype, shape and data`);
    }
    out.set(name, { datatype, shape: shape as number[], data: decodeTensorData(name, name, datatype, (data as unknown[]).flat(Infinity)) });
  }
  return out;
}

/**
 * Requests read from a file: `.npy` is one request (its array, for a
 * one-input model); anything else is JSON lines, one v2 request body a line
 * (blank lines skipped). `toV2Npy` turns a .npy array into a v2 body with
 * this input name (for KServe targets, which have no .npy body).
 */
export function payloadsFromFile(file: string, bytes: Buffer, binary: boolean, npyInputName: string | undefined): RequestPayload[] {
  if (/\.npy$/i.test(file)) {
    const array = decodeNpy(file, bytes);
    if (npyInputName === undefined) return [{ kind: 'npy', body: bytes }];
    return [encodeV2(new Map([[npyInputName, { datatype: array.datatype, shape: array.shape, data: array.data }]]), binary)];
  }
  const out: RequestPayload[] = [];
  const lines = bytes.toString('utf8').split('\n');
  lines.forEach((line, i) => {
    if (line.trim() === '') return;
    const where = `${file}:${i + 1}`;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch (err) {
      throw new Error(`${where}: not JSON (${(err as Error).message}); the file must hold one request body a line`);
    }
    // INT64/UINT64 beyond 2^53 keep every digit, as the server reads them (protocol/exact-json).
    const tensors = exactRetry(
      () => tensorsOfJsonRequest(parsed, where),
      () => tensorsOfJsonRequest(parseJsonExact(line), where),
    );
    out.push(binary ? encodeV2(tensors, true) : { kind: 'v2', body: Buffer.from(line.trim()) });
  });
  if (out.length === 0) throw new Error(`${file}: no requests in the file`);
  return out;
}
