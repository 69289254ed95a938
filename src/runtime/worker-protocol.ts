/**
 * @module runtime/worker-protocol
 * Messages between the main thread and the runtime worker threads.
 * onnxruntime objects never cross a thread. Tensors travel as parallel flat
 * lists (names, datatypes, shapes, data) rather than a list of tensor
 * objects: the structured clone of every run message and reply is on the
 * request path, and flat arrays of primitives clone with fewer objects to
 * walk and create on both sides. Typed arrays and string arrays survive the
 * clone; reply buffers are transferred, not copied (session-worker.ts).
 */
import type { ProviderName } from '../config/server-config.js';
import type { Tensor } from '../protocol/tensor.js';
import type { OnnxIoInfo } from './onnx-io.js';

export interface CreateSessionOptions {
  readonly providers: readonly ProviderName[];
  readonly deviceId: number;
  readonly graphOptimizationLevel: 'all' | 'basic' | 'extended' | 'disabled';
  readonly intraOpThreads: number | undefined;
  readonly interOpThreads: number | undefined;
}

/** Tensors as parallel lists: entry i of each list belongs to tensor i. */
export interface TensorList {
  readonly names: readonly string[];
  readonly datatypes: readonly Tensor['datatype'][];
  readonly shapes: readonly (readonly number[])[];
  readonly data: readonly Tensor['data'][];
}

export function toTensorList(tensors: Iterable<readonly [string, Tensor]>): TensorList {
  const names: string[] = [];
  const datatypes: Tensor['datatype'][] = [];
  const shapes: (readonly number[])[] = [];
  const data: Tensor['data'][] = [];
  for (const [name, t] of tensors) {
    names.push(name);
    datatypes.push(t.datatype);
    shapes.push(t.shape);
    data.push(t.data);
  }
  return { names, datatypes, shapes, data };
}

export function fromTensorList(list: TensorList): Map<string, Tensor> {
  const out = new Map<string, Tensor>();
  for (let i = 0; i < list.names.length; i++) {
    out.set(list.names[i]!, { datatype: list.datatypes[i]!, shape: list.shapes[i]!, data: list.data[i]! });
  }
  return out;
}

export type WorkerRequest =
  | { readonly id: number; readonly op: 'create'; readonly path: string; readonly options: CreateSessionOptions }
  | { readonly id: number; readonly op: 'run'; readonly session: number; readonly feeds: TensorList; readonly outputs: readonly string[] }
  | { readonly id: number; readonly op: 'release'; readonly session: number }
  /** One full garbage collection in the worker (runtime/reclaim.ts). */
  | { readonly id: number; readonly op: 'reclaim' }
  /** Pay onnxruntime's fixed per-thread cost now (runtime/prime.ts). */
  | { readonly id: number; readonly op: 'prime'; readonly intraOpThreads: number | undefined };

export interface WorkerError {
  readonly message: string;
}

export type WorkerReply =
  | {
      readonly id: number;
      readonly ok: true;
      readonly op: 'create';
      readonly session: number;
      readonly inputs: readonly OnnxIoInfo[];
      readonly outputs: readonly OnnxIoInfo[];
    }
  | { readonly id: number; readonly ok: true; readonly op: 'run'; readonly outputs: TensorList }
  | { readonly id: number; readonly ok: true; readonly op: 'release' }
  | { readonly id: number; readonly ok: true; readonly op: 'prime' }
  | { readonly id: number; readonly ok: true; readonly op: 'reclaim' }
  | { readonly id: number; readonly ok: false; readonly error: WorkerError }
  | WorkerReady;

/**
 * Posted once, unasked, when a worker's modules (onnxruntime-node among them) have loaded. Its id, 0, is never a
 * call's. Until then the worker must not be stopped (runtime-pool.ts, `RuntimeWorker.stop`).
 */
export interface WorkerReady {
  readonly id: 0;
  readonly ok: true;
  readonly op: 'ready';
  /** Why the worker could not take the nice value it was given (WorkerSettings.nice); it runs at the process's priority. */
  readonly niceError?: string;
}
