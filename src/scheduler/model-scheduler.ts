/**
 * @module scheduler/model-scheduler
 * The interface every model step is run through. The ensemble runner only
 * sees this; whether a call runs at once or is merged into a batch is the
 * scheduler's business (scheduler/dynamic-batcher.ts implements it).
 */
import type { Cancellation } from '../cancellation.js';
import type { Tensor } from '../protocol/tensor.js';

export interface ModelExecutor {
  /**
   * Run the model once on tensors shaped as the config declares them (batch
   * dim first when batching). `busy`: more requests for the model are queued
   * behind this batch (an executor may then run it where it leaves the main
   * thread free for them; see registry/session-placement.ts).
   */
  execute(inputs: ReadonlyMap<string, Tensor>, outputNames: readonly string[], busy?: boolean): Promise<Map<string, Tensor>>;
}

/** Per-request scheduling wishes (KServe v2 request parameters `priority` and `timeout`). */
export interface ScheduleOptions {
  /** Priority level, 1 = highest; 0 or a level the model does not have = the model's default level. */
  readonly priority?: number;
  /** Queue timeout in microseconds; honoured only where the queue policy has allow_timeout_override. */
  readonly timeoutUs?: number;
}

export interface ModelScheduler {
  schedule(
    inputs: ReadonlyMap<string, Tensor>,
    outputNames: readonly string[],
    /** The request's cancellation: a queued request leaves the queue when it fires. */
    cancel?: Cancellation,
    options?: ScheduleOptions,
  ): Promise<Map<string, Tensor>>;
  /** Stop accepting work and wait for what is queued and running. */
  close(): Promise<void>;
}
