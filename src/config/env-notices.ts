/**
 * @module config/env-notices
 * Nothing silently ignored: every `MME_*` / `SAGEMAKER_*` variable in the
 * environment that no setting reads gets one line at start-up. Names of
 * SageMaker's and Triton's own variables that this server knows but does
 * not use say why and what to use instead (info: SageMaker sets some of
 * them itself); any other name is a warning with the nearest known name
 * (`MME_MEMORY_BUDGET` → `MME_MEMORY_BUDGET_BYTES`). The table of honoured
 * and ignored names is in docs/configuration.md (checked by a test).
 */
import { nearestName } from '../protocol/did-you-mean.js';

export interface EnvNotice {
  readonly level: 'info' | 'warn';
  readonly name: string;
  readonly message: string;
}

/** Known SageMaker/Triton/TorchServe variables this server does not read, and why. */
export const IGNORED_ENV: Readonly<Record<string, string>> = Object.freeze({
  SAGEMAKER_PROGRAM: 'a framework container entry script; this server runs models, not user scripts',
  SAGEMAKER_SUBMIT_DIRECTORY: 'a framework container code location; this server runs models, not user scripts',
  SAGEMAKER_CONTAINER_LOG_LEVEL: 'set MME_LOG_LEVEL for this server',
  SAGEMAKER_REGION: 'the S3 client takes AWS_REGION (or its usual resolution)',
  SAGEMAKER_ENABLE_CLOUDWATCH_METRICS: 'metrics are served at GET /metrics (Prometheus)',
  SAGEMAKER_MODEL_SERVER_WORKERS: 'set MME_RUNTIME_WORKERS (threads that run sessions) for this server',
  SAGEMAKER_MODEL_SERVER_TIMEOUT:
    "queue timeouts come from each model's dynamic_batching default_queue_policy; the shutdown deadline is MME_SHUTDOWN_TIMEOUT_SECONDS",
  SAGEMAKER_TRITON_LOG_VERBOSE: 'set MME_LOG_LEVEL=debug for this server',
  SAGEMAKER_TRITON_LOG_INFO: 'set MME_LOG_LEVEL for this server',
  SAGEMAKER_TRITON_LOG_WARNING: 'set MME_LOG_LEVEL for this server',
  SAGEMAKER_TRITON_LOG_ERROR: 'set MME_LOG_LEVEL for this server',
  SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT: 'Triton-internal; this server has no buffer manager threads',
  SAGEMAKER_TRITON_THREAD_COUNT: 'set MME_RUNTIME_WORKERS / MME_INTRA_OP_THREADS for this server',
  SAGEMAKER_TRITON_PING_MODE: "/ping is always the container's liveness here (it never depends on a model)",
  SAGEMAKER_TRITON_DISABLE_MODEL_NAMESPACING: 'models of different targets are always kept apart here',
  SAGEMAKER_TRITON_ADDITIONAL_ARGS: "tritonserver command-line flags do not apply; see docs/configuration.md for this server's settings",
  SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT: 'set MME_MEMORY_BUDGET_BYTES for this server',
  SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE: 'no Python backend here, so no shared-memory arena',
  SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE: 'no Python backend here, so no shared-memory arena',
  SAGEMAKER_TRITON_TENSORFLOW_VERSION: 'ONNX models only',
  SAGEMAKER_TS_RESPONSE_TIMEOUT: 'per-model queue timeouts come from dynamic_batching default_queue_policy',
  SAGEMAKER_MAX_REQUEST_SIZE: 'set SAGEMAKER_MAX_PAYLOAD_IN_MB for this server',
});

/** One notice per MME_* / SAGEMAKER_* variable that none of `known` names, in name order. */
export function environmentNotices(env: NodeJS.ProcessEnv, known: readonly string[]): EnvNotice[] {
  const notices: EnvNotice[] = [];
  for (const name of Object.keys(env).sort()) {
    if (!/^(MME|SAGEMAKER)_/.test(name) || known.includes(name) || env[name] === undefined) continue;
    const why = IGNORED_ENV[name];
    if (why !== undefined) {
      notices.push({ level: 'info', name, message: `${name} is ignored by this server: ${why}` });
      continue;
    }
    const near = nearestName(name, [...known, ...Object.keys(IGNORED_ENV)]);
    notices.push({
      level: 'warn',
      name,
      message: `${name} is not a setting of this server and is ignored${near === undefined ? '' : `; did you mean ${near}?`}`,
    });
  }
  return notices;
}
