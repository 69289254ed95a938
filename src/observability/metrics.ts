/**
 * @module observability/metrics
 * Every Prometheus metric the server exports, declared once. Modules receive
 * the typed `Metrics` object (never the global registry) so each server
 * instance, and each test, has its own registry. Names follow Triton's
 * `nv_inference_*` where they mean the same thing, so existing dashboards work;
 * histograms are added because counters alone cannot give percentiles.
 *
 * Per-model series carry `target` (the canonical target key, or the
 * SageMaker model name) before Triton's `model` and `version`: two tenants'
 * packages whose configs are both named `model` are two series. They are
 * cells (metric-cells.ts: plain accumulators read at scrape time), handed
 * out per package by `forTarget`; when the last package of a target is
 * released its series are removed. At most `maxTargets` targets have series
 * of their own: the rest are counted in one overflow series
 * (target=model=version=`_overflow`), so 10,000 targets cannot make 10,000
 * series sets. Each target still keeps its own accumulators, which the
 * statistics extension (GET /v2/models/{m}/stats) reads.
 *
 * Adding a metric: declare it in the object below. A per-model one is a
 * cell metric (CellCounter, CellDurationCounter, CellGauge, CellHistogram)
 * whose labelNames start with MODEL_LABELS, and its cell is added to
 * ModelMetrics in `modelCells`; removal and the cap then apply to it
 * (test/unit/observability/metrics.test.ts checks that every metric with a
 * `target` label is such a metric).
 */
import { readFileSync } from 'node:fs';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import {
  CellCounter,
  CellDurationCounter,
  CellGauge,
  CellHistogram,
  type CounterCell,
  type DurationCell,
  type GaugeCell,
  type HistogramCell,
} from './metric-cells.js';

/** The labels every per-model series starts with. */
export const MODEL_LABELS = ['target', 'model', 'version'] as const;
export type ModelLabel = (typeof MODEL_LABELS)[number];

/** The label value of every part of the overflow series (targets past the cap). */
export const OVERFLOW_LABEL = '_overflow';

/** Live targets with series of their own when MME_METRICS_MAX_TARGETS is not set. */
export const DEFAULT_MAX_TARGETS = 500;

/** Counts and summed time of the executions of one batch size (Triton's batch_stats). */
export interface BatchStat {
  count: number;
  inputUs: number;
  inferUs: number;
  outputUs: number;
}

/** Most distinct batch sizes kept per model version (a batch size is at most max_batch_size rows). */
const MAX_BATCH_STATS = 4096;

/**
 * The cells of one model version of one target that the request path
 * updates: its scheduler holds the batch ones, the service looks the set up
 * once per request. Names say which metric each feeds; the statistics
 * extension reads the same cells.
 */
export interface ModelMetrics {
  readonly target: string;
  readonly model: string;
  readonly version: string;
  readonly requestSuccess: CounterCell;
  readonly requestDurationUs: DurationCell;
  /** onnx_mme_request_duration_seconds. */
  readonly requestDuration: HistogramCell;
  readonly pending: GaugeCell;
  readonly computeInputUs: DurationCell;
  readonly computeOutputUs: DurationCell;
  /** Counted per request: a batch's run time is added once for each of its requests (Triton's rule). */
  readonly computeInferUs: DurationCell;
  readonly inferenceCount: CounterCell;
  readonly execCount: CounterCell;
  /** Counted per request (count = requests that waited). */
  readonly queueUs: DurationCell;
  readonly batchSize: HistogramCell;
  readonly cacheHits: CounterCell;
  readonly cacheMisses: CounterCell;
  readonly cacheHitUs: DurationCell;
  readonly cacheMissUs: DurationCell;
  /** A failed request of this version, by reason (Triton's REJECTED, CANCELED, BACKEND, OTHER), with its duration. */
  fail(reason: string, us: number): void;
  /** Failed requests and their summed duration (µs); the count is the sum of nv_inference_request_failure over reasons. */
  readonly failures: { readonly count: number; readonly us: number };
  /** One execution of `size` rows: its input preparation, run and output split times (µs). */
  recordBatch(size: number, inputUs: number, inferUs: number, outputUs: number): void;
  /** Executions by batch size, in the order sizes were first seen. */
  readonly batchStats: ReadonlyMap<number, Readonly<BatchStat>>;
  /** A stateful model's live sequences changed by `delta` (onnx_mme_sequences_live; its series exist once used). */
  sequenceLive(delta: number): void;
  /** A sequence waited for a slot (onnx_mme_sequence_slot_waits_total). */
  sequenceSlotWait(): void;
  /** A sequence ended, by reason (onnx_mme_sequence_ends_total). */
  sequenceEnded(reason: string): void;
  /** process.hrtime.bigint() when the last request finished (successfully or not); 0n = none yet. */
  lastInferenceAt: bigint;
}

