/**
 * @module observability/metrics-models
 * The metrics of models as things held, declared by area: their loads and
 * unloads, the memory budget they live in, the model source and the disk
 * cache they come through, and the process itself. None has per-model
 * labels; observability/metrics.ts composes them with the request path's
 * (metrics-request.ts) into one Metrics object.
 */
import { readFileSync } from 'node:fs';
import { Counter, Gauge, Histogram } from 'prom-client';
import { CellCounter } from './metric-cells.js';
import type { Registers } from './metrics-request.js';

const LOAD_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** Loads, unloads and waits for them (SageMaker's ModelLoadingTime, ModelUnloadingTime, ModelLoadingWaitTime, LoadedModelCount). */
export interface ModelLifecycleMetrics {
  readonly modelLoadDuration: Histogram<'outcome'>;
  readonly modelUnloadDuration: Histogram;
  readonly loadedModels: Gauge;
  /** How long requests waited for their model to be loaded (SageMaker ModelLoadingWaitTime). */
  readonly modelLoadingWait: Histogram;
}

export function modelLifecycleMetrics(registers: Registers): ModelLifecycleMetrics {
  return {
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
    modelLoadingWait: new Histogram({
      name: 'onnx_mme_model_loading_wait_seconds',
      help: 'Time requests waited for their model to be loaded (SageMaker ModelLoadingWaitTime); requests that found it in memory are not counted',
      buckets: LOAD_BUCKETS,
      registers,
    }),
  };
}

/** The memory budget resident models live in (registry/memory-manager.ts). */
export interface ModelMemoryMetrics {
  /** Reserved/measured bytes of resident model packages (the memory budget's use). */
  readonly loadedModelBytes: Gauge;
  /** Model memory the process really holds: resident set above the idle figure, less the main thread's JS heap growth. */
  readonly measuredModelBytes: Gauge;
  readonly memoryBudgetBytes: Gauge;
  readonly modelEvictions: Counter;
}

export function modelMemoryMetrics(registers: Registers): ModelMemoryMetrics {
  return {
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
  };
}

/** The model source and the disk cache models come through (store/, registry lookups). */
export interface StoreMetrics {
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
}

export function storeMetrics(registers: Registers): StoreMetrics {
  return {
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
  };
}

/** The process and the metrics themselves. */
export interface ProcessMetrics {
  /** Live targets folded into the overflow series now (0 while under the cap). */
  readonly overflowTargets: Gauge;
  /** Threads of the process now (/proc/self/status), read at each scrape. */
  readonly processThreads: Gauge;
}

export function processMetrics(registers: Registers): ProcessMetrics {
  return {
    overflowTargets: new Gauge({
      name: 'onnx_mme_metrics_overflow_targets',
      help: 'Loaded targets whose per-model series are folded into the target="_overflow" series (more than MME_METRICS_MAX_TARGETS targets loaded)',
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
