/**
 * @module grpc/infer-codec
 * ModelInferRequest / ModelInferResponse (as @grpc/proto-loader hands them
 * over: snake_case fields, 64-bit integers as decimal strings, bytes as
 * Buffers) ↔ the transport-free InferRequest / InferResponse.
 *
 * Inputs come either all in `raw_input_contents` (one entry per input, in
 * input order: what tritonclient.grpc always sends) or each in its typed
 * `contents` field; never both. The bytes of raw inputs are read where
 * gRPC left them (no copy when aligned). Outputs always go back in
 * `raw_output_contents`, as Triton's gRPC frontend answers, whatever form
 * the inputs took: numeric tensors straight from their memory, BYTES
 * elements as a 4-byte little-endian length and the UTF-8 text each.
 */
import { ServingError } from '../errors.js';
import { decodeBinaryTensorData, encodeBinaryTensorData } from '../protocol/binary-tensor.js';
import type { InferRequest, InferResponse, ParameterValue, Parameters, RequestedOutput } from '../protocol/infer-types.js';
import { elementCount, formatShape, isDataType, unknownDataTypeMessage, type DataType, type Tensor, type TensorData } from '../protocol/tensor.js';
import { decodeTensorData } from '../protocol/v2-json-codec.js';

/** A 64-bit integer field: proto-loader's `longs: String`, or a number from a JS client's object. */
type Long = string | number;

export interface InferParameterMessage {
  readonly bool_param?: boolean;
  readonly int64_param?: Long;
  readonly string_param?: string;
  readonly double_param?: number;
  readonly uint64_param?: Long;
  /** Which member is set (proto-loader's `oneofs: true`). */
  readonly parameter_choice?: string;
}

export interface TensorContentsMessage {
  readonly bool_contents?: readonly boolean[];
  readonly int_contents?: readonly number[];
  readonly int64_contents?: readonly Long[];
  readonly uint_contents?: readonly number[];
  readonly uint64_contents?: readonly Long[];
  readonly fp32_contents?: readonly number[];
  readonly fp64_contents?: readonly number[];
  readonly bytes_contents?: readonly Uint8Array[];
}

export interface InferInputMessage {
  readonly name?: string;
  readonly datatype?: string;
  readonly shape?: readonly Long[];
  readonly parameters?: Readonly<Record<string, InferParameterMessage>>;
  readonly contents?: TensorContentsMessage | null;
}

export interface ModelInferRequestMessage {
  readonly model_name?: string;
  readonly model_version?: string;
  readonly id?: string;
  readonly parameters?: Readonly<Record<string, InferParameterMessage>>;
  readonly inputs?: readonly InferInputMessage[];
  readonly outputs?: readonly { readonly name?: string; readonly parameters?: Readonly<Record<string, InferParameterMessage>> }[];
  readonly raw_input_contents?: readonly Uint8Array[];
}

export interface ModelInferResponseMessage {
  model_name: string;
  model_version: string;
  id: string;
  parameters: Record<string, InferParameterMessage>;
  outputs: { name: string; datatype: string; shape: number[]; parameters: Record<string, InferParameterMessage> }[];
  raw_output_contents: Buffer[];
}

function invalidInput(model: string, message: string): ServingError {
  return new ServingError('INVALID_INPUT', `model '${model}': ${message}`, { model });
}

function invalidRequest(model: string, message: string): ServingError {
  return new ServingError('INVALID_REQUEST', `model '${model}': ${message}`, { model });
}

/** The typed-contents field of each datatype (FP16 and BF16 have none: raw only, as the protocol says). */
const CONTENTS_FIELD: Readonly<Record<DataType, keyof TensorContentsMessage | undefined>> = {
  BOOL: 'bool_contents',
  INT8: 'int_contents',
  INT16: 'int_contents',
  INT32: 'int_contents',
  INT64: 'int64_contents',
  UINT8: 'uint_contents',
  UINT16: 'uint_contents',
  UINT32: 'uint_contents',
  UINT64: 'uint64_contents',
  FP32: 'fp32_contents',
  FP64: 'fp64_contents',
  BYTES: 'bytes_contents',
  FP16: undefined,
  BF16: undefined,
};

const CONTENTS_FIELDS = [...new Set(Object.values(CONTENTS_FIELD).filter((f) => f !== undefined))] as (keyof TensorContentsMessage)[];

/** A 64-bit parameter as a JS number; beyond 2^53 it could not be used exactly, so it is refused. */
function longParameter(model: string, where: string, key: string, v: Long): number {
  const n = typeof v === 'number' ? v : Number(v);
  if (!Number.isSafeInteger(n))
    throw invalidRequest(model, `${where}: parameter '${key}' (${String(v)}) is beyond the integers onnx-mme can represent exactly (±2^53)`);
  return n;
}

/** InferParameter map → Parameters: the member the oneof holds, as the HTTP JSON form would carry it. */
export function decodeParameters(model: string, where: string, raw: Readonly<Record<string, InferParameterMessage>> | undefined): Parameters {
  if (raw === undefined) return EMPTY;
  const keys = Object.keys(raw);
  if (keys.length === 0) return EMPTY;
  const out: Record<string, ParameterValue> = {};
  for (const key of keys) {
    const p = raw[key]!;
    switch (p.parameter_choice) {
      case 'bool_param':
        out[key] = p.bool_param === true;
        break;
      case 'int64_param':
        out[key] = longParameter(model, where, key, p.int64_param ?? 0);
        break;
      case 'uint64_param':
        out[key] = longParameter(model, where, key, p.uint64_param ?? 0);
        break;
      case 'double_param':
        out[key] = p.double_param ?? 0;
        break;
      case 'string_param':
        out[key] = p.string_param ?? '';
        break;
      default:
        throw invalidRequest(model, `${where}: parameter '${key}' has no value`);
    }
  }
  return Object.freeze(out);
}

