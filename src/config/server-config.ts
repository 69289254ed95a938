/**
 * @module config/server-config
 * The single reader of `process.env`. Every setting is declared once in
 * SETTINGS (env names, default, description); `loadServerConfig` parses them
 * into a typed, deep-frozen ServerConfig and reports every bad value at once.
 * The env-var table in docs/configuration.md is checked against SETTINGS by a test.
 */
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ServingError } from '../errors.js';
import { DEFAULT_MAX_ENTRIES, DEFAULT_MAX_RATIO } from './archive-limits.js';
import { DEFAULT_MAX_BATCH_SIZE, MAX_BATCH_SIZE_FIELD } from './auto-complete.js';
import { DEFAULT_CONFIG_MAX_BYTES } from './model-config-parse.js';
import { environmentNotices, type EnvNotice } from './env-notices.js';
import { parseBooleanSetting } from './boolean-setting.js';
import { ORT_TELEMETRY_ENV, parseOrtTelemetry } from './ort-telemetry.js';
import { METRICS_GROUP, parseRestrictions, TRITON_API_GROUPS, type Restriction } from './restricted-api.js';
import { isS3Uri, parseS3Uri } from './s3-uri.js';
import { didYouMean } from '../protocol/did-you-mean.js';
import { parseByteSize } from './byte-size.js';

/** Inference requests one event-loop turn starts (service/event-loop-turns.ts says why). */
export const TURN_REQUESTS = 16;
/** MME_SHARED_TURN_REQUESTS's default: starts per turn while several models are in use (service/event-loop-turns.ts has the measurement). */
export const DEFAULT_SHARED_TURN_REQUESTS = 4;
/** MME_RUNTIME_WORKER_NICE's default: the runtime workers below the main thread (the setting's description has the measurement). */
export const DEFAULT_RUNTIME_WORKER_NICE = 10;

export type ProviderName = 'tensorrt' | 'cuda' | 'cpu';
export const PROVIDER_NAMES: readonly ProviderName[] = ['tensorrt', 'cuda', 'cpu'];

export type ModelControlMode = 'none' | 'explicit';

/** MME_MODEL_CONTROL, and why it is what it is (the start-up log says both). */
export interface ModelControl {
  readonly mode: ModelControlMode;
  readonly reason: string;
}

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'silent';

export type LogFormat = 'json' | 'pretty';
export const LOG_FORMATS: readonly LogFormat[] = ['json', 'pretty'];

/**
 * Names people reach for to set the port (Heroku's and Cloud Run's `PORT`, this server's own prefix).
 * The port is SAGEMAKER_BIND_TO_PORT alone: one of these with another value stops start-up naming it.
 */
/** MME_MODEL_SOURCE's default: where SageMaker puts a single-model endpoint's ModelDataUrl. */
export const DEFAULT_MODEL_SOURCE = '/opt/ml/model';

export const PORT_STAND_INS: readonly string[] = ['PORT', 'MME_PORT'];

export interface ServerConfig {
  readonly host: string;
  readonly port: number;
  readonly multiModel: boolean;
  readonly bodyLimitBytes: number;
  /** `s3://bucket/prefix/`, or a local directory (file:// URLs are converted). */
  readonly modelSource: string;
  /** AWS region for S3 (else the SDK's own resolution: profile, instance metadata). */
  readonly awsRegion: string | undefined;
  /** S3-compatible endpoint; turns on path-style addressing. */
  readonly s3Endpoint: string | undefined;
  /** MME_S3_MIN_BYTES_PER_SECOND: a download slower than this over a window fails (and is retried, then 503); 0 = no check. */
  readonly s3MinBytesPerSecond: number;
  /** MME_S3_PROGRESS_WINDOW_SECONDS: the window the minimum download rate is averaged over. */
  readonly s3ProgressWindowMs: number;
  readonly cacheDir: string;
  /** Disk cache byte budget; undefined = 80% of the cache volume's free space (plus what the cache already holds) at startup. */
  readonly cacheMaxBytes: number | undefined;
  /** How long a loaded target is trusted before its source object is checked again; 0 = never. */
  readonly revalidateMs: number;
  /** MME_MISSING_TARGET_TTL_SECONDS in ms: how long a target the source does not hold is answered 404 from memory; 0 = never remembered. */
  readonly missingTargetTtlMs: number;
  /** MME_MISSING_TARGET_LOOKUPS_PER_SECOND: source lookups that find nothing, per second (a burst of twice that); 0 = unbounded. */
  readonly missingTargetLookupsPerSecond: number;
  /** MME_PROGRESS_LOG_SECONDS in ms: a model load (download, sessions, warm-up) logs its progress at this interval; 0 = never. */
  readonly progressLogMs: number;
  /** MME_MAX_RESPONSE_BYTES: the largest answer body; an inference answer whose encoding could exceed it is refused before it is encoded. */
  readonly maxResponseBytes: number;
  /** Targets fetched and loaded in the background at startup. */
  readonly preload: readonly string[];
  /** Memory budget for resident models; undefined = a share of the container's (or GPU's) memory. */
  readonly memoryBudgetBytes: number | undefined;
  /** Most model packages resident at once; undefined = no count cap. */
  readonly maxLoadedModels: number | undefined;
  /** How long a load waits for memory held by models in use before 507. */
  readonly memoryWaitMs: number;
  readonly defaultModel: string | undefined;
  /** undefined = automatic (CUDA when its provider library and a GPU are present, else CPU). */
  readonly executionProviders: readonly ProviderName[] | undefined;
  /** MME_ORT_TELEMETRY: onnxruntime's own telemetry left on (config/ort-env.ts applies it before onnxruntime loads). */
  readonly ortTelemetry: boolean;
  readonly logLevel: LogLevel;
  /** MME_LOG_FORMAT: `json` (pino's lines, for collectors) or `pretty` (one readable line per entry, for a terminal). */
  readonly logFormat: LogFormat;
  readonly archiveMaxBytes: number;
  readonly archiveMaxEntries: number;
  /** MME_MODEL_URL_ROOTS: directories a POST /models url (a ModelMesh modelPath) must lie in, on its real path; /opt/ml/models under SageMaker; undefined only where model control is `none`. */
  readonly modelUrlRoots: readonly string[] | undefined;
  /** MME_MODEL_CONTROL: whether the load/unload APIs answer at all (service/access-policy.ts). */
  readonly modelControl: ModelControl;
  /** MME_HTTP_RESTRICTED_API: API groups answered only to callers sending a header (config/restricted-api.ts). */
  readonly httpRestrictedApi: readonly Restriction[];
  /** MME_GRPC_RESTRICTED_PROTOCOL: the same for gRPC, from call metadata. */
  readonly grpcRestrictedProtocol: readonly Restriction[];
  /** MME_ARCHIVE_MAX_RATIO: decompressed:compressed bytes of one archive; 0 = unchecked. */
  readonly archiveMaxRatio: number;
  /** MME_CONFIG_MAX_BYTES: a larger config.pbtxt is refused (INVALID_MODEL) before it is read. */
  readonly configMaxBytes: number;
  readonly shutdownTimeoutMs: number;
  /** After SIGTERM: not ready but still serving for this long, inside shutdownTimeoutMs (server.ts). */
  readonly drainMs: number;
  readonly maxInflightRequests: number;
  /** MME_HOLD_REFUSED_CONNECTIONS: a keep-alive connection refused for overload is not read again until a place frees or Retry-After passes. */
  readonly holdRefusedConnections: boolean;
  /** MME_SHARED_TURN_REQUESTS: inference requests an event-loop turn starts while several models are in use (service/event-loop-turns.ts). */
  readonly sharedTurnRequests: number;
  /** MME_MAX_INFLIGHT_BYTES: request bodies plus answers held at once; undefined = 10% of the container's memory, at least 4 bodies of the largest size. */
  readonly maxInflightBytes: number | undefined;
  /** MME_MAX_CONNECTIONS: open client connections; beyond it new ones are closed at once. */
  readonly maxConnections: number;
  /** MME_HEADERS_TIMEOUT_SECONDS: a request's headers must arrive within this (slow-header clients). */
  readonly headersTimeoutMs: number;
  /** MME_REQUEST_TIMEOUT_SECONDS: a whole request (headers and body) must arrive within this. */
  readonly requestTimeoutMs: number;
  /** MME_CPU_COUNT: the CPUs the server sizes its threads and load concurrency for; default os.availableParallelism(). */
  readonly cpuCount: number;
  readonly runtimeWorkers: number;
  /** MME_RUNTIME_WORKER_NICE: the runtime workers' nice value (Linux), above the main thread's so that it goes first. */
  readonly runtimeWorkerNice: number;
  /** MME_HOT_MODEL_MAX_INSTANCES: instances a hot model placed in the workers may grow to (registry/hot-instances.ts); 1 = never grows. */
  readonly hotModelMaxInstances: number;
  readonly intraOpThreads: number | undefined;
  /** MME_LOAD_CONCURRENCY: model loads (session create, warm-up, placement) in progress at once; more wait their turn. */
  readonly loadConcurrency: number;
  /** MME_MAIN_THREAD_COPIES: most main-thread session copies (beside a worker's) held at once, going to the models that run most often (runtime/main-thread-copies.ts). */
  readonly mainThreadCopies: number;
  /** MME_MAIN_THREAD_MAX_RUN_US: CPU models whose largest batch runs at most this long (µs) run on the main thread; 0 = none unless a config asks. */
  readonly mainThreadMaxRunUs: number;
  /** MME_MAIN_THREAD_ONLY_MAX_RUN_US: of those, models whose largest batch runs at most this long (µs) keep no worker copy; 0 = none. */
  readonly mainThreadOnlyMaxRunUs: number;
  /** Byte budget of the response cache (models with `response_cache { enable: true }`); 0 = no cache. */
  readonly responseCacheBytes: number;
  /** MME_DYNAMIC_BATCHING: false = every request runs alone (config dynamic_batching blocks included). */
  readonly dynamicBatching: boolean;
  /** MME_ALLOW_JS_BACKEND: false refuses packages with a `backend: "js"` step (their code runs in a sandboxed process of its own). */
  readonly allowJsBackend: boolean;
  /** MME_JS_STEP_USER: the uid and gid a js step's process runs as when the server runs as root. */
  readonly jsStepUser: { readonly uid: number; readonly gid: number };
  /** MME_JS_STEP_TIMEOUT_SECONDS: a js step's deadline per call (initialize, execute, finalize) where its config sets no `js_timeout_seconds`. */
  readonly jsStepTimeoutSeconds: number;
  /** Queue delay for batching models without a dynamic_batching block, in microseconds. */
  readonly batchMaxDelayUs: number;
  /** Most rows per batch for batching models without a dynamic_batching block; undefined = the model's max_batch_size. */
  readonly batchMaxSize: number | undefined;
  /** MME_DEFAULT_MAX_BATCH_SIZE: the max_batch_size auto-complete gives a model that can batch and whose config sets none (Triton's default-max-batch-size). */
  readonly defaultMaxBatchSize: number;
  /** Waiting requests per model (and priority level) where config.pbtxt sets no max_queue_size. */
  readonly maxQueueSize: number;
  /** MME_MAX_SEQUENCES: live sequences of stateful models (sequence_batching) the server holds at once; a start beyond it gets 429. */
  readonly maxSequences: number;
  /** Inclusive range SageMaker allows for extra ports (SAGEMAKER_SAFE_PORT_RANGE). */
  readonly safePortRange: { readonly min: number; readonly max: number } | undefined;
  /** Separate /metrics listener; undefined = only on the main port; 0 = any free port (tests). */
  readonly metricsPort: number | undefined;
  /** Loaded targets with per-model series of their own; the rest share the `_overflow` series. */
  readonly metricsMaxTargets: number;
  /** MME_ACCESS_LOG: the `request` line for every request at info; false (the default) = only errors and slow requests, the rest at debug. */
  readonly accessLog: boolean;
  /** MME_SLOW_REQUEST_MS: a request that took at least this long gets its `request` line at warn (`slow: true`), whatever MME_ACCESS_LOG says. */
  readonly slowRequestMs: number;
  /** Response content type when Accept is missing or * / *. */
  readonly defaultAccept: DefaultAccept;
  /** MME_GRPC_PORT: the KServe v2 gRPC listener; undefined = none (the default); 0 = any free port (tests). */
  readonly grpcPort: number | undefined;
  /** MME_GRPC_TLS_CERT / MME_GRPC_TLS_KEY: PEM files, both or neither (undefined = plaintext gRPC). */
  readonly grpcTlsCertFile: string | undefined;
  readonly grpcTlsKeyFile: string | undefined;
  /** MME_GRPC_TLS_CA: PEM CAs that must have signed a client's certificate (mutual TLS). */
  readonly grpcTlsCaFile: string | undefined;
  /** MME_MODEL_MESH: also serve ModelMesh's runtime SPI (mmesh.ModelRuntime) on the gRPC port. */
  readonly modelMesh: boolean;
  /**
   * A platform loads the models through the load API: a SageMaker multi-model endpoint
   * (SAGEMAKER_MULTI_MODEL=true, POST /models) or ModelMesh (MME_MODEL_MESH=true, loadModel). A local
   * source that does not exist (the default /opt/ml/model there) is then logged and start-up goes on;
   * otherwise such a source stops start-up (server.ts).
   */
  readonly modelSourceOptional: boolean;
  /** One per MME_* / SAGEMAKER_* variable no setting reads (config/env-notices.ts); logged once at start-up. */
  readonly environmentNotices: readonly EnvNotice[];
}

