/**
 * @module runtime/session-placement
 * Where a session runs: decided once per loaded model version here (a
 * main-thread copy or not), and per run by the session itself from the
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
 * A model qualifies when it runs on CPU with one instance, its version
 * directory holds at most MAIN_THREAD_MAX_FILE_BYTES (a copy doubles its
 * weights while it exists, and that is booked), and the median of PROBE_RUNS
 * runs of zeros at max(1, max_batch_size) rows, timed inside the worker after
 * warm-up, is at most MME_MAIN_THREAD_MAX_RUN_US: the event loop is then
 * blocked for at most about that long by a run. A variable non-batch
 * dimension (the cost depends on the request), string inputs, or inputs that
 * zeros do not suit keep it in its worker only.
 *
 * A model cheaper still, whose largest batch runs in at most
 * MME_MAIN_THREAD_ONLY_MAX_RUN_US, keeps no worker copy at all: under load
 * the hop costs the main thread more than such a run
 * (DEFAULT_MAIN_THREAD_ONLY_MAX_RUN_US has the measurement).
 *
 * Per model, `parameters { key: "execution_thread" value: { string_value: "auto" | "main" | "worker" } }`:
 * `main` runs it on the main thread only (no worker copy, no measurement;
 * CPU, one instance), `worker` keeps it in its worker only.
 */
import os from 'node:os';
import type { ModelConfig } from '../config/model-config-types.js';
import { ServingError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Tensor } from '../protocol/tensor.js';
import { MainThreadCopies } from './main-thread-copies.js';
import type { CopyBooking, ModelSession } from './onnx-session.js';

export type ExecutionThread = 'auto' | 'main' | 'worker';

