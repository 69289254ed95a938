/**
 * @module config/server-config
 * The single reader of `process.env`. Every setting is declared once in
 * SETTINGS (env names, default, description); `loadServerConfig` parses them
 * into a typed, deep-frozen ServerConfig and reports every bad value at once.
 * The README's env-var table is checked against SETTINGS by a test.
 */
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ServingError } from '../errors.js';
import { isS3Uri, parseS3Uri } from './s3-uri.js';

export type ProviderName = 'tensorrt' | 'cuda' | 'cpu';
export const PROVIDER_NAMES: readonly ProviderName[] = ['tensorrt', 'cuda', 'cpu'];

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'silent';

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
  readonly cacheDir: string;
  readonly defaultModel: string | undefined;
  /** undefined = automatic (CUDA when its provider library and a GPU are present, else CPU). */
  readonly executionProviders: readonly ProviderName[] | undefined;
  readonly logLevel: LogLevel;
  readonly archiveMaxBytes: number;
  readonly archiveMaxEntries: number;
  readonly shutdownTimeoutMs: number;
  readonly maxInflightRequests: number;
  readonly runtimeWorkers: number;
  readonly intraOpThreads: number | undefined;
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

function int(name: string, raw: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  // Number('') is 0: an empty variable must not silently mean port 0 or a 0 s timeout.
  const n = /^\s*-?\d+\s*$/.test(raw) ? Number(raw.trim()) : Number.NaN;
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new Error(`${name} must be an integer in [${min}, ${max}], got '${raw}'`);
  }
  return n;
}

