/**
 * @module service/model-statistics
 * Triton's per-model statistics (the KServe statistics extension), read from
 * the same metric cells /metrics shows, so the two can never disagree: the
 * counters of each (model, version), summed over any other label.
 *
 * Durations are kept in microseconds by the metrics and reported here in
 * nanoseconds, as Triton's fields are. What the cells do not hold is
 * reported as zero: the duration of failed requests (only their count is
 * kept) and batch statistics per batch size.
 */
import type { Counter } from 'prom-client';
import type { Metrics } from '../observability/metrics.js';

export interface DurationStat {
  readonly count: number;
  readonly ns: number;
}

export interface ModelStatisticsEntry {
  readonly name: string;
  readonly version: string;
  /** Milliseconds since the epoch of the last successful inference; 0 = none since the server started. */
  readonly lastInference: number;
  readonly inferenceCount: number;
  readonly executionCount: number;
  readonly success: DurationStat;
  readonly fail: DurationStat;
  readonly queue: DurationStat;
  readonly computeInput: DurationStat;
  readonly computeInfer: DurationStat;
  readonly computeOutput: DurationStat;
  readonly cacheHit: DurationStat;
  readonly cacheMiss: DurationStat;
}

type Sums = Map<string, number>;

const keyOf = (model: string, version: string): string => JSON.stringify([model, version]);

/** One counter's values summed by (model, version). */
async function sums(counter: Counter<string>): Promise<Sums> {
  const out: Sums = new Map();
  for (const v of (await counter.get()).values) {
    const model = v.labels['model'];
    const version = v.labels['version'];
    if (model === undefined || version === undefined) continue;
    const key = keyOf(String(model), String(version));
    out.set(key, (out.get(key) ?? 0) + v.value);
  }
  return out;
}

/**
 * Statistics of every model and version that has served a request, or of
 * `name` (and `version`) only. `lastInference` comes from the caller, which
 * sees the requests (InferenceService keeps it).
 */
export async function modelStatistics(
  metrics: Metrics,
  lastInference: (model: string, version: string) => number,
  filter: { readonly name?: string | undefined; readonly version?: string | undefined } = {},
): Promise<ModelStatisticsEntry[]> {
  const [success, successUs, fail, queueUs, inputUs, inferUs, outputUs, inferences, executions, hits, hitUs, misses, missUs] = await Promise.all([
    sums(metrics.requestSuccess),
    sums(metrics.requestDurationUs),
    sums(metrics.requestFailure),
    sums(metrics.queueDurationUs),
    sums(metrics.computeInputDurationUs),
    sums(metrics.computeInferDurationUs),
    sums(metrics.computeOutputDurationUs),
    sums(metrics.inferenceCount),
    sums(metrics.execCount),
    sums(metrics.cacheHits),
    sums(metrics.cacheHitDurationUs),
    sums(metrics.cacheMisses),
    sums(metrics.cacheMissDurationUs),
  ]);
  const keys = new Set([...success.keys(), ...fail.keys()]);
  const rows: ModelStatisticsEntry[] = [];
  const ns = (us: number | undefined): number => Math.round((us ?? 0) * 1000);
  for (const key of [...keys].sort()) {
    const [name, version] = JSON.parse(key) as [string, string];
    if (filter.name !== undefined && filter.name !== name) continue;
    if (filter.version !== undefined && filter.version !== version) continue;
    const ok = success.get(key) ?? 0;
    // Response-cache hits are successes that never queued or computed (Triton leaves them out of those).
    const computed = ok - (hits.get(key) ?? 0);
    rows.push({
      name,
      version,
      lastInference: lastInference(name, version),
      inferenceCount: inferences.get(key) ?? 0,
      executionCount: executions.get(key) ?? 0,
      success: { count: ok, ns: ns(successUs.get(key)) },
      fail: { count: fail.get(key) ?? 0, ns: 0 },
      queue: { count: computed, ns: ns(queueUs.get(key)) },
      computeInput: { count: computed, ns: ns(inputUs.get(key)) },
      computeInfer: { count: computed, ns: ns(inferUs.get(key)) },
      computeOutput: { count: computed, ns: ns(outputUs.get(key)) },
      cacheHit: { count: hits.get(key) ?? 0, ns: ns(hitUs.get(key)) },
      cacheMiss: { count: misses.get(key) ?? 0, ns: ns(missUs.get(key)) },
    });
  }
  return rows;
}
