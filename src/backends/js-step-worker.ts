/**
 * @module backends/js-step-worker
 * The server's side of a js step's process (js-step-host.ts, run in the
 * sandbox of js-step-sandbox.ts): one process (the step's "worker") per
 * loaded step version, supervised.
 *
 * - Every call has a deadline (`timeoutMs`: import + initialize(), each
 *   execute(), finalize()). A call past it kills the process (SIGKILL): that
 *   is the only way to stop an endless loop. The call fails with TIMEOUT (504).
 * - A process that dies (an exception thrown from a timer, an unhandled
 *   rejection, process.exit(), its heap limit `js_heap_limit_mb`, its memory
 *   bound) fails the calls in flight on it with INTERNAL naming the model and
 *   the cause.
 * - Either way the process is replaced at once (a fresh import + initialize());
 *   calls in flight that were not the culprit (another batch on the same
 *   process) fail with RUNTIME_UNAVAILABLE (503, retry), calls that arrive
 *   meanwhile wait for the new one.
 * - MAX_FAULTS such faults in a row (no call answered between them) within
 *   FAULT_WINDOW_MS fail the step for good: every call then gets the same
 *   error at once (INTERNAL, "... crashed or timed out N times in a row;
 *   load the model again"), and no process is started again until the model
 *   is loaded again. A step that keeps crashing is broken, not unlucky, and
 *   restarting it for ever would cost every request a restart.
 * - A call that throws (execute() rejects) is not a fault: the step answered.
 */