export interface PlacementSettings {
  /** Largest measured run (µs, median, at the largest batch) that `auto` moves to the main thread; 0 = `auto` never does. */
  readonly mainThreadMaxRunUs: number;
  /**
   * Largest measured run that `auto` puts on the main thread only, with no
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
 * runs in at most this many µs lives on the main thread only, busy or quiet:
 * handing a batch to a worker and taking its answer back costs the main
 * thread more than such a run. Measured on the 2-core bench box, tiny model
 * at 64 connections (8 rows a batch; the probe reads 8 µs a run, where a
 * loop of runs on the main thread costs it 5.5-6 µs each: the probe also
 * times the event-loop turn onnxruntime-node takes per run): the hop cost
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

/** Runs timed per probe: enough for a stable median, few enough to keep loads fast (each run is at most a few ms). */
const PROBE_RUNS = 7;
/**
 * A first probe run this many times over MME_MAIN_THREAD_MAX_RUN_US settles
 * the probe at once: no median of noise could bring it under the limit. So a
 * heavy model costs one probe run (none when its implicit warm-up run already says so),
 * not PROBE_RUNS at max_batch_size rows (which would load a 4 s model in 32 s).
 */
const SETTLED_ABOVE = 50;
/**
 * The same for the implicit warm-up run, which is cold (first allocations,
 * kernel selection, the first hop to the worker): a tiny model's first run can
 * take milliseconds on a busy host, so only a run this far over the limit counts.
 */
const WARMUP_SETTLED_ABOVE = 100;
/** Most time the probe's further runs may take together, after a first run that did not settle it. */
const PROBE_CAP_US = 20_000;
/**
 * A model that may be cheaper than the hop is timed longer: the first runs
 * after a load are cold (tiny model: a median of 37 µs over the first 7 runs,
 * 8 µs from the 20th on), which is noise against a 1 ms limit but not against
 * MME_MAIN_THREAD_ONLY_MAX_RUN_US, so REFINE_RUNS runs after the first
 * PROBE_RUNS decide. The median of 25 such runs read the same as of 50 (tiny
 * model, 20 models: 17.6 and 17.5 µs at 8 rows on the 2-core bench box), at
 * half the time.
 */
const REFINE_RUNS = 25;
/** Runs up to this long, as a multiple of the main-thread-only limit, make a model small: timed with REFINE_RUNS more. */
const REFINE_BELOW = 10;
const PARAMETER = 'execution_thread';

export function executionThreadOf(config: ModelConfig): ExecutionThread {
  const v = config.parameters[PARAMETER];
  if (v === undefined || v === '' || v === 'auto') return 'auto';
  if (v === 'main' || v === 'worker') return v;
  throw new ServingError('INVALID_MODEL', `parameter ${PARAMETER} must be "auto", "main" or "worker", got ${JSON.stringify(v)}`);
}

/** Zeros at the largest batch, or undefined when a run's cost cannot be bounded from the config alone. */
function probeFeeds(config: ModelConfig, zeros: (rows: number) => Map<string, Tensor>): Map<string, Tensor> | undefined {
  const unbounded = config.input.some((i) => !i.optional && (i.dataType === 'BYTES' || i.dims.some((d) => d < 0)));
  return unbounded ? undefined : zeros(config.maxBatchSize);
}

/** One loaded version of a model, as placement sees it (the registry supplies it). */
export interface PlacedVersion {
  readonly version: number;
  /** Its ONNX sessions, one per instance; empty for a processing step. */
  readonly sessions: readonly ModelSession[];
  /** Bytes of the version's files (the model and external data): a main-thread copy holds them again. */
  fileBytes(): Promise<number>;
  /** µs of its implicit warm-up run (one row of zeros, registry/warmup.ts), when it ran: a run far over the limit settles the probe. */
  readonly warmupRunUs?: number | undefined;
}

/** Round trips the per-request probe makes (a model without a batch dimension): each one run in the worker. */
const HOP_PROBES = 20;
/**
 * The longest run a model without a batch dimension may have to live on the
 * main thread only because the hop costs more, as a multiple of the
 * main-thread-only limit: on a loaded host the hop reads long, and a run this
 * long must still not hold up the event loop on every request.
 */
const HOP_CAP_TIMES = 4;

/**
 * A model without a batch dimension (max_batch_size 0) pays the hop to its
 * worker on every request, not once per batch: tiny 16→4 cost 185 µs a
 * request through its worker against 56 µs for the same weights batched. So
 * its run is set against the hop itself, both timed now, on this host as
 * loaded as it is: HOP_PROBES round trips of one run each from this thread;
 * the run is the fastest run the worker timed (the run's own cost, which a
 * busy host only adds to: the median of 50 read 26-27 µs for runs of 6-8 µs
 * on the shared bench box), the hop the fastest round trip less its run.
 */
async function perRequestProbe(session: ModelSession, feeds: Map<string, Tensor>, outputs: readonly string[]): Promise<{ runUs: number; hopUs: number }> {
  let runUs = Number.POSITIVE_INFINITY;
  let hopUs = Number.POSITIVE_INFINITY;
  for (let i = 0; i < HOP_PROBES; i++) {
    const t0 = performance.now();
    const [run = Number.POSITIVE_INFINITY] = await session.timeRuns(feeds, outputs, 1);
    const tripUs = (performance.now() - t0) * 1000;
    runUs = Math.min(runUs, run);
    hopUs = Math.min(hopUs, Math.max(0, tripUs - run));
  }
  return { runUs, hopUs };
}

function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.POSITIVE_INFINITY;
}

/**
 * Allow the sessions of `model` that qualify a main-thread copy (or move
 * them, for `execution_thread: "main"` and models cheaper than the hop). Runs while the model loads, before
 * it takes traffic. A failed probe or copy leaves the session in its worker
 * (logged); only a bad `execution_thread` fails the load.
 */
export async function placeSessions(
  config: ModelConfig,
  versions: Iterable<PlacedVersion>,
  /** Zeros shaped for the config at `rows` rows (the warm-up's own, registry/warmup.ts). */
  zeros: (rows: number) => Map<string, Tensor>,
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
  if (choice === 'worker') return;
  const ownThreads = config.parameters['intra_op_thread_count'];
  const placement: Placement = {
    config,
    zeros,
    label,
    settings,
    logger,
    book,
    copies,
    choice,
    outputs: config.output.map((o) => o.name),
    onlyMaxRunUs: Math.min(settings.mainThreadOnlyMaxRunUs ?? DEFAULT_MAIN_THREAD_ONLY_MAX_RUN_US, settings.mainThreadMaxRunUs),
    copyThreads:
      ownThreads !== undefined && ownThreads !== ''
        ? undefined
        : (settings.mainThreadIntraOpThreads ?? Math.min(MAIN_THREAD_MAX_INTRA_OP_THREADS, settings.cpuCount ?? os.availableParallelism())),
  };
  for (const version of versions) await placeVersion(placement, version);
}