export type DefaultAccept = 'application/json' | 'text/csv' | 'application/x-npy';
export const DEFAULT_ACCEPT_TYPES: readonly DefaultAccept[] = ['application/json', 'text/csv', 'application/x-npy'];

/** `"23000-23999"` → {min, max}; throws on anything else. */
function portRange(name: string, raw: string): { min: number; max: number } {
  const m = /^\s*(\d{1,5})\s*-\s*(\d{1,5})\s*$/.exec(raw);
  const min = m ? Number(m[1]) : Number.NaN;
  const max = m ? Number(m[2]) : Number.NaN;
  if (!(min >= 1 && max <= 65535 && min <= max)) throw new Error(`${name} must be an inclusive port range 'MIN-MAX' within 1-65535, got '${raw}'`);
  return { min, max };
}

/** SAGEMAKER_SAFE_PORT_RANGE for the extra ports' checks; a malformed one is reported by its own setting. */
function safeRange(env: NodeJS.ProcessEnv): { min: number; max: number } | undefined {
  const raw = env['SAGEMAKER_SAFE_PORT_RANGE'];
  try {
    return raw === undefined || raw.trim() === '' ? undefined : portRange('SAGEMAKER_SAFE_PORT_RANGE', raw);
  } catch {
    return undefined;
  }
}

interface Setting<K extends keyof ServerConfig> {
  readonly key: K;
  /** First name wins; later names are accepted aliases (e.g. SageMaker's or Triton's). */
  readonly env: readonly string[];
  readonly defaultText: string;
  readonly description: string;
  parse(raw: string | undefined, env: NodeJS.ProcessEnv): ServerConfig[K];
}

type AnySetting = { [K in keyof ServerConfig]: Setting<K> }[keyof ServerConfig];

const MIB = 1024 * 1024;
/** Default MME_DRAIN_SECONDS: a balancer checking /ping every second marks the instance down after 3 failures (+ a check timeout) well within it. */
const DEFAULT_DRAIN_MS = 5_000;

/** MME_JS_STEP_USER: `uid[:gid]`, numbers; 65534:65534 (nobody:nogroup) when unset. */
function parseStepUser(raw: string | undefined): { uid: number; gid: number } {
  if (raw === undefined || raw.trim() === '') return Object.freeze({ uid: 65534, gid: 65534 });
  const m = /^\s*(\d+)(?::(\d+))?\s*$/.exec(raw);
  const uid = m ? Number(m[1]) : Number.NaN;
  const gid = m ? Number(m[2] ?? m[1]) : Number.NaN;
  if (!(uid >= 1 && uid <= 4294967294 && gid >= 1 && gid <= 4294967294)) {
    throw new Error(`MME_JS_STEP_USER must be 'uid:gid' or 'uid', numbers from 1 (not root), got '${raw}'`);
  }
  return Object.freeze({ uid, gid });
}

function int(name: string, raw: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  // Number('') is 0: an empty variable must not silently mean port 0 or a 0 s timeout.
  const n = /^\s*-?\d+\s*$/.test(raw) ? Number(raw.trim()) : Number.NaN;
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new Error(`${name} must be an integer in [${min}, ${max}], got '${raw}'`);
  }
  return n;
}

/** SAGEMAKER_MULTI_MODEL=true: SageMaker's limits apply (a malformed value is reported by its own setting). */
function onSageMakerMme(env: NodeJS.ProcessEnv): boolean {
  const raw = env['SAGEMAKER_MULTI_MODEL'];
  try {
    return raw !== undefined && parseBooleanSetting('SAGEMAKER_MULTI_MODEL', raw);
  } catch {
    return false;
  }
}

/** MME_CPU_COUNT, else what Node sees (os.availableParallelism): every core-derived default starts here. */
function cpuCountOf(env: NodeJS.ProcessEnv): number {
  const raw = env['MME_CPU_COUNT'];
  return raw === undefined || raw.trim() === '' ? os.availableParallelism() : int('MME_CPU_COUNT', raw, 1, 4096);
}

/** MME_RUNTIME_WORKERS's default: one worker per CPU, at most MAX_DEFAULT_WORKERS. */
const MAX_DEFAULT_WORKERS = 16;

function defaultWorkers(env: NodeJS.ProcessEnv): number {
  return Math.max(1, Math.min(MAX_DEFAULT_WORKERS, cpuCountOf(env)));
}

