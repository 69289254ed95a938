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
import { createMainThreadSession, MAIN_THREAD } from './main-thread-session.js';
import { ownLoadBusy, type QuietWindow, type RunLoad } from './quiet-window.js';
import type { PooledSession, RuntimePool } from './runtime-pool.js';
import type { CreateSessionOptions } from './worker-protocol.js';

export type { OnnxIoInfo } from './onnx-io.js';

export interface ModelSession {
  /** The runtime worker that holds it; MAIN_THREAD (-1) when it lives on the main thread only. */
  readonly worker: number;
  readonly inputs: readonly OnnxIoInfo[];
  readonly outputs: readonly OnnxIoInfo[];
  readonly provider: ProviderName;
  /** The GPU device of a CUDA/TensorRT session (its provider's device_id); 0 on CPU. */
  readonly deviceId: number;
  /** Copies of the session held (a worker's and a main-thread one): each holds the weights; memory is predicted per copy. */
  readonly copies: number;
  /**
   * Run once. `load`: what waits behind this run (the scheduler's facts). A
   * session with both copies decides here where the run goes: busy (work
   * waiting for this model, or for any model within the server's quiet
   * window) runs in its worker, leaving the main thread to that work;
   * otherwise the main-thread copy runs, saving the thread hop.
   */
  run(feeds: ReadonlyMap<string, Tensor>, outputNames: readonly string[], load?: RunLoad): Promise<Map<string, Tensor>>;
  /** Durations (µs) of `repeats` runs, measured inside the worker (no message passing): what session placement decides on. */
  timeRuns(feeds: ReadonlyMap<string, Tensor>, outputNames: readonly string[], repeats: number): Promise<number[]>;
  /**
   * Create a second copy on the main thread (CPU sessions only; see
   * runtime/main-thread-session.ts), used when the model is not busy. Called
   * while the model loads, before it takes traffic. `intraOpThreads`: the
   * copy's own intra-op thread count (default: the session's).
   */
  addMainThreadCopy(intraOpThreads?: number): Promise<void>;
  /** Like addMainThreadCopy, then release the worker's copy: every run is on the main thread. */
  moveToMainThread(intraOpThreads?: number): Promise<void>;
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
  /** The server-wide quiet window (runtime/quiet-window.ts); omitted: busy means only this model's own load. */
  readonly quiet?: QuietWindow;
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

/** A dead runtime worker's error, naming the model it was running. */
function workerLost(model: string, err: ServingError): ServingError {
  return err.model !== undefined ? err : new ServingError(err.code, `model '${model}': ${err.message}`, { model, cause: err });
}

function wrapRunError(model: string, err: unknown): ServingError {
  if (err instanceof ServingError) return err.code === 'RUNTIME_UNAVAILABLE' ? workerLost(model, err) : err;
  const msg = err instanceof Error ? err.message : String(err);
  if (isAllocationFailure(err)) {
    return new ServingError('INSUFFICIENT_MEMORY', `model '${model}': out of memory while running: ${msg}`, { model, cause: err });
  }
  return new ServingError('INTERNAL', `model '${model}': onnxruntime failed: ${msg}`, { model, cause: err });
}

class PooledModelSession implements ModelSession {
  private released = false;
  /** The worker's copy; undefined once moved to the main thread. */
  private inWorker: PooledSession | undefined;
  private onMain: PooledSession | undefined;

  constructor(
    session: PooledSession,
    readonly provider: ProviderName,
    private readonly model: string,
    /** How it was created, to create it again on the main thread. */
    private readonly origin: { readonly path: string; readonly options: CreateSessionOptions },
    private readonly quiet: QuietWindow | undefined,
  ) {
    this.inWorker = session;
  }

  private get any(): PooledSession {
    return (this.inWorker ?? this.onMain)!;
  }

  get worker(): number {
    return this.inWorker?.worker ?? MAIN_THREAD;
  }

  get deviceId(): number {
    return this.origin.options.deviceId;
  }

  get inputs(): readonly OnnxIoInfo[] {
    return this.any.inputs;
  }

  get outputs(): readonly OnnxIoInfo[] {
    return this.any.outputs;
  }

  get copies(): number {
    return (this.inWorker ? 1 : 0) + (this.onMain ? 1 : 0);
  }

  async run(feeds: ReadonlyMap<string, Tensor>, outputNames: readonly string[], load?: RunLoad): Promise<Map<string, Tensor>> {
    if (this.released) throw new ServingError('INTERNAL', `model '${this.model}': session used after release`, { model: this.model });
    // Every session reports its load to the shared window (a busy model elsewhere keeps the copies off the main thread).
    const busy = this.quiet !== undefined ? this.quiet.busy(load) : ownLoadBusy(load);
    const session = this.onMain !== undefined && (!busy || this.inWorker === undefined) ? this.onMain : this.any;
    try {
      return await session.run(feeds, outputNames);
    } catch (err) {
      throw wrapRunError(this.model, err);
    }
  }

  async timeRuns(feeds: ReadonlyMap<string, Tensor>, outputNames: readonly string[], repeats: number): Promise<number[]> {
    try {
      return await this.any.timeRuns(feeds, outputNames, repeats);
    } catch (err) {
      throw wrapRunError(this.model, err);
    }
  }

  async addMainThreadCopy(intraOpThreads?: number): Promise<void> {
    if (this.onMain !== undefined) return;
    if (this.provider !== 'cpu') throw new Error(`model '${this.model}': only CPU sessions run on the main thread (this one uses ${this.provider})`);
    const options = intraOpThreads === undefined ? this.origin.options : { ...this.origin.options, intraOpThreads };
    this.onMain = await createMainThreadSession(this.origin.path, options);
  }

  async moveToMainThread(intraOpThreads?: number): Promise<void> {
    await this.addMainThreadCopy(intraOpThreads);
    const old = this.inWorker;
    this.inWorker = undefined;
    await old?.release();
  }

  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    await Promise.all([this.inWorker?.release(), this.onMain?.release()]);
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
      const createOptions: CreateSessionOptions = {
        providers,
        deviceId: providerChoice.deviceId,
        graphOptimizationLevel: GRAPH_LEVELS[options.graphLevel] ?? 'all',
        intraOpThreads: options.intraOpThreads,
        interOpThreads: options.interOpThreads,
      };
      const session = await options.pool.createSession(modelPath, createOptions, options.avoidWorkers);
      return new PooledModelSession(session, providers[0] ?? 'cpu', model, { path: modelPath, options: createOptions }, options.quiet);
    } catch (err) {
      const first = providers[0];
      if (first && first !== 'cpu' && isProviderLoadError(err)) {
        logger.warn({ model, provider: first, err: (err as Error).message }, 'execution provider unavailable; falling back to the next one');
        providers = providers.slice(1);
        continue;
      }
      // The worker died under the load: the server's fault, not the model's.
      if (err instanceof ServingError && err.code === 'RUNTIME_UNAVAILABLE') throw workerLost(model, err);
      const msg = err instanceof Error ? err.message : String(err);
      if (isAllocationFailure(err)) {
        throw new ServingError('INSUFFICIENT_MEMORY', `model '${model}': out of memory while creating the session: ${msg}`, { model, cause: err });
      }
      // The file as the package names it (version/file), never the host's cache path.
      const inPackage = modelPath.split(/[\\/]/).slice(-2).join('/');
      throw new ServingError('INVALID_MODEL', `model '${model}': onnxruntime cannot load ${inPackage}: ${msg.split(modelPath).join(inPackage)}`, { model, cause: err });
    }
  }
}