function bool(name: string, raw: string): boolean {
  const v = raw.trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(v)) return true;
  if (['false', '0', 'no', 'off', ''].includes(v)) return false;
  throw new Error(`${name} must be true or false, got '${raw}'`);
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
    parse: (raw) => (raw === undefined ? 8080 : int('SAGEMAKER_BIND_TO_PORT', raw, 0, 65535)),
  },
  {
    key: 'multiModel',
    env: ['SAGEMAKER_MULTI_MODEL'],
    defaultText: 'false',
    description: 'Set by SageMaker on multi-model endpoints; logged, the MME API is always on.',
    parse: (raw) => (raw === undefined ? false : bool('SAGEMAKER_MULTI_MODEL', raw)),
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
      'Where targets are resolved: `s3://bucket/prefix/`, or a local directory or file:// URL holding .tar.gz archives and/or model directories.',
    parse: (raw) => {
      const v = (raw ?? '/opt/ml/model').trim();
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
    defaultText: "(SDK default; us-east-1 with an endpoint)",
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
    key: 'cacheDir',
    env: ['MME_CACHE_DIR'],
    defaultText: '$TMPDIR/onnx-mme-cache (os.tmpdir())',
    description: 'Writable directory where archives are extracted (never /opt/ml/model, which is read-only).',
    parse: (raw) => localPath('MME_CACHE_DIR', raw ?? path.join(os.tmpdir(), 'onnx-mme-cache')),
  },
  {
    key: 'defaultModel',
    env: ['MME_DEFAULT_MODEL', 'SAGEMAKER_TRITON_DEFAULT_MODEL_NAME'],
    defaultText: '(none)',
    description:
      'Model used by /invocations without a target header: a target in the source, or a model directory inside the source root.',
    parse: (raw) => (raw?.trim() ? raw.trim() : undefined),
  },
  {
    key: 'executionProviders',
    env: ['MME_EXECUTION_PROVIDERS'],
    defaultText: 'auto',
    description:
      'Comma-separated provider preference, e.g. `tensorrt,cuda,cpu`. `auto`: CUDA when its library and a GPU are present, else CPU.',
    parse: (raw) => {
      if (raw === undefined || raw.trim() === '' || raw.trim().toLowerCase() === 'auto') return undefined;
      const names = raw.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);
      for (const n of names) {
        if (!(PROVIDER_NAMES as readonly string[]).includes(n)) {
          throw new Error(`MME_EXECUTION_PROVIDERS: unknown provider '${n}' (known: ${PROVIDER_NAMES.join(', ')}, auto)`);
        }
      }
      return [...new Set(names)] as ProviderName[];
    },
  },
  {
    key: 'logLevel',
    env: ['MME_LOG_LEVEL'],
    defaultText: 'info',
    description: 'pino level: trace, debug, info, warn, error, fatal, silent.',
    parse: (raw) => {
      const v = (raw ?? 'info').trim().toLowerCase();
      const levels: readonly LogLevel[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];
      if (!(levels as readonly string[]).includes(v)) throw new Error(`MME_LOG_LEVEL: unknown level '${raw}'`);
      return v as LogLevel;
    },
  },
  {
    key: 'archiveMaxBytes',
    env: ['MME_ARCHIVE_MAX_BYTES'],
    defaultText: '17179869184 (16 GiB)',
    description: 'Largest total extracted size of one model archive; larger archives are rejected.',
    parse: (raw) => (raw === undefined ? 16 * 1024 * MIB : int('MME_ARCHIVE_MAX_BYTES', raw, 1)),
  },
  {
    key: 'archiveMaxEntries',
    env: ['MME_ARCHIVE_MAX_ENTRIES'],
    defaultText: '100000',
    description: 'Most entries (files and directories) one model archive may hold.',
    parse: (raw) => (raw === undefined ? 100_000 : int('MME_ARCHIVE_MAX_ENTRIES', raw, 1)),
  },
  {
    key: 'shutdownTimeoutMs',
    env: ['MME_SHUTDOWN_TIMEOUT_SECONDS'],
    defaultText: '25',
    description: 'After SIGTERM, how long in-flight requests may finish before the process exits (SageMaker kills at 30 s).',
    parse: (raw) => (raw === undefined ? 25_000 : int('MME_SHUTDOWN_TIMEOUT_SECONDS', raw, 0, 3600) * 1000),
  },
  {
    key: 'maxInflightRequests',
    env: ['MME_MAX_INFLIGHT_REQUESTS'],
    defaultText: '1024',
    description: 'Server-wide cap on inference requests in progress; beyond it requests get 429.',
    parse: (raw) => (raw === undefined ? 1024 : int('MME_MAX_INFLIGHT_REQUESTS', raw, 1)),
  },
  {
    key: 'runtimeWorkers',
    env: ['MME_RUNTIME_WORKERS'],
    defaultText: 'CPU count (at most 8)',
    description:
      'Worker threads that own onnxruntime sessions. Sessions load and run there, so HTTP stays responsive; runs in different workers proceed in parallel.',
    parse: (raw) => (raw === undefined ? Math.max(1, Math.min(8, os.availableParallelism())) : int('MME_RUNTIME_WORKERS', raw, 1, 256)),
  },
  {
    key: 'intraOpThreads',
    env: ['MME_INTRA_OP_THREADS'],
    defaultText: 'max(1, CPU count / workers)',
    description:
      "onnxruntime intra-op threads per session, so workers × threads does not oversubscribe the cores; a model's `intra_op_thread_count` parameter overrides it. 0 = onnxruntime's default.",
    parse: (raw, env) => {
      if (raw !== undefined) {
        const n = int('MME_INTRA_OP_THREADS', raw, 0, 1024);
        return n === 0 ? undefined : n;
      }
      const workersRaw = env['MME_RUNTIME_WORKERS'];
      const cores = os.availableParallelism();
      const workers = workersRaw !== undefined && /^\d+$/.test(workersRaw.trim()) ? Math.max(1, Number(workersRaw)) : Math.max(1, Math.min(8, cores));
      return Math.max(1, Math.floor(cores / workers));
    },
  },
];

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
  for (const setting of SETTINGS) {
    const name = setting.env.find((n) => env[n] !== undefined);
    try {
      out[setting.key] = setting.parse(name === undefined ? undefined : env[name], env);
    } catch (err) {
      problems.push(err instanceof Error ? err.message : String(err));
    }
  }
  if (problems.length > 0) {
    throw new ServingError('INVALID_REQUEST', `invalid server configuration: ${problems.join('; ')}`);
  }
  return deepFreeze(out as unknown as ServerConfig);
}