function localPath(name: string, raw: string): string {
  const v = raw.trim();
  if (v.startsWith('file:')) {
    try {
      return fileURLToPath(v);
    } catch (err) {
      throw new Error(`${name}: '${raw}' is not a usable file URL (${(err as Error).message}); use file:///absolute/path or a plain path`);
    }
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(v)) {
    throw new Error(`${name}: unsupported scheme in '${raw}' (use a local directory or file:// URL)`);
  }
  return path.resolve(v);
}

/** Where SageMaker extracts the models it loads on a multi-model endpoint (its POST /models urls lie under it). */
export const SAGEMAKER_MODEL_DIR = '/opt/ml/models';

function modelMeshOn(env: NodeJS.ProcessEnv): boolean {
  const raw = env['MME_MODEL_MESH'];
  try {
    return raw !== undefined && parseBooleanSetting('MME_MODEL_MESH', raw);
  } catch {
    return false;
  }
}

/** MME_MODEL_CONTROL, else `explicit` where a platform drives the load API (SageMaker MME, ModelMesh), else `none`. */
function modelControlOf(env: NodeJS.ProcessEnv): ModelControl {
  const raw = env['MME_MODEL_CONTROL'];
  if (raw !== undefined && raw.trim() !== '') {
    const v = raw.trim().toLowerCase();
    if (v !== 'none' && v !== 'explicit') {
      throw new Error(`MME_MODEL_CONTROL must be 'none' or 'explicit' (Triton's 'poll' is not supported), got '${raw.slice(0, 60)}'`);
    }
    return Object.freeze({ mode: v, reason: `MME_MODEL_CONTROL=${v}` });
  }
  if (onSageMakerMme(env)) return Object.freeze({ mode: 'explicit', reason: 'SAGEMAKER_MULTI_MODEL=true (SageMaker drives POST /models)' });
  if (modelMeshOn(env)) return Object.freeze({ mode: 'explicit', reason: 'MME_MODEL_MESH=true (model-mesh drives loadModel)' });
  return Object.freeze({ mode: 'none', reason: 'the default off SageMaker and ModelMesh' });
}

