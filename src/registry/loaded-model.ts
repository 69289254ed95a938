/**
 * @module registry/loaded-model
 * A model resident in memory: its effective config and, per served version,
 * one session per instance plus the scheduler that batches onto them. The
 * executor applies config `reshape`, so the scheduler and everything above it
 * see tensors exactly as config.pbtxt declares them.
 */
import type { GraphTensor } from '../config/auto-complete.js';
import type { ModelConfig, TensorConfig } from '../config/model-config-types.js';
import type { Tensor } from '../protocol/tensor.js';
import type { ModelSession } from '../runtime/onnx-session.js';
import type { ElasticInstances } from '../runtime/session-placement.js';
import type { BatchLoad, ModelExecutor, ModelScheduler } from '../scheduler/model-scheduler.js';
import { effectiveReshape } from './config-check.js';

export interface LoadedVersion {
  readonly version: number;
  /** ONNX models: the first instance, the graph the config was checked against. Undefined for processing steps (backends/). */
  readonly session: ModelSession | undefined;
  /** Every ONNX instance (instance_group count), `session` first; each holds its own copy of the weights. Empty for processing steps. */
  readonly sessions: readonly ModelSession[];
  /** One executor per instance: what the scheduler runs batches on, and what warm-up runs. */
  readonly executors: readonly ModelExecutor[];
  readonly scheduler: ModelScheduler;
  /** What the version holds beyond `sessions`, released after its scheduler closed: a processing step's backend (e.g. a JS step's finalize()), a hot model's added instances; idempotent. */
  readonly release?: () => Promise<void>;
  /** ONNX models that may add instances while hot (registry/hot-instances.ts), once placement allows it. */
  readonly elastic?: ElasticInstances;
  /** The backend when it is not onnxruntime (a processing step: `image`, `tokenizer`, `js`, ...). */
  readonly backend?: string;
  /** A processing step stopped for good (a JS step that kept crashing, backends/js-step-worker.ts): an explicit load replaces the package. */
  readonly stopped?: () => boolean;
}

export interface LoadedModel {
  readonly name: string;
  readonly dir: string;
  readonly config: ModelConfig;
  /** Empty for ensembles (they have no executor of their own). */
  readonly versions: ReadonlyMap<number, LoadedVersion>;
}

/** Highest loaded version: where a request without a version goes (Triton's rule). */
export function latestVersion(model: LoadedModel): LoadedVersion | undefined {
  let best: LoadedVersion | undefined;
  for (const v of model.versions.values()) if (!best || v.version > best.version) best = v;
  return best;
}

function withShape(t: Tensor, shape: readonly number[]): Tensor {
  return { datatype: t.datatype, shape, data: t.data };
}

/** Replace the non-batch part of a shape, keeping the batch dim when batching. */
function reshaped(t: Tensor, inner: readonly number[], batching: boolean): Tensor {
  return withShape(t, batching ? [t.shape[0] ?? 1, ...inner] : inner);
}

function perItemCount(t: Tensor, batching: boolean): number {
  const inner = batching ? t.shape.slice(1) : t.shape;
  return inner.reduce((a, b) => a * b, 1);
}

/** Fill the one -1 of config dims from the element count (a reshape keeps the count). */
function resolveDims(dims: readonly number[], count: number): number[] {
  const known = dims.reduce((a, d) => (d === -1 ? a : a * d), 1);
  return dims.map((d) => (d === -1 ? (known === 0 ? 0 : count / known) : d));
}

interface Reshape {
  /** The config dims (what requests and answers use). */
  readonly dims: readonly number[];
  /** What the graph is fed / gives (registry/config-check `effectiveReshape`). */
  readonly reshape: readonly number[];
}

function reshapes(tensors: readonly TensorConfig[], graph: readonly GraphTensor[], maxBatchSize: number): Map<string, Reshape> {
  const out = new Map<string, Reshape>();
  for (const t of tensors) {
    const reshape = effectiveReshape(
      t,
      graph.find((g) => g.name === t.name),
      maxBatchSize,
    );
    if (reshape !== undefined) out.set(t.name, { dims: t.dims, reshape });
  }
  return out;
}

export class SessionExecutor implements ModelExecutor {
  private readonly inputReshape: ReadonlyMap<string, Reshape>;
  private readonly outputReshape: ReadonlyMap<string, Reshape>;
  private readonly batching: boolean;

  constructor(
    private readonly session: ModelSession,
    config: ModelConfig,
  ) {
    this.batching = config.maxBatchSize > 0;
    this.inputReshape = reshapes(config.input, session.inputs, config.maxBatchSize);
    this.outputReshape = reshapes(config.output, session.outputs, config.maxBatchSize);
  }

  async execute(inputs: ReadonlyMap<string, Tensor>, outputNames: readonly string[], load?: BatchLoad): Promise<Map<string, Tensor>> {
    let feeds = inputs;
    if (this.inputReshape.size > 0) {
      const m = new Map<string, Tensor>();
      for (const [name, t] of inputs) {
        const cfg = this.inputReshape.get(name);
        m.set(name, cfg ? reshaped(t, cfg.reshape, this.batching) : t);
      }
      feeds = m;
    }
    const out = await this.session.run(feeds, outputNames, load);
    if (this.outputReshape.size > 0) {
      for (const [name, t] of out) {
        const cfg = this.outputReshape.get(name);
        if (cfg) out.set(name, reshaped(t, resolveDims(cfg.dims, perItemCount(t, this.batching)), this.batching));
      }
    }
    return out;
  }
}
