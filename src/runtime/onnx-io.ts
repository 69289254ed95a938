/**
 * @module runtime/onnx-io
 * onnxruntime-node tensor types ⇄ our datatypes, and Tensor ⇄ ort.Tensor.
 * Used inside the runtime worker threads, where sessions live.
 */
// First: onnxruntime's telemetry is decided before onnxruntime-node loads (config/ort-env.ts).
import '../config/ort-env.js';
import * as ort from 'onnxruntime-node';
// Before any tensor is made: float16 data as Uint16Array on Node.js 24 too (runtime/ort-float16.ts).
import './ort-float16.js';
import type { DataType, Tensor, TensorData } from '../protocol/tensor.js';
import { graphValueTypes } from './onnx-value-kinds.js';

/** One input or output as the ONNX graph declares it. */
export interface OnnxIoInfo {
  readonly name: string;
  /** undefined when the graph uses a type we cannot serve (sequence, map, optional, bf16). */
  readonly datatype: DataType | undefined;
  /** Fixed dims as numbers, symbolic dims as -1; undefined when the graph gives no shape. */
  readonly shape: readonly number[] | undefined;
  /** When datatype is undefined: what the graph declares, in ONNX's notation (`seq(tensor(float))`, `tensor(bfloat16)`). */
  readonly declared?: string;
}

const ORT_TO_DATATYPE: Readonly<Record<string, DataType>> = {
  bool: 'BOOL',
  uint8: 'UINT8',
  uint16: 'UINT16',
  uint32: 'UINT32',
  uint64: 'UINT64',
  int8: 'INT8',
  int16: 'INT16',
  int32: 'INT32',
  int64: 'INT64',
  float16: 'FP16',
  float32: 'FP32',
  float64: 'FP64',
  string: 'BYTES',
};

/** Our datatype → onnxruntime-node tensor type (undefined: not representable). */
export const DATATYPE_TO_ORT: Readonly<Record<DataType, ort.Tensor.Type | undefined>> = {
  BOOL: 'bool',
  UINT8: 'uint8',
  UINT16: 'uint16',
  UINT32: 'uint32',
  UINT64: 'uint64',
  INT8: 'int8',
  INT16: 'int16',
  INT32: 'int32',
  INT64: 'int64',
  FP16: 'float16',
  FP32: 'float32',
  FP64: 'float64',
  BYTES: 'string',
  // onnxruntime-node 1.30 has no bfloat16 tensor type.
  BF16: undefined,
};

export function ioInfo(meta: ort.InferenceSession.ValueMetadata): OnnxIoInfo {
  if (!meta.isTensor) return { name: meta.name, datatype: undefined, shape: undefined };
  const datatype = ORT_TO_DATATYPE[meta.type];
  return {
    name: meta.name,
    datatype,
    shape: meta.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : -1)),
    ...(datatype === undefined ? { declared: `tensor(${meta.type})` } : {}),
  };
}

/**
 * A session's inputs and outputs. onnxruntime-node tells a non-tensor value
 * (sequence, optional, map) only by `isTensor: false`; for those the model
 * file is read to say what they are (runtime/onnx-value-kinds), so the
 * refusal names the kind. Models of tensors only never read it.
 */
export async function sessionIo(
  session: Pick<ort.InferenceSession, 'inputMetadata' | 'outputMetadata'>,
  modelPath: string,
): Promise<{ inputs: OnnxIoInfo[]; outputs: OnnxIoInfo[] }> {
  const inputs = session.inputMetadata.map(ioInfo);
  const outputs = session.outputMetadata.map(ioInfo);
  const unknown = [...inputs, ...outputs].some((t) => t.datatype === undefined && t.declared === undefined);
  if (!unknown) return { inputs, outputs };
  const types = await graphValueTypes(modelPath);
  const withType = (t: OnnxIoInfo): OnnxIoInfo =>
    t.datatype === undefined && t.declared === undefined && types.has(t.name) ? { ...t, declared: types.get(t.name)! } : t;
  return { inputs: inputs.map(withType), outputs: outputs.map(withType) };
}

export function toOrtTensor(name: string, t: Tensor): ort.Tensor {
  const type = DATATYPE_TO_ORT[t.datatype];
  if (!type) throw new Error(`input '${name}': datatype ${t.datatype} is not supported by onnxruntime-node`);
  // ort.Tensor's overloads are keyed by type; the data already has the matching array type.
  return new ort.Tensor(type, t.data as never, t.shape as number[]);
}

export function fromOrtTensor(t: ort.Tensor): Tensor {
  const datatype = ORT_TO_DATATYPE[t.type];
  if (!datatype) throw new Error(`onnxruntime returned an unsupported tensor type '${t.type}'`);
  // float16 data arrives as Uint16Array bits (runtime/ort-float16.ts), as our Tensor type holds it.
  return { datatype, shape: t.dims.slice(), data: t.data as TensorData };
}
