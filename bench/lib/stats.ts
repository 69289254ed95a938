/**
 * Small statistics helpers shared by the load generator, the raw ORT loop
 * and the report: percentiles over raw samples (nearest rank) and medians.
 */

/** Nearest-rank percentile of `sorted` (ascending); NaN when empty. */
export function percentileSorted(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  const i = Math.min(sorted.length - 1, Math.max(0, rank - 1));
  return sorted[i] ?? Number.NaN;
}

/** p50 and p99 of unsorted samples (copied, not mutated). */
export function latencySummary(samples: ArrayLike<number>): { p50: number; p99: number } {
  const sorted = Float64Array.from(samples).sort();
  return { p50: percentileSorted(sorted, 50), p99: percentileSorted(sorted, 99) };
}

/** Median of the finite values; NaN when there are none. */
export function median(values: readonly number[]): number {
  const v = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (v.length === 0) return Number.NaN;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 === 1 ? (v[mid] ?? Number.NaN) : ((v[mid - 1] ?? 0) + (v[mid] ?? 0)) / 2;
}

/** A growable buffer of float samples (latencies in ms) that avoids boxing. */
export class SampleBuffer {
  private data = new Float64Array(4096);
  private n = 0;

  push(value: number): void {
    if (this.n === this.data.length) {
      const bigger = new Float64Array(this.data.length * 2);
      bigger.set(this.data);
      this.data = bigger;
    }
    this.data[this.n++] = value;
  }

  get length(): number {
    return this.n;
  }

  values(): Float64Array {
    return this.data.subarray(0, this.n);
  }
}

/** One measured run (HTTP or a raw loop) in common terms: throughput, latency (ms), failures. */
export interface RunSample {
  readonly perSec: number;
  readonly p50: number;
  readonly p99: number;
  readonly errors: number;
  readonly non2xx: number;
}
