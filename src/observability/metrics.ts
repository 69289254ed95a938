/**
 * @module observability/metrics
 * Every Prometheus metric the server exports, declared once. Modules receive
 * the typed `Metrics` object (never the global registry) so each server
 * instance, and each test, has its own registry. Names follow Triton's
 * `nv_inference_*` where they mean the same thing, so existing dashboards work;
 * histograms are added because counters alone cannot give percentiles.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface Metrics {
  readonly registry: Registry;
  readonly requestSuccess: Counter<'model' | 'version'>;
  readonly requestFailure: Counter<'model' | 'version' | 'reason'>;
  readonly inferenceCount: Counter<'model' | 'version'>;
  readonly execCount: Counter<'model' | 'version'>;
  readonly requestDurationUs: Counter<'model' | 'version'>;
  readonly computeInferDurationUs: Counter<'model' | 'version'>;
  readonly requestDuration: Histogram<'model'>;
  readonly httpRequests: Counter<'route' | 'status'>;
  readonly modelLoadDuration: Histogram<'outcome'>;
  readonly modelUnloadDuration: Histogram;
  readonly loadedModels: Gauge;
}

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const LOAD_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export function createMetrics(options: { collectProcessMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (options.collectProcessMetrics) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
    requestSuccess: new Counter({
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
    inferenceCount: new Counter({
      name: 'nv_inference_count',
      help: 'Number of inferences performed (does not include cached requests)',
      labelNames: ['model', 'version'],
      registers,
    }),
    execCount: new Counter({
      name: 'nv_inference_exec_count',
      help: 'Number of model executions performed (does not include cached requests)',
      labelNames: ['model', 'version'],
      registers,
    }),
    requestDurationUs: new Counter({
      name: 'nv_inference_request_duration_us',
      help: 'Cumulative inference request duration in microseconds (includes cached requests)',
      labelNames: ['model', 'version'],
      registers,
    }),
    computeInferDurationUs: new Counter({
      name: 'nv_inference_compute_infer_duration_us',
      help: 'Cumulative compute inference duration in microseconds (does not include cached requests)',
      labelNames: ['model', 'version'],
      registers,
    }),
    requestDuration: new Histogram({
      name: 'onnx_mme_request_duration_seconds',
      help: 'End-to-end inference request latency in seconds, per entry model',
      labelNames: ['model'],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    httpRequests: new Counter({
      name: 'onnx_mme_http_requests_total',
      help: 'HTTP requests by route and status code',
      labelNames: ['route', 'status'],
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
  };
}
