/**
 * @module scheduler/model-scheduler
 * The interface every model step is run through. The ensemble runner only
 * sees this; whether a call runs at once or is merged into a batch is the
 * scheduler's business (scheduler/dynamic-batcher.ts implements it).
 */
import type { Cancellation } from '../cancellation.js';
import type { Tensor } from '../protocol/tensor.js';
import type { SequenceRequest } from './sequence-tensors.js';

/**
 * Facts about the load around a batch, passed with it to the executor. The
 * scheduler reports them; where the batch runs is the runtime's decision
 * (runtime/session-placement.ts, runtime/quiet-window.ts), not the scheduler's.
 */
export interface BatchLoad {
  /** Requests still queued for the model behind this batch. */
  readonly queued: number;
  /** Batches of the model in flight, this one included. */
  readonly inFlight: number;
}

export interface ModelExecutor {
  /**
   * Run the model once on tensors shaped as the config declares them (batch
   * dim first when batching). `load`: what waits behind this batch; omitted
   * outside a scheduler (warm-up, probes).
   */
  execute(inputs: ReadonlyMap<string, Tensor>, outputNames: readonly string[], load?: BatchLoad): Promise<Map<string, Tensor>>;
}

/** Per-request scheduling wishes (KServe v2 request parameters `priority` and `timeout`). */
export interface ScheduleOptions {
  /** Priority level, 1 = highest; 0 or a level the model does not have = the model's default level. */
  readonly priority?: number;
  /** Queue timeout in microseconds; honoured only where the queue policy has allow_timeout_override. */
  readonly timeoutUs?: number;
  /** KServe v2 `sequence_id` / `sequence_start` / `sequence_end`: read by a stateful model's sequence batcher, ignored by the others (as Triton's default and dynamic schedulers do). */
  readonly sequence?: SequenceRequest;
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
  /**
   * The queue a new request joins (the default priority level): how many
   * wait in it and the most that may. The HTTP front counts requests on their
   * way to the model against the same limit (service/admission.ts).
   */
  queueDepth?(): QueueDepth;
}

/**
 * A no-op shared by every queued request: its detach when it has no
 * cancellation, and its resolve and reject until its promise exists. One
 * function, not a closure per request.
 */
export function nothing(): void {}

/** What every batcher's queued request carries to be answered: its promise's settlers and its cancellation's unregister. */
export interface Answerable {
  resolve(outputs: Map<string, Tensor>): void;
  reject(err: unknown): void;
  detach(): void;
}

/**
 * The promise that answers `p`, its settlers set on `p`. `p` is built before,
 * outside the promise's executor (settlers and detach `nothing` until then), so
 * what its cancellation's callback keeps alive while it waits is the batcher
 * and the request, not the executor's scope.
 */
export function answerOf(p: Answerable): Promise<Map<string, Tensor>> {
  return new Promise<Map<string, Tensor>>((resolve, reject) => {
    p.resolve = resolve;
    p.reject = reject;
  });
}

/**
 * A scheduler that queues: `enqueue` throws its refusals (unloading,
 * cancelled, queue full, a bad request) and returns the request's own
 * promise; `schedule` hands a refusal back as a rejected promise.
 */
export abstract class QueueingScheduler implements ModelScheduler {
  /** Not `async`: the request's own promise is returned as is, not wrapped in another (two fewer microtask turns per request). */
  schedule(
    inputs: ReadonlyMap<string, Tensor>,
    outputNames: readonly string[],
    cancel?: Cancellation,
    options: ScheduleOptions = {},
  ): Promise<Map<string, Tensor>> {
    try {
      return this.enqueue(inputs, outputNames, cancel, options);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  protected abstract enqueue(
    inputs: ReadonlyMap<string, Tensor>,
    outputNames: readonly string[],
    cancel: Cancellation | undefined,
    options: ScheduleOptions,
  ): Promise<Map<string, Tensor>>;

  abstract close(): Promise<void>;
}

export interface QueueDepth {
  readonly queued: number;
  readonly limit: number;
}
