/**
 * @module runtime/runtime-pool
 * A fixed pool of worker threads that own the onnxruntime sessions. A session
 * lives in one worker (the one holding the fewest sessions when it is
 * created); calls to it are messages. The main thread only parses HTTP and
 * moves tensors, so /ping and other models stay responsive while a model
 * loads or runs.
 */
import { Worker } from 'node:worker_threads';
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
}

class RuntimeWorker {
  readonly worker: Worker;
  sessions = 0;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private dead: Error | undefined;

  constructor(
    readonly index: number,
    settings: WorkerSettings,
  ) {
    this.worker = new Worker(new URL('./session-worker.js', import.meta.url), { name: `onnx-mme-runtime-${index}`, workerData: settings });
    // Idle workers must not keep the process alive; a pending call refs them.
    this.worker.unref();
    this.worker.on('message', (reply: WorkerReply) => {
      const p = this.pending.get(reply.id);
      if (!p) return;
      this.pending.delete(reply.id);
      if (this.pending.size === 0) this.worker.unref();
      p.resolve(reply);
    });
    const fail = (err: Error): void => {
      this.dead = err;
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
    };
    this.worker.on('error', (err) => fail(new Error(`runtime worker ${index} crashed: ${err.message}`)));
    this.worker.on('exit', (code) => fail(new Error(`runtime worker ${index} exited with code ${code}`)));
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
  /** Run `repeats` times; each run's duration in µs, measured where the session lives (no message passing). */
  timeRuns(feeds: ReadonlyMap<string, Tensor>, outputNames: readonly string[], repeats: number): Promise<number[]>;
  release(): Promise<void>;
}

/** An error the worker reported: the message is onnxruntime's own. */
export class RuntimeCallError extends Error {}

function unwrap(reply: WorkerReply): Exclude<WorkerReply, { ok: false }> {
  if (!reply.ok) throw new RuntimeCallError(reply.error.message);
  return reply;
}

export class RuntimePool {
  private readonly workers: RuntimeWorker[];
  private closed = false;

  constructor(
    readonly size: number,
    settings: WorkerSettings = {},
  ) {
    // Before any worker starts: TensorRT reads its cache settings from the environment (provider-options.ts).
    if (settings.tensorrtCacheDir !== undefined) tensorrtCacheEnvironment(process.env, settings.tensorrtCacheDir);
    this.workers = Array.from({ length: Math.max(1, size) }, (_, i) => new RuntimeWorker(i, settings));
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
      timeRuns: async (feeds, outputNames, repeats) => {
        const r = unwrap(await worker.call({ op: 'time', session, feeds: toTensorList(feeds), outputs: outputNames, repeats }));
        if (r.op !== 'time') throw new Error('runtime worker answered a time with the wrong reply');
        return [...r.runUs];
      },
      release: async () => {
        if (released) return;
        released = true;
        worker.sessions--;
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
    await Promise.all(this.workers.map(async (w) => {
      const reply = unwrap(await w.call({ op: 'prime', intraOpThreads }));
      if (reply.op !== 'prime') throw new Error('runtime worker answered a prime with the wrong reply');
    }));
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
    await Promise.allSettled(this.workers.map((w) => w.worker.terminate()));
  }
}
