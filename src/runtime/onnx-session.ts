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
import type { CopyHolder, MainThreadCopies } from './main-thread-copies.js';
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
  /**
   * Allow a second copy on the main thread (CPU sessions only; see
   * runtime/main-thread-session.ts), used when the model is not busy. The
   * copy is made lazily, once the model has run COPY_AFTER_QUIET_RUNS times
   * while the server was quiet, within `plan.copies`' bound and only if the
   * budget has room for it (`plan.book`); it may be dropped again when other
   * models need the room (runtime/main-thread-copies.ts).
   */
  allowMainThreadCopy(plan: CopyPlan): void;
  /**
   * Create the session on the main thread, then release the worker's: every
   * run is on the main thread. Session placement does this while the model
   * loads, so the load's measurement sees the session where it stays.
   */
  moveToMainThread(options?: MoveOptions): Promise<void>;
  /**
   * Create the session in a runtime worker, then release the main thread's:
   * for a session created on the main thread (SessionOptions.mainThread)
   * that placement, once its inputs and outputs are known, puts elsewhere.
   */
  moveToWorker(): Promise<void>;
  release(): Promise<void>;
}

export interface MoveOptions {
  /** The main-thread session's intra-op threads; undefined: the session's own. */
  readonly intraOpThreads?: number | undefined;
}

/** How a main-thread copy is booked in the memory budget: grown while it exists, given back when dropped. */
export interface CopyBooking {
  /**
   * Book a copy holding `fileBytes` of weights if the budget has room now (no
   * eviction, no wait): the bytes booked (the weights plus what a session
   * was measured to hold beyond them), or undefined when there is no room.
   */
  tryGrow(fileBytes: number): number | undefined;
  /** Give back what tryGrow booked. */
  shrink(bytes: number): void;
}

/** What a session needs to make (and drop) its main-thread copy. */
export interface CopyPlan {
  /** The copy's intra-op threads; undefined: the session's own. */
  readonly intraOpThreads: number | undefined;
  /** Bytes of the copy's files (its weights again). */
  readonly fileBytes: number;
  readonly book: CopyBooking;
  readonly copies: MainThreadCopies;
  /** Told when making a copy failed (it is then not tried again for this session). */
  readonly onError?: (err: Error) => void;
}

/**
 * Quiet runs after which a session makes its main-thread copy: a model
 * requested once (a cold miss in a long tail) never gets one, and a copy
 * dropped for a hotter model comes back only if this one is used again.
 */
export const COPY_AFTER_QUIET_RUNS = 2;

interface MainCopy {
  readonly session: PooledSession;
  /** Runs started on it and not yet finished: a dropped copy is released after the last. */
  runs: number;
  dropped: boolean;
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
  /**
   * Create it on the main thread, with these options, rather than in a runtime worker: placement decided so before
   * the session exists (runtime/session-placement.ts creationPlacement). CPU only.
   */
  readonly mainThread?: MoveOptions;
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
  if (err.model !== undefined) return err;
  return new ServingError(err.code, `model '${model}': ${err.message}`, { model, cause: err, ...(err.details === undefined ? {} : { details: err.details }) });
}

function wrapRunError(model: string, err: unknown): ServingError {
  if (err instanceof ServingError) return err.code === 'RUNTIME_UNAVAILABLE' ? workerLost(model, err) : err;
  const msg = err instanceof Error ? err.message : String(err);
  if (isAllocationFailure(err)) {
    return new ServingError('INSUFFICIENT_MEMORY', `model '${model}': out of memory while running: ${msg}`, { model, cause: err });
  }
  return new ServingError('INTERNAL', `model '${model}': onnxruntime failed: ${msg}`, { model, cause: err });
}

class PooledModelSession implements ModelSession, CopyHolder {
  private released = false;
  /** The worker's copy; undefined once moved to the main thread. */
  private inWorker: PooledSession | undefined;
  private onMain: MainCopy | undefined;
  /** Set when the session may hold a main-thread copy beside its worker's. */
  private plan: CopyPlan | undefined;
  private quietRuns = 0;
  private making = false;
  /** What the copy that exists is booked at. */
  private copyBooked = 0;

  constructor(
    session: PooledSession,
    readonly provider: ProviderName,
    private readonly model: string,
    /** How it was created (its own options), to create it again on the other side: the main thread, or a worker of `pool`. */
    private readonly origin: { readonly path: string; readonly options: CreateSessionOptions; readonly pool: RuntimePool },
    private readonly quiet: QuietWindow | undefined,
  ) {
    if (session.worker === MAIN_THREAD) this.onMain = { session, runs: 0, dropped: false };
    else this.inWorker = session;
  }

