/**
 * @module runtime/runtime-pool
 * A fixed pool of worker threads that own the onnxruntime sessions. A session
 * lives in one worker (the one holding the fewest sessions when it is
 * created); calls to it are messages. The main thread only parses HTTP and
 * moves tensors, so /ping and other models stay responsive while a model
 * loads or runs.
 *
 * Supervision: a worker that dies (an exception inside it, a crash in native
 * code that node reports as an exit) is replaced at once by a fresh one at
 * the same index. Calls that were waiting on it fail with RUNTIME_UNAVAILABLE
 * (503, retryable: the server's fault, not the model's), its sessions are
 * gone, and the listeners (server.ts: the registry) drop the models that had
 * sessions there, so the next request loads them again. A pool whose workers
 * keep dying (MAX_DEATHS within DEATH_WINDOW_MS) reports itself unhealthy,
 * and /ping says so, so the platform replaces the container.
 */
// First: onnxruntime's telemetry is decided before onnxruntime-node loads (config/ort-env.ts).
import '../config/ort-env.js';
import { Worker } from 'node:worker_threads';
import { retryAfter, ServingError } from '../errors.js';
import type { Tensor } from '../protocol/tensor.js';
import type { OnnxIoInfo } from './onnx-io.js';
import { primeThread } from './prime.js';
import { tensorrtCacheEnvironment } from './provider-options.js';
import { collectGarbage } from './reclaim.js';
import { fromTensorList, toTensorList, type CreateSessionOptions, type WorkerReply, type WorkerRequest } from './worker-protocol.js';

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

interface Pending {
  resolve(reply: WorkerReply): void;
  reject(err: Error): void;
}

/** Process-wide settings every runtime worker starts with. */
export interface WorkerSettings {
  /** Where TensorRT keeps built engines and timing caches, so a reload skips the build (under the disk cache). */
  readonly tensorrtCacheDir?: string;
  /** The workers' nice value on Linux (MME_RUNTIME_WORKER_NICE); absent or 0: the process's own priority. */
  readonly nice?: number;
}

/**
 * The longest a stop waits for a starting worker to finish loading its modules. A worker stopped while node registers
 * onnxruntime-node's addon aborts the whole process (the addon's registration throws a C++ exception when the thread
 * may no longer run JavaScript, and nothing catches it): seen as `onnx-mme validate` ending on SIGABRT about once in two
 * thousand runs, where the command finished before its idle worker had started. A worker loads in well under a second.
 */
export const STOP_WAITS_FOR_START_MS = 10_000;

/** Deaths within DEATH_WINDOW_MS (10 min) at which the pool reports itself unhealthy: a sick instance, not bad luck. */
export const MAX_DEATHS = 3;
export const DEATH_WINDOW_MS = 600_000;

class RuntimeWorker {
  readonly worker: Worker;
  sessions = 0;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private dead: ServingError | undefined;
  /** Resolves once the worker's modules have loaded (its `ready` notice), or once it died. */
  private readonly started: Promise<void>;
  private markStarted!: () => void;
  /** Why the worker runs at the process's priority instead of WorkerSettings.nice, once it said so. */
  niceError: string | undefined;

  constructor(
    readonly index: number,
    settings: WorkerSettings,
    script: URL,
    onDeath: (worker: RuntimeWorker, cause: string) => void,
  ) {
    this.worker = new Worker(script, { name: `onnx-mme-runtime-${index}`, workerData: settings });
    // Idle workers must not keep the process alive; a pending call refs them.
    this.worker.unref();
    this.started = new Promise<void>((resolve) => (this.markStarted = resolve));
    this.worker.on('message', (reply: WorkerReply) => {
      if (reply.id === 0) {
        if (reply.ok && reply.op === 'ready') this.niceError = reply.niceError;
        this.markStarted();
        return;
      }
      const p = this.pending.get(reply.id);
      if (!p) return;
      this.pending.delete(reply.id);
      if (this.pending.size === 0) this.worker.unref();
      p.resolve(reply);
    });
    const fail = (cause: string): void => {
      this.markStarted();
      if (this.dead) return;
      // Its replacement starts now: the request may come back at once, the model loads again on it.
      this.dead = new ServingError('RUNTIME_UNAVAILABLE', `the runtime worker running this model stopped (${cause}); it has been replaced, retry the request`, {
        details: retryAfter(),
      });
      for (const p of this.pending.values()) p.reject(this.dead);
      this.pending.clear();
      onDeath(this, cause);
    };
    this.worker.on('error', (err) => fail(`runtime worker ${index} crashed: ${err.message}`));
    this.worker.on('exit', (code) => fail(`runtime worker ${index} exited with code ${code}`));
  }

