/**
 * @module perf/server-split
 * Where the time went inside the server, per step: the server's own
 * counters read before and after it, as perf_analyzer prints them ("Server:
 * queue, compute input, compute infer, compute output", and the batch size
 * the dynamic batcher formed = inferences / executions).
 *
 * Read from the KServe statistics extension (GET /v2/models/{m}/stats,
 * Triton's format, so this also works against Triton) when the target
 * answers it, else from Prometheus /metrics with Triton's `nv_inference_*`
 * counter names (this server, and Triton's metrics port when it is the same
 * address). A target with neither (a real SageMaker endpoint) gets no split.
 */
import { getJson, getText } from './http-target.js';

export interface ServerCounters {
  readonly success: number;
  readonly queueUs: number;
  readonly computeInputUs: number;
  readonly computeInferUs: number;
  readonly computeOutputUs: number;
  readonly inferences: number;
  readonly executions: number;
}

export interface ServerSplit {
  readonly source: 'stats' | 'metrics';
  /** Successful requests the server counted during the step. */
  readonly requests: number;
  readonly queueMs: number;
  readonly computeInputMs: number;
  readonly computeInferMs: number;
  readonly computeOutputMs: number;
  /** Mean rows per model execution. */
  readonly batchSize: number;
}

export interface CounterReader {
  readonly source: 'stats' | 'metrics';
  read(): Promise<ServerCounters | undefined>;
}

type Json = Record<string, unknown>;
const num = (v: unknown): number => (typeof v === 'number' ? v : typeof v === 'string' ? Number(v) : 0);
const at = (v: unknown, ...keys: string[]): unknown => keys.reduce<unknown>((o, k) => (o !== null && typeof o === 'object' ? (o as Json)[k] : undefined), v);

/** Triton's statistics document, summed over the versions it lists. */
export function countersFromStats(doc: unknown): ServerCounters | undefined {
  const stats = at(doc, 'model_stats');
  if (!Array.isArray(stats)) return undefined;
  const sum = (f: (s: unknown) => number): number => stats.reduce<number>((n, s) => n + f(s), 0);
  const ns = (k: string) => (s: unknown) => num(at(s, 'inference_stats', k, 'ns')) / 1000;
  return {
    success: sum((s) => num(at(s, 'inference_stats', 'success', 'count'))),
    queueUs: sum(ns('queue')),
    computeInputUs: sum(ns('compute_input')),
    computeInferUs: sum(ns('compute_infer')),
    computeOutputUs: sum(ns('compute_output')),
    inferences: sum((s) => num(at(s, 'inference_count'))),
    executions: sum((s) => num(at(s, 'execution_count'))),
  };
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** Sums of the `nv_inference_*` counters over the series whose `model` label is one of `models`. */
export function countersFromMetrics(text: string, models: readonly string[]): ServerCounters | undefined {
  const totals = new Map<string, number>();
  let matched = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith('nv_inference_')) continue;
    const m = SAMPLE.exec(line);
    if (!m) continue;
    const labels = new Map<string, string>();
    for (const l of (m[2] ?? '').matchAll(LABEL)) labels.set(l[1]!, l[2]!.replace(/\\(.)/g, '$1'));
    if (!models.includes(labels.get('model') ?? '')) continue;
    matched = true;
    totals.set(m[1]!, (totals.get(m[1]!) ?? 0) + Number(m[3]));
  }
  if (!matched) return undefined;
  const t = (name: string): number => totals.get(name) ?? 0;
  return {
    success: t('nv_inference_request_success'),
    queueUs: t('nv_inference_queue_duration_us'),
    computeInputUs: t('nv_inference_compute_input_duration_us'),
    computeInferUs: t('nv_inference_compute_infer_duration_us'),
    computeOutputUs: t('nv_inference_compute_output_duration_us'),
    inferences: t('nv_inference_count'),
    executions: t('nv_inference_exec_count'),
  };
}

/**
 * A reader for the target at `baseUrl` serving `model` (`names`: the names
 * its metrics may carry, e.g. the metadata name and the requested name), or
 * undefined when it offers neither route. On /metrics a model with no
 * series yet has had no request counted, so it reads as zeros.
 */
export async function findCounterReader(baseUrl: string, model: string, names: readonly string[]): Promise<CounterReader | undefined> {
  const base = baseUrl.replace(/\/+$/, '');
  const statsUrl = `${base}/v2/models/${encodeURIComponent(model)}/stats`;
  if (countersFromStats(await getJson(statsUrl)) !== undefined) {
    return { source: 'stats', read: async () => countersFromStats(await getJson(statsUrl)) };
  }
  const metricsUrl = `${base}/metrics`;
  const text = await getText(metricsUrl);
  if (text !== undefined && text.includes('nv_inference_request_success')) {
    return {
      source: 'metrics',
      read: async () => {
        const now = await getText(metricsUrl);
        return now === undefined ? undefined : (countersFromMetrics(now, names) ?? ZERO_COUNTERS);
      },
    };
  }
  return undefined;
}

export const ZERO_COUNTERS: ServerCounters = Object.freeze({
  success: 0,
  queueUs: 0,
  computeInputUs: 0,
  computeInferUs: 0,
  computeOutputUs: 0,
  inferences: 0,
  executions: 0,
});

/** The per-request split between two readings. */
export function splitBetween(before: ServerCounters, after: ServerCounters, source: 'stats' | 'metrics'): ServerSplit | undefined {
  const requests = after.success - before.success;
  // Nothing counted: a name the server labels differently, or no success; no split rather than a row of zeros.
  if (requests <= 0) return undefined;
  const per = (a: number, b: number): number => (requests > 0 ? (a - b) / requests / 1000 : Number.NaN);
  const executions = after.executions - before.executions;
  return {
    source,
    requests,
    queueMs: per(after.queueUs, before.queueUs),
    computeInputMs: per(after.computeInputUs, before.computeInputUs),
    computeInferMs: per(after.computeInferUs, before.computeInferUs),
    computeOutputMs: per(after.computeOutputUs, before.computeOutputUs),
    batchSize: executions > 0 ? (after.inferences - before.inferences) / executions : Number.NaN,
  };
}
