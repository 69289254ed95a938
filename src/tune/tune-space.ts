/**
 * @module tune/tune-space
 * The knobs `onnx-mme tune` turns, all of them config.pbtxt fields (so the
 * recommendation is one file the user can ship): instance count,
 * max_batch_size, the dynamic batcher's delay and preferred sizes, the
 * onnxruntime intra-op thread count and, on CPU, where the session runs
 * (this server's `execution_thread`). A candidate is a full setting of the
 * knobs; `applySetting` writes it into the user's config (JSON form of
 * config.pbtxt), leaving every other field as the user wrote it.
 *
 * The search is coordinate descent, as model-analyzer's quick mode: one
 * dimension at a time, from the current best setting, walking its values
 * outward from the current one and stopping the walk as soon as a value does
 * not pay (tune/tune-run.ts); never the full grid.
 */

export type ExecutionThread = 'auto' | 'main' | 'worker';

export interface KnobSetting {
  readonly instances: number;
  /** 0 = the model does not batch. */
  readonly maxBatchSize: number;
  /** undefined = no dynamic_batching block (the server's default batching: delay 0). */
  readonly delayUs: number | undefined;
  /** Empty = none (batches up to max_batch_size). */
  readonly preferred: readonly number[];
  /** undefined = the server's default (MME_INTRA_OP_THREADS). */
  readonly intraOpThreads: number | undefined;
  readonly executionThread: ExecutionThread;
}

export type Dimension = 'instances' | 'maxBatchSize' | 'delayUs' | 'preferred' | 'intraOpThreads' | 'executionThread';

/** Preferred batch sizes relative to max_batch_size (resolved per candidate, since that may change too). */
export type PreferredChoice = 'none' | 'half-and-max' | 'max';

export interface DimensionSpace {
  readonly dimension: Dimension;
  /** Ordered values (the walk goes up and down this list from the current value); for `preferred`, PreferredChoices. */
  readonly values: readonly unknown[];
}

type Json = Record<string, unknown>;

const obj = (v: unknown): Json | undefined => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : undefined);

