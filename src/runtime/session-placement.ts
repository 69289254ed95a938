/**
 * @module runtime/session-placement
 * Where a session runs: decided once per loaded model version here (in its
 * runtime worker, on the main thread only, or in its worker with a
 * main-thread copy), and per run by the session itself from the
 * scheduler's facts (runtime/onnx-session.ts run, runtime/quiet-window.ts).
 * The scheduler only says what waits behind a batch; the runtime decides. By default a
 * session lives in a runtime worker, which keeps HTTP responsive while a
 * model runs; but each run then costs a round trip between threads (a
 * structured clone each way and two thread wake-ups: p50 at one connection
 * 0.210 ms against 0.144 ms without it, tiny model, 2-core bench box), which
 * for a small model is many times the run itself (a 16→4 model runs in about
 * 6 µs, a 256→1024→1024→16 MLP in about 45 µs).
 *
 * So a small, fast CPU model may get a second copy of its session on the
 * main thread, and each batch picks one (ModelSession.run, from the batch's load the
 * batcher reports): while the server is quiet (no model had requests queued behind a
 * batch or two batches in flight within runtime/quiet-window.ts's window),
 * the main-thread copy runs (no hop: the latency of a lone request is the
 * run itself), with MAIN_THREAD_MAX_INTRA_OP_THREADS intra-op threads; otherwise the worker
 * copy runs, so the main thread keeps reading and answering requests in
 * parallel (measured at 64 connections: 22.7k req/s this way or in the
 * worker alone, 19.4k with every batch on the main thread). A copy holds the
 * weights again and a thread pool of its own, so copies are bounded
 * (runtime/main-thread-copies.ts, MME_MAIN_THREAD_COPIES): made lazily once the model is
 * used while quiet, for the models that run most often, each booked in
 * the memory budget while it exists (`book`).
 *
 * The decision needs no timing: a run at max(1, max_batch_size) rows is
 * estimated from the model's graph (runtime/run-estimate.ts: multiply-adds
 * against its weights and elements written, at one bench-box core's rates),
 * so a model lands the same way on every start and every host; a timed probe
 * read the 16→4 model at 14-142 µs across ten starts, across the
 * main-thread-only limit. A model gets a main-thread copy when it runs on
 * CPU with one instance, its version directory holds at most
 * MAIN_THREAD_MAX_FILE_BYTES (a copy doubles its weights while it exists,
 * and that is booked), and the estimate is at most MME_MAIN_THREAD_MAX_RUN_US:
 * the event loop is then blocked for at most about that long by a run. A
 * variable non-batch dimension or string inputs (the cost depends on the
 * request), or a graph the estimate cannot bound (a loop, a product of two
 * activations, an operator it does not know), keep it in its worker only; the `session
 * placed` line says why.
 *
 * A model cheaper still, whose largest batch is estimated at most
 * MME_MAIN_THREAD_ONLY_MAX_RUN_US (PER_REQUEST_ONLY_TIMES that without a
 * batch dimension), keeps no worker copy at all: under load the hop costs
 * the main thread more than such a run (DEFAULT_MAIN_THREAD_ONLY_MAX_RUN_US
 * has the measurement). Where its file is small enough to be read before
 * its session exists (CREATION_PLACEMENT_MAX_FILE_BYTES), the same decision
 * is taken from the inputs and outputs the graph declares (creationPlacement)
 * and its session is created on the main thread at once: no worker session
 * is created, warmed up and released while it loads (those round trips were
 * about a third of a tiny model's cold load). Otherwise it moves to the main
 * thread while the model loads. Either way inside the load's measured
 * section (registry/model-loader.ts), so the load is booked at what the
 * session holds there.
 *
 * Per model, `parameters { key: "execution_thread" value: { string_value: "auto" | "main" | "worker" } }`:
 * `main` runs it on the main thread only (no worker copy, whatever the
 * estimate; CPU, one instance), `worker` keeps it in its worker only.
 */
