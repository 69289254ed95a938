/**
 * @module scheduler/batch-execution
 * What both batchers (dynamic-batcher.ts, sequence-batcher.ts) do alike
 * around one run of the model: the outcome each request of a batch gets,
 * running one request alone (a batch of one, or the re-run of a failed
 * batch), and the batch-level metric cells every run adds to.
 */
import type { Clock } from '../clock.js';
import type { ModelMetrics } from '../observability/metrics.js';
import type { Tensor } from '../protocol/tensor.js';
import type { BatchLoad, ModelExecutor } from './model-scheduler.js';

/** The batch-level cells of the model version a batcher serves (observability/metrics.ts forModel). */
export type SchedulerMetrics = Pick<ModelMetrics, 'execCount' | 'inferenceCount' | 'computeInferUs' | 'queueUs' | 'batchSize' | 'recordBatch'>;

/** What one request of a batch gets: its outputs, or the error it fails with. */
export type Outcome = { readonly ok: true; readonly outputs: Map<string, Tensor> } | { readonly ok: false; readonly error: unknown };

/** One request run alone on `executor`, `rows` rows counted in the metrics. Never rejects. */
export async function runAlone(
  executor: ModelExecutor,
  inputs: ReadonlyMap<string, Tensor>,
  names: readonly string[],
  rows: number,
  load: BatchLoad,
  clock: Clock,
  metrics: SchedulerMetrics | undefined,
): Promise<Outcome> {
  try {
    const started = clock.nowUs();
    const outputs = await executor.execute(inputs, names, load);
    recordExecution(metrics, rows, 1, clock.nowUs() - started, 0, 0);
    return { ok: true, outputs };
  } catch (error) {
    return { ok: false, error };
  }
}

/**
 * One run of the model: `rows` rows for `requests` requests, its compute
 * time and the time spent merging its inputs and splitting its outputs.
 */
export function recordExecution(m: SchedulerMetrics | undefined, rows: number, requests: number, computeUs: number, inputUs: number, outputUs: number): void {
  if (!m) return;
  m.execCount.inc();
  m.inferenceCount.inc(rows);
  m.batchSize.observe(rows);
  // Triton adds a batch's compute time to each of its requests.
  m.computeInferUs.add(computeUs * requests, requests);
  m.recordBatch(rows, inputUs, computeUs, outputUs);
}