  get isDead(): boolean {
    return this.dead !== undefined;
  }

  /** Stop the thread, once it has started (STOP_WAITS_FOR_START_MS says why), or after that long at the most. */
  async stop(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, STOP_WAITS_FOR_START_MS)));
    await Promise.race([this.started, deadline]);
    clearTimeout(timer);
    await this.worker.terminate();
  }

  call(request: DistributiveOmit<WorkerRequest, 'id'>): Promise<WorkerReply> {
    if (this.dead) return Promise.reject(this.dead);
    const id = this.nextId++;
    return new Promise<WorkerReply>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.ref();
      this.worker.postMessage({ ...request, id } as WorkerRequest);
    });
  }
}

export interface PooledSession {
  /** Index of the worker thread that holds the session (runs on different workers proceed in parallel). */
  readonly worker: number;
  readonly inputs: readonly OnnxIoInfo[];
  readonly outputs: readonly OnnxIoInfo[];
  run(feeds: ReadonlyMap<string, Tensor>, outputNames: readonly string[]): Promise<Map<string, Tensor>>;
  release(): Promise<void>;
}

/** An error the worker reported: the message is onnxruntime's own. */
export class RuntimeCallError extends Error {}

function unwrap(reply: WorkerReply): Exclude<WorkerReply, { ok: false }> {
  if (!reply.ok) throw new RuntimeCallError(reply.error.message);
  return reply;
}

/** The worker entry point: session-worker.js; unit tests inject a stand-in that dies on cue (a real worker cannot be stopped inside a native run without aborting the process). */
const SESSION_WORKER = new URL('./session-worker.js', import.meta.url);

/** Told when a worker died (and was replaced): `index` is where its sessions were. */
export type WorkerLostListener = (index: number, cause: string) => void;

export class RuntimePool {
  private readonly workers: RuntimeWorker[];
  private closed = false;
  /** When workers died (performance.now()), the last DEATH_WINDOW_MS of them. */
  private deaths: number[] = [];
  private readonly listeners: WorkerLostListener[] = [];
  private readonly onDeath = (dead: RuntimeWorker, cause: string): void => {
    if (this.closed) return;
    const now = performance.now();
    this.deaths = [...this.deaths.filter((t) => now - t < DEATH_WINDOW_MS), now];
    if (this.workers[dead.index] === dead) this.workers[dead.index] = new RuntimeWorker(dead.index, this.settings, this.script, this.onDeath);
    for (const listener of this.listeners) listener(dead.index, cause);
  };

  constructor(
    readonly size: number,
    private readonly settings: WorkerSettings = {},
    private readonly script: URL = SESSION_WORKER,
  ) {
    // Before any worker starts: TensorRT reads its cache settings from the environment (provider-options.ts).
    if (settings.tensorrtCacheDir !== undefined) tensorrtCacheEnvironment(process.env, settings.tensorrtCacheDir);
    this.workers = Array.from({ length: Math.max(1, size) }, (_, i) => new RuntimeWorker(i, settings, script, this.onDeath));
  }

  /** Why started workers could not take WorkerSettings.nice (each cause once); empty when they all did, or none was asked. */
  get niceErrors(): string[] {
    return [...new Set(this.workers.flatMap((w) => (w.niceError === undefined ? [] : [w.niceError])))];
  }

  /** Call `listener` each time a worker dies (after its replacement started). */
  onWorkerLost(listener: WorkerLostListener): void {
    this.listeners.push(listener);
  }

  /** False while MAX_DEATHS or more workers died within the last DEATH_WINDOW_MS: /ping reports it. */
  get healthy(): boolean {
    const now = performance.now();
    return this.deaths.filter((t) => now - t < DEATH_WINDOW_MS).length < MAX_DEATHS;
  }