/** One model's placement: what placeSessions was given, and what it derived once for all its versions. */
interface Placement {
  readonly config: ModelConfig;
  readonly zeros: (rows: number) => Map<string, Tensor>;
  readonly label: string;
  readonly settings: PlacementSettings;
  readonly logger: Logger;
  readonly book: CopyBooking;
  readonly copies: MainThreadCopies;
  /** `auto` or `main` (`worker` places nothing). */
  readonly choice: ExecutionThread;
  readonly outputs: readonly string[];
  /** Largest run that `auto` puts on the main thread only (never above the copy limit). */
  readonly onlyMaxRunUs: number;
  /** Intra-op threads of a main-thread copy; undefined: the model sets its own. */
  readonly copyThreads: number | undefined;
}

async function placeVersion(p: Placement, version: PlacedVersion): Promise<void> {
  const { config, choice, logger, label } = p;
  const session = version.sessions[0];
  if (session === undefined) return; // a processing step: already in-process
  const why =
    version.sessions.length > 1 ? `it has ${version.sessions.length} instances` : session.provider !== 'cpu' ? `it runs on ${session.provider}` : undefined;
  if (why !== undefined) {
    if (choice === 'main')
      logger.warn({ model: label, version: version.version }, `execution_thread "main" ignored: ${why}; instances and GPU sessions run in runtime workers`);
    return;
  }
  let runUs: number | undefined;
  if (choice === 'auto') {
    runUs = await measuredRunUs(p, version, session);
    if (runUs === undefined) return;
  }
  // A model without a batch dimension: the hop is paid per request (perRequestProbe).
  let hopUs: number | undefined;
  if (choice === 'auto' && config.maxBatchSize === 0 && runUs !== undefined && runUs > p.onlyMaxRunUs) {
    ({ runUs, hopUs } = await againstTheHop(p, version, session, runUs));
  }
  // Cheaper than the hop: no worker copy at all. One intra-op thread (unless the model sets its own): a run
  // this short gains nothing from more, and a pool's threads would spin beside the server under load.
  const only = choice === 'main' || (runUs !== undefined && runUs <= p.onlyMaxRunUs) || hopUs !== undefined;
  if (!only && p.copies.capacity === 0) return;
  if (!(await useMainThread(p, version, session, only))) return;
  logPlaced(p, version, only, runUs, hopUs);
}

/**
 * For `auto`: the session's run time at the largest batch (µs, see probeRunUs), or undefined when
 * it stays in its worker (not measurable from the config, files too large, too slow, or the probe failed).
 */
async function measuredRunUs(p: Placement, version: PlacedVersion, session: ModelSession): Promise<number | undefined> {
  const { settings, logger, label } = p;
  if (settings.mainThreadMaxRunUs <= 0) return undefined;
  const feeds = probeFeeds(p.config, p.zeros);
  if (feeds === undefined) return undefined;
  if ((await version.fileBytes()) > MAIN_THREAD_MAX_FILE_BYTES) return undefined;
  // The implicit warm-up ran one row; the probe would run max_batch_size rows, which cost at least as much.
  const oneRow = version.warmupRunUs;
  if (oneRow !== undefined && oneRow > settings.mainThreadMaxRunUs * WARMUP_SETTLED_ABOVE) {
    logger.debug(
      { model: label, version: version.version, warmupRunUs: Math.round(oneRow), maxRunUs: settings.mainThreadMaxRunUs },
      'session stays in its runtime worker (its warm-up run settles it)',
    );
    return undefined;
  }
  let runUs: number;
  try {
    runUs = await probeRunUs(p, session, feeds);
  } catch (err) {
    logger.debug({ model: label, version: version.version, err: (err as Error).message }, 'placement probe failed; the session stays in its runtime worker');
    return undefined;
  }
  if (runUs > settings.mainThreadMaxRunUs) {
    logger.debug(
      { model: label, version: version.version, runUs: Math.round(runUs), maxRunUs: settings.mainThreadMaxRunUs },
      'session stays in its runtime worker',
    );
    return undefined;
  }
  return runUs;
}

