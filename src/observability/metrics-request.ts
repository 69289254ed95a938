/**
 * @module observability/metrics-request
 * The request path's metrics, declared by area: Triton's per-model inference
 * series, the transports' request counts, the response cache and stateful
 * models' sequences. observability/metrics.ts composes them with the model
 * and store areas (metrics-models.ts) into one Metrics object; the per-model
 * ones are cell metrics whose labelNames start with MODEL_LABELS, so the cap
 * on targets and the removal of a released target's series apply to them.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import { CellCounter, CellDurationCounter, CellGauge, CellHistogram } from './metric-cells.js';

/** The labels every per-model series starts with. */
export const MODEL_LABELS = ['target', 'model', 'version'] as const;
export type ModelLabel = (typeof MODEL_LABELS)[number];

/** Where a metric is registered (each server instance, and each test, has its own registry). */
export type Registers = Registry[];

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Powers of two up to 1024 rows: max_batch_size values in practice. */
const BATCH_SIZE_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

/** Triton's per-model inference series, and the latency and batch-size histograms it lacks. */
export interface InferenceMetrics {
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
  /** Requests admitted for a model (its package leased) and not yet finished; see docs/metrics-and-logs.md. */
  readonly pendingRequests: CellGauge<ModelLabel>;
  /** Request body → typed tensors, bound and validated against the model (Triton's "compute input"). */
  readonly computeInputDurationUs: CellDurationCounter<ModelLabel>;
  /** Output post-processing after the run (classification), before encoding (Triton's "compute output"). */
  readonly computeOutputDurationUs: CellDurationCounter<ModelLabel>;
}

export function inferenceMetrics(registers: Registers): InferenceMetrics {
  return {
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
  };
}

/** Requests by transport, with bounded labels: the routes and RPC names are fixed sets. */
export interface TransportMetrics {
  readonly httpRequests: CellCounter<'route' | 'status'>;
  /** gRPC calls by RPC (the service's fixed method names) and status code name: bounded like the HTTP routes. */
  readonly grpcRequests: CellCounter<'method' | 'code'>;
}

export function transportMetrics(registers: Registers): TransportMetrics {
  return {
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
  };
}

/** The response cache (models with `response_cache { enable: true }`): Triton's per-model names, and its size. */
export interface ResponseCacheMetrics {
  /** Triton's per-model names; durations are lookup (+ insert on a miss). */
  readonly cacheHits: CellCounter<ModelLabel>;
  readonly cacheMisses: CellCounter<ModelLabel>;
  readonly cacheHitDurationUs: CellDurationCounter<ModelLabel>;
  readonly cacheMissDurationUs: CellDurationCounter<ModelLabel>;
  readonly responseCacheBytes: Gauge;
  readonly responseCacheEntries: Gauge;
  readonly responseCacheEvictions: Counter;
}

export function responseCacheMetrics(registers: Registers): ResponseCacheMetrics {
  return {
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
  };
}

/** A hot model's added instances (registry/hot-instances.ts). */
export interface InstanceMetrics {
  /** Sessions a hot model runs beyond its own, on other runtime workers (registry/hot-instances.ts). */
  readonly instancesAdded: CellGauge<ModelLabel>;
}

export function instanceMetrics(registers: Registers): InstanceMetrics {
  return {
    instancesAdded: new CellGauge({
      name: 'onnx_mme_model_instances_added',
      help: 'Sessions a hot model runs beyond its own, each on another runtime worker (MME_HOT_MODEL_MAX_INSTANCES); 0 once given back',
      labelNames: MODEL_LABELS,
      registers,
    }),
  };
}

/** Stateful models (sequence_batching). */
export interface SequenceMetrics {
  /** Sequences started and not ended, in a slot or waiting for one. */
  readonly sequencesLive: CellGauge<ModelLabel>;
  /** Sequences that found every slot of their model taken and waited in the backlog. */
  readonly sequenceSlotWaits: CellCounter<ModelLabel>;
  /** Sequences ended, by why: end (its sequence_end), idle, unload, cancelled, slot_timeout, restart (a sequence_start on its live id). */
  readonly sequenceEnds: CellCounter<ModelLabel | 'reason'>;
  /** Bytes of implicit state the server holds for live sequences (counted in the memory budget). */
  readonly sequenceStateBytes: Gauge;
}

export function sequenceMetrics(registers: Registers): SequenceMetrics {
  return {
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
  };
}
