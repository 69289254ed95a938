/**
 * @module tune/load-worker
 * perf's engine on its own thread, for `onnx-mme tune`: the server runs on
 * tune's main thread (in-process), and a load generator sharing that event
 * loop would take time from the very thread it measures. The worker gets
 * the run's options (structured-clone data) and a stop rule, and posts
 * progress lines and the finished run back.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { runPerf, type PerfOptions, type PerfRun, type PerfStep } from '../perf/perf-run.js';

export interface StopRule {
  /** Latency objective: a step whose p99 exceeds this ends the sweep (more concurrency only queues more). */
  readonly p99Ms: number | undefined;
  /** A step that adds less than this fraction of throughput over the best so far ends the sweep (saturated). */
  readonly flatGain: number;
}

export interface WorkerRequest {
  readonly options: Omit<PerfOptions, 'progress' | 'continueAfter'>;
  readonly stop: StopRule;
}

export type WorkerMessage =
  | { readonly type: 'progress'; readonly line: string }
  | { readonly type: 'done'; readonly run: PerfRun }
  | { readonly type: 'failed'; readonly message: string };

/** Whether the sweep goes on after `step` (exported for its unit test). */
export function keepGoing(stop: StopRule, step: PerfStep, steps: readonly PerfStep[]): boolean {
  if (step.errors > 0 || step.latency.count === 0) return false;
  if (stop.p99Ms !== undefined && step.latency.p99Ms > stop.p99Ms) return false;
  const before = steps.slice(0, -1).reduce((m, s) => Math.max(m, s.throughputRps), 0);
  return steps.length < 2 || step.throughputRps >= before * (1 + stop.flatGain);
}

if (parentPort !== null && workerData !== undefined) {
  const port = parentPort;
  const { options, stop } = workerData as WorkerRequest;
  runPerf({
    ...options,
    progress: (line) => port.postMessage({ type: 'progress', line } satisfies WorkerMessage),
    continueAfter: (step, steps) => keepGoing(stop, step, steps),
  }).then(
    (run) => port.postMessage({ type: 'done', run } satisfies WorkerMessage),
    (err: unknown) => port.postMessage({ type: 'failed', message: err instanceof Error ? err.message : String(err) } satisfies WorkerMessage),
  );
}