/** A package's handle on its target's series: hand it back (release) when the package is released. */
export interface TargetMetrics {
  /** The target the handle was asked for. */
  readonly target: string;
  /** Whether its series are folded into the overflow series (the cap was reached when it was first asked for). */
  readonly overflow: boolean;
  /** The cells of `model` version `version` (made on first use, then two Map lookups). */
  forModel(model: string, version: string): ModelMetrics;
  /** Every model version's cells made so far, in creation order. */
  models(): Iterable<ModelMetrics>;
  /** The package's entry model (what a client addressing the target runs), once the package is built. */
  readonly entryModel: string | undefined;
  setEntryModel(model: string): void;
  /** Once per forTarget call; the series go when the target's last handle is released. */
  release(): void;
}

/** A live target as the statistics extension reads it. */
export type TargetView = Omit<TargetMetrics, 'release' | 'setEntryModel'>;

export interface Metrics {
  readonly registry: Registry;
  /** A handle on `target`'s series (shared by every package of it that is loaded; counted). */
  forTarget(target: string): TargetMetrics;
  /** The targets with a live handle, in the order they were first asked for. */
  targets(): Iterable<TargetView>;
  /** A live target's view, or undefined. */
  target(target: string): TargetView | undefined;
  /** Live targets with series of their own (MME_METRICS_MAX_TARGETS). */
  readonly maxTargets: number;
  readonly requestSuccess: CellCounter<ModelLabel>;
  readonly requestFailure: CellCounter<ModelLabel | 'reason'>;
  readonly inferenceCount: CellCounter<ModelLabel>;
  readonly execCount: CellCounter<ModelLabel>;
  /** Time requests spent in a model's scheduler queue before their batch started (Triton's queue duration). */
  readonly queueDurationUs: CellDurationCounter<ModelLabel>;
  /** Rows per model execution: how well the dynamic batcher merges (average batch = nv_inference_count / nv_inference_exec_count). */
  readonly batchSize: CellHistogram<ModelLabel>;
  readonly requestDurationUs: CellDurationCounter<ModelLabel>;
  readonly computeInferDurationUs: CellDurationCounter<ModelLabel>;
  readonly requestDuration: CellHistogram<ModelLabel>;
  readonly httpRequests: CellCounter<'route' | 'status'>;
  /** gRPC calls by RPC (the service's fixed method names) and status code name: bounded like the HTTP routes. */
  readonly grpcRequests: CellCounter<'method' | 'code'>;
  readonly modelLoadDuration: Histogram<'outcome'>;
  readonly modelUnloadDuration: Histogram;
  readonly loadedModels: Gauge;
  /** Per model lookup: already in memory, on local disk, or fetched from the source (SageMaker ModelCacheHit). */
  readonly modelCacheLookups: CellCounter<'result'>;
  readonly modelDownloads: Counter<'outcome'>;
  readonly modelDownloadBytes: Counter;
  readonly modelRevalidations: Counter<'result'>;
  /** Requests for targets the source does not hold, by what they cost: registry/missing-targets.ts. */
  readonly missingTargets: Counter<'result'>;
  readonly diskCacheBytes: Gauge;
  readonly diskCacheBudgetBytes: Gauge;
  readonly diskCacheEvictions: Counter;
  /** Reserved/measured bytes of resident model packages (the memory budget's use). */
  readonly loadedModelBytes: Gauge;
  /** Model memory the process really holds: resident set above the idle figure, less the main thread's JS heap growth. */
  readonly measuredModelBytes: Gauge;
  readonly memoryBudgetBytes: Gauge;
  readonly modelEvictions: Counter;
  /** How long requests waited for their model to be loaded (SageMaker ModelLoadingWaitTime). */
  readonly modelLoadingWait: Histogram;
  /** Requests admitted for a model (its package leased) and not yet finished; see docs/metrics-and-logs.md. */
  readonly pendingRequests: CellGauge<ModelLabel>;
  /** Request body → typed tensors, bound and validated against the model (Triton's "compute input"). */
  readonly computeInputDurationUs: CellDurationCounter<ModelLabel>;
  /** Output post-processing after the run (classification), before encoding (Triton's "compute output"). */
  readonly computeOutputDurationUs: CellDurationCounter<ModelLabel>;
  /** Response cache (models with `response_cache { enable: true }`): Triton's per-model names; durations are lookup (+ insert on a miss). */
  readonly cacheHits: CellCounter<ModelLabel>;
  readonly cacheMisses: CellCounter<ModelLabel>;
  readonly cacheHitDurationUs: CellDurationCounter<ModelLabel>;
  readonly cacheMissDurationUs: CellDurationCounter<ModelLabel>;
  /** Live targets folded into the overflow series now (0 while under the cap). */
  readonly overflowTargets: Gauge;
  readonly responseCacheBytes: Gauge;
  readonly responseCacheEntries: Gauge;
  readonly responseCacheEvictions: Counter;
  /** Stateful models (sequence_batching): sequences started and not ended, in a slot or waiting for one. */
  readonly sequencesLive: CellGauge<ModelLabel>;
  /** Sequences that found every slot of their model taken and waited in the backlog. */
  readonly sequenceSlotWaits: CellCounter<ModelLabel>;
  /** Sequences ended, by why: end (its sequence_end), idle, unload, cancelled, slot_timeout, restart (a sequence_start on its live id). */
  readonly sequenceEnds: CellCounter<ModelLabel | 'reason'>;
  /** Bytes of implicit state the server holds for live sequences (counted in the memory budget). */
  readonly sequenceStateBytes: Gauge;
  /** Threads of the process now (/proc/self/status), read at each scrape. */
  readonly processThreads: Gauge;
}