/** The median run at the largest batch: of the refinement runs for a small model, else of at most PROBE_RUNS runs. */
async function probeRunUs(p: Placement, session: ModelSession, feeds: Map<string, Tensor>): Promise<number> {
  const settled = p.settings.mainThreadMaxRunUs * SETTLED_ABOVE;
  // One call first, bounded by what a small model's runs take: a model whose runs stay under the refinement
  // limit is timed in full there, PROBE_RUNS runs that are still cold and REFINE_RUNS after them that decide, in
  // one hop to the worker (a tiny model's probe: 0.6 ms, where two calls of 7 and 50 runs took 1.3).
  const smallUs = p.onlyMaxRunUs * REFINE_BELOW;
  const total = PROBE_RUNS + REFINE_RUNS;
  const runs = await session.timeRuns(feeds, p.outputs, smallUs > 0 ? total : 1, smallUs > 0 ? smallUs * total : undefined);
  if (runs.length === total) return median(runs.slice(PROBE_RUNS));
  // Not small: the median of PROBE_RUNS, unless the first run already settles it.
  const first = runs[0] ?? Number.POSITIVE_INFINITY;
  if (first <= settled) {
    // Bounded: at most PROBE_RUNS runs of at most `settled` µs each, and at most PROBE_CAP_US in all after the first.
    const wanted = 1 + Math.max(2, Math.min(PROBE_RUNS - 1, Math.floor(PROBE_CAP_US / Math.max(1, first))));
    if (runs.length < wanted) runs.push(...(await session.timeRuns(feeds, p.outputs, wanted - runs.length)));
  }
  return median(runs);
}

/** A model without a batch dimension, set against the hop it pays per request: hopUs is set when the main thread only wins. */
async function againstTheHop(p: Placement, version: PlacedVersion, session: ModelSession, runUs: number): Promise<{ runUs: number; hopUs?: number }> {
  try {
    const probe = await perRequestProbe(session, probeFeeds(p.config, p.zeros)!, p.outputs);
    if (probe.runUs <= p.onlyMaxRunUs || probe.runUs <= Math.min(probe.hopUs, p.onlyMaxRunUs * HOP_CAP_TIMES)) {
      return { runUs: probe.runUs, hopUs: probe.hopUs };
    }
  } catch (err) {
    p.logger.debug({ model: p.label, version: version.version, err: (err as Error).message }, 'per-request probe failed; placement as measured');
  }
  return { runUs };
}

/** Moves the session to the main thread (`only`, or `main`) or allows it a main-thread copy; false when that failed (logged). */
async function useMainThread(p: Placement, version: PlacedVersion, session: ModelSession, only: boolean): Promise<boolean> {
  const { logger, label } = p;
  try {
    if (p.choice === 'main') await session.moveToMainThread();
    else if (only) {
      // After its first answer: a cold request does not wait for the main thread's create (about 1 ms for a tiny model).
      const v = version.version;
      await session.moveToMainThread({
        intraOpThreads: p.copyThreads === undefined ? undefined : 1,
        afterNextRun: true,
        onError: (err) =>
          logger.warn({ model: label, version: v, err: err.message }, 'could not create the session on the main thread; it stays in its runtime worker'),
      });
    } else {
      const fileBytes = await version.fileBytes();
      const v = version.version;
      const onError = (err: Error): void =>
        logger.warn({ model: label, version: v, err: err.message }, 'could not create the main-thread copy; the session stays in its runtime worker');
      session.allowMainThreadCopy({ intraOpThreads: p.copyThreads, fileBytes, book: p.book, copies: p.copies, onError });
    }
  } catch (err) {
    logger.warn(
      { model: label, version: version.version, err: (err as Error).message },
      'could not create the session on the main thread; it stays in its runtime worker',
    );
    return false;
  }
  return true;
}

function logPlaced(p: Placement, version: PlacedVersion, only: boolean, runUs: number | undefined, hopUs: number | undefined): void {
  const { config, label } = p;
  p.logger.info(
    p.choice === 'main'
      ? { model: label, version: version.version, placement: 'main thread only (execution_thread "main")' }
      : only
        ? {
            model: label,
            version: version.version,
            placement: 'main thread only (a batch runs in less than a hop to a worker costs)',
            runUs: Math.round(runUs ?? 0),
            batch: Math.max(1, config.maxBatchSize),
            ...(hopUs === undefined ? {} : { hopUs: Math.round(hopUs) }),
          }
        : {
            model: label,
            version: version.version,
            placement: 'main thread when the server is quiet (a copy, once used, among the most often used), worker when busy',
            runUs: Math.round(runUs ?? 0),
            batch: Math.max(1, config.maxBatchSize),
            intraOpThreads: p.copyThreads ?? "the model's intra_op_thread_count",
          },
    'session placed',
  );
}
