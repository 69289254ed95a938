/**
 * @module observability/metrics
 * Every Prometheus metric the server exports, declared once. Modules receive
 * the typed `Metrics` object (never the global registry) so each server
 * instance, and each test, has its own registry. Names follow Triton's
 * `nv_inference_*` where they mean the same thing, so existing dashboards work;
 * histograms are added because counters alone cannot give percentiles.
 * The metrics the request path updates are cells (metric-cells.ts: plain
 * accumulators read at scrape time); `forModel` hands out one model
 * version's set.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { CellCounter, CellGauge, CellHistogram, type CounterCell, type GaugeCell, type HistogramCell } from './metric-cells.js';

/**
 * The cells (observability/metric-cells.ts) of one model version that the
 * request path updates: its scheduler holds the batch ones, the service looks
 * the set up once per request. Names say which metric each feeds.
 */
export interface ModelMetrics {
  readonly requestSuccess: CounterCell;
  readonly requestDurationUs: CounterCell;
  /** onnx_mme_request_duration_seconds (labelled by model only). */
  readonly requestDuration: HistogramCell;
  readonly pending: GaugeCell;
  readonly computeInputUs: CounterCell;
  readonly computeOutputUs: CounterCell;
  readonly computeInferUs: CounterCell;
  readonly inferenceCount: CounterCell;
  readonly execCount: CounterCell;
  readonly queueUs: CounterCell;
  readonly batchSize: HistogramCell;
}

