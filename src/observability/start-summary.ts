/**
 * @module observability/start-summary
 * The start-up line for a person: where the server listens, where models come
 * from, where they are cached and how much memory they may use, in MiB/GiB.
 * It is logged beside `onnx-mme listening`, whose fields (raw byte counts)
 * stay what tools and tests read.
 */
import { formatBytes } from './format-bytes.js';

export interface StartFacts {
  readonly host: string;
  readonly port: number;
  readonly grpcPort: number | undefined;
  readonly grpcTls: boolean;
  readonly metricsPort: number | undefined;
  /** The source as the listening line gives it (`file:///models`, `s3://bucket/prefix/`). */
  readonly source: string;
  /** `absent`: no source directory (a SageMaker multi-model endpoint: models come through POST /models). */
  readonly sourceKind: 'local' | 's3' | 'absent';
  readonly cacheDir: string;
  /** The disk cache's byte budget (Infinity: none). */
  readonly cacheBytes: number;
  readonly budgetBytes: number;
  /** What the memory budget was taken from (`MME_MEMORY_BUDGET_BYTES`, `host memory (…)`). */
  readonly budgetFrom: string;
  readonly runtimeWorkers: number;
  readonly providers: readonly string[] | 'auto';
  readonly gpuVisible: boolean;
  readonly logLevel: string;
  /** MME_MODEL_CONTROL's mode and why it is that (`SAGEMAKER_MULTI_MODEL=true`, `default`, …). */
  readonly modelControl: { readonly mode: string; readonly reason: string };
}

/** `ready: HTTP 0.0.0.0:8080, gRPC 8001; models from …; cache …, up to 40.0 GiB; memory budget 11.2 GiB (…); 2 runtime workers (CPU)`. */
export function startSummary(f: StartFacts): string {
  const listeners = [`HTTP ${f.host}:${f.port}`];
  if (f.grpcPort !== undefined) listeners.push(`gRPC ${f.grpcPort}${f.grpcTls ? ' (TLS)' : ''}`);
  if (f.metricsPort !== undefined) listeners.push(`metrics ${f.metricsPort}`);
  const providers = f.providers === 'auto' ? (f.gpuVisible ? 'auto: CUDA when installed' : 'CPU') : f.providers.join(', ');
  return [
    `ready: ${listeners.join(', ')}`,
    f.sourceKind === 'absent'
      ? 'models only through POST /models (no model source)'
      : `models from ${f.source}${f.sourceKind === 's3' ? ' (downloaded on first use)' : ''}`,
    `cache ${f.cacheDir}, ${Number.isFinite(f.cacheBytes) ? `up to ${formatBytes(f.cacheBytes)}` : 'no byte budget'}`,
    `memory budget ${formatBytes(f.budgetBytes)}, from ${f.budgetFrom}`,
    `${f.runtimeWorkers} runtime worker${f.runtimeWorkers === 1 ? '' : 's'} (${providers})`,
    `model control ${f.modelControl.mode} (${f.modelControl.reason})`,
    `log level ${f.logLevel}`,
  ].join('; ');
}