// First: onnxruntime's telemetry is decided before onnxruntime-node loads (config/ort-env.ts).
import '../config/ort-env.js';
import { spawn, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import { retryAfter, ServingError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import { BULK_CAP_BYTES, openBulkFiles, type BulkFiles } from './js-step-bulk.js';
import { FrameReader, FrameWriter } from './js-step-frames.js';
import { JS_STEP_TENSORS, type HostReply, type HostRequest, type JsBatch, type JsHostData, type JsStepError } from './js-step-protocol.js';
import type { Sandbox } from './js-step-sandbox.js';

/** Faults in a row at which the step is failed until it is loaded again. */
export const MAX_FAULTS = 5;
/** Faults older than this are forgotten (a fault a day is bad luck, not a broken step). */
export const FAULT_WINDOW_MS = 600_000;

export interface JsStepWorkerOptions {
  /** The model as messages name it. */
  readonly label: string;
  readonly hostData: JsHostData;
  /** The deadline of each call (initialize, execute, finalize). */
  readonly timeoutMs: number;
  readonly logger: Logger;
  /** Where and how the process runs (js-step-sandbox.ts). */
  readonly sandbox: Sandbox;
  /** Its V8 heap limit, which its sandbox's memory bound is sized from (messages name it). */
  readonly heapLimitMb: number;
  readonly maxFaults?: number;
  readonly faultWindowMs?: number;
}

/** A load failure the host reported: turned into the load's error by the caller (js-step.ts keeps the messages). */
export class JsLoadFailure extends Error {
  constructor(
    readonly what: string,
    readonly error: JsStepError | undefined,
  ) {
    super(error ? `${what}: ${error.message}` : what);
  }
}

/** execute() threw: the step's own error (its code decides 400 or 500 in js-step.ts). */
export class JsCallFailure extends Error {
  constructor(
    readonly what: string,
    readonly error: JsStepError,
  ) {
    super(`${what}: ${error.message}`);
  }
}

interface Pending {
  resolve(reply: HostReply): void;
  reject(err: Error): void;
}

function seconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(3))} s`;
}

/** The stderr a dead process leaves tells a full heap from other ends. */
function exitCause(code: number | null, signal: NodeJS.Signals | null, stderr: string, heapLimitMb: number): string {
  if (/JavaScript heap out of memory|Reached heap limit/.test(stderr)) return `its heap is full (js_heap_limit_mb ${heapLimitMb})`;
  if (/out of memory/i.test(stderr)) return `it ran out of memory (js_heap_limit_mb ${heapLimitMb} bounds its heap and typed arrays together)`;
  if (signal !== null) return `its process was killed by ${signal}`;
  return `its process exited with code ${code}`;
}

/** The step's process, holding `bulk`'s two files at fds 4 and 5 (closed here once it has them; both, if it cannot start). */
function spawnStep(sandbox: Sandbox, bulk: BulkFiles | undefined, capBytes: number): ChildProcess {
  try {
    return spawn(sandbox.command, [...sandbox.args, ...(bulk ? ['--bulk', String(capBytes)] : [])], {
      cwd: sandbox.scratchDir,
      env: sandbox.env,
      // fd 3: the frames; 4 and 5: the bulk files (js-step-bulk.ts STEP_BULK_FDS).
      stdio: ['ignore', 'pipe', 'pipe', 'pipe', ...(bulk ? bulk.childFds : [])],
      ...(sandbox.user ? { uid: sandbox.user.uid, gid: sandbox.user.gid } : {}),
    });
  } catch (err) {
    bulk?.link.close();
    throw err;
  } finally {
    bulk?.handedOver();
  }
}

/** One step process and the calls waiting on it. */
class Instance {
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  /** Resolves when the process runs (its start-up is not the step's time). */
  readonly online: Promise<void>;
  readonly pending = new Map<number, Pending>();
  /** Why it stopped (set once, before it is killed). */
  ended: Error | undefined;
  private onEnd: ((err: Error) => void) | undefined;
  private readonly channel: Socket;
  private readonly writer: FrameWriter;
  /** The files large tensors travel through (undefined when they could not be made: everything goes inline). */
  private readonly bulk: BulkFiles | undefined;
  private stderrTail = '';
  /** Whether its handles keep the event loop alive now (spawn's are referenced). */
  private referenced = true;

  constructor(
    options: JsStepWorkerOptions,
    onDeath: (instance: Instance, cause: string) => void,
    onLoadFailed: (instance: Instance, failure: JsLoadFailure) => void,
  ) {
    const { sandbox, label, logger } = options;
    const capBytes = Math.min(BULK_CAP_BYTES, sandbox.memoryBoundBytes);
    this.bulk = openBulkFiles(capBytes);
    if (!this.bulk) logger.warn({ model: label }, 'js step: no bulk files could be made in the temp directory; its large tensors go through the socket');
    this.child = spawnStep(sandbox, this.bulk, capBytes);
    this.channel = this.child.stdio[3] as Socket;
    this.writer = new FrameWriter(this.channel, JS_STEP_TENSORS, this.bulk?.link);
    const died = (cause: string): void => {
      if (this.ended) return;
      onDeath(this, cause);
    };
    let online: () => void = () => undefined;
    this.online = new Promise<void>((resolve) => (online = resolve));
    this.ready = new Promise<void>((resolve, reject) => {
      this.onEnd = reject;
      const onReply = (reply: HostReply): void => {
        if (reply.op === 'online') return online();
        if (reply.op === 'crash') return died(reply.cause);
        if (reply.op === 'ready') {
          this.onEnd = undefined;
          this.updateRef();
          return resolve();
        }
        if (reply.op === 'load-failed') return onLoadFailed(this, new JsLoadFailure(reply.what, reply.error));
        const p = this.pending.get(reply.id);
        if (!p) return;
        this.pending.delete(reply.id);
        this.updateRef();
        p.resolve(reply);
      };
      // The step cannot have built an answer larger than its own memory bound: nothing larger is read.
      const reader = new FrameReader(JS_STEP_TENSORS, sandbox.memoryBoundBytes, this.bulk?.link);
      this.channel.on('data', (chunk: Buffer) => {
        let replies;
        try {
          replies = reader.push(chunk);
        } catch (err) {
          died(`it wrote a malformed message (${(err as Error).message})`);
          return;
        }
        for (const r of replies) if (!this.ended) onReply(r as unknown as HostReply);
      });
    });
    // Nobody may be waiting (a restart while idle): do not report it as unhandled.
    this.ready.catch(() => undefined);
    // EPIPE and the like once the process is gone: its 'close' says why.
    this.channel.on('error', () => undefined);
    for (const [stream, name] of [
      [this.child.stdout, 'stdout'],
      [this.child.stderr, 'stderr'],
    ] as const) {
      stream!.setEncoding('utf8');
      stream!.on('data', (text: string) => {
        if (name === 'stderr') this.stderrTail = (this.stderrTail + text).slice(-8192);
        logger.info({ model: label, stream: name }, text.trimEnd().slice(0, 4096));
      });
    }
    this.child.on('error', (err) => died(`its process could not be started: ${err.message}`));
    this.child.on('close', (code, signal) => {
      this.bulk?.link.close();
      died(exitCause(code, signal, this.stderrTail, options.heapLimitMb));
    });
    this.send({ op: 'init', data: options.hostData });
  }

  /** End it: every waiting call (and a start not finished) fails with `err`. */
  stop(err: Error): void {
    if (this.ended) return;
    this.ended = err;
    this.onEnd?.(err);
    this.onEnd = undefined;
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    this.child.kill('SIGKILL');
    this.bulk?.link.close();
    this.updateRef();
  }

  /** Write a request (throws when it cannot be encoded: a batch V8 cannot serialize). */
  send(request: HostRequest): void {
    this.writer.write(request as unknown as Record<string, unknown>);
  }

  call(request: HostRequest): Promise<HostReply> {
    if (this.ended) return Promise.reject(this.ended);
    return new Promise<HostReply>((resolve, reject) => {
      this.pending.set((request as { id: number }).id, { resolve, reject });
      this.updateRef();
      this.send(request);
    });
  }

  /** An idle step must not keep the server alive; a start or a call in flight does. */
  updateRef(): void {
    const busy = !this.ended && (this.onEnd !== undefined || this.pending.size > 0);
    // Four native calls per handle change: only when it changes, not twice per call.
    if (busy === this.referenced) return;
    this.referenced = busy;
    for (const handle of [this.child, this.channel, this.child.stdout as Socket, this.child.stderr as Socket]) {
      if (busy) handle.ref();
      else handle.unref();
    }
  }
}

export class JsStepWorker {
  private instance: Instance;
  private nextId = 1;
  /** When the faults of the current run of faults happened (performance.now()); emptied by an answered call. */
  private faults: number[] = [];
  private failed: ServingError | undefined;
  /** Until the first start finished: a fault then fails the load instead of restarting. */
  private starting = true;
  private closed = false;
  private readonly maxFaults: number;
  private readonly faultWindowMs: number;

  constructor(private readonly options: JsStepWorkerOptions) {
    this.maxFaults = options.maxFaults ?? MAX_FAULTS;
    this.faultWindowMs = options.faultWindowMs ?? FAULT_WINDOW_MS;
    this.instance = this.spawn();
  }

  /**
   * The first start (the model's load): resolves when initialize() returned;
   * rejects with JsLoadFailure (the host's checks, initialize() threw, the
   * deadline) or a ServingError (the worker crashed). Nothing is left running
   * on failure.
   */
  async started(): Promise<void> {
    try {
      await this.instance.ready;
      this.starting = false;
    } catch (err) {
      this.closed = true;
      this.instance.stop(err as Error);
      throw err;
    }
  }

  /** What execute() returned (not yet checked), or a rejection: JsCallFailure (the step threw) or a ServingError. */
  async execute(batch: JsBatch): Promise<unknown> {
    const reply = await this.call((id) => ({ op: 'execute', id, batch }), 'execute()');
    if (reply.op !== 'result') throw new Error('js step worker answered an execute with the wrong reply');
    if (!reply.ok) throw new JsCallFailure(reply.what, reply.error);
    return reply.value;
  }

  /**
   * finalize() within one deadline (a worker still restarting gets the same
   * deadline to finish its start first), then the worker is gone. Never
   * rejects: a failure is logged.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const inst = this.instance;
    const { label, timeoutMs, logger } = this.options;
    const unloaded = new ServingError('MODEL_NOT_FOUND', `model '${label}' was unloaded`, { model: label });
    if (this.failed || inst.ended) {
      inst.stop(unloaded);
      return;
    }
    try {
      const finalized = inst.ready.then(() => inst.call({ op: 'finalize', id: this.nextId++ }));
      const reply = await deadline(finalized, timeoutMs, () => new Error(`finalize() did not return within ${seconds(timeoutMs)}; its worker was stopped`));
      if (reply.op === 'finalized' && reply.error) logger.warn({ model: label, err: reply.error.message }, 'js step finalize() failed');
    } catch (err) {
      logger.warn({ model: label, err: (err as Error).message }, 'js step finalize() failed');
    } finally {
      inst.stop(unloaded);
    }
  }

  /** Stopped for good after MAX_FAULTS faults in a row: only a new load starts it again. */
  get stopped(): boolean {
    return this.failed !== undefined;
  }

  /** The process running the step now (tests look at it). */
  get process(): ChildProcess {
    return this.instance.child;
  }

  /**
   * A worker whose start (import + initialize()) has the call deadline too,
   * counted from when its process runs: the process's own start-up is the
   * machine's business (tens of ms, seconds on a loaded one), not the step's.
   */
  private spawn(): Instance {
    const inst = new Instance(
      this.options,
      (dead, cause) => this.fault(dead, `the js step crashed: ${cause}`, 'INTERNAL'),
      // At load the failure is the load's error; at a restart (initialize() throws now) a fault like any other.
      (failed, failure) => (this.starting ? failed.stop(failure) : this.fault(failed, `its worker did not restart: ${failure.message}`, 'RUNTIME_UNAVAILABLE')),
    );
    const { timeoutMs, hostData } = this.options;
    let timer: NodeJS.Timeout | undefined;
    let settled = false;
    void inst.online.then(() => {
      if (settled) return;
      timer = setTimeout(() => {
        const why = `${hostData.fileName} did not finish loading (import and initialize()) within ${seconds(timeoutMs)}`;
        if (this.starting) inst.stop(new JsLoadFailure(why, undefined));
        else this.fault(inst, `its worker did not restart: ${why}`, 'RUNTIME_UNAVAILABLE');
      }, timeoutMs);
      timer.unref();
    });
    const done = (): void => {
      settled = true;
      clearTimeout(timer);
    };
    inst.ready.then(done, done);
    return inst;
  }

  private async call(make: (id: number) => HostRequest, what: string): Promise<HostReply> {
    const { label, timeoutMs } = this.options;
    if (this.failed) throw this.again(this.failed);
    if (this.closed) throw new ServingError('MODEL_NOT_FOUND', `model '${label}' was unloaded`, { model: label });
    const inst = this.instance;
    try {
      // A worker restarting after a fault: its start has its own deadline (spawn).
      await inst.ready;
    } catch (err) {
      if (err instanceof JsLoadFailure) {
        throw new ServingError('RUNTIME_UNAVAILABLE', `model '${label}': its js step could not be restarted: ${err.message}; retry the request`, {
          model: label,
          details: retryAfter(),
          cause: err,
        });
      }
      throw err;
    }
    const id = this.nextId++;
    const sent = new Promise<HostReply>((resolve, reject) => {
      if (inst.ended) return reject(inst.ended);
      inst.pending.set(id, { resolve, reject });
      inst.updateRef();
      try {
        inst.send(make(id));
      } catch (err) {
        inst.pending.delete(id);
        inst.updateRef();
        reject(
          new ServingError('INTERNAL', `model '${label}': the batch cannot be passed to its js step: ${(err as Error).message}`, { model: label, cause: err }),
        );
      }
    });
    const reply = await deadline(sent, timeoutMs, () => {
      // This call is the culprit: it gets TIMEOUT; the calls beside it on the same worker a retryable 503.
      inst.pending.delete(id);
      const why = `${what} did not return within ${seconds(timeoutMs)}`;
      this.fault(inst, why, 'TIMEOUT');
      return new ServingError(
        'TIMEOUT',
        `model '${label}': ${why}; ${this.failed ? this.failed.message.replace(`model '${label}': `, '') : 'its worker was stopped and is restarted for the next request'}`,
        { model: label },
      );
    });
    // Answered: the step is alive, whatever the answer says.
    if (this.faults.length > 0) this.faults = [];
    return reply;
  }

  /**
   * `inst` crashed, or was stopped for a deadline: fail what waits on it,
   * count the fault, and start a fresh worker unless the step is now failed
   * (or this was its first start, or it is unloaded).
   */
  private fault(inst: Instance, cause: string, kind: 'INTERNAL' | 'TIMEOUT' | 'RUNTIME_UNAVAILABLE'): void {
    if (inst.ended) return;
    const { label, logger } = this.options;
    if (this.starting || this.closed) {
      // The load's own error (js-step.ts names it), or nothing waits any more.
      inst.stop(new ServingError('INTERNAL', `model '${label}': ${cause}`, { model: label }));
      return;
    }
    const now = performance.now();
    this.faults = [...this.faults.filter((t) => now - t < this.faultWindowMs), now];
    if (this.faults.length >= this.maxFaults) {
      this.failed = new ServingError(
        'INTERNAL',
        `model '${label}': its js step crashed or timed out ${this.faults.length} times in a row (last: ${cause}); it is stopped until the model is loaded again`,
        { model: label },
      );
    }
    const next = this.failed ? this.failed.message.replace(`model '${label}': `, '') : 'its worker is restarted for the next request';
    // A crash cannot be pinned on one call: every call on the worker fails with it. A deadline can:
    // the others on the worker only lost it (503, retry).
    const others =
      kind === 'INTERNAL'
        ? new ServingError('INTERNAL', `model '${label}': ${cause}; ${next}`, { model: label })
        : this.failed
          ? this.again(this.failed)
          : new ServingError('RUNTIME_UNAVAILABLE', `model '${label}': its js step's worker was stopped (${cause}); retry the request`, {
              model: label,
              details: retryAfter(),
            });
    inst.stop(others);
    if (this.failed) {
      logger.error({ model: label, faults: this.faults.length, cause }, 'js step keeps crashing or timing out; stopped until the model is loaded again');
      return;
    }
    logger.warn({ model: label, faults: this.faults.length, cause }, 'js step crashed or timed out; restarting its worker');
    if (this.instance === inst) this.instance = this.spawn();
  }

  /** The failed step's error, as a new error per request (one object must not be shared by concurrent answers). */
  private again(err: ServingError): ServingError {
    return new ServingError(err.code, err.message, { model: this.options.label });
  }
}

/** `work`, or the error `late()` makes once `ms` passed; `late` runs before anything `work` does afterwards is seen. */
function deadline<T>(work: Promise<T>, ms: number, late: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let done = false;
    const timer = setTimeout(
      () => {
        if (done) return;
        done = true;
        reject(late());
      },
      Math.max(0, ms),
    );
    timer.unref();
    work.then(
      (value) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        reject(err as Error);
      },
    );
  });
}
