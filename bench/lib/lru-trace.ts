/**
 * @module bench/lib/lru-trace
 * Traffic for the memory-LRU bench: a seeded Zipf trace over many models, and
 * the exact LRU simulation the server's hit ratio is compared with.
 *
 * Popularity ranks are shuffled over the model ids (seeded), so a model's
 * popularity is not tied to its name or its size.
 */
import { seededRandom } from '../../examples/models/zoo.js';

export interface ZipfTraceOptions {
  /** Number of distinct models (ids 0 … models-1). */
  readonly models: number;
  readonly requests: number;
  /** Zipf exponent: P(rank k) ∝ 1 / k^s. */
  readonly s: number;
  readonly seed: number;
}

/** `requests` model ids drawn from a Zipf(s) law over `models`, reproducible from `seed`. */
export function zipfTrace(options: ZipfTraceOptions): Int32Array {
  const { models, requests, s, seed } = options;
  if (!Number.isInteger(models) || models < 1) throw new RangeError(`models must be a positive integer, got ${models}`);
  if (!(s > 0)) throw new RangeError(`the Zipf exponent must be positive, got ${s}`);
  const rand = seededRandom(seed);
  // Rank → model id: a Fisher-Yates shuffle of the ids.
  const idOfRank = Int32Array.from({ length: models }, (_, i) => i);
  for (let i = models - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    const t = idOfRank[i]!;
    idOfRank[i] = idOfRank[j]!;
    idOfRank[j] = t;
  }
  const cdf = new Float64Array(models);
  let total = 0;
  for (let k = 0; k < models; k++) {
    total += 1 / Math.pow(k + 1, s);
    cdf[k] = total;
  }
  const trace = new Int32Array(requests);
  for (let i = 0; i < requests; i++) {
    const u = rand() * total;
    // First rank whose cumulative weight reaches u.
    let lo = 0;
    let hi = models - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (cdf[mid]! < u) lo = mid + 1;
      else hi = mid;
    }
    trace[i] = idOfRank[lo]!;
  }
  return trace;
}

/** What an LRU cache sees at each trace position (stored in a Uint8Array). */
export const Verdict = Object.freeze({
  /** Resident: served from memory. */
  Hit: 0,
  /** First request for this model in the trace: it comes from the source (S3). */
  ColdMiss: 1,
  /** Seen before but evicted since: reloaded (from the disk cache, if it kept the files). */
  CapacityMiss: 2,
} as const);

export interface LruSimulation {
  readonly capacity: number;
  /** Verdict per trace position. */
  readonly verdicts: Uint8Array;
  readonly hits: number;
  readonly coldMisses: number;
  readonly capacityMisses: number;
  readonly evictions: number;
  readonly distinct: number;
  readonly hitRatio: number;
}

/**
 * An exact LRU of `capacity` entries replayed sequentially over `trace`
 * (a Map keeps insertion order: delete + set moves a key to most recent).
 */
export function simulateLru(trace: ArrayLike<number>, capacity: number): LruSimulation {
  if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
  const lru = new Map<number, true>();
  const seen = new Set<number>();
  const verdicts = new Uint8Array(trace.length);
  let hits = 0;
  let coldMisses = 0;
  let evictions = 0;
  for (let i = 0; i < trace.length; i++) {
    const id = trace[i]!;
    if (lru.delete(id)) {
      hits++;
      verdicts[i] = Verdict.Hit;
    } else if (seen.has(id)) {
      verdicts[i] = Verdict.CapacityMiss;
    } else {
      seen.add(id);
      coldMisses++;
      verdicts[i] = Verdict.ColdMiss;
    }
    lru.set(id, true);
    if (lru.size > capacity) {
      const oldest = lru.keys().next().value as number;
      lru.delete(oldest);
      evictions++;
    }
  }
  return {
    capacity,
    verdicts,
    hits,
    coldMisses,
    capacityMisses: trace.length - hits - coldMisses,
    evictions,
    distinct: seen.size,
    hitRatio: trace.length === 0 ? Number.NaN : hits / trace.length,
  };
}