export const SETTINGS: readonly AnySetting[] = [
  {
    key: 'host',
    env: ['MME_HOST'],
    defaultText: '0.0.0.0',
    description: 'Address to listen on.',
    parse: (raw) => raw?.trim() || '0.0.0.0',
  },
  {
    key: 'port',
    env: ['SAGEMAKER_BIND_TO_PORT'],
    defaultText: '8080',
    description: 'Port for every route (SageMaker sets it in pipelines and multi-container endpoints).',
    parse: (raw, env) => {
      const port = raw === undefined ? 8080 : int('SAGEMAKER_BIND_TO_PORT', raw, 0, 65535);
      // PORT=8080 set by a platform agrees and changes nothing; any other value would be silently ignored.
      for (const name of PORT_STAND_INS) {
        const other = env[name]?.trim();
        if (other === undefined || other === '' || (/^\d+$/.test(other) && Number(other) === port)) continue;
        throw new Error(
          `${name}=${other} is not read by this server: the port is SAGEMAKER_BIND_TO_PORT (${raw === undefined ? 'unset, so 8080' : port}); set SAGEMAKER_BIND_TO_PORT=${other} instead`,
        );
      }
      return port;
    },
  },
  {
    key: 'multiModel',
    env: ['SAGEMAKER_MULTI_MODEL'],
    defaultText: 'false',
    description:
      'Set by SageMaker on multi-model endpoints: `true` makes `MME_MODEL_CONTROL` default to `explicit` (SageMaker drives `POST /models` and `DELETE /models/{m}`) and `MME_MODEL_URL_ROOTS` to `/opt/ml/models`.',
    parse: (raw) => (raw === undefined ? false : parseBooleanSetting('SAGEMAKER_MULTI_MODEL', raw)),
  },
  {
    key: 'bodyLimitBytes',
    env: ['SAGEMAKER_MAX_PAYLOAD_IN_MB'],
    defaultText: '6',
    description: 'Largest request body in MiB; larger bodies get 413.',
    parse: (raw) => (raw === undefined ? 6 * MIB : int('SAGEMAKER_MAX_PAYLOAD_IN_MB', raw, 1, 4096) * MIB),
  },
  {
    key: 'modelSource',
    env: ['MME_MODEL_SOURCE'],
    defaultText: '/opt/ml/model',
    description:
      'Where targets are resolved: `s3://bucket/prefix/`, or a local directory or file:// URL holding .tar.gz archives and/or model directories. A local directory that does not exist or cannot be read stops startup (exit 2), except where a platform loads the models (`SAGEMAKER_MULTI_MODEL=true`: `POST /models`; `MME_MODEL_MESH=true`: `loadModel`); an S3 prefix that cannot be listed gets a warning at startup.',
    parse: (raw) => {
      const v = (raw ?? DEFAULT_MODEL_SOURCE).trim();
      if (!isS3Uri(v)) return localPath('MME_MODEL_SOURCE', v);
      try {
        return parseS3Uri(v).uri;
      } catch (err) {
        throw new Error(`MME_MODEL_SOURCE: ${(err as Error).message}`);
      }
    },
  },
  {
    key: 'awsRegion',
    env: ['AWS_REGION', 'AWS_DEFAULT_REGION'],
    defaultText: '(SDK default; us-east-1 with an endpoint)',
    description: 'Region of the S3 bucket. With AWS_ENDPOINT_URL_S3 and no region, us-east-1.',
    parse: (raw) => (raw?.trim() ? raw.trim() : undefined),
  },
  {
    key: 's3Endpoint',
    env: ['AWS_ENDPOINT_URL_S3', 'AWS_ENDPOINT_URL'],
    defaultText: '(AWS)',
    description: 'S3-compatible endpoint URL (MinIO, LocalStack, s3rver); enables path-style addressing. Credentials come from the standard AWS chain.',
    parse: (raw) => {
      if (!raw?.trim()) return undefined;
      const v = raw.trim();
      if (!/^https?:\/\/[^\s]+$/i.test(v)) throw new Error(`AWS_ENDPOINT_URL_S3 must be an http(s) URL, got '${raw}'`);
      return v;
    },
  },
  {
    key: 's3MinBytesPerSecond',
    env: ['MME_S3_MIN_BYTES_PER_SECOND'],
    defaultText: '16384',
    description:
      'Slowest S3 download not treated as stalled: a body that delivers less than this per second over MME_S3_PROGRESS_WINDOW_SECONDS is dropped and retried, then the request gets 503. 0 disables the check (the 60 s idle timeout still applies).',
    parse: (raw) => (raw === undefined ? 16 * 1024 : parseByteSize('MME_S3_MIN_BYTES_PER_SECOND', raw, 0)),
  },
  {
    key: 's3ProgressWindowMs',
    env: ['MME_S3_PROGRESS_WINDOW_SECONDS'],
    defaultText: '20',
    description: 'Window over which MME_S3_MIN_BYTES_PER_SECOND is averaged.',
    parse: (raw) => (raw === undefined ? 20_000 : int('MME_S3_PROGRESS_WINDOW_SECONDS', raw, 1, 3600) * 1000),
  },
  {
    key: 'cacheDir',
    env: ['MME_CACHE_DIR'],
    defaultText: '$TMPDIR/onnx-mme-cache (os.tmpdir())',
    description: 'Writable directory where archives are extracted (never /opt/ml/model, which is read-only).',
    parse: (raw) => localPath('MME_CACHE_DIR', raw ?? path.join(os.tmpdir(), 'onnx-mme-cache')),
  },
  {
    key: 'cacheMaxBytes',
    env: ['MME_CACHE_MAX_BYTES'],
    defaultText: '80% of the cache volume (free space + what the cache holds) at startup',
    description:
      'Byte budget of the disk cache of extracted models, counted in allocated blocks as du counts (every file and directory costs at least one block). When a new model needs room, least recently used models that are not loaded in memory are removed; a model that cannot fit gets 507.',
    parse: (raw) => (raw === undefined || raw.trim() === '' ? undefined : parseByteSize('MME_CACHE_MAX_BYTES', raw, 1)),
  },
  {
    key: 'revalidateMs',
    env: ['MME_REVALIDATE_SECONDS'],
    defaultText: '60',
    description:
      "After this many seconds a loaded target's source object is checked again (one HeadObject, or a stat locally) on its next request; a changed object is reloaded, a deleted one becomes unknown (404). 0 = never. Fractions allowed.",
    parse: (raw) => {
      if (raw === undefined) return 60_000;
      const n = /^\s*\d+(\.\d+)?\s*$/.test(raw) ? Number(raw.trim()) : Number.NaN;
      if (!Number.isFinite(n) || n < 0 || n > 31_536_000) throw new Error(`MME_REVALIDATE_SECONDS must be a number of seconds >= 0, got '${raw}'`);
      return Math.round(n * 1000);
    },
  },
  {
    key: 'missingTargetTtlMs',
    env: ['MME_MISSING_TARGET_TTL_SECONDS'],
    defaultText: '5',
    description:
      'How long a target the model source does not hold is answered 404 from memory, without asking the source again (at most 4096 remembered); once it ends, the next request asks the source, so an object uploaded meanwhile is found. 0 = ask on every request. Fractions allowed.',
    parse: (raw) => {
      if (raw === undefined) return 5_000;
      const n = /^\s*\d+(\.\d+)?\s*$/.test(raw) ? Number(raw.trim()) : Number.NaN;
      if (!Number.isFinite(n) || n > 3600) throw new Error(`MME_MISSING_TARGET_TTL_SECONDS must be a number of seconds from 0 to 3600, got '${raw}'`);
      return Math.round(n * 1000);
    },
  },
  {
    key: 'missingTargetLookupsPerSecond',
    env: ['MME_MISSING_TARGET_LOOKUPS_PER_SECOND'],
    defaultText: '20',
    description:
      'Source lookups that find nothing, per second on average (a burst of twice that): once spent, a request for a target the server does not know gets 429 with Retry-After until the bucket refills. Lookups that find their object cost nothing. 0 = no bound.',
    parse: (raw) => (raw === undefined ? 20 : int('MME_MISSING_TARGET_LOOKUPS_PER_SECOND', raw, 0, 100_000)),
  },
  {
    key: 'progressLogMs',
    env: ['MME_PROGRESS_LOG_SECONDS'],
    defaultText: '5',
    description:
      'A model load still running after this many seconds logs `model load in progress` (phase; for a download its bytes, percent, rate and ETA), again at every interval; the repository index shows the same beside LOADING. 0 = no progress lines. Fractions allowed.',
    parse: (raw) => {
      if (raw === undefined) return 5_000;
      const n = /^\s*\d+(\.\d+)?\s*$/.test(raw) ? Number(raw.trim()) : Number.NaN;
      if (!Number.isFinite(n) || n > 3600) throw new Error(`MME_PROGRESS_LOG_SECONDS must be a number of seconds from 0 to 3600, got '${raw}'`);
      return Math.round(n * 1000);
    },
  },
  {
    key: 'maxResponseBytes',
    env: ['MME_MAX_RESPONSE_BYTES'],
    defaultText: "6 MiB (SageMaker's real-time response limit) with SAGEMAKER_MULTI_MODEL=true; else 256 MiB",
    description:
      'Largest inference answer in bytes. The bound of the encoding the client asked for (JSON, CSV, TF Serving: a worst case per element by datatype; binary, .npy and gRPC: exact) is checked before anything is encoded, and an answer that could exceed it gets 400 RESPONSE_TOO_LARGE naming this setting.',
    parse: (raw, env) => {
      if (raw !== undefined && raw.trim() !== '') return parseByteSize('MME_MAX_RESPONSE_BYTES', raw, 1024);
      return onSageMakerMme(env) ? 6 * MIB : 256 * MIB;
    },
  },
  {
    key: 'memoryBudgetBytes',
    env: ['MME_MEMORY_BUDGET_BYTES'],
    defaultText: '70% of the container memory limit (cgroups) or of RAM; 80% of GPU memory when sessions run on CUDA',
    description:
      'Bytes resident models may use. Each load reserves its predicted size (its files), corrected up by the measured footprint after load and warm-up; idle models are evicted least recently used first to make room; 507 only when a model cannot fit.',
    parse: (raw) => (raw === undefined || raw.trim() === '' ? undefined : parseByteSize('MME_MEMORY_BUDGET_BYTES', raw, 1)),
  },
  {
    key: 'maxLoadedModels',
    env: ['MME_MAX_LOADED_MODELS'],
    defaultText: '(no cap)',
    description: 'Most model packages resident at once (an ensemble and its steps count as one); beyond it the least recently used idle one is evicted.',
    parse: (raw) => (raw === undefined || raw.trim() === '' ? undefined : int('MME_MAX_LOADED_MODELS', raw, 1)),
  },
  {
    key: 'memoryWaitMs',
    env: ['MME_MEMORY_WAIT_SECONDS'],
    defaultText: '30',
    description: 'How long a load waits for memory held by models with requests in flight (they are never evicted mid-request) before answering 507.',
    parse: (raw) => (raw === undefined ? 30_000 : int('MME_MEMORY_WAIT_SECONDS', raw, 0, 3600) * 1000),
  },
  {
    key: 'preload',
    env: ['MME_PRELOAD'],
    defaultText: '(none)',
    description: 'Comma-separated targets fetched and loaded at startup, in the background (/ping answers at once).',
    parse: (raw) => [
      ...new Set(
        (raw ?? '')
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
      ),
    ],
  },
  {
    key: 'defaultModel',
    env: ['MME_DEFAULT_MODEL', 'SAGEMAKER_TRITON_DEFAULT_MODEL_NAME'],
    defaultText: '(none)',
    description: 'Model used by /invocations without a target header: a target in the source, or a model directory inside the source root.',
    parse: (raw) => (raw?.trim() ? raw.trim() : undefined),
  },
  {
    key: 'executionProviders',
    env: ['MME_EXECUTION_PROVIDERS'],
    defaultText: 'auto',
    description: 'Comma-separated provider preference, e.g. `tensorrt,cuda,cpu`. `auto`: CUDA when its library and a GPU are present, else CPU.',
    parse: (raw) => {
      if (raw === undefined || raw.trim() === '' || raw.trim().toLowerCase() === 'auto') return undefined;
      const names = raw
        .split(',')
        .map((s) => s.trim().toLowerCase())
        .filter(Boolean);
      for (const n of names) {
        if (!(PROVIDER_NAMES as readonly string[]).includes(n)) {
          throw new Error(`MME_EXECUTION_PROVIDERS: unknown provider '${n}'${didYouMean(n, [...PROVIDER_NAMES, 'auto'], { list: true })}`);
        }
      }
      return [...new Set(names)] as ProviderName[];
    },
  },
  {
    key: 'ortTelemetry',
    env: [ORT_TELEMETRY_ENV],
    defaultText: 'false',
    description:
      "onnxruntime's own telemetry (Microsoft's 1DS: events in `$HOME/.cache/Microsoft/DeveloperTools/.onnxruntime/` and their upload to Microsoft). Off unless `true`: the server sets `ORT_DISABLE_TELEMETRY=1` before onnxruntime loads, in every process that runs models ([security.md](security.md#outbound-connections)).",
    parse: (raw) => parseOrtTelemetry(raw),
  },
  {
    key: 'logLevel',
    env: ['MME_LOG_LEVEL'],
    defaultText: 'info',
    description: 'pino level: trace, debug, info, warn, error, fatal, silent.',
    parse: (raw) => {
      const v = (raw ?? 'info').trim().toLowerCase();
      const levels: readonly LogLevel[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];
      if (!(levels as readonly string[]).includes(v)) throw new Error(`MME_LOG_LEVEL: unknown level '${raw}'${didYouMean(v, levels, { list: true })}`);
      return v as LogLevel;
    },
  },
  {
    key: 'logFormat',
    env: ['MME_LOG_FORMAT'],
    defaultText: 'json',
    description:
      '`json`: one pino JSON object per line on stdout (for log collectors; what containers should keep). `pretty`: one readable line per entry (time, level, message, then `key=value` fields), for a terminal; written by the main thread, like JSON (no extra thread).',
    parse: (raw) => logFormatValue(raw),
  },
  {
    key: 'archiveMaxBytes',
    env: ['MME_ARCHIVE_MAX_BYTES'],
    defaultText: '17179869184 (16 GiB)',
    description: 'Largest total extracted size of one model archive; larger archives are rejected.',
    parse: (raw) => (raw === undefined ? 16 * 1024 * MIB : parseByteSize('MME_ARCHIVE_MAX_BYTES', raw, 1)),
  },
  {
    key: 'archiveMaxEntries',
    env: ['MME_ARCHIVE_MAX_ENTRIES'],
    defaultText: '10000',
    description:
      'Most entries one model archive may hold, every entry counted (files, directories, links, skipped junk such as `._*`); more is 400 ARCHIVE_REJECTED.',
    parse: (raw) => (raw === undefined ? DEFAULT_MAX_ENTRIES : int('MME_ARCHIVE_MAX_ENTRIES', raw, 1)),
  },
  {
    key: 'archiveMaxRatio',
    env: ['MME_ARCHIVE_MAX_RATIO'],
    defaultText: '200',
    description:
      'Largest ratio of decompressed to compressed bytes of one model archive, checked while it streams once 16 MiB of tar data have come out; more is 400 ARCHIVE_REJECTED (a gzip bomb). Real weights compress about 1.1-1.5:1; raise it for a large model of zeros. 0 = no ratio check.',
    parse: (raw) => (raw === undefined ? DEFAULT_MAX_RATIO : int('MME_ARCHIVE_MAX_RATIO', raw, 0)),
  },
  {
    key: 'modelControl',
    env: ['MME_MODEL_CONTROL'],
    defaultText: '`explicit` with `SAGEMAKER_MULTI_MODEL=true` or `MME_MODEL_MESH=true`, else `none`',
    description:
      "Triton's model control modes. `none`: every load and unload API (SageMaker `POST /models` and `DELETE /models/{m}`, `/v2/repository/models/{m}/load` and `/unload`, gRPC `RepositoryModelLoad`/`RepositoryModelUnload`, ModelMesh's `loadModel`/`unloadModel`) is refused with 403 `MODEL_CONTROL_DISABLED`; models of `MME_MODEL_SOURCE` still load on first use. `explicit`: those APIs answer; off SageMaker it needs `MME_MODEL_URL_ROOTS`. The start-up line `onnx-mme listening` says which mode and why ([security](security.md#model-control)).",
    parse: (_raw, env) => modelControlOf(env),
  },
  {
    key: 'modelUrlRoots',
    env: ['MME_MODEL_URL_ROOTS'],
    defaultText: '`/opt/ml/models` with `SAGEMAKER_MULTI_MODEL=true`, else none',
    description:
      'Comma-separated absolute directories a SageMaker `POST /models` url (and a ModelMesh modelPath) must lie in, judged on its real path. A url outside them gets one answer whatever is there (400 `INVALID_REQUEST`, the same message for a file, a missing path or a system directory). Required when `MME_MODEL_CONTROL=explicit` off SageMaker: the server refuses to start without it ([security](security.md#model-urls)).',
    parse: (raw, env) => {
      if (raw === undefined || raw.trim() === '') {
        if (onSageMakerMme(env)) return Object.freeze([SAGEMAKER_MODEL_DIR]);
        if (modelControlOf(env).mode === 'explicit') {
          throw new Error(
            'MME_MODEL_CONTROL=explicit (load and unload through the API) needs MME_MODEL_URL_ROOTS: the directories a POST /models url or a ModelMesh modelPath may name (e.g. /opt/ml/models)',
          );
        }
        return undefined;
      }
      const roots = raw
        .split(',')
        .map((r) => r.trim())
        .filter((r) => r !== '');
      for (const r of roots) {
        if (!path.isAbsolute(r) || r.split('/').includes('..')) throw new Error(`MME_MODEL_URL_ROOTS: '${r}' is not an absolute directory without '..'`);
      }
      return Object.freeze(roots.map((r) => path.resolve(r)));
    },
  },
  {
    key: 'httpRestrictedApi',
    env: ['MME_HTTP_RESTRICTED_API'],
    defaultText: '(none: no API needs a header)',
    description:
      "Triton's `--http-restricted-api`: `<API>[,<API>...]:<header>=<value>`, several separated by `;` (e.g. `model-repository:admin-key=s3cr3t;inference,metadata:infer-key=k1`). A request to a route of a named group without that header and value gets 403 `API_RESTRICTED`, before its body is read. Groups: Triton's (`health`, `metadata`, `inference`, `shared-memory`, `model-config`, `model-repository`, `statistics`, `trace`, `logging`) and `metrics` (ours: `/metrics`); an unknown group, or a value with a character outside printable ASCII (which no client could send as written), stops startup. `/ping` is never restricted ([security](security.md#restricted-apis)).",
    parse: (raw) =>
      raw === undefined || raw.trim() === '' ? Object.freeze([]) : parseRestrictions('MME_HTTP_RESTRICTED_API', raw, [...TRITON_API_GROUPS, METRICS_GROUP]),
  },
  {
    key: 'grpcRestrictedProtocol',
    env: ['MME_GRPC_RESTRICTED_PROTOCOL'],
    defaultText: '(none: no RPC needs metadata)',
    description:
      "Triton's `--grpc-restricted-protocol`, for `MME_GRPC_PORT`: the same syntax and Triton's groups; the key is read from the call's metadata as `<header>` or Triton's `triton-grpc-protocol-<header>`. A call without it gets `PERMISSION_DENIED` (`API_RESTRICTED`). `grpc.health.v1` is never restricted ([security](security.md#restricted-apis)).",
    parse: (raw) => (raw === undefined || raw.trim() === '' ? Object.freeze([]) : parseRestrictions('MME_GRPC_RESTRICTED_PROTOCOL', raw, TRITON_API_GROUPS)),
  },
  {
    key: 'configMaxBytes',
    env: ['MME_CONFIG_MAX_BYTES'],
    defaultText: '1048576 (1 MiB)',
    description:
      'Largest config.pbtxt a model may have; a larger one is refused with 400 INVALID_MODEL naming the model and the limit, from its size, before it is read. Configs over 8 KiB are parsed in a worker thread, so /ping is never held by a parse.',
    parse: (raw) => (raw === undefined ? DEFAULT_CONFIG_MAX_BYTES : parseByteSize('MME_CONFIG_MAX_BYTES', raw, 1)),
  },
  {
    key: 'shutdownTimeoutMs',
    env: ['MME_SHUTDOWN_TIMEOUT_SECONDS'],
    defaultText: '25',
    description:
      'After SIGTERM, the deadline of the whole shutdown: the drain (MME_DRAIN_SECONDS), then in-flight requests finish and sessions are released, then the process exits (SageMaker kills at 30 s).',
    parse: (raw) => (raw === undefined ? 25_000 : int('MME_SHUTDOWN_TIMEOUT_SECONDS', raw, 0, 3600) * 1000),
  },
  {
    key: 'drainMs',
    env: ['MME_DRAIN_SECONDS'],
    defaultText: '5 (at most half of MME_SHUTDOWN_TIMEOUT_SECONDS)',
    description:
      "After SIGTERM, how long the server stays up but not ready: /ping and /v2/health/ready answer 503 and gRPC health NOT_SERVING while every request is still served (with Connection: close), so balancers stop sending before the listener closes. Counted inside MME_SHUTDOWN_TIMEOUT_SECONDS and must be less than it; size it to the balancer's health checks (docs/scaling-out.md).",
    parse: (raw, env) => {
      const timeoutRaw = env['MME_SHUTDOWN_TIMEOUT_SECONDS'];
      // A bad timeout is reported by its own setting; the relation is checked against a good one only.
      let timeoutMs: number | undefined = 25_000;
      if (timeoutRaw !== undefined) {
        try {
          timeoutMs = int('MME_SHUTDOWN_TIMEOUT_SECONDS', timeoutRaw, 0, 3600) * 1000;
        } catch {
          timeoutMs = undefined;
        }
      }
      if (raw === undefined) return Math.min(DEFAULT_DRAIN_MS, Math.floor((timeoutMs ?? 0) / 2));
      const n = /^\s*\d+(\.\d{1,3})?\s*$/.test(raw) ? Math.round(Number(raw.trim()) * 1000) : Number.NaN;
      if (!Number.isFinite(n) || n > 3_600_000) throw new Error(`MME_DRAIN_SECONDS must be a number of seconds in [0, 3600] (up to 3 decimals), got '${raw}'`);
      if (timeoutMs !== undefined && n > 0 && n >= timeoutMs) {
        throw new Error(
          `MME_DRAIN_SECONDS (${n / 1000}) must be less than MME_SHUTDOWN_TIMEOUT_SECONDS (${timeoutMs / 1000}): in-flight requests need time to finish after the drain`,
        );
      }
      return n;
    },
  },
  {
    key: 'maxInflightRequests',
    env: ['MME_MAX_INFLIGHT_REQUESTS'],
    defaultText: '1024',
    description: 'Server-wide cap on inference requests in progress; beyond it requests get 429.',
    parse: (raw) => (raw === undefined ? 1024 : int('MME_MAX_INFLIGHT_REQUESTS', raw, 1)),
  },
  {
    key: 'holdRefusedConnections',
    env: ['MME_HOLD_REFUSED_CONNECTIONS'],
    defaultText: '`false` with `SAGEMAKER_MULTI_MODEL=true`, else `true`',
    description:
      "`true`: an inference request refused for overload (429, 503 on the KServe routes, with `Retry-After: 1`) is answered at once, and its keep-alive connection is not read again until a place frees for it (the connection refused longest ago first) or Retry-After passes, so a client that retries at once costs one refusal per freed place, not one per retry. `false`: the connection is read again at once. Off by default on a SageMaker multi-model endpoint, whose front end carries many callers' requests on its connections to the container: a held connection would delay whoever's request comes next on it. [Operations](operations.md#overload-and-retry-storms) says why.",
    parse: (raw, env) => (raw === undefined ? !onSageMakerMme(env) : parseBooleanSetting('MME_HOLD_REFUSED_CONNECTIONS', raw)),
  },
  {
    key: 'sharedTurnRequests',
    env: ['MME_SHARED_TURN_REQUESTS'],
    defaultText: '4',
    description:
      "Inference requests one event-loop turn starts while requests of two or more models arrived within the last 250 ms (16 otherwise, and at most 16). A request's work runs interleaved with that of every request started in its turn, so smaller turns keep a light model beside a flooded one closer to its latency alone, and larger ones keep more of the flooded model's throughput (its batches are formed from fewer requests per turn). Measured on a 2-core machine, a 16→4 model one request at a time beside an MLP flooded by 128 connections: 4 gave it p50 0.50 ms against 0.86 ms with 16, and left the MLP 0.83 of its throughput alone against 0.90 (medians of 3). [Operations](operations.md#overload-and-retry-storms) says why.",
    parse: (raw) => (raw === undefined ? DEFAULT_SHARED_TURN_REQUESTS : int('MME_SHARED_TURN_REQUESTS', raw, 1, TURN_REQUESTS)),
  },
  {
    key: 'maxInflightBytes',
    env: ['MME_MAX_INFLIGHT_BYTES'],
    defaultText: '10% of the container memory (at least 4 × the body limit)',
    description:
      'Request bodies plus answers held in memory at once, on every route that reads a body (inference, `POST /models`, the repository index, load and unload). A request whose declared Content-Length does not fit is refused (429; 503 on the KServe routes) before its body is read, and its connection closed.',
    parse: (raw) => (raw === undefined ? undefined : parseByteSize('MME_MAX_INFLIGHT_BYTES', raw, 1)),
  },
  {
    key: 'maxConnections',
    env: ['MME_MAX_CONNECTIONS'],
    defaultText: '4096',
    description:
      'Open client connections; beyond it new connections are closed at once (keep it above the clients you expect, /ping included). Also the depth of the accept queue (capped by the kernel at net.core.somaxconn).',
    parse: (raw) => (raw === undefined ? 4096 : int('MME_MAX_CONNECTIONS', raw, 1)),
  },
  {
    key: 'headersTimeoutMs',
    env: ['MME_HEADERS_TIMEOUT_SECONDS'],
    defaultText: '20',
    description: 'A request whose headers have not all arrived after this long gets 408 and its connection is closed.',
    parse: (raw) => (raw === undefined ? 20_000 : int('MME_HEADERS_TIMEOUT_SECONDS', raw, 1, 3600) * 1000),
  },
  {
    key: 'requestTimeoutMs',
    env: ['MME_REQUEST_TIMEOUT_SECONDS'],
    defaultText: '60',
    description:
      'A request (headers and body) that has not fully arrived after this long gets 408 and its connection is closed, so a stalled upload holds its memory no longer. At least MME_HEADERS_TIMEOUT_SECONDS.',
    parse: (raw, env) => {
      const ms = raw === undefined ? 60_000 : int('MME_REQUEST_TIMEOUT_SECONDS', raw, 1, 3600) * 1000;
      const headersRaw = env['MME_HEADERS_TIMEOUT_SECONDS'];
      const headers = headersRaw === undefined || !/^\s*\d+\s*$/.test(headersRaw) ? 20_000 : Number(headersRaw.trim()) * 1000;
      if (ms < headers) throw new Error(`MME_REQUEST_TIMEOUT_SECONDS (${ms / 1000}) must be at least MME_HEADERS_TIMEOUT_SECONDS (${headers / 1000})`);
      return ms;
    },
  },
  {
    key: 'cpuCount',
    env: ['MME_CPU_COUNT'],
    defaultText: 'os.availableParallelism()',
    description:
      "The CPUs the server sizes its runtime workers and load concurrency for (the defaults below derive from it). Set it where the container's CPU quota is below the CPUs Node sees.",
    parse: (_raw, env) => cpuCountOf(env),
  },
  {
    key: 'runtimeWorkers',
    env: ['MME_RUNTIME_WORKERS'],
    defaultText: `CPU count (at most ${MAX_DEFAULT_WORKERS})`,
    description:
      "Worker threads that own onnxruntime sessions. Sessions load and run there, so HTTP stays responsive; runs in different workers proceed in parallel. With one intra-op thread per session (the default), these are the threads that hold the machine's parallelism, whatever the number of models.",
    parse: (raw, env) => (raw === undefined ? defaultWorkers(env) : int('MME_RUNTIME_WORKERS', raw, 1, 256)),
  },
  {
    key: 'runtimeWorkerNice',
    env: ['MME_RUNTIME_WORKER_NICE'],
    defaultText: String(DEFAULT_RUNTIME_WORKER_NICE),
    description:
      "The runtime workers' CPU priority on Linux, as a nice value (0-19; the main thread keeps the process's, 0 unless started otherwise), and so their onnxruntime threads'. Where the cores are shared, the main thread, which reads and answers every tenant's requests and the health checks, then runs before the model runs it waits for; the workers get every core it does not use. Measured on a 2-core machine, a 16→4 model one request at a time beside an MLP flooded by 128 connections: p50 0.32-0.64 ms with 10 against 0.55-0.81 with 0, p99 2.3-3.1 against 3.2-4.4 ms, and the MLP kept 0.70-0.81 of its throughput alone against 0.60-0.72. 0 runs them at the main thread's priority, and a server started at a higher nice value keeps it on every thread. Ignored, with a warning, where the OS is not Linux (there the call would renice the whole process).",
    parse: (raw) => (raw === undefined ? DEFAULT_RUNTIME_WORKER_NICE : int('MME_RUNTIME_WORKER_NICE', raw, 0, 19)),
  },
  {
    key: 'hotModelMaxInstances',
    env: ['MME_HOT_MODEL_MAX_INSTANCES'],
    defaultText: 'MME_RUNTIME_WORKERS, at most CPU count - 1',
    description:
      'Instances a hot model may grow to (by default one core is left to the main thread, so a 2-CPU machine never grows one). A model whose config sets no `instance_group` has one instance, so one core; when it runs in the runtime workers only (its batch is too costly for the main thread) and its batch slots are all busy (a batch waiting behind another) for half of a 0.5 s window, it gets another session on a worker that holds none of its instances, booked in the memory budget from the room there is (never by evicting another model), and gives it back after 30 s without that. 1 = never. Models with an `instance_group`, sequence models and GPU models keep what they have.',
    parse: (raw, env) => {
      if (raw !== undefined) return int('MME_HOT_MODEL_MAX_INSTANCES', raw, 1, 256);
      // A bad MME_RUNTIME_WORKERS is reported by its own entry; this one only follows a good one.
      const n = Number(env['MME_RUNTIME_WORKERS'] ?? Number.NaN);
      const workers = Number.isInteger(n) && n >= 1 && n <= 256 ? n : defaultWorkers(env);
      // A core is left to the main thread, which reads and writes every request: on 2 CPUs a second
      // instance gave 0.86x the answers of one (bench/README.md, hot-model.bench).
      return Math.max(1, Math.min(workers, cpuCountOf(env) - 1));
    },
  },
  {
    key: 'intraOpThreads',
    env: ['MME_INTRA_OP_THREADS'],
    defaultText: '1',
    description:
      "onnxruntime intra-op threads per session. Every session with more than one holds its own pool of that many threads less one (onnxruntime-node has no shared pool), so the default 1 keeps the thread count independent of the number of models; a model's `intra_op_thread_count` parameter overrides it for that model. 0 = onnxruntime's default (a pool of every physical core per session).",
    parse: (raw) => {
      if (raw === undefined) return 1;
      const n = int('MME_INTRA_OP_THREADS', raw, 0, 1024);
      return n === 0 ? undefined : n;
    },
  },
  {
    key: 'loadConcurrency',
    env: ['MME_LOAD_CONCURRENCY'],
    defaultText: 'CPU count (at least 2, at most 8)',
    description:
      'Model loads (session creation, warm-up and placement) in progress at once; further loads wait their turn. Downloads and extraction are not counted here. 1 = one load at a time.',
    parse: (raw, env) => (raw === undefined ? Math.max(2, Math.min(8, cpuCountOf(env))) : int('MME_LOAD_CONCURRENCY', raw, 1, 256)),
  },
  {
    key: 'mainThreadCopies',
    env: ['MME_MAIN_THREAD_COPIES'],
    defaultText: '16',
    description:
      "Most main-thread session copies held at once (the copy a small model gets beside its worker session for a lone request's latency, MME_MAIN_THREAD_MAX_RUN_US): once they are all held, a model gets one only if it ran more often recently than the held model that ran least, which drops its copy; each copy is counted in the memory budget. 0 = no copies (models that run on the main thread only are not counted: they hold one session).",
    parse: (raw) => (raw === undefined ? 16 : int('MME_MAIN_THREAD_COPIES', raw, 0, 100_000)),
  },
  {
    key: 'mainThreadMaxRunUs',
    env: ['MME_MAIN_THREAD_MAX_RUN_US'],
    defaultText: '1000',
    description:
      "A CPU model with one instance whose largest batch runs in at most this many µs (measured at load) also gets a session on the main thread, used when no other request for it is queued: the hop to a runtime worker costs more than such a run. 0 = never (a model's `execution_thread` parameter still may). At most 100000.",
    parse: (raw) => (raw === undefined ? 1000 : int('MME_MAIN_THREAD_MAX_RUN_US', raw, 0, 100_000)),
  },
  {
    key: 'mainThreadOnlyMaxRunUs',
    env: ['MME_MAIN_THREAD_ONLY_MAX_RUN_US'],
    defaultText: '15',
    description:
      'Of the models that get a main-thread session, those whose largest batch runs in at most this many µs run there only, busy or not, with no worker session: handing a batch to a worker and taking the answer back costs the main thread more than such a run. 0 = never. At most 100000.',
    parse: (raw) => (raw === undefined ? 15 : int('MME_MAIN_THREAD_ONLY_MAX_RUN_US', raw, 0, 100_000)),
  },
  {
    key: 'responseCacheBytes',
    env: ['MME_RESPONSE_CACHE_BYTES'],
    defaultText: '0 (off)',
    description:
      'Byte budget of the response cache, shared by every model whose config.pbtxt says `response_cache { enable: true }`: an identical request (same model version, inputs and requested outputs) is answered from memory without running the model; least recently used answers go first. 0 = no cache (such models then run every request, with a warning at load).',
    parse: (raw) => (raw === undefined || raw.trim() === '' ? 0 : parseByteSize('MME_RESPONSE_CACHE_BYTES', raw, 0)),
  },
  {
    key: 'allowJsBackend',
    env: ['MME_ALLOW_JS_BACKEND'],
    defaultText: 'true',
    description:
      'Allow `backend: "js"` processing steps, whose `model.mjs` runs in a sandboxed process of its own (no server environment, reads only its model directory, writes only its scratch directory, memory bounded, another user when the server is root; it can still connect out). `false`: packages with a js step are refused (501 `UNSUPPORTED`); built-in steps still load.',
    parse: (raw) => (raw === undefined ? true : parseBooleanSetting('MME_ALLOW_JS_BACKEND', raw)),
  },
  {
    key: 'jsStepUser',
    env: ['MME_JS_STEP_USER'],
    defaultText: '65534:65534',
    description:
      "The user a js step's process runs as when the server runs as root, as `uid:gid` (or `uid`, the gid then the same number): it cannot read the server's /proc files nor signal it, and the OS checks every file it opens. Numbers, not names. Not used when the server is not root (the step then runs as the server's user). In a container whose user namespace does not map that uid, set a mapped one. 1 to 4294967294 each: root (0) is refused.",
    parse: (raw) => parseStepUser(raw),
  },
  {
    key: 'jsStepTimeoutSeconds',
    env: ['MME_JS_STEP_TIMEOUT_SECONDS'],
    defaultText: '30',
    description:
      "Deadline of each call into a js step (its import and `initialize()`, each `execute()`, `finalize()`) where its config.pbtxt sets no `js_timeout_seconds` parameter. A call past it fails (504 `TIMEOUT`; its batch is not re-run request by request), the step's process is stopped (the only way to end an endless loop) and started again. 1 to 3600.",
    parse: (raw) => (raw === undefined ? 30 : int('MME_JS_STEP_TIMEOUT_SECONDS', raw, 1, 3600)),
  },
  {
    key: 'dynamicBatching',
    env: ['MME_DYNAMIC_BATCHING'],
    defaultText: 'true',
    description:
      'Dynamic batching on or off server-wide. `false`: every request runs alone (each model still queues, bounded, and runs up to its instance count at once), e.g. to benchmark without batching.',
    parse: (raw) => (raw === undefined ? true : parseBooleanSetting('MME_DYNAMIC_BATCHING', raw)),
  },
  {
    key: 'batchMaxDelayUs',
    env: ['MME_BATCH_MAX_DELAY_US', 'SAGEMAKER_TS_MAX_BATCH_DELAY'],
    defaultText: '0',
    description:
      "How long (µs) a batch may wait for more rows, for models with max_batch_size > 0 and no `dynamic_batching` block; 0 = never wait (requests that queue while a batch runs join the next one). TorchServe's `SAGEMAKER_TS_MAX_BATCH_DELAY` is accepted instead, in **milliseconds** as TorchServe reads it. At most 10 s.",
    parse: (raw, env) => {
      if (raw === undefined) return 0;
      const micros = env['MME_BATCH_MAX_DELAY_US'] !== undefined;
      const name = micros ? 'MME_BATCH_MAX_DELAY_US' : 'SAGEMAKER_TS_MAX_BATCH_DELAY';
      const limit = micros ? 10_000_000 : 10_000;
      const n = /^\s*\d+\s*$/.test(raw) ? Number(raw.trim()) : Number.NaN;
      if (!Number.isSafeInteger(n) || n > limit) {
        // TorchServe's variable is milliseconds; some guides say microseconds, and 100000 would then mean 100 s.
        throw new Error(`${name} must be an integer in [0, ${limit}] (${micros ? 'microseconds' : 'milliseconds'}, at most 10 s), got '${raw}'`);
      }
      return micros ? n : n * 1000;
    },
  },
  {
    key: 'batchMaxSize',
    env: ['MME_BATCH_MAX_SIZE', 'SAGEMAKER_TS_BATCH_SIZE'],
    defaultText: "(the model's max_batch_size)",
    description:
      "Most rows in one batch for models with no `dynamic_batching` block (capped by max_batch_size; a request with more rows still runs, alone). TorchServe's `SAGEMAKER_TS_BATCH_SIZE` is accepted instead (TorchServe counts requests; with one row per request that is the same).",
    parse: (raw, env) => {
      if (raw === undefined || raw.trim() === '') return undefined;
      return int(env['MME_BATCH_MAX_SIZE'] !== undefined ? 'MME_BATCH_MAX_SIZE' : 'SAGEMAKER_TS_BATCH_SIZE', raw, 1);
    },
  },
  {
    key: 'defaultMaxBatchSize',
    env: ['MME_DEFAULT_MAX_BATCH_SIZE'],
    defaultText: String(DEFAULT_MAX_BATCH_SIZE),
    description:
      "The `max_batch_size` ONNX auto-complete gives a model whose graph can batch (every input and output has a variable first dimension) and whose config.pbtxt sets none, or that has none: Triton's `--backend-config=default-max-batch-size`, with Triton's default. Such a model also gets an empty `dynamic_batching` block when this is above 1. 0 = such models do not batch (their inputs and outputs keep the batch dimension). A config that sets `max_batch_size` is never changed.",
    parse: (raw) => (raw === undefined || raw.trim() === '' ? DEFAULT_MAX_BATCH_SIZE : int('MME_DEFAULT_MAX_BATCH_SIZE', raw, 0, MAX_BATCH_SIZE_FIELD)),
  },
  {
    key: 'maxQueueSize',
    env: ['MME_MAX_QUEUE_SIZE'],
    defaultText: '1024',
    description:
      "Requests that may wait in one model's queue (per priority level) where its config.pbtxt sets no `max_queue_size` (Triton's 0 = unbounded is never used); beyond it requests get 429.",
    parse: (raw) => (raw === undefined ? 1024 : int('MME_MAX_QUEUE_SIZE', raw, 1)),
  },
  {
    key: 'maxSequences',
    env: ['MME_MAX_SEQUENCES'],
    defaultText: '4096',
    description:
      'Live sequences of stateful models (`sequence_batching`) the whole server holds at once (each keeps its implicit state in memory until it ends); a `sequence_start` beyond it gets 429.',
    parse: (raw) => (raw === undefined ? 4096 : int('MME_MAX_SEQUENCES', raw, 1)),
  },
  {
    key: 'safePortRange',
    env: ['SAGEMAKER_SAFE_PORT_RANGE'],
    defaultText: '(none)',
    description:
      'Set by SageMaker: the inclusive range (`MIN-MAX`) any extra port must lie in; `MME_METRICS_PORT` or `MME_GRPC_PORT` outside it stops startup.',
    parse: (raw) => (raw === undefined || raw.trim() === '' ? undefined : portRange('SAGEMAKER_SAFE_PORT_RANGE', raw)),
  },
  {
    key: 'accessLog',
    env: ['MME_ACCESS_LOG'],
    defaultText: 'false',
    description:
      '`true`: one `request` line for every HTTP request at `info` (method, path, route, status, target, model, version, durationMs, reqId, traceId; about 300 bytes). `false`: only errors (a status of 400 or more; rejections also get their `request rejected`/`request failed` line) and slow requests (`MME_SLOW_REQUEST_MS`) get one, the rest at `debug`. `/ping` is always at `debug`. [Logs](metrics-and-logs.md#what-is-logged-per-request) has the cost.',
    parse: (raw) => (raw === undefined ? false : parseBooleanSetting('MME_ACCESS_LOG', raw)),
  },
  {
    key: 'slowRequestMs',
    env: ['MME_SLOW_REQUEST_MS'],
    defaultText: '1000',
    description:
      'A request that took at least this many milliseconds (arrival to the end of its answer) gets its `request` line at `warn` with `"slow":true`, whatever `MME_ACCESS_LOG` says. 1 to 3600000.',
    parse: (raw) => (raw === undefined || raw.trim() === '' ? 1000 : int('MME_SLOW_REQUEST_MS', raw, 1, 3_600_000)),
  },
  {
    key: 'metricsMaxTargets',
    env: ['MME_METRICS_MAX_TARGETS'],
    defaultText: '500',
    description:
      'Most loaded targets with per-model series of their own (each label set `target`, `model`, `version`); further targets are counted together under `target="_overflow"` until some unload. Bounds what Prometheus stores when thousands of targets are served; `/v2/models/{m}/stats` stays per target.',
    parse: (raw) => (raw === undefined || raw.trim() === '' ? 500 : int('MME_METRICS_MAX_TARGETS', raw, 0, 1_000_000)),
  },
  {
    key: 'metricsPort',
    env: ['MME_METRICS_PORT'],
    defaultText: '(none: /metrics on the main port)',
    description:
      'Serve `GET /metrics` on this port instead of the main one (a separate listener, nothing else on it; the main port then answers 404 for `/metrics`, so clients of the inference port cannot read the series); must lie inside `SAGEMAKER_SAFE_PORT_RANGE` when that is set. 0 = any free port.',
    parse: (raw, env) => {
      if (raw === undefined || raw.trim() === '') return undefined;
      const port = int('MME_METRICS_PORT', raw, 0, 65535);
      const range = safeRange(env);
      if (range && (port < range.min || port > range.max)) {
        throw new Error(
          `MME_METRICS_PORT ${port} is outside SAGEMAKER_SAFE_PORT_RANGE ${range.min}-${range.max} (SageMaker only allows extra ports inside it)`,
        );
      }
      const mainRaw = env['SAGEMAKER_BIND_TO_PORT'];
      const main = mainRaw === undefined ? 8080 : Number(mainRaw.trim());
      if (port !== 0 && port === main) throw new Error(`MME_METRICS_PORT ${port} is the main port (SAGEMAKER_BIND_TO_PORT); choose another or leave it unset`);
      return port;
    },
  },
  {
    key: 'grpcPort',
    env: ['MME_GRPC_PORT'],
    defaultText: '(none: no gRPC listener)',
    description:
      "Serve the KServe v2 gRPC protocol (`inference.GRPCInferenceService`, Triton's; with `grpc.health.v1`) on this port; Triton's is 8001. Must lie inside `SAGEMAKER_SAFE_PORT_RANGE` when that is set, and differ from the main and metrics ports. 0 = any free port.",
    parse: (raw, env) => {
      if (raw === undefined || raw.trim() === '') return undefined;
      const port = int('MME_GRPC_PORT', raw, 0, 65535);
      const range = safeRange(env);
      if (range && (port < range.min || port > range.max)) {
        throw new Error(`MME_GRPC_PORT ${port} is outside SAGEMAKER_SAFE_PORT_RANGE ${range.min}-${range.max} (SageMaker only allows extra ports inside it)`);
      }
      const mainRaw = env['SAGEMAKER_BIND_TO_PORT'];
      const main = mainRaw === undefined ? 8080 : Number(mainRaw.trim());
      if (port !== 0 && port === main) throw new Error(`MME_GRPC_PORT ${port} is the main (HTTP) port; choose another, e.g. 8001`);
      const metricsRaw = env['MME_METRICS_PORT'];
      if (port !== 0 && metricsRaw !== undefined && metricsRaw.trim() !== '' && Number(metricsRaw.trim()) === port) {
        throw new Error(`MME_GRPC_PORT ${port} is also MME_METRICS_PORT; give each listener its own port`);
      }
      return port;
    },
  },
  {
    key: 'grpcTlsCertFile',
    env: ['MME_GRPC_TLS_CERT'],
    defaultText: '(none: plaintext gRPC)',
    description: 'PEM certificate chain: TLS on the gRPC port, with `MME_GRPC_TLS_KEY`; both or neither. Read at startup.',
    parse: (raw, env) => {
      const cert = raw?.trim() || undefined;
      const key = env['MME_GRPC_TLS_KEY']?.trim() || undefined;
      if ((cert === undefined) !== (key === undefined)) {
        throw new Error(
          `${cert === undefined ? 'MME_GRPC_TLS_KEY' : 'MME_GRPC_TLS_CERT'} is set without ${cert === undefined ? 'MME_GRPC_TLS_CERT' : 'MME_GRPC_TLS_KEY'}: TLS needs both the certificate and its key`,
        );
      }
      return cert === undefined ? undefined : path.resolve(cert);
    },
  },
  {
    key: 'grpcTlsKeyFile',
    env: ['MME_GRPC_TLS_KEY'],
    defaultText: '(none)',
    description: 'PEM private key of `MME_GRPC_TLS_CERT`.',
    parse: (raw) => (raw?.trim() ? path.resolve(raw.trim()) : undefined),
  },
  {
    key: 'grpcTlsCaFile',
    env: ['MME_GRPC_TLS_CA'],
    defaultText: '(none: clients are not asked for a certificate)',
    description: 'PEM CA certificates: with TLS on, gRPC clients must present a certificate one of them signed (mutual TLS).',
    parse: (raw, env) => {
      if (!raw?.trim()) return undefined;
      if (!env['MME_GRPC_TLS_CERT']?.trim())
        throw new Error("MME_GRPC_TLS_CA needs MME_GRPC_TLS_CERT and MME_GRPC_TLS_KEY (the server's own certificate and key)");
      return path.resolve(raw.trim());
    },
  },
  {
    key: 'modelMesh',
    env: ['MME_MODEL_MESH'],
    defaultText: 'false',
    description:
      "Also serve ModelMesh's runtime SPI (`mmesh.ModelRuntime`: loadModel, unloadModel, modelSize, predictModelSize, runtimeStatus) on `MME_GRPC_PORT`, over the SageMaker-managed mode; needs `MME_GRPC_PORT`. Off by default: runtimeStatus unloads every managed model.",
    parse: (raw, env) => {
      const on = raw === undefined ? false : parseBooleanSetting('MME_MODEL_MESH', raw);
      if (on && !env['MME_GRPC_PORT']?.trim()) throw new Error('MME_MODEL_MESH=true needs MME_GRPC_PORT (model-mesh talks to the runtime over gRPC)');
      return on;
    },
  },
  {
    key: 'defaultAccept',
    env: ['SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT'],
    defaultText: 'application/json',
    description: 'Response content type for inference requests without `Accept` (or with `*/*`): `application/json`, `text/csv` or `application/x-npy`.',
    parse: (raw) => {
      const v = (raw ?? '').trim().toLowerCase();
      if (v === '') return 'application/json';
      if (!(DEFAULT_ACCEPT_TYPES as readonly string[]).includes(v)) {
        throw new Error(
          `SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT must be one of ${DEFAULT_ACCEPT_TYPES.join(', ')}, got '${raw}'${didYouMean(v, DEFAULT_ACCEPT_TYPES)}`,
        );
      }
      return v as DefaultAccept;
    },
  },
];

