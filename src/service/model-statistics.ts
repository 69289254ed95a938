/**
 * @module service/model-statistics
 * Triton's statistics extension (GET /v2/models[/{m}[/versions/{v}]]/stats)
 * in its JSON shape, read from the same cells /metrics exports
 * (observability/metrics.ts): success and fail (count and duration),
 * queue, compute_input, compute_infer, compute_output, cache_hit and
 * cache_miss, inference_count, execution_count, last_inference (ms since the
 * epoch, 0 before the first request) and batch_stats per executed batch
 * size. Durations are reported in ns as Triton does; they are accumulated
 * in µs with sub-µs fractions, so they are exact to the ns the clock gave.
 */
import type { BatchStat, ModelMetrics } from '../observability/metrics.js';

export interface DurationStat {
  readonly count: number;
  readonly ns: number;
}

export interface BatchStatJson {
  readonly batch_size: number;
  readonly compute_input: DurationStat;
  readonly compute_infer: DurationStat;
  readonly compute_output: DurationStat;
}

export interface ModelStatJson {
  readonly name: string;
  readonly version: string;
  readonly last_inference: number;
  readonly inference_count: number;
  readonly execution_count: number;
  readonly inference_stats: {
    readonly success: DurationStat;
    readonly fail: DurationStat;
    readonly queue: DurationStat;
    readonly compute_input: DurationStat;
    readonly compute_infer: DurationStat;
    readonly compute_output: DurationStat;
    readonly cache_hit: DurationStat;
    readonly cache_miss: DurationStat;
  };
  readonly response_stats: Record<string, never>;
  readonly batch_stats: readonly BatchStatJson[];
  readonly memory_usage: readonly never[];
}

const ns = (us: number): number => Math.round(us * 1000);
const stat = (count: number, us: number): DurationStat => ({ count, ns: ns(us) });

/** hrtime of the last request → ms since the epoch (0 = none yet). */
function epochMs(at: bigint, nowHr: bigint, nowMs: number): number {
  return at === 0n ? 0 : Math.round(nowMs - Number(nowHr - at) / 1e6);
}

function batchStat(size: number, b: Readonly<BatchStat>): BatchStatJson {
  return { batch_size: size, compute_input: stat(b.count, b.inputUs), compute_infer: stat(b.count, b.inferUs), compute_output: stat(b.count, b.outputUs) };
}

/** One model version's statistics, under the name a client addresses it by. */
export function modelStat(name: string, cells: ModelMetrics, nowHr = process.hrtime.bigint(), nowMs = Date.now()): ModelStatJson {
  const c = cells;
  return {
    name,
    version: c.version,
    last_inference: epochMs(c.lastInferenceAt, nowHr, nowMs),
    inference_count: c.inferenceCount.total,
    execution_count: c.execCount.total,
    inference_stats: {
      success: stat(c.requestSuccess.total, c.requestDurationUs.totalUs),
      fail: stat(c.failures.count, c.failures.us),
      queue: stat(c.queueUs.count, c.queueUs.totalUs),
      compute_input: stat(c.computeInputUs.count, c.computeInputUs.totalUs),
      compute_infer: stat(c.computeInferUs.count, c.computeInferUs.totalUs),
      compute_output: stat(c.computeOutputUs.count, c.computeOutputUs.totalUs),
      cache_hit: stat(c.cacheHitUs.count, c.cacheHitUs.totalUs),
      cache_miss: stat(c.cacheMissUs.count, c.cacheMissUs.totalUs),
    },
    response_stats: {},
    batch_stats: [...c.batchStats.entries()].sort((a, b) => a[0] - b[0]).map(([size, b]) => batchStat(size, b)),
    memory_usage: [],
  };
}
