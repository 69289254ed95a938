/**
 * @module scheduler/direct-scheduler
 * Runs each request as soon as it arrives: the default until a model has a
 * batching policy. Tracks in-flight executions so close() can wait for them.
 */
import { ServingError } from '../errors.js';
import type { Tensor } from '../protocol/tensor.js';
import type { ModelExecutor, ModelScheduler } from './model-scheduler.js';

export class DirectScheduler implements ModelScheduler {
  private inflight = new Set<Promise<unknown>>();
  private closed = false;

  constructor(
    private readonly executor: ModelExecutor,
    private readonly model: string,
  ) {}

  async schedule(inputs: ReadonlyMap<string, Tensor>, outputNames: readonly string[], signal?: AbortSignal): Promise<Map<string, Tensor>> {
    if (this.closed) throw new ServingError('MODEL_NOT_FOUND', `model '${this.model}' is being unloaded`, { model: this.model });
    if (signal?.aborted) throw new ServingError('CANCELLED', `model '${this.model}': request cancelled before it ran`, { model: this.model });
    const run = this.executor.execute(inputs, outputNames);
    this.inflight.add(run);
    try {
      return await run;
    } finally {
      this.inflight.delete(run);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.inflight]);
  }
}