function logFormatValue(raw: string | undefined): LogFormat {
  const v = (raw ?? 'json').trim().toLowerCase() || 'json';
  if (!(LOG_FORMATS as readonly string[]).includes(v)) throw new Error(`MME_LOG_FORMAT must be one of ${LOG_FORMATS.join(', ')}, got '${raw}'`);
  return v as LogFormat;
}

/**
 * The log format to report a configuration that failed to load in: MME_LOG_FORMAT when it is
 * valid itself, else json (main.ts has no ServerConfig then, and still owes one line).
 */
export function logFormatOf(env: NodeJS.ProcessEnv): LogFormat {
  try {
    return logFormatValue(env['MME_LOG_FORMAT']);
  } catch {
    return 'json';
  }
}

/** Every variable a setting reads. */
export const KNOWN_ENV: readonly string[] = SETTINGS.flatMap((s) => s.env);

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value as Record<string, unknown>)) deepFreeze(v);
  }
  return value;
}

/** Parse the environment once. Throws one ServingError listing every invalid setting. */
export function loadServerConfig(env: NodeJS.ProcessEnv = process.env): ServerConfig {
  const out: Record<string, unknown> = {};
  const problems: string[] = [];
  const settings: string[] = [];
  for (const setting of SETTINGS) {
    const name = setting.env.find((n) => env[n] !== undefined);
    try {
      out[setting.key] = setting.parse(name === undefined ? undefined : env[name], env);
    } catch (err) {
      problems.push(err instanceof Error ? err.message : String(err));
      settings.push(name ?? setting.env[0]!);
    }
  }
  if (problems.length > 0) {
    // `settings`: the variables to change, for the one start-up line main.ts writes.
    throw new ServingError('INVALID_REQUEST', `invalid server configuration: ${problems.join('; ')}`, { details: { settings } });
  }
  out['modelSourceOptional'] = out['multiModel'] === true || out['modelMesh'] === true;
  // The port's stand-ins are checked by the port's own setting; they get no "not a setting" notice.
  out['environmentNotices'] = environmentNotices(env, [...KNOWN_ENV, ...PORT_STAND_INS]);
  return deepFreeze(out as unknown as ServerConfig);
}
