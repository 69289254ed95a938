/**
 * @module scheduler/model-scheduler
 * The interface every model step is run through. The ensemble runner only
 * sees this; whether a call runs at once or is merged into a batch is the
 * scheduler's business (the dynamic batcher implements the same interface).
 */
import type { Tensor } from '../protocol/tensor.js';

export interface ModelExecutor {
  /** Run the model once on tensors shaped as the config declares them (batch dim first when batching). */
  execute(inputs: ReadonlyMap<string, Tensor>, outputNames: readonly string[]): Promise<Map<string, Tensor>>;
}

export interface ModelScheduler {
  schedule(inputs: ReadonlyMap<string, Tensor>, outputNames: readonly string[], signal?: AbortSignal): Promise<Map<string, Tensor>>;
  /** Stop accepting work and wait for what is running. */
  close(): Promise<void>;
}
