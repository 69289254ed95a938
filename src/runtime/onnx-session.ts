/**
 * @module runtime/onnx-session
 * A model session as the rest of the server sees it. The session itself lives
 * in a runtime worker thread (see runtime-pool.ts); this module adds the
 * provider fallback chain and turns onnxruntime's errors into ServingErrors:
 * allocation failures become INSUFFICIENT_MEMORY (507), anything else at load
 * INVALID_MODEL, anything else at run INTERNAL.
 */
import { ServingError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { ProviderName } from '../config/server-config.js';
import type { Tensor } from '../protocol/tensor.js';
import { isProviderLoadError, type ProviderChoice } from './execution-providers.js';
import type { OnnxIoInfo } from './onnx-io.js';
import type { PooledSession, RuntimePool } from './runtime-pool.js';

export type { OnnxIoInfo } from './onnx-io.js';

export interface ModelSession {
  /** The runtime worker that holds it. */
  readonly worker: number;
  readonly inputs: readonly OnnxIoInfo[];
  readonly outputs: readonly OnnxIoInfo[];
  readonly provider: ProviderName;
  run(feeds: ReadonlyMap<string, Tensor>, outputNames: readonly string[]): Promise<Map<string, Tensor>>;
  release(): Promise<void>;
}

export interface SessionOptions {
  readonly pool: RuntimePool;
  readonly providerChoice: ProviderChoice;
  /** optimization.graph.level as Triton's ORT backend reads it. */
  readonly graphLevel: number;
  readonly intraOpThreads: number | undefined;
  readonly interOpThreads: number | undefined;
  readonly logger: Logger;
  /** Label for error messages. */
  readonly model: string;
  /** Workers to keep away from if another has room: those holding the model's other instances. */
  readonly avoidWorkers?: ReadonlySet<number>;
}

/** Memory trouble as onnxruntime (CPU or CUDA) reports it; Triton's list, matched at the runtime boundary only. */
const OOM_PATTERN =
  /out of memory|Out Of Memory|OutOfMemory|CUDA_OUT_OF_MEMORY|Failed to allocate memory|failed to allocate memory|bad_alloc|CUBLAS_STATUS_ALLOC_FAILED|CNMEM_STATUS_OUT_OF_MEMORY|No space left on device/;

export function isAllocationFailure(err: unknown): boolean {
  return OOM_PATTERN.test(err instanceof Error ? err.message : String(err));
}

const GRAPH_LEVELS: Readonly<Record<number, 'all' | 'basic' | 'extended' | 'disabled'>> = {
  0: 'all',
  [-1]: 'basic',
  1: 'extended',
  2: 'disabled',
};

function wrapRunError(model: string, err: unknown): ServingError {
  if (err instanceof ServingError) return err;
  const msg = err instanceof Error ? err.message : String(err);
  if (isAllocationFailure(err)) {
    return new ServingError('INSUFFICIENT_MEMORY', `model '${model}': out of memory while running: ${msg}`, { model, cause: err });
  }
  return new ServingError('INTERNAL', `model '${model}': onnxruntime failed: ${msg}`, { model, cause: err });
}

class PooledModelSession implements ModelSession {
  private released = false;

  constructor(
    private readonly session: PooledSession,
    readonly provider: ProviderName,
    private readonly model: string,
  ) {}

  get worker(): number {
    return this.session.worker;
  }

  get inputs(): readonly OnnxIoInfo[] {
    return this.session.inputs;
  }

  get outputs(): readonly OnnxIoInfo[] {
    return this.session.outputs;
  }

  async run(feeds: ReadonlyMap<string, Tensor>, outputNames: readonly string[]): Promise<Map<string, Tensor>> {
    if (this.released) throw new ServingError('INTERNAL', `model '${this.model}': session used after release`, { model: this.model });
    try {
      return await this.session.run(feeds, outputNames);
    } catch (err) {
      throw wrapRunError(this.model, err);
    }
  }

  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    await this.session.release();
  }
}

/**
 * Create a session from a model file, trying the chosen providers in order: if
 * a provider's library cannot be loaded, it is dropped with a warning and the
 * next list is tried, ending with CPU alone.
 */
export async function createModelSession(modelPath: string, options: SessionOptions): Promise<ModelSession> {
  const { providerChoice, logger, model } = options;
  let providers = [...providerChoice.providers];
  for (;;) {
    try {
      const session = await options.pool.createSession(
        modelPath,
        {
          providers,
          deviceId: providerChoice.deviceId,
          graphOptimizationLevel: GRAPH_LEVELS[options.graphLevel] ?? 'all',
          intraOpThreads: options.intraOpThreads,
          interOpThreads: options.interOpThreads,
        },
        options.avoidWorkers,
      );
      return new PooledModelSession(session, providers[0] ?? 'cpu', model);
    } catch (err) {
      const first = providers[0];
      if (first && first !== 'cpu' && isProviderLoadError(err)) {
        logger.warn({ model, provider: first, err: (err as Error).message }, 'execution provider unavailable; falling back to the next one');
        providers = providers.slice(1);
        continue;
      }
      const msg = err instanceof Error ? err.message : String(err);
      if (isAllocationFailure(err)) {
        throw new ServingError('INSUFFICIENT_MEMORY', `model '${model}': out of memory while creating the session: ${msg}`, { model, cause: err });
      }
      throw new ServingError('INVALID_MODEL', `model '${model}': onnxruntime cannot load ${modelPath}: ${msg}`, { model, cause: err });
    }
  }
}