/** A cell metric with per-model labels: what forTarget's removal walks. */
interface PerModelMetric {
  removeFirst(target: string): void;
}

function isPerModel(m: unknown): m is PerModelMetric {
  if (!(m instanceof CellCounter || m instanceof CellDurationCounter || m instanceof CellGauge || m instanceof CellHistogram)) return false;
  return (m as unknown as { labelNames: readonly string[] }).labelNames[0] === 'target';
}

/** The cells of one model version; `exportAs` is the overflow label set for a target past the cap. */
/** The cell of each `reason` of a per-model counter with a reason label, made on first use (exported as the overflow series when `as` says so). */
function byReason(
  metric: CellCounter<ModelLabel | 'reason'>,
  labels: Record<ModelLabel, string>,
  as: Record<ModelLabel, string> | undefined,
): (reason: string) => CounterCell {
  const cells = new Map<string, CounterCell>();
  return (reason) => {
    let cell = cells.get(reason);
    if (cell === undefined) cells.set(reason, (cell = metric.cell({ ...labels, reason }, as && { ...as, reason })));
    return cell;
  };
}

function modelCells(metrics: Metrics, target: string, model: string, version: string, overflow: boolean): ModelMetrics {
  const labels = { target, model, version };
  const as = overflow ? { target: OVERFLOW_LABEL, model: OVERFLOW_LABEL, version: OVERFLOW_LABEL } : undefined;
  const failures = { count: 0, us: 0 };
  const batchStats = new Map<number, BatchStat>();
  const failCell = byReason(metrics.requestFailure, labels, as);
  // Made on first use: a stateless model has no sequence series.
  let live: GaugeCell | undefined;
  let slotWaits: CounterCell | undefined;
  const endCell = byReason(metrics.sequenceEnds, labels, as);
  return {
    target,
    model,
    version,
    requestSuccess: metrics.requestSuccess.cell(labels, as),
    requestDurationUs: metrics.requestDurationUs.cell(labels, as),
    requestDuration: metrics.requestDuration.cell(labels, as),
    pending: metrics.pendingRequests.cell(labels, as),
    computeInputUs: metrics.computeInputDurationUs.cell(labels, as),
    computeOutputUs: metrics.computeOutputDurationUs.cell(labels, as),
    computeInferUs: metrics.computeInferDurationUs.cell(labels, as),
    inferenceCount: metrics.inferenceCount.cell(labels, as),
    execCount: metrics.execCount.cell(labels, as),
    queueUs: metrics.queueDurationUs.cell(labels, as),
    batchSize: metrics.batchSize.cell(labels, as),
    cacheHits: metrics.cacheHits.cell(labels, as),
    cacheMisses: metrics.cacheMisses.cell(labels, as),
    cacheHitUs: metrics.cacheHitDurationUs.cell(labels, as),
    cacheMissUs: metrics.cacheMissDurationUs.cell(labels, as),
    fail(reason, us) {
      failCell(reason).inc();
      failures.count += 1;
      failures.us += us;
    },
    failures,
    sequenceLive(delta) {
      (live ??= metrics.sequencesLive.cell(labels, as)).inc(delta);
    },
    sequenceSlotWait() {
      (slotWaits ??= metrics.sequenceSlotWaits.cell(labels, as)).inc();
    },
    sequenceEnded(reason) {
      endCell(reason).inc();
    },
    recordBatch(size, inputUs, inferUs, outputUs) {
      let stat = batchStats.get(size);
      if (stat === undefined) {
        if (batchStats.size >= MAX_BATCH_STATS) return;
        batchStats.set(size, (stat = { count: 0, inputUs: 0, inferUs: 0, outputUs: 0 }));
      }
      stat.count += 1;
      stat.inputUs += inputUs;
      stat.inferUs += inferUs;
      stat.outputUs += outputUs;
    },
    batchStats,
    lastInferenceAt: 0n,
  };
}

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Powers of two up to 1024 rows: max_batch_size values in practice. */
const BATCH_SIZE_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
const LOAD_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export interface MetricsOptions {
  readonly collectProcessMetrics?: boolean;
  /** Live targets with series of their own (MME_METRICS_MAX_TARGETS); default DEFAULT_MAX_TARGETS. */
  readonly maxTargets?: number;
}