  private get any(): PooledSession {
    return (this.inWorker ?? this.onMain?.session)!;
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
    const copy = this.onMain !== undefined && (!busy || this.inWorker === undefined) ? this.onMain : undefined;
    let makeCopy = false;
    if (copy !== undefined) copy.runs++;
    const plan = this.inWorker !== undefined ? this.plan : undefined;
    if (plan !== undefined) {
      plan.copies.ran(this);
      // Only once the copy would get a place: a model the held ones outrun makes none (main-thread-copies.ts).
      if (copy === undefined && !busy && this.onMain === undefined && !this.making)
        makeCopy = ++this.quietRuns >= COPY_AFTER_QUIET_RUNS && plan.copies.wouldAdmit(this);
    }
    try {
      return await (copy?.session ?? this.any).run(feeds, outputNames);
    } catch (err) {
      throw wrapRunError(this.model, err);
    } finally {
      if (copy !== undefined && --copy.runs === 0 && copy.dropped) void copy.session.release();
      // After this answer is on its way: creating a session blocks the main thread for its create time.
      if (makeCopy) {
        this.making = true;
        setImmediate(() => void this.makeCopy());
      }
    }
  }

  allowMainThreadCopy(plan: CopyPlan): void {
    if (this.provider !== 'cpu') throw new Error(`model '${this.model}': only CPU sessions run on the main thread (this one uses ${this.provider})`);
    if (this.inWorker === undefined) return;
    this.plan = plan;
  }

  private async makeCopy(): Promise<void> {
    const plan = this.plan;
    try {
      if (plan === undefined || this.released || this.onMain !== undefined || this.inWorker === undefined) return;
      this.quietRuns = 0;
      const booked = plan.book.tryGrow(plan.fileBytes);
      if (booked === undefined) return;
      if (!plan.copies.admit(this)) {
        plan.book.shrink(booked);
        return;
      }
      let session: PooledSession;
      try {
        session = await createMainThreadSession(
          this.origin.path,
          plan.intraOpThreads === undefined ? this.origin.options : { ...this.origin.options, intraOpThreads: plan.intraOpThreads },
        );
      } catch (err) {
        plan.copies.forget(this);
        plan.book.shrink(booked);
        this.plan = undefined;
        plan.onError?.(err as Error);
        return;
      }
      if (this.released || this.inWorker === undefined) {
        plan.copies.forget(this);
        plan.book.shrink(booked);
        await session.release();
        return;
      }
      this.copyBooked = booked;
      this.onMain = { session, runs: 0, dropped: false };
    } finally {
      this.making = false;
    }
  }

  dropCopy(): void {
    const copy = this.onMain;
    // A session on the main thread only holds no copy: its one session is never dropped.
    if (copy === undefined || this.inWorker === undefined) return;
    this.onMain = undefined;
    copy.dropped = true;
    this.quietRuns = 0;
    this.plan?.copies.forget(this);
    this.plan?.book.shrink(this.copyBooked);
    this.copyBooked = 0;
    if (copy.runs === 0) void copy.session.release();
  }

  async moveToMainThread(move: MoveOptions = {}): Promise<void> {
    if (this.onMain !== undefined && this.inWorker === undefined) return;
    if (this.provider !== 'cpu') throw new Error(`model '${this.model}': only CPU sessions run on the main thread (this one uses ${this.provider})`);
    const { intraOpThreads } = move;
    const options = intraOpThreads === undefined ? this.origin.options : { ...this.origin.options, intraOpThreads };
    const session = await createMainThreadSession(this.origin.path, options);
    if (this.released) {
      await session.release();
      return;
    }
    this.dropCopy();
    this.plan = undefined;
    this.onMain = { session, runs: 0, dropped: false };
    const old = this.inWorker;
    this.inWorker = undefined;
    // Not awaited: the load need not wait for the worker's turn to free it (the worker handles messages in order,
    // so nothing can use it meanwhile); a failure there leaves nothing to undo.
    void old?.release().catch(() => undefined);
  }

  async moveToWorker(): Promise<void> {
    if (this.inWorker !== undefined) return;
    const session = await this.origin.pool.createSession(this.origin.path, this.origin.options);
    if (this.released) {
      await session.release();
      return;
    }
    const main = this.onMain;
    this.onMain = undefined;
    this.inWorker = session;
    if (main === undefined) return;
    // A run started on it finishes there; it is released after the last (run's finally).
    main.dropped = true;
    if (main.runs === 0) void main.session.release();
  }

  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    const copy = this.onMain;
    this.dropCopy();
    await Promise.all([this.inWorker?.release(), copy !== undefined && !copy.dropped ? copy.session.release() : undefined]);
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
      const main = options.mainThread;
      const session =
        main === undefined
          ? await options.pool.createSession(modelPath, createOptions, options.avoidWorkers)
          : await createMainThreadSession(
              modelPath,
              main.intraOpThreads === undefined ? createOptions : { ...createOptions, intraOpThreads: main.intraOpThreads },
            );
      return new PooledModelSession(session, providers[0] ?? 'cpu', model, { path: modelPath, options: createOptions, pool: options.pool }, options.quiet);
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
      throw new ServingError('INVALID_MODEL', `model '${model}': onnxruntime cannot load ${inPackage}: ${msg.split(modelPath).join(inPackage)}`, {
        model,
        cause: err,
      });
    }
  }
}