import os from 'node:os';
import type { ModelConfig } from '../config/model-config-types.js';
import { ServingError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import { MainThreadCopies } from './main-thread-copies.js';
import { MAIN_THREAD } from './main-thread-session.js';
import type { CopyBooking, ModelSession, MoveOptions } from './onnx-session.js';
import type { GraphSummary } from './onnx-graph.js';
import { estimateRunUs, runCostOf } from './run-estimate.js';

export type ExecutionThread = 'auto' | 'main' | 'worker';

export interface PlacementSettings {
  /** Largest estimated run (µs, at the largest batch, runtime/run-estimate.ts) that `auto` moves to the main thread; 0 = `auto` never does. */
  readonly mainThreadMaxRunUs: number;
  /**
   * Largest estimated run that `auto` puts on the main thread only, with no
   * worker session (DEFAULT_MAIN_THREAD_ONLY_MAX_RUN_US says why); 0 = none.
   */
  readonly mainThreadOnlyMaxRunUs?: number;
  /**
   * Intra-op threads of an `auto` main-thread copy; default: every core, at
   * most MAIN_THREAD_MAX_INTRA_OP_THREADS. The copy runs only while the whole
   * server is quiet (runtime/quiet-window.ts), so one run may use the
   * cores; a model's own `intra_op_thread_count` parameter wins.
   */
  readonly mainThreadIntraOpThreads?: number;
  /** The CPUs the server plans for (MME_CPU_COUNT); default os.availableParallelism(). */
  readonly cpuCount?: number;
}

/**
 * MME_MAIN_THREAD_ONLY_MAX_RUN_US's default. A model whose largest batch
 * is estimated at most this many µs lives on the main thread only, busy or
 * quiet: handing a batch to a worker and taking its answer back costs the
 * main thread more than such a run. Measured on the 2-core bench box, tiny
 * model at 64 connections (8 rows a batch; a loop of runs on the main thread
 * costs 5.5-6 µs each, and 8 µs timed one by one with the event-loop turn
 * onnxruntime-node takes per run; estimated 6.5 µs at 64 rows): the hop cost
 * the main thread about 10-14 µs a batch, and with every batch on the main
 * thread the server answered 44.9k req/s against 40.8k with busy batches in
 * the worker (medians of 5 interleaved runs). The main thread is what limits
 * throughput there, so the worker copy only added work to it, and held the
 * weights twice.
 */
export const DEFAULT_MAIN_THREAD_ONLY_MAX_RUN_US = 15;

/** The server's defaults (MME_MAIN_THREAD_MAX_RUN_US, MME_MAIN_THREAD_ONLY_MAX_RUN_US). */
export const DEFAULT_PLACEMENT: PlacementSettings = Object.freeze({ mainThreadMaxRunUs: 1000, mainThreadOnlyMaxRunUs: DEFAULT_MAIN_THREAD_ONLY_MAX_RUN_US });

/**
 * Cap on a main-thread copy's intra-op threads: every copy holds its own
 * onnxruntime pool (that many threads less one, blocked while unused);
 * copies are bounded (MME_MAIN_THREAD_COPIES), so the threads they add are
 * too: at most copies × (this − 1). The measured gain (MLP, one connection:
 * p50 0.107 ms against 0.181 with one thread) came from the second thread.
 */
export const MAIN_THREAD_MAX_INTRA_OP_THREADS = 2;

/** MME_MAIN_THREAD_COPIES's default: copies of small models held at once, by the models that run most often. */
export const DEFAULT_MAIN_THREAD_COPIES = 16;

/** Largest version directory (model file and external data) that gets a main-thread copy. */
export const MAIN_THREAD_MAX_FILE_BYTES = 64 * 1024 * 1024;

/** What a main-thread copy is booked at beyond its weights where no measurement says better (the per-session allowance of registry/package-size.ts). */
export const MAIN_THREAD_COPY_ALLOWANCE_BYTES = 1024 * 1024;

const PARAMETER = 'execution_thread';

export function executionThreadOf(config: ModelConfig): ExecutionThread {
  const v = config.parameters[PARAMETER];
  if (v === undefined || v === '' || v === 'auto') return 'auto';
  if (v === 'main' || v === 'worker') return v;
  throw new ServingError('INVALID_MODEL', `parameter ${PARAMETER} must be "auto", "main" or "worker", got ${JSON.stringify(v)}`);
}

/**
 * A model without a batch dimension (max_batch_size 0) pays the hop to its
 * worker on every request, not once per batch (tiny 16→4: 185 µs a request
 * through its worker against 56 µs for the same weights batched; the hop
 * itself read 65-185 µs a request on the bench box). So it lives on the main
 * thread only up to this multiple of the main-thread-only limit: a run that
 * long is still below the hop it saves, and does not hold up the event loop
 * for long on every request.
 */
export const PER_REQUEST_ONLY_TIMES = 4;

/** Where a version's session runs, and why; `runUs`: the estimate it was decided on (none: `execution_thread` decided). */
export type Decision =
  { readonly kind: 'worker'; readonly reason: string; readonly runUs?: number } | { readonly kind: 'main only' | 'copy'; readonly runUs?: number };

/** Elements per row of each input, or undefined when a run's cost depends on the request (a variable dimension, strings). */
function perRowInputs(config: ModelConfig): Map<string, number> | undefined {
  const out = new Map<string, number>();
  for (const i of config.input) {
    const bounded = i.dataType !== 'BYTES' && i.dims.every((d) => d >= 0);
    if (!bounded && !i.optional) return undefined;
    const elements = i.dims.reduce((a, b) => a * b, 1);
    if (bounded) out.set(i.name, elements);
  }
  return out;
}

/** One loaded version of a model, as placement sees it (the registry supplies it). */
export interface PlacedVersion {
  readonly version: number;
  /** Its ONNX sessions, one per instance; empty for a processing step. */
  readonly sessions: readonly ModelSession[];
  /** Bytes of the version's files (the model and external data): a main-thread copy holds them again. */
  fileBytes(): Promise<number>;
  /** The ONNX file's graph (runtime/onnx-graph.ts: what the estimate reads; external data stays on disk). */
  graph(): Promise<GraphSummary>;
  /** Instances it may add when hot (registry/hot-instances.ts): enabled for a version placed in the workers only. */
  readonly elastic?: ElasticInstances;
}

/** A version that may grow instances across the runtime workers while hot, each booked like a main-thread copy. */
export interface ElasticInstances {
  enable(book: CopyBooking): void;
  /** The runtime workers its added instances run on (a worker that dies takes the model with it, as for its own sessions). */
  readonly workers: readonly number[];
}

/**
 * Largest model file whose placement is decided before its session exists
 * (creationPlacement). A model placed on the main thread only runs in at most
 * a few tens of µs by its estimate: about a million multiply-adds, 4 MB of
 * FP32 weights, so nearly every such model is below this; a larger file is
 * not read before its session is created, and such a model (one that gathers
 * from a large table, or `execution_thread: "main"`) moves to the main thread
 * after its session is created in its worker.
 */
export const CREATION_PLACEMENT_MAX_FILE_BYTES = 4 * 1024 * 1024;

/**
 * Where a version's session is created, decided before it exists: the main
 * thread (with these options) when placement would put it there only, by
 * decide() on `config` as completed from the inputs and outputs the graph
 * declares; undefined: in its runtime worker. `instances`: the sessions the
 * version will have. placeSessions decides again once the session exists,
 * from its own inputs and outputs, and moves it to its worker where that
 * differs.
 */
export async function creationPlacement(
  config: ModelConfig,
  version: Omit<PlacedVersion, 'sessions'>,
  settings: PlacementSettings,
  instances: number,
): Promise<MoveOptions | undefined> {
  if (instances !== 1) return undefined;
  const decision = await decide(config, executionThreadOf(config), { ...version, sessions: [] }, settings, 0);
  return decision.kind === 'main only' ? mainOnlyOptions(config, decision) : undefined;
}

/**
 * A session on the main thread only runs with one intra-op thread unless the model sets its own: a run this short
 * gains nothing from more, and a pool's threads would spin beside the server under load. `execution_thread: "main"`
 * keeps the model's threads.
 */
function mainOnlyOptions(config: ModelConfig, decision: Decision): MoveOptions {
  return { intraOpThreads: ownIntraOpThreads(config) || decision.runUs === undefined ? undefined : 1 };
}

/** Whether the model sets its own `intra_op_thread_count`. */
function ownIntraOpThreads(config: ModelConfig): boolean {
  const own = config.parameters['intra_op_thread_count'];
  return own !== undefined && own !== '';
}

/**
 * Decide where each session of `model` runs, from its config and graph
 * (decide), and move it there: to the main thread only, or allowed a
 * main-thread copy. Runs while the model loads, inside the load's measured
 * section (registry/model-loader.ts), so a session moved to the main thread
 * is booked at what it holds there. A failed move leaves the session in its
 * worker (logged); only a bad `execution_thread` fails the load. Each version
 * logs one `session placed` line.
 */
export async function placeSessions(
  config: ModelConfig,
  versions: Iterable<PlacedVersion>,
  label: string,
  settings: PlacementSettings,
  logger: Logger,
  /**
   * Books a second copy while it exists, at the bytes it will hold (its
   * files again, plus a session's allowance); no room in the budget when a
   * copy would be made: none is. Moving a session to the main thread holds
   * one copy as before and is not booked.
   */
  book: CopyBooking = { tryGrow: (fileBytes) => fileBytes + MAIN_THREAD_COPY_ALLOWANCE_BYTES, shrink: () => undefined },
  /** The server's bounded set of copies (MME_MAIN_THREAD_COPIES). */
  copies: MainThreadCopies = new MainThreadCopies(DEFAULT_MAIN_THREAD_COPIES),
): Promise<void> {
  if (config.platform === 'ensemble') return;
  const choice = executionThreadOf(config);
  const copyThreads = ownIntraOpThreads(config)
    ? undefined
    : (settings.mainThreadIntraOpThreads ?? Math.min(MAIN_THREAD_MAX_INTRA_OP_THREADS, settings.cpuCount ?? os.availableParallelism()));
  for (const version of versions) {
    const session = version.sessions[0];
    if (session === undefined) continue; // a processing step: already in-process
    const decision = await decide(config, choice, version, settings, copies.capacity);
    // Created on the main thread (creationPlacement), placed elsewhere from its session's own inputs and outputs.
    if (decision.kind !== 'main only' && session.worker === MAIN_THREAD) await session.moveToWorker();
    const placed = await apply(decision, session, config, { fileBytes: () => version.fileBytes(), copyThreads, book, copies });
    const fields = { model: label, version: version.version, batch: Math.max(1, config.maxBatchSize) };
    if (placed instanceof Error) {
      logger.warn({ ...fields, err: placed.message }, 'could not create the session on the main thread; it stays in its runtime worker');
    } else {
      if (choice === 'main' && decision.kind === 'worker') logger.warn(fields, `execution_thread "main" ignored: ${decision.reason}`);
      // Its batch costs more than the main thread may spend: when hot, more cores are what serves it faster.
      if (decision.kind === 'worker') version.elastic?.enable(book);
      logger.info({ ...fields, ...placementFields(decision, choice, copyThreads) }, 'session placed');
    }
  }
}

/**
 * Where one version's session runs. `auto`: from the run estimated at the
 * largest batch (runtime/run-estimate.ts), the same on every start: at most
 * MME_MAIN_THREAD_ONLY_MAX_RUN_US (PER_REQUEST_ONLY_TIMES that without a
 * batch dimension) the main thread only, at most MME_MAIN_THREAD_MAX_RUN_US a
 * main-thread copy beside the worker's, else the worker only.
 */
export async function decide(
  config: ModelConfig,
  choice: ExecutionThread,
  version: PlacedVersion,
  settings: PlacementSettings,
  copyCapacity: number,
): Promise<Decision> {
  const session = version.sessions[0];
  if (version.sessions.length > 1) return { kind: 'worker', reason: `it has ${version.sessions.length} instances, each in its own runtime worker` };
  if (session !== undefined && session.provider !== 'cpu') return { kind: 'worker', reason: `it runs on ${session.provider}` };
  if (choice === 'worker') return { kind: 'worker', reason: 'execution_thread "worker"' };
  if (choice === 'main') return { kind: 'main only' };
  if (settings.mainThreadMaxRunUs <= 0) return { kind: 'worker', reason: 'MME_MAIN_THREAD_MAX_RUN_US is 0' };
  const inputs = perRowInputs(config);
  if (inputs === undefined) return { kind: 'worker', reason: 'a variable dimension or a string input: the cost depends on the request' };
  if ((await version.fileBytes()) > MAIN_THREAD_MAX_FILE_BYTES) return { kind: 'worker', reason: 'its files are over 64 MiB' };
  let cost;
  try {
    cost = runCostOf(await version.graph(), inputs);
  } catch (err) {
    return { kind: 'worker', reason: `its graph could not be read for an estimate: ${(err as Error).message}` };
  }
  if ('unbounded' in cost) return { kind: 'worker', reason: `no estimate: ${cost.unbounded}` };
  const runUs = Math.round(estimateRunUs(cost, Math.max(1, config.maxBatchSize)) * 10) / 10;
  if (runUs > settings.mainThreadMaxRunUs) return { kind: 'worker', reason: 'estimated run over MME_MAIN_THREAD_MAX_RUN_US', runUs };
  const onlyMaxRunUs = Math.min(settings.mainThreadOnlyMaxRunUs ?? DEFAULT_MAIN_THREAD_ONLY_MAX_RUN_US, settings.mainThreadMaxRunUs);
  if (runUs <= onlyMaxRunUs * (config.maxBatchSize === 0 ? PER_REQUEST_ONLY_TIMES : 1)) return { kind: 'main only', runUs };
  if (copyCapacity === 0) return { kind: 'worker', reason: 'MME_MAIN_THREAD_COPIES is 0', runUs };
  return { kind: 'copy', runUs };
}

/** Puts the session where `decision` says; an Error when moving it failed (it then stays in its worker). */
async function apply(
  decision: Decision,
  session: ModelSession,
  config: ModelConfig,
  copy: { fileBytes: () => Promise<number>; copyThreads: number | undefined; book: CopyBooking; copies: MainThreadCopies },
): Promise<Error | undefined> {
  try {
    if (decision.kind === 'main only') await session.moveToMainThread(mainOnlyOptions(config, decision));
    else if (decision.kind === 'copy') {
      session.allowMainThreadCopy({ intraOpThreads: copy.copyThreads, fileBytes: await copy.fileBytes(), book: copy.book, copies: copy.copies });
    }
  } catch (err) {
    return err as Error;
  }
  return undefined;
}

/** The `session placed` line's fields: where, the estimate it was decided on, and why a session stays in its worker. */
function placementFields(decision: Decision, choice: ExecutionThread, copyThreads: number | undefined): Record<string, unknown> {
  const estimate = decision.runUs === undefined ? {} : { estimatedRunUs: decision.runUs };
  switch (decision.kind) {
    case 'main only':
      return choice === 'main'
        ? { placement: 'main thread only (execution_thread "main")' }
        : { placement: 'main thread only (a batch runs in less than a hop to a worker costs)', ...estimate };
    case 'copy':
      return {
        placement: 'main thread when the server is quiet (a copy, once used, among the most often used), worker when busy',
        ...estimate,
        intraOpThreads: copyThreads ?? "the model's intra_op_thread_count",
      };
    case 'worker':
      return { placement: 'runtime worker only', reason: decision.reason, ...estimate };
  }
}
