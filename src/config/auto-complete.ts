/**
 * @module config/auto-complete
 * Triton's ONNX auto-complete (triton-compat.md §1.7), on the JSON form of a
 * config: fills inputs, outputs, max_batch_size and dynamic_batching from what
 * the ONNX graph declares. Runs only when the config lacks inputs or outputs,
 * exactly like the onnxruntime backend, so explicit configs are never changed.
 */
import { ServingError } from '../errors.js';
import { DATA_TYPE_INFO, type DataType } from '../protocol/tensor.js';

/** What the graph says about one input or output (-1 = symbolic dim). */
export interface GraphTensor {
  readonly name: string;
  readonly datatype: DataType | undefined;
  readonly shape: readonly number[] | undefined;
  /** When datatype is undefined: what the graph declares, in ONNX's notation (`seq(tensor(float))`). */
  readonly declared?: string;
}

function kindWord(declared: string): string {
  if (declared.startsWith('seq(')) return 'a sequence';
  if (declared.startsWith('optional(')) return 'an optional';
  if (declared.startsWith('map(')) return 'a map';
  if (declared.startsWith('sparse_tensor(')) return 'a sparse tensor';
  return 'a non-tensor value';
}

/** The graph's type of a value for messages: its datatype, else what it is ("a sequence (seq(tensor(float))), not a tensor"). */
export function graphTypeText(t: GraphTensor): string {
  if (t.datatype !== undefined) return t.datatype;
  const declared = t.declared;
  if (declared === undefined) return 'a non-tensor type';
  if (declared.startsWith('tensor(')) return `a tensor of ${declared.slice(7, -1)}, an element type onnxruntime-node cannot hold`;
  return `${kindWord(declared)} (${declared}), not a tensor`;
}

/** Why a graph value with no datatype cannot be served, naming its kind: "is a sequence (seq(tensor(float))), not a tensor". */
export function unservableKind(t: GraphTensor): string {
  return t.declared === undefined ? 'is not a tensor' : `is ${graphTypeText(t)}`;
}

/** Triton's onnxruntime backend default for `default-max-batch-size` (MME_DEFAULT_MAX_BATCH_SIZE's default). */
export const DEFAULT_MAX_BATCH_SIZE = 4;

/** model_config.proto's `max_batch_size` is an int32. */
export const MAX_BATCH_SIZE_FIELD = 2 ** 31 - 1;

type Json = Record<string, unknown>;

function listOf(json: Json, key: string): Json[] {
  const v = json[key];
  return Array.isArray(v) ? (v as Json[]) : [];
}

/** True when every tensor has rank ≥ 1 and a symbolic first dim: Triton's "model can batch". */
export function graphCanBatch(inputs: readonly GraphTensor[], outputs: readonly GraphTensor[]): boolean {
  // A model that declares no inputs has no batch dimension a request could set: it never batches.
  if (inputs.length === 0) return false;
  return [...inputs, ...outputs].every((t) => t.shape !== undefined && t.shape.length >= 1 && t.shape[0] === -1);
}

function tensorJson(t: GraphTensor, batching: boolean, kind: string): Json {
  if (t.datatype === undefined) {
    throw new ServingError('INVALID_MODEL', `${kind} '${t.name}' ${unservableKind(t)}; onnx-mme serves tensors only`);
  }
  const full = t.shape ?? [-1];
  const dims = batching ? full.slice(1) : full.slice();
  const out: Json = { name: t.name, data_type: DATA_TYPE_INFO[t.datatype].configName };
  if (dims.length === 0) {
    // Triton: a per-item scalar is dims [1], reshaped to [] for the model.
    out['dims'] = [1];
    if (batching) out['reshape'] = { shape: [] };
  } else {
    out['dims'] = dims;
  }
  return out;
}

/**
 * Complete `config` (JSON form, possibly `{}`) from the graph. Returns a new
 * object; the input is not modified. `defaultMaxBatchSize` is what a model
 * that can batch gets where its config sets no max_batch_size (Triton's
 * default-max-batch-size; 0: it does not batch).
 */
export function autoCompleteConfig(
  config: Readonly<Json>,
  graph: { readonly inputs: readonly GraphTensor[]; readonly outputs: readonly GraphTensor[] },
  defaultMaxBatchSize: number = DEFAULT_MAX_BATCH_SIZE,
): Json {
  const out: Json = { ...config };
  if (!out['platform'] && !out['backend']) out['platform'] = 'onnxruntime_onnx';
  const hasIo = listOf(out, 'input').length > 0 && listOf(out, 'output').length > 0;
  if (hasIo) return out;

  // A stateful model's control and state tensors are the server's business, never listed in input/output.
  const sequence = out['sequence_batching'] as Json | undefined;
  const internal = new Set<string>();
  for (const c of listOf(sequence ?? {}, 'control_input')) if (typeof c['name'] === 'string') internal.add(c['name']);
  for (const st of listOf(sequence ?? {}, 'state')) {
    if (typeof st['input_name'] === 'string') internal.add(st['input_name']);
    if (typeof st['output_name'] === 'string') internal.add(st['output_name']);
  }
  if (internal.size > 0) graph = { inputs: graph.inputs.filter((t) => !internal.has(t.name)), outputs: graph.outputs.filter((t) => !internal.has(t.name)) };
  const canBatch = graphCanBatch(graph.inputs, graph.outputs);
  let mbs = typeof out['max_batch_size'] === 'number' ? (out['max_batch_size'] as number) : 0;
  if (canBatch && mbs === 0 && defaultMaxBatchSize > 0) {
    // As Triton: proto3 cannot tell an explicit 0 from an absent field.
    mbs = defaultMaxBatchSize;
    out['max_batch_size'] = mbs;
  }
  if (!canBatch && mbs !== 0) {
    throw new ServingError(
      'INVALID_MODEL',
      `autofill failed: model does not support batching while non-zero max_batch_size is specified${graph.inputs.length === 0 ? ' (it declares no inputs, so no request carries a batch dimension: set max_batch_size: 0)' : ''}`,
    );
  }
  if (mbs > 1 && out['dynamic_batching'] === undefined && out['sequence_batching'] === undefined) {
    out['dynamic_batching'] = {};
  }
  const batching = mbs > 0;
  if (listOf(out, 'input').length === 0) out['input'] = graph.inputs.map((t) => tensorJson(t, batching, 'input'));
  if (listOf(out, 'output').length === 0) out['output'] = graph.outputs.map((t) => tensorJson(t, batching, 'output'));
  return out;
}
