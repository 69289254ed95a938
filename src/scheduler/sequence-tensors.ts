/**
 * @module scheduler/sequence-tensors
 * The tensors the sequence batcher adds to a request before the model runs:
 * the control inputs (START, END, READY, CORRID as the config spells them)
 * and the implicit state (the previous request's output state, or the
 * initial state at the start of a sequence). Triton's shapes: a control is
 * [1] per request, [1, 1] with the batch dim when max_batch_size > 0; a state
 * is its dims, with a leading 1 when batching.
 */
import type { SequenceControlConfig, SequenceStateConfig } from '../config/model-config-types.js';
import { ServingError } from '../errors.js';
import { DATA_TYPE_INFO, elementCount, type DataType, type Tensor, type TensorData } from '../protocol/tensor.js';

/** A correlation id as the client sent it: a non-negative integer, or a string. 0 and '' mean none (Triton). */
export type SequenceId = number | string;

/** What a request says about its sequence (KServe v2 `sequence_id`, `sequence_start`, `sequence_end`). */
export interface SequenceRequest {
  readonly id: SequenceId;
  readonly start: boolean;
  readonly end: boolean;
}

/** The id as logs and messages show it (a string id quoted, so `7` and `"7"` read differently). */
export function showSequenceId(id: SequenceId): string {
  return typeof id === 'string' ? JSON.stringify(id) : String(id);
}

/** Map key: a number and a string with the same digits are different sequences. */
export function sequenceKey(id: SequenceId): string {
  return typeof id === 'string' ? `s${id}` : `n${id}`;
}

function scalar(datatype: DataType, value: number | bigint | string, batching: boolean): Tensor {
  const shape = batching ? [1, 1] : [1];
  let data: TensorData;
  if (datatype === 'BYTES') data = [String(value)];
  else {
    const Array = DATA_TYPE_INFO[datatype].arrayType!;
    const a = new Array(1);
    a[0] = (typeof a[0] === 'bigint' ? BigInt(value) : Number(value)) as never;
    data = a;
  }
  return Object.freeze({ datatype, shape: Object.freeze(shape), data });
}

export interface ControlTensors {
  /** The control inputs for one request of a sequence. */
  forRequest(id: SequenceId, start: boolean, end: boolean): [string, Tensor][];
}

/** Built once per model: the four flag tensors per control are shared (never written after creation). */
export function controlTensors(controls: readonly SequenceControlConfig[], batching: boolean, model: string): ControlTensors {
  const flags = controls
    .filter((c) => c.kind !== 'CONTROL_SEQUENCE_CORRID')
    .map((c) => ({ kind: c.kind, name: c.inputName, off: scalar(c.dataType, c.falseTrue![0], batching), on: scalar(c.dataType, c.falseTrue![1], batching) }));
  const corrid = controls.find((c) => c.kind === 'CONTROL_SEQUENCE_CORRID');
  return {
    forRequest(id, start, end) {
      const out: [string, Tensor][] = [];
      for (const f of flags) {
        // READY is true for every request that runs (Triton sends READY=false only in padding slots, which onnx-mme never sends).
        const value = f.kind === 'CONTROL_SEQUENCE_START' ? start : f.kind === 'CONTROL_SEQUENCE_END' ? end : true;
        out.push([f.name, value ? f.on : f.off]);
      }
      if (corrid) out.push([corrid.inputName, corridTensor(corrid, id, batching, model)]);
      return out;
    },
  };
}

const INT_RANGES: Partial<Record<DataType, readonly [bigint, bigint]>> = {
  UINT64: [0n, 2n ** 64n - 1n],
  INT64: [-(2n ** 63n), 2n ** 63n - 1n],
  UINT32: [0n, 2n ** 32n - 1n],
  INT32: [-(2n ** 31n), 2n ** 31n - 1n],
};

function corridTensor(c: SequenceControlConfig, id: SequenceId, batching: boolean, model: string): Tensor {
  if (c.dataType === 'BYTES') return scalar('BYTES', id, batching);
  if (typeof id === 'string') {
    throw new ServingError(
      'INVALID_REQUEST',
      `model '${model}': sequence_id ${showSequenceId(id)} is a string but the model's CONTROL_SEQUENCE_CORRID input '${c.inputName}' is ${c.dataType}; send the id as a JSON number`,
      { model },
    );
  }
  const range = INT_RANGES[c.dataType]!;
  if (BigInt(id) > range[1]) {
    throw new ServingError(
      'INVALID_REQUEST',
      `model '${model}': sequence_id ${id} does not fit the model's CONTROL_SEQUENCE_CORRID input '${c.inputName}' (${c.dataType})`,
      { model },
    );
  }
  return scalar(c.dataType, id, batching);
}

/** A state's tensor at the start of a sequence. `fileBytes`: the initial_state data_file's contents, when it names one. */
export function initialStateTensor(state: SequenceStateConfig, batching: boolean, fileBytes: Uint8Array | undefined, model: string): Tensor {
  const init = state.initialState;
  const dims = init?.dims ?? state.dims;
  const shape = batching ? [1, ...dims] : [...dims];
  const count = elementCount(dims);
  const Array = DATA_TYPE_INFO[state.dataType].arrayType!;
  const data = new Array(count);
  if (fileBytes !== undefined) {
    const need = count * DATA_TYPE_INFO[state.dataType].byteSize;
    if (fileBytes.byteLength < need) {
      throw new ServingError(
        'INVALID_MODEL',
        `model '${model}': initial_state '${init?.name ?? ''}' of state '${state.inputName}' expects ${need} bytes, but its data_file has only ${fileBytes.byteLength}`,
        { model },
      );
    }
    new Uint8Array(data.buffer, data.byteOffset, need).set(fileBytes.subarray(0, need));
  }
  return Object.freeze({ datatype: state.dataType, shape: Object.freeze(shape), data });
}

/** A state output kept across requests: its own copy (a batch's output is one buffer; a view would keep all of it alive). */
export function ownedCopy(t: Tensor): Tensor {
  const data = Array.isArray(t.data) ? [...t.data] : t.data.slice();
  return Object.freeze({ datatype: t.datatype, shape: Object.freeze([...t.shape]), data });
}

export function tensorBytes(t: Tensor): number {
  return Array.isArray(t.data) ? t.data.reduce((a, s) => a + s.length, 0) : t.data.byteLength;
}