export interface Metrics {
  readonly registry: Registry;
  /** The cells of `model` version `version` (made on first use, then one Map lookup). */
  forModel(model: string, version: string): ModelMetrics;
  readonly requestSuccess: CellCounter<'model' | 'version'>;
  readonly requestFailure: Counter<'model' | 'version' | 'reason'>;
  readonly inferenceCount: CellCounter<'model' | 'version'>;
  readonly execCount: CellCounter<'model' | 'version'>;
  /** Time requests spent in a model's scheduler queue before their batch started (Triton's queue duration). */
  readonly queueDurationUs: CellCounter<'model' | 'version'>;
  /** Rows per model execution: how well the dynamic batcher merges (average batch = nv_inference_count / nv_inference_exec_count). */
  readonly batchSize: CellHistogram<'model' | 'version'>;
  readonly requestDurationUs: CellCounter<'model' | 'version'>;
  readonly computeInferDurationUs: CellCounter<'model' | 'version'>;
  readonly requestDuration: CellHistogram<'model'>;
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
  readonly pendingRequests: CellGauge<'model' | 'version'>;
  /** Request body → typed tensors, bound and validated against the model (Triton's "compute input"). */
  readonly computeInputDurationUs: CellCounter<'model' | 'version'>;
  /** Output post-processing after the run (classification), before encoding (Triton's "compute output"). */
  readonly computeOutputDurationUs: CellCounter<'model' | 'version'>;
  /** Response cache (models with `response_cache { enable: true }`): Triton's per-model names; durations are lookup (+ insert on a miss). */
  readonly cacheHits: Counter<'model' | 'version'>;
  readonly cacheMisses: Counter<'model' | 'version'>;
  readonly cacheHitDurationUs: Counter<'model' | 'version'>;
  readonly cacheMissDurationUs: Counter<'model' | 'version'>;
  readonly responseCacheBytes: Gauge;
  readonly responseCacheEntries: Gauge;
  readonly responseCacheEvictions: Counter;
  /** Stateful models (sequence_batching): sequences started and not ended, in a slot or waiting for one. */
  readonly sequencesLive: Gauge<'model' | 'version'>;
  /** Sequences that found every slot of their model taken and waited in the backlog. */
  readonly sequenceSlotWaits: Counter<'model' | 'version'>;
  /** Sequences ended, by why: end (its sequence_end), idle, unload, cancelled, slot_timeout. */
  readonly sequenceEnds: Counter<'model' | 'version' | 'reason'>;
  /** Bytes of implicit state the server holds for live sequences (counted in the memory budget). */
  readonly sequenceStateBytes: Gauge;
}

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Powers of two up to 1024 rows: max_batch_size values in practice. */
const BATCH_SIZE_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
const LOAD_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export function createMetrics(options: { collectProcessMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (options.collectProcessMetrics) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  /** By model, then version: the request path looks its set up with strings it already holds, building no key. */
  const byModel = new Map<string, Map<string, ModelMetrics>>();
  const metrics: Metrics = {
    registry,
    forModel(model, version) {
      let versions = byModel.get(model);
      if (versions === undefined) byModel.set(model, (versions = new Map()));
      let cells = versions.get(version);
      if (cells === undefined) {
        const labels = { model, version };
        cells = Object.freeze({
          requestSuccess: metrics.requestSuccess.cell(labels),
          requestDurationUs: metrics.requestDurationUs.cell(labels),
          requestDuration: metrics.requestDuration.cell({ model }),
          pending: metrics.pendingRequests.cell(labels),
          computeInputUs: metrics.computeInputDurationUs.cell(labels),
          computeOutputUs: metrics.computeOutputDurationUs.cell(labels),
          computeInferUs: metrics.computeInferDurationUs.cell(labels),
          inferenceCount: metrics.inferenceCount.cell(labels),
          execCount: metrics.execCount.cell(labels),
          queueUs: metrics.queueDurationUs.cell(labels),
          batchSize: metrics.batchSize.cell(labels),
        });
        versions.set(version, cells);
      }
      return cells;
    },
    requestSuccess: new CellCounter({
      name: 'nv_inference_request_success',
      help: 'Number of successful inference requests, all batch sizes',
      labelNames: ['model', 'version'],
      registers,
    }),
    requestFailure: new Counter({
      name: 'nv_inference_request_failure',
      help: 'Number of failed inference requests, all batch sizes',
      labelNames: ['model', 'version', 'reason'],
      registers,
    }),
    inferenceCount: new CellCounter({
      name: 'nv_inference_count',
      help: 'Number of inferences performed (does not include cached requests)',
      labelNames: ['model', 'version'],
      registers,
    }),
    execCount: new CellCounter({
      name: 'nv_inference_exec_count',
      help: 'Number of model executions performed (does not include cached requests)',
      labelNames: ['model', 'version'],
      registers,
    }),
    queueDurationUs: new CellCounter({
      name: 'nv_inference_queue_duration_us',
      help: 'Cumulative inference queuing duration in microseconds (includes cached requests)',
      labelNames: ['model', 'version'],
      registers,
    }),
    batchSize: new CellHistogram({
      name: 'onnx_mme_batch_size',
      help: 'Rows per model execution formed by the dynamic batcher (one observation per execution)',
      labelNames: ['model', 'version'],
      buckets: BATCH_SIZE_BUCKETS,
      registers,
    }),
    requestDurationUs: new CellCounter({
      name: 'nv_inference_request_duration_us',
      help: 'Cumulative inference request duration in microseconds (includes cached requests)',
      labelNames: ['model', 'version'],
      registers,
    }),
    computeInferDurationUs: new CellCounter({
      name: 'nv_inference_compute_infer_duration_us',
      help: 'Cumulative compute inference duration in microseconds (does not include cached requests)',
      labelNames: ['model', 'version'],
      registers,
    }),
    requestDuration: new CellHistogram({
      name: 'onnx_mme_request_duration_seconds',
      help: 'End-to-end inference request latency in seconds, per entry model',
      labelNames: ['model'],
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
    diskCacheBytes: new Gauge({
      name: 'onnx_mme_disk_cache_bytes',
      help: 'Bytes of extracted models in the disk cache (MME_CACHE_DIR)',
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
      help: 'Memory reserved against the budget for resident and loading models (a load\'s peak while it loads, then the larger of prediction and measurement)',
      registers,
    }),
    measuredModelBytes: new Gauge({
      name: 'onnx_mme_measured_model_bytes',
      help: 'Model memory measured in the process: resident set above the idle figure taken at start-up, less the main thread\'s JavaScript heap growth; reconciled against the budget',
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
      labelNames: ['model', 'version'],
      registers,
    }),
    computeInputDurationUs: new CellCounter({
      name: 'nv_inference_compute_input_duration_us',
      help: 'Cumulative compute input duration in microseconds: request body decoding into tensors and validation against the model',
      labelNames: ['model', 'version'],
      registers,
    }),
    computeOutputDurationUs: new CellCounter({
      name: 'nv_inference_compute_output_duration_us',
      help: 'Cumulative compute output duration in microseconds: output post-processing (classification) after the run',
      labelNames: ['model', 'version'],
      registers,
    }),
    cacheHits: new Counter({
      name: 'nv_cache_num_hits_per_model',
      help: 'Number of requests answered from the response cache',
      labelNames: ['model', 'version'],
      registers,
    }),
    cacheMisses: new Counter({
      name: 'nv_cache_num_misses_per_model',
      help: 'Number of requests not found in the response cache (run, then cached)',
      labelNames: ['model', 'version'],
      registers,
    }),
    cacheHitDurationUs: new Counter({
      name: 'nv_cache_hit_duration_per_model',
      help: 'Cumulative time of response cache hits in microseconds (key hashing and lookup)',
      labelNames: ['model', 'version'],
      registers,
    }),
    cacheMissDurationUs: new Counter({
      name: 'nv_cache_miss_duration_per_model',
      help: 'Cumulative time of response cache misses in microseconds (key hashing, lookup and insertion)',
      labelNames: ['model', 'version'],
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
    sequencesLive: new Gauge({
      name: 'onnx_mme_sequences_live',
      help: 'Live sequences of a stateful model (sequence_batching): started and not yet ended, in a slot or waiting for one',
      labelNames: ['model', 'version'],
      registers,
    }),
    sequenceSlotWaits: new Counter({
      name: 'onnx_mme_sequence_slot_waits_total',
      help: 'Sequences that found every sequence slot of their model taken and waited in the backlog',
      labelNames: ['model', 'version'],
      registers,
    }),
    sequenceEnds: new Counter({
      name: 'onnx_mme_sequence_ends_total',
      help: 'Sequences ended, by reason: end (the client sent sequence_end), idle (max_sequence_idle_microseconds), unload, cancelled, slot_timeout',
      labelNames: ['model', 'version', 'reason'],
      registers,
    }),
    sequenceStateBytes: new Gauge({
      name: 'onnx_mme_sequence_state_bytes',
      help: 'Bytes of implicit state (sequence_batching state) the server holds for live sequences; counted in the memory budget',
      registers,
    }),
  };
  return metrics;
}
