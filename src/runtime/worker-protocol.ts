/**
 * @module runtime/worker-protocol
 * Messages between the main thread and the runtime worker threads. Tensors
 * travel as our plain Tensor (typed arrays and string arrays survive the
 * structured clone); onnxruntime objects never cross a thread.
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

export type WorkerRequest =
  | { readonly id: number; readonly op: 'create'; readonly path: string; readonly options: CreateSessionOptions }
  | { readonly id: number; readonly op: 'run'; readonly session: number; readonly feeds: readonly (readonly [string, Tensor])[]; readonly outputs: readonly string[] }
  | { readonly id: number; readonly op: 'release'; readonly session: number };

export interface WorkerError {
  readonly message: string;
}

export type WorkerReply =
  | { readonly id: number; readonly ok: true; readonly op: 'create'; readonly session: number; readonly inputs: readonly OnnxIoInfo[]; readonly outputs: readonly OnnxIoInfo[] }
  | { readonly id: number; readonly ok: true; readonly op: 'run'; readonly outputs: readonly (readonly [string, Tensor])[] }
  | { readonly id: number; readonly ok: true; readonly op: 'release' }
  | { readonly id: number; readonly ok: false; readonly error: WorkerError };