  /**
   * Why /ping answers 503 while the pool is not healthy; undefined while it is. Its Retry-After is when the pool would
   * count healthy again if no other worker died: once all but MAX_DEATHS - 1 of the recent deaths left the window.
   */
  get unhealthy(): ServingError | undefined {
    const now = performance.now();
    const recent = this.deaths.filter((t) => now - t < DEATH_WINDOW_MS);
    if (recent.length < MAX_DEATHS) return undefined;
    const healthyAt = recent[recent.length - MAX_DEATHS]! + DEATH_WINDOW_MS;
    return new ServingError(
      'RUNTIME_UNAVAILABLE',
      `runtime workers keep dying (${recent.length} in the last ${DEATH_WINDOW_MS / 1000} s); this instance should be replaced`,
      { details: retryAfter((healthyAt - now) / 1000) },
    );
  }

  /** Worker deaths within the last DEATH_WINDOW_MS. */
  get recentDeaths(): number {
    const now = performance.now();
    return this.deaths.filter((t) => now - t < DEATH_WINDOW_MS).length;
  }

  /** The thread behind a worker index now (tests stop it to prove supervision). */
  threadOf(index: number): Worker {
    const w = this.workers[index];
    if (!w) throw new RangeError(`no runtime worker ${index}`);
    return w.worker;
  }

  /**
   * Create a session in the least-loaded worker, preferring workers not in
   * `avoid` (the instances of one model go to different workers, or they
   * could not run at the same time). Rejects with RuntimeCallError carrying
   * onnxruntime's message.
   */
  async createSession(path: string, options: CreateSessionOptions, avoid: ReadonlySet<number> = new Set()): Promise<PooledSession> {
    if (this.closed) throw new Error('runtime pool is closed');
    const open = this.workers.filter((w) => !avoid.has(w.index));
    const worker = (open.length > 0 ? open : this.workers).reduce((a, b) => (b.sessions < a.sessions ? b : a));
    worker.sessions++;
    let reply;
    try {
      reply = unwrap(await worker.call({ op: 'create', path, options }));
    } catch (err) {
      worker.sessions--;
      throw err;
    }
    if (reply.op !== 'create') throw new Error('runtime worker answered a create with the wrong reply');
    const session = reply.session;
    let released = false;
    return {
      worker: worker.index,
      inputs: reply.inputs,
      outputs: reply.outputs,
      run: async (feeds, outputNames) => {
        // Inputs are cloned, not transferred: a request's tensors may be read again after the run
        // (a failed batch re-runs each request alone, an ensemble feeds one tensor to several steps,
        // binary inputs are views of the request body). Outputs come back transferred.
        const r = unwrap(await worker.call({ op: 'run', session, feeds: toTensorList(feeds), outputs: outputNames }));
        if (r.op !== 'run') throw new Error('runtime worker answered a run with the wrong reply');
        return fromTensorList(r.outputs);
      },
      release: async () => {
        if (released) return;
        released = true;
        worker.sessions--;
        // A dead worker took its sessions with it: nothing to release.
        if (worker.isDead) return;
        unwrap(await worker.call({ op: 'release', session }));
      },
    };
  }

  /**
   * Pay onnxruntime's fixed per-thread cost in every worker now, so the idle
   * figure includes it (runtime/prime.ts); the main thread too when sessions
   * may run there. Before the server takes traffic.
   */
  async prime(intraOpThreads: number | undefined, mainThread: boolean): Promise<void> {
    await Promise.all(
      this.workers.map(async (w) => {
        const reply = unwrap(await w.call({ op: 'prime', intraOpThreads }));
        if (reply.op !== 'prime') throw new Error('runtime worker answered a prime with the wrong reply');
      }),
    );
    if (mainThread) await primeThread(intraOpThreads);
  }

  /** One full garbage collection in every worker and on the main thread (runtime/reclaim.ts): after unloads. */
  async reclaim(): Promise<void> {
    if (this.closed) return;
    await Promise.allSettled(this.workers.map((w) => w.call({ op: 'reclaim' })));
    collectGarbage();
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled(this.workers.map((w) => w.stop()));
  }
}