function stringParameter(config: Json, key: string): string | undefined {
  const v = obj(obj(config['parameters'])?.[key])?.['string_value'];
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/**
 * The setting a config has now: the user's config (raw JSON form), with
 * `effectiveInstances` as the server loaded it (instance_group count 0 or
 * absent means the runtime's default).
 */
export function settingOf(config: Json, effectiveInstances: number): KnobSetting {
  const dynamic = obj(config['dynamic_batching']);
  const threads = stringParameter(config, 'intra_op_thread_count');
  const thread = stringParameter(config, 'execution_thread');
  const delay = dynamic?.['max_queue_delay_microseconds'];
  return {
    instances: effectiveInstances,
    maxBatchSize: Number(config['max_batch_size'] ?? 0),
    delayUs: dynamic === undefined ? undefined : Number(delay ?? 0),
    preferred: Array.isArray(dynamic?.['preferred_batch_size']) ? (dynamic['preferred_batch_size'] as number[]).map(Number) : [],
    intraOpThreads: threads === undefined || Number(threads) === 0 ? undefined : Number(threads),
    executionThread: thread === 'main' || thread === 'worker' ? thread : 'auto',
  };
}

function setParameter(config: Json, key: string, value: string | undefined): void {
  const params = { ...(obj(config['parameters']) ?? {}) };
  if (value === undefined) delete params[key];
  else params[key] = { string_value: value };
  if (Object.keys(params).length === 0) delete config['parameters'];
  else config['parameters'] = params;
}

/** `base` (raw JSON form) with `s` applied; only the fields a knob owns change, and only where `s` differs from `from`. */
export function applySetting(base: Json, s: KnobSetting, from: KnobSetting): Json {
  const config: Json = structuredClone(base);
  if (s.instances !== from.instances) {
    const groups = Array.isArray(config['instance_group']) ? (config['instance_group'] as Json[]) : [];
    const kind = groups[0]?.['kind'];
    config['instance_group'] = [{ ...(groups[0] ?? {}), count: s.instances, kind: typeof kind === 'string' && kind !== '' ? kind : 'KIND_CPU' }];
  }
  if (s.maxBatchSize !== from.maxBatchSize) config['max_batch_size'] = s.maxBatchSize;
  if (s.delayUs !== from.delayUs || s.preferred.join() !== from.preferred.join()) {
    if (s.delayUs === undefined && s.preferred.length === 0) delete config['dynamic_batching'];
    else {
      const dynamic: Json = { ...(obj(config['dynamic_batching']) ?? {}) };
      dynamic['max_queue_delay_microseconds'] = s.delayUs ?? 0;
      if (s.preferred.length > 0) dynamic['preferred_batch_size'] = [...s.preferred];
      else delete dynamic['preferred_batch_size'];
      config['dynamic_batching'] = dynamic;
    }
  } else if (s.maxBatchSize !== from.maxBatchSize && s.preferred.some((p) => p > s.maxBatchSize)) {
    // A preferred size above the new max_batch_size would make the config invalid.
    const dynamic: Json = { ...(obj(config['dynamic_batching']) ?? {}) };
    dynamic['preferred_batch_size'] = s.preferred.filter((p) => p <= s.maxBatchSize);
    config['dynamic_batching'] = dynamic;
  }
  if (s.intraOpThreads !== from.intraOpThreads)
    setParameter(config, 'intra_op_thread_count', s.intraOpThreads === undefined ? undefined : String(s.intraOpThreads));
  if (s.executionThread !== from.executionThread) setParameter(config, 'execution_thread', s.executionThread === 'auto' ? undefined : s.executionThread);
  return config;
}

const uniqSorted = (values: number[]): number[] => [...new Set(values)].sort((a, b) => a - b);

export interface SpaceLimits {
  /** Runtime workers: the server loads at most one instance per worker. */
  readonly workers: number;
  readonly cores: number;
  readonly cpu: boolean;
  /** Largest max_batch_size to try. */
  readonly maxBatchCap: number;
}

/** The dimensions to walk for a model whose current setting is `s`, in the order they are searched. */
export function searchSpace(s: KnobSetting, limits: SpaceLimits): DimensionSpace[] {
  const dims: DimensionSpace[] = [];
  const batching = s.maxBatchSize > 0;
  if (batching) {
    const sizes: number[] = [s.maxBatchSize];
    for (let v = 1; v <= limits.maxBatchCap; v *= 2) sizes.push(v);
    dims.push({ dimension: 'maxBatchSize', values: uniqSorted(sizes) });
  }
  dims.push({ dimension: 'instances', values: uniqSorted([1, 2, 4, 8, s.instances].filter((n) => n <= Math.max(1, limits.workers))) });
  if (batching) {
    // Microseconds a batch may wait for more rows; "none" (no block) is the server's default, delay 0.
    // (sort() would put undefined last without asking the comparator, so "none" is placed first by hand.)
    dims.push({ dimension: 'delayUs', values: [undefined, ...uniqSorted([100, 500, 2000, 10000, ...(s.delayUs !== undefined ? [s.delayUs] : [])])] });
    dims.push({ dimension: 'preferred', values: ['none', 'half-and-max', 'max'] satisfies PreferredChoice[] });
  }
  dims.push({ dimension: 'intraOpThreads', values: [undefined, ...uniqSorted([1, 2, 4, limits.cores].filter((n) => n <= limits.cores))] });
  if (limits.cpu) dims.push({ dimension: 'executionThread', values: ['auto', 'worker', 'main'] });
  return dims;
}

export function resolvePreferred(value: unknown, maxBatchSize: number): number[] {
  if (value === 'max') return [maxBatchSize];
  if (value === 'half-and-max') return maxBatchSize >= 2 ? [Math.floor(maxBatchSize / 2), maxBatchSize] : [maxBatchSize];
  return Array.isArray(value) ? (value as number[]) : [];
}

/** `s` with one dimension changed; a new max_batch_size keeps preferred sizes valid (at most it). */
export function withValue(s: KnobSetting, dimension: Dimension, value: unknown): KnobSetting {
  if (dimension === 'preferred') return { ...s, preferred: resolvePreferred(value, s.maxBatchSize) };
  const next = { ...s, [dimension]: value } as KnobSetting;
  if (dimension === 'maxBatchSize') {
    const kept = next.preferred.filter((p) => p <= next.maxBatchSize);
    return { ...next, preferred: kept.length === next.preferred.length ? next.preferred : kept };
  }
  return next;
}

/** "instances 2, max_batch_size 16, delay 500 µs, preferred [8,16], threads 2, thread main": the knobs, short. */
export function describeSetting(s: KnobSetting): string {
  return [
    `instances ${s.instances}`,
    `max_batch_size ${s.maxBatchSize}`,
    ...(s.maxBatchSize > 0
      ? [`delay ${s.delayUs === undefined ? 'default' : `${s.delayUs} µs`}`, `preferred ${s.preferred.length === 0 ? 'none' : `[${s.preferred.join(',')}]`}`]
      : []),
    `intra-op threads ${s.intraOpThreads ?? 'default'}`,
    `execution_thread ${s.executionThread}`,
  ].join(', ');
}

/** What the server would run for settings it leaves to its own defaults (MME_INTRA_OP_THREADS as this server resolved it). */
export interface ServerDefaults {
  /** undefined: onnxruntime's own default. */
  readonly intraOpThreads: number | undefined;
}

/**
 * `s` as the server runs it: no intra_op_thread_count means the server's
 * thread count, so "threads 1" and "default" are one configuration where the
 * default is 1 and measuring both would spend the budget on nothing.
 */
export function effectiveSetting(s: KnobSetting, defaults: ServerDefaults): KnobSetting {
  return s.intraOpThreads === undefined && defaults.intraOpThreads !== undefined ? { ...s, intraOpThreads: defaults.intraOpThreads } : s;
}

/** A key equal for two settings exactly when the server runs them alike. */
export function effectKey(s: KnobSetting, defaults: ServerDefaults): string {
  return describeSetting(effectiveSetting(s, defaults));
}

export function sameSetting(a: KnobSetting, b: KnobSetting): boolean {
  return describeSetting(a) === describeSetting(b);
}
