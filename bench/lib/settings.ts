/**
 * @module bench/lib/settings
 * Bench knobs from the environment (read here only), with defaults that keep
 * `npm run bench` to a few minutes on a small machine.
 */

export interface BenchSettings {
  /** Seconds per measured run (BENCH_DURATION_S, default 3). */
  readonly durationS: number;
  /** Seconds of discarded warm-up before a target's first run in each cell (BENCH_WARMUP_S, default 1). */
  readonly warmupS: number;
  /** Measured runs per target and cell; medians are reported (BENCH_REPEATS, default 3). */
  readonly repeats: number;
  /** Concurrent connections / loops (BENCH_CONCURRENCY, default 1,8,64). */
  readonly concurrency: readonly number[];
}

function positive(name: string, fallback: number, integer: boolean, allowZero = false): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0 || (!allowZero && n === 0) || (integer && !Number.isInteger(n))) {
    throw new Error(`${name} must be a ${integer ? 'positive integer' : 'positive number'}, got '${raw}'`);
  }
  return n;
}

export function benchSettings(): BenchSettings {
  const concRaw = process.env['BENCH_CONCURRENCY'];
  const concurrency =
    concRaw === undefined || concRaw.trim() === ''
      ? [1, 8, 64]
      : concRaw.split(',').map((s) => {
          const n = Number(s.trim());
          if (!Number.isInteger(n) || n < 1) throw new Error(`BENCH_CONCURRENCY must be comma-separated positive integers, got '${concRaw}'`);
          return n;
        });
  return {
    durationS: positive('BENCH_DURATION_S', 3, false),
    warmupS: positive('BENCH_WARMUP_S', 1, false, true),
    repeats: positive('BENCH_REPEATS', 3, true),
    concurrency,
  };
}

/**
 * The tables a bench measures, from `variable` (comma-separated names out of
 * `known`): all of them when unset; an unknown name stops the bench naming it.
 */
export function benchParts(variable: string, known: readonly string[]): ReadonlySet<string> {
  const raw = process.env[variable];
  if (raw === undefined || raw.trim() === '') return new Set(known);
  const asked = raw.split(',').map((p) => p.trim());
  const unknown = asked.filter((p) => !known.includes(p));
  if (unknown.length > 0) throw new Error(`${variable}: unknown part(s) ${unknown.join(', ')}; known: ${known.join(', ')}`);
  return new Set(asked);
}