const EMPTY: Parameters = Object.freeze({});

function shapeOf(model: string, input: string, raw: readonly Long[] | undefined): number[] {
  const shape = (raw ?? []).map(Number);
  for (const d of shape) {
    if (!Number.isSafeInteger(d) || d < 0) throw invalidInput(model, `input '${input}': shape must hold non-negative integers, got [${(raw ?? []).join(',')}]`);
  }
  return shape;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function typedContents(model: string, input: string, dt: DataType, shape: readonly number[], contents: TensorContentsMessage): TensorData {
  const field = CONTENTS_FIELD[dt];
  if (field === undefined) {
    throw invalidInput(model, `input '${input}': datatype ${dt} has no typed contents field; send it in raw_input_contents (little-endian 16-bit values)`);
  }
  for (const other of CONTENTS_FIELDS) {
    if (other !== field && (contents[other]?.length ?? 0) > 0) {
      throw invalidInput(
        model,
        `input '${input}': datatype ${dt} takes its elements in contents.${field}, but contents.${other} has ${contents[other]!.length}`,
      );
    }
  }
  const values = (contents[field] ?? []) as readonly unknown[];
  let count: number;
  try {
    count = elementCount(shape);
  } catch (err) {
    throw invalidInput(model, `input '${input}': ${(err as Error).message}`);
  }
  if (values.length !== count) {
    throw invalidInput(model, `input '${input}': shape ${formatShape(shape)} needs ${count} elements but contents.${field} has ${values.length}`);
  }
  if (dt !== 'BYTES') return decodeTensorData(model, input, dt, values);
  return (values as readonly Uint8Array[]).map((b, i) => {
    try {
      return utf8.decode(b);
    } catch {
      throw invalidInput(model, `input '${input}': BYTES element ${i} is not valid UTF-8 (onnxruntime-node string tensors hold text)`);
    }
  });
}

/** Decode a ModelInferRequest; every problem is INVALID_INPUT / INVALID_REQUEST naming the model and the tensor. */
export function decodeModelInferRequest(msg: ModelInferRequestMessage, model: string): InferRequest {
  const rawInputs = msg.inputs ?? [];
  const raw = msg.raw_input_contents ?? [];
  if (raw.length > 0 && raw.length !== rawInputs.length) {
    throw invalidRequest(
      model,
      `raw_input_contents has ${raw.length} entries but the request has ${rawInputs.length} inputs (one entry per input, in input order)`,
    );
  }
  const inputs = new Map<string, Tensor>();
  rawInputs.forEach((input, i) => {
    const name = input.name ?? '';
    if (name === '') throw invalidRequest(model, `inputs[${i}] has no name`);
    if (inputs.has(name)) throw invalidInput(model, `input '${name}' appears more than once`);
    const datatype = input.datatype ?? '';
    if (!isDataType(datatype)) throw invalidInput(model, `input '${name}': ${unknownDataTypeMessage(datatype)}`);
    const shape = shapeOf(model, name, input.shape);
    const contents = input.contents ?? undefined;
    const hasContents = contents !== undefined && CONTENTS_FIELDS.some((f) => (contents[f]?.length ?? 0) > 0);
    let data: TensorData;
    if (raw.length > 0) {
      if (hasContents) throw invalidRequest(model, `input '${name}' has contents, but the request uses raw_input_contents: send every input one way`);
      data = decodeBinaryTensorData(model, name, datatype, shape, raw[i]!);
    } else if (contents !== undefined) {
      data = typedContents(model, name, datatype, shape, contents);
    } else {
      throw invalidInput(model, `input '${name}' has no data: send it in raw_input_contents or in contents`);
    }
    decodeParameters(model, `input '${name}'`, input.parameters); // checked like HTTP's; no input parameter changes a tensor here
    inputs.set(name, Object.freeze({ datatype, shape: Object.freeze(shape), data }));
  });
  let outputs: RequestedOutput[] | undefined;
  if ((msg.outputs?.length ?? 0) > 0) {
    outputs = msg.outputs!.map((o, i) => {
      const name = o.name ?? '';
      if (name === '') throw invalidRequest(model, `outputs[${i}] has no name`);
      const parameters = decodeParameters(model, `output '${name}'`, o.parameters);
      const k = parameters['classification'];
      if (k !== undefined && (typeof k !== 'number' || !Number.isSafeInteger(k) || k < 1)) {
        throw invalidRequest(model, `output '${name}': parameter 'classification' must be a positive integer, got ${JSON.stringify(k)}`);
      }
      return Object.freeze({ name, parameters });
    });
  }
  const id = msg.id === undefined || msg.id === '' ? undefined : msg.id;
  return Object.freeze({ id, inputs, outputs: outputs && Object.freeze(outputs), parameters: decodeParameters(model, 'request', msg.parameters) });
}

const NO_PARAMETERS: Record<string, InferParameterMessage> = Object.freeze({}) as Record<string, InferParameterMessage>;

/** The ModelInferResponse of an answer: every output in raw_output_contents, in the answer's order. */
export function encodeModelInferResponse(response: InferResponse): ModelInferResponseMessage {
  const outputs: ModelInferResponseMessage['outputs'] = [];
  const raw: Buffer[] = [];
  for (const [name, tensor] of response.outputs) {
    outputs.push({ name, datatype: tensor.datatype, shape: tensor.shape as number[], parameters: NO_PARAMETERS });
    raw.push(encodeBinaryTensorData(tensor));
  }
  return {
    model_name: response.modelName,
    model_version: response.modelVersion,
    id: response.id ?? '',
    parameters: NO_PARAMETERS,
    outputs,
    raw_output_contents: raw,
  };
}