interface Tenant extends TargetMetrics {
  refs: number;
  entryModel: string | undefined;
}

/** The process's live thread count from /proc/self/status (Linux); undefined elsewhere. */
export function processThreadCount(readStatus: () => string = () => readFileSync('/proc/self/status', 'utf8')): number | undefined {
  try {
    const m = /^Threads:\s+(\d+)$/m.exec(readStatus());
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  if (options.collectProcessMetrics) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const maxTargets = options.maxTargets ?? DEFAULT_MAX_TARGETS;
  const tenants = new Map<string, Tenant>();
  let ownSeries = 0;
  const perModel = (): PerModelMetric[] => Object.values(metrics).filter(isPerModel);
  const newTenant = (target: string): Tenant => {
    const overflow = ownSeries >= maxTargets;
    if (overflow) metrics.overflowTargets.inc();
    else ownSeries++;
    /** By model, then version: the request path looks its set up with strings it already holds, building no key. */
    const byModel = new Map<string, Map<string, ModelMetrics>>();
    const all: ModelMetrics[] = [];
    const tenant: Tenant = {
      target,
      overflow,
      refs: 0,
      entryModel: undefined,
      setEntryModel(model) {
        tenant.entryModel = model;
      },
      forModel(model, version) {
        let versions = byModel.get(model);
        if (versions === undefined) byModel.set(model, (versions = new Map()));
        let cells = versions.get(version);
        if (cells === undefined) {
          // Never an empty label: a version not known yet is not a series.
          if (model === '' || version === '') throw new Error(`metrics: empty model or version label for target '${target}'`);
          versions.set(version, (cells = modelCells(metrics, target, model, version, overflow)));
          all.push(cells);
        }
        return cells;
      },
      models: () => all.values(),
      release() {
        if (tenant.refs <= 0) return;
        tenant.refs -= 1;
        if (tenant.refs > 0 || tenants.get(target) !== tenant) return;
        tenants.delete(target);
        if (overflow) metrics.overflowTargets.dec();
        else ownSeries--;
        for (const m of perModel()) m.removeFirst(target);
      },
    };
    return tenant;
  };
  const metrics: Metrics = {
    registry,
    maxTargets,
    forTarget(target) {
      let tenant = tenants.get(target);
      if (tenant === undefined) tenants.set(target, (tenant = newTenant(target)));
      tenant.refs += 1;
      // Each caller's own handle: releasing it twice hands back one reference, not two.
      let held = true;
      const shared = tenant;
      return {
        target,
        overflow: shared.overflow,
        forModel: shared.forModel,
        models: shared.models,
        get entryModel() {
          return shared.entryModel;
        },
        setEntryModel: shared.setEntryModel,
        release() {
          if (!held) return;
          held = false;
          shared.release();
        },
      };
    },
    targets: () => tenants.values(),
    target: (target) => tenants.get(target),
    requestSuccess: new CellCounter({
      name: 'nv_inference_request_success',
      help: 'Number of successful inference requests, all batch sizes',
      labelNames: MODEL_LABELS,
      registers,
    }),
    requestFailure: new CellCounter({
      name: 'nv_inference_request_failure',
      help: 'Number of failed inference requests, all batch sizes',
      labelNames: [...MODEL_LABELS, 'reason'],
      registers,
    }),
    inferenceCount: new CellCounter({
      name: 'nv_inference_count',
      help: 'Number of inferences performed (does not include cached requests)',
      labelNames: MODEL_LABELS,
      registers,
    }),
    execCount: new CellCounter({
      name: 'nv_inference_exec_count',
      help: 'Number of model executions performed (does not include cached requests)',
      labelNames: MODEL_LABELS,
      registers,
    }),
    queueDurationUs: new CellDurationCounter({
      name: 'nv_inference_queue_duration_us',
      help: 'Cumulative inference queuing duration in microseconds (includes cached requests)',
      labelNames: MODEL_LABELS,
      registers,
    }),
    batchSize: new CellHistogram({
      name: 'onnx_mme_batch_size',
      help: 'Rows per model execution formed by the dynamic batcher (one observation per execution)',
      labelNames: MODEL_LABELS,
      buckets: BATCH_SIZE_BUCKETS,
      registers,
    }),
    requestDurationUs: new CellDurationCounter({
      name: 'nv_inference_request_duration_us',
      help: 'Cumulative inference request duration in microseconds (includes cached requests)',
      labelNames: MODEL_LABELS,
      registers,
    }),
    computeInferDurationUs: new CellDurationCounter({
      name: 'nv_inference_compute_infer_duration_us',
      help: 'Cumulative compute inference duration in microseconds (does not include cached requests)',
      labelNames: MODEL_LABELS,
      registers,
    }),
    requestDuration: new CellHistogram({
      name: 'onnx_mme_request_duration_seconds',
      help: 'End-to-end inference request latency in seconds, per entry model',
      labelNames: MODEL_LABELS,
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    httpRequests: new CellCounter({
      name: 'onnx_mme_http_requests_total',
      help: 'HTTP requests by route and status code',
      labelNames: ['route', 'status'],
      registers,
    }),
    grpcRequests: new CellCounter({
      name: 'onnx_mme_grpc_requests_total',
      help: 'gRPC calls (MME_GRPC_PORT) by method and status code',
      labelNames: ['method', 'code'],
      registers,
    }),
    modelLoadDuration: new Histogram({
      name: 'onnx_mme_model_load_duration_seconds',
      help: 'Time to localize, create sessions for and warm up a model package (SageMaker ModelLoadingTime)',
      labelNames: ['outcome'],
      buckets: LOAD_BUCKETS,
      registers,
    }),
    modelUnloadDuration: new Histogram({
      name: 'onnx_mme_model_unload_duration_seconds',
      help: 'Time to release a model package (SageMaker ModelUnloadingTime)',
      buckets: LOAD_BUCKETS,
      registers,
    }),
    loadedModels: new Gauge({
      name: 'onnx_mme_loaded_models',
      help: 'Model packages resident in memory (SageMaker LoadedModelCount)',
      registers,
    }),
    modelCacheLookups: new CellCounter({
      name: 'onnx_mme_model_cache_lookups_total',
      help: 'Model lookups by where the model was found: memory (already loaded), disk (cached, loaded now) or source (downloaded/extracted now)',
      labelNames: ['result'],
      registers,
    }),
    modelDownloads: new Counter({
      name: 'onnx_mme_model_downloads_total',
      help: 'Model archives fetched and extracted into the disk cache, by outcome',
      labelNames: ['outcome'],
      registers,
    }),
    modelDownloadBytes: new Counter({
      name: 'onnx_mme_model_download_bytes_total',
      help: 'Archive bytes received from the model source',
      registers,
    }),
    modelRevalidations: new Counter({
      name: 'onnx_mme_model_revalidations_total',
      help: 'Freshness checks of loaded models against the source: unchanged, changed (reloaded), deleted, error (kept serving the cached copy)',
      labelNames: ['result'],
      registers,
    }),
    missingTargets: new Counter({
      name: 'onnx_mme_missing_target_requests_total',
      help: 'Requests for targets the model source does not hold, by what they cost: miss (the source was asked), remembered (answered 404 from memory within MME_MISSING_TARGET_TTL_SECONDS), refused (429: the MME_MISSING_TARGET_LOOKUPS_PER_SECOND bucket was empty)',
      labelNames: ['result'],
      registers,
    }),
    diskCacheBytes: new Gauge({
      name: 'onnx_mme_disk_cache_bytes',
      help: 'Disk space the extracted models in the disk cache (MME_CACHE_DIR) take, in allocated blocks as du counts (what MME_CACHE_MAX_BYTES budgets)',
      registers,
    }),
    diskCacheBudgetBytes: new Gauge({
      name: 'onnx_mme_disk_cache_budget_bytes',
      help: 'The disk cache byte budget (MME_CACHE_MAX_BYTES or its default)',
      registers,
    }),
    diskCacheEvictions: new Counter({
      name: 'onnx_mme_disk_cache_evictions_total',
      help: 'Cached models removed from disk to make room (least recently used, not loaded in memory)',
      registers,
    }),
    loadedModelBytes: new Gauge({
      name: 'onnx_mme_loaded_model_bytes',
      help: "Memory reserved against the budget for resident and loading models (a load's peak while it loads, then what it was measured to hold, plus main-thread copies while they exist)",
      registers,
    }),
    measuredModelBytes: new Gauge({
      name: 'onnx_mme_measured_model_bytes',
      help: "Model memory measured in the process: resident set above the idle figure taken at start-up, less the main thread's JavaScript heap growth; reconciled against the budget",
      registers,
    }),
    memoryBudgetBytes: new Gauge({
      name: 'onnx_mme_memory_budget_bytes',
      help: 'The memory budget for resident models (MME_MEMORY_BUDGET_BYTES or its default)',
      registers,
    }),
    modelEvictions: new Counter({
      name: 'onnx_mme_model_evictions_total',
      help: 'Idle models released from memory to make room (least recently used first)',
      registers,
    }),
    modelLoadingWait: new Histogram({
      name: 'onnx_mme_model_loading_wait_seconds',
      help: 'Time requests waited for their model to be loaded (SageMaker ModelLoadingWaitTime); requests that found it in memory are not counted',
      buckets: LOAD_BUCKETS,
      registers,
    }),
    pendingRequests: new CellGauge({
      name: 'nv_inference_pending_request_count',
      help: 'Instantaneous number of requests admitted for the model and not yet completed (queued or executing)',
      labelNames: MODEL_LABELS,
      registers,
    }),
    computeInputDurationUs: new CellDurationCounter({
      name: 'nv_inference_compute_input_duration_us',
      help: 'Cumulative compute input duration in microseconds: request body decoding into tensors and validation against the model',
      labelNames: MODEL_LABELS,
      registers,
    }),
    computeOutputDurationUs: new CellDurationCounter({
      name: 'nv_inference_compute_output_duration_us',
      help: 'Cumulative compute output duration in microseconds: output post-processing (classification) after the run',
      labelNames: MODEL_LABELS,
      registers,
    }),
    cacheHits: new CellCounter({
      name: 'nv_cache_num_hits_per_model',
      help: 'Number of requests answered from the response cache',
      labelNames: MODEL_LABELS,
      registers,
    }),
    cacheMisses: new CellCounter({
      name: 'nv_cache_num_misses_per_model',
      help: 'Number of requests not found in the response cache (run, then cached)',
      labelNames: MODEL_LABELS,
      registers,
    }),
    cacheHitDurationUs: new CellDurationCounter({
      name: 'nv_cache_hit_duration_per_model',
      help: 'Cumulative time of response cache hits in microseconds (key hashing and lookup)',
      labelNames: MODEL_LABELS,
      registers,
    }),
    cacheMissDurationUs: new CellDurationCounter({
      name: 'nv_cache_miss_duration_per_model',
      help: 'Cumulative time of response cache misses in microseconds (key hashing, lookup and insertion)',
      labelNames: MODEL_LABELS,
      registers,
    }),
    overflowTargets: new Gauge({
      name: 'onnx_mme_metrics_overflow_targets',
      help: 'Loaded targets whose per-model series are folded into the target="_overflow" series (more than MME_METRICS_MAX_TARGETS targets loaded)',
      registers,
    }),
    responseCacheBytes: new Gauge({
      name: 'onnx_mme_response_cache_bytes',
      help: 'Bytes held by the response cache (MME_RESPONSE_CACHE_BYTES is its budget)',
      registers,
    }),
    responseCacheEntries: new Gauge({
      name: 'onnx_mme_response_cache_entries',
      help: 'Answers held by the response cache',
      registers,
    }),
    responseCacheEvictions: new Counter({
      name: 'onnx_mme_response_cache_evictions_total',
      help: 'Answers removed from the response cache to make room (least recently used first)',
      registers,
    }),
    sequencesLive: new CellGauge({
      name: 'onnx_mme_sequences_live',
      help: 'Live sequences of a stateful model (sequence_batching): started and not yet ended, in a slot or waiting for one',
      labelNames: MODEL_LABELS,
      registers,
    }),
    sequenceSlotWaits: new CellCounter({
      name: 'onnx_mme_sequence_slot_waits_total',
      help: 'Sequences that found every sequence slot of their model taken and waited in the backlog',
      labelNames: MODEL_LABELS,
      registers,
    }),
    sequenceEnds: new CellCounter({
      name: 'onnx_mme_sequence_ends_total',
      help: 'Sequences ended, by reason: end (the client sent sequence_end), idle (max_sequence_idle_microseconds), unload, cancelled, slot_timeout, restart (a sequence_start on its live id ended it early)',
      labelNames: [...MODEL_LABELS, 'reason'],
      registers,
    }),
    sequenceStateBytes: new Gauge({
      name: 'onnx_mme_sequence_state_bytes',
      help: 'Bytes of implicit state (sequence_batching state) the server holds for live sequences; counted in the memory budget',
      registers,
    }),
    processThreads: new Gauge({
      name: 'onnx_mme_process_threads',
      help: "Threads of the server process now (Threads in /proc/self/status, read at each scrape): runtime workers, onnxruntime intra-op pools, Node's own; absent where /proc is not",
      registers,
      collect() {
        const threads = processThreadCount();
        if (threads !== undefined) this.set(threads);
      },
    }),
  };
  return metrics;
}
