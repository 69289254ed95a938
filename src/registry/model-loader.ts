/**
 * @module registry/model-loader
 * The one home of a model's way into memory: reserve its share of the budget,
 * load the package, warm it up, place its sessions, measure what it really
 * took and correct the reservation; and, on the way out, release both. The
 * registry (registry/model-registry.ts) decides when a model loads and
 * unloads and who holds it; this module decides how, and what it costs.
 *
 * Everything it calls is injected (ModelLoaderDeps), so the registry and the
 * service are unit-tested with a fake loader, and this module with fake
 * packages and a fake memory probe. createModelLoader wires the real parts.
 */
import { statSync } from 'node:fs';
import { readModelFile, yieldTurn } from '../store/small-io.js';
import path from 'node:path';
import { inModel, ServingError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { gpuProcessBytes, processRssBytes } from '../runtime/memory-usage.js';
import { MainThreadCopies } from '../runtime/main-thread-copies.js';
import { readGraphSummary } from '../runtime/onnx-graph.js';
import type { CopyBooking } from '../runtime/onnx-session.js';
import { DEFAULT_MAIN_THREAD_COPIES, DEFAULT_PLACEMENT, placeSessions, type PlacementSettings } from '../runtime/session-placement.js';
import type { LoadedModel } from './loaded-model.js';
import { LoadMeasurement, type LoadFootprint, type MeasureToken } from './load-measurement.js';
import { LoadSlots } from './load-slots.js';
import type { MemoryManager, Reservation } from './memory-manager.js';
import { loadPackage, throwIfAborted, type LoadedPackage, type PackageLoadDeps, type PackageLoadRequest } from './package-loader.js';
import { filesBytes, loadedFootprint, predictPackageFootprint, SESSION_OVERHEAD_BYTES, sizeMemo, type FilesBytes } from './package-size.js';
import { warmUpModel } from './warmup.js';

/** A package in memory with its share of the budget; what the registry holds per entry. */
export interface LoadedModelPackage {
  readonly pkg: LoadedPackage;
  /** Bytes of the budget it holds now (its reservation). */
  readonly bytes: number;
  /**
   * What its load was measured to add to the process (RSS, or the GPU's
   * per-process figure; for loads that overlapped, its share of their
   * growth once the last of them ended); undefined until then, or when it could not be measured.
   */
  readonly measuredBytes: number | undefined;
  /** Release the sessions, then the reservation. Idempotent. */
  release(): Promise<void>;
}

/** How the registry loads a model: the seam a unit test replaces with a fake. */
export interface ModelLoader {
  /**
   * Reserve memory, load, warm up, place, measure. All-or-nothing: on any
   * failure the sessions and the reservation are released before it throws.
   */
  load(request: PackageLoadRequest): Promise<LoadedModelPackage>;
}

/** Where memory is read: the process's resident set, and this process's use of a GPU device when one is visible. */
export interface MemoryProbe {
  rssBytes(): number;
  /** This process's bytes on each GPU device (the driver's per-process figures); undefined: no GPU, or the driver could not be asked. */
  gpuBytes?(): Promise<ReadonlyMap<number, number> | undefined>;
}

/**
 * What a load holds at its peak beyond what the package keeps: onnxruntime
 * keeps the parsed model (its initializers) while it creates the session's
 * own copy, so creating a session transiently holds about its files twice
 * (measured: ~2x a 12 MiB MatMul's file during create, ~1x after). Sessions
 * are created one at a time, so one file set's worth covers a package.
 */
export function loadPeakBytes(predictedBytes: number, fileBytes: number): number {
  return predictedBytes + fileBytes;
}

/** The GPU devices a package's sessions run on. */
function gpuDevices(pkg: LoadedPackage): Set<number> {
  const out = new Set<number>();
  for (const m of pkg.models.values()) for (const v of m.versions.values()) for (const s of v.sessions) if (s.provider !== 'cpu') out.add(s.deviceId);
  return out;
}

/** This process's growth on `devices` between two readings; undefined when either reading is missing a device. */
export function gpuDelta(
  before: ReadonlyMap<number, number> | undefined,
  after: ReadonlyMap<number, number> | undefined,
  devices: ReadonlySet<number>,
): number | undefined {
  if (before === undefined || after === undefined) return undefined;
  let total = 0;
  for (const d of devices) {
    const a = after.get(d);
    const b = before.get(d);
    if (a === undefined || b === undefined) return undefined;
    total += a - b;
  }
  return total;
}

/** After unloads, wait this long for more to come before reclaiming once (an eviction wave is many unloads). */
const RECLAIM_DELAY_MS = 200;

export interface ModelLoaderDeps {
  readonly memory: Pick<MemoryManager, 'reserve' | 'trim' | 'reconcile'> & Partial<Pick<MemoryManager, 'notify'>>;
  /** What the process grew by since idle (its resident set above the idle figure); omitted: bookings are not normalised. */
  readonly processGrowth?: () => number | undefined;
  /** Build the package's sessions, schedulers and plan (registry/package-loader.ts loadPackage). */
  readonly loadPackage: (request: PackageLoadRequest) => Promise<LoadedPackage>;
  /** Run each session once before traffic (registry/warmup.ts), for the load `request`. */
  readonly warmUp: (model: LoadedModel, request: PackageLoadRequest) => Promise<void>;
  /**
   * Decide where each session runs and move it there (runtime/session-placement.ts), inside the load's measured
   * section; `book` books a main-thread copy in the model's reservation while it exists.
   */
  readonly place: (model: LoadedModel, request: PackageLoadRequest, book: CopyBooking, sizeOf?: FilesBytes) => Promise<void>;
  /** Budget bytes predicted from the package's files before loading, and the files' own bytes. */
  readonly predictFiles: (
    dir: string,
  ) => Promise<{ readonly predictedBytes: number; readonly fileBytes: number; readonly dirBytes?: ReadonlyMap<string, number> }>;
  /** What the package holds once loaded: the files of the versions served, once per session copy, and the session count. */
  readonly footprint: (pkg: LoadedPackage, sizeOf?: FilesBytes) => Promise<LoadFootprint>;
  readonly probe: MemoryProbe;
  /** Loads in their measured section at once (MME_LOAD_CONCURRENCY); default 1. */
  readonly concurrency?: number;
  /** Run after unloads settle, to give the threads' garbage back (runtime/reclaim.ts); omitted: nothing. */
  readonly reclaim?: () => Promise<void>;
  readonly logger: Logger;
  readonly metrics: Pick<Metrics, 'modelLoadDuration'> & Partial<Pick<Metrics, 'sequenceStateBytes'>>;
}

/** The real loader's parts, as the server configures them. */
export interface ModelLoaderOptions {
  readonly memory: MemoryManager;
  readonly loadDeps: PackageLoadDeps;
  /** Whether GPU memory can be measured (a GPU is visible): packages on CUDA are measured there. */
  readonly gpuVisible?: boolean;
  /** Run after unloads settle (RuntimePool.reclaim). */
  readonly reclaim?: () => Promise<void>;
  readonly logger: Logger;
  /** forTarget: each package's series (observability/metrics.ts), handed to the package it is built for. */
  readonly metrics: Pick<Metrics, 'modelLoadDuration' | 'forTarget'> & Partial<Pick<Metrics, 'sequenceStateBytes'>>;
  /** MME_LOAD_CONCURRENCY. */
  readonly concurrency?: number;
  /** The process's resident set at idle (start-up, onnxruntime's fixed costs paid): bookings are normalised to the growth above it. */
  readonly idleRssBytes?: number;
  /** The server's bounded set of main-thread copies (MME_MAIN_THREAD_COPIES). */
  readonly copies?: MainThreadCopies;
}

/** Placement of every ONNX version of a model of the load `request` (the runtime decides; this supplies the files). */
export function placeModel(
  model: LoadedModel,
  request: PackageLoadRequest,
  settings: PlacementSettings,
  logger: Logger,
  book?: CopyBooking,
  copies?: MainThreadCopies,
  sizeOf: FilesBytes = filesBytes,
): Promise<void> {
  const fileName = model.config.defaultModelFilename || 'model.onnx';
  const versions = [...model.versions.values()].map((v) => {
    const dir = path.join(model.dir, String(v.version));
    const read = request.graphs?.get(dir);
    return {
      version: v.version,
      sessions: v.sessions,
      ...(v.elastic === undefined ? {} : { elastic: v.elastic }),
      fileBytes: () => sizeOf(dir),
      graph: async () => read ?? readGraphSummary(await modelFileBytes(dir, fileName)),
    };
  });
  return placeSessions(model.config, versions, request.label, settings, logger, book, copies);
}

/** A version's ONNX file (Triton allows `model.onnx` to be a directory holding model.onnx and its external data). */
async function modelFileBytes(dir: string, fileName: string): Promise<Uint8Array> {
  const file = path.join(dir, fileName);
  return readModelFile(statSync(file).isDirectory() ? path.join(file, 'model.onnx') : file);
}

/** The loader the server runs: real packages, warm-up, placement and probes. */
export function createModelLoader(options: ModelLoaderOptions): PackageModelLoader {
  const { loadDeps, logger } = options;
  const placement = loadDeps.placement ?? DEFAULT_PLACEMENT;
  const copies = options.copies ?? new MainThreadCopies(DEFAULT_MAIN_THREAD_COPIES);
  return new PackageModelLoader({
    memory: options.memory,
    // The package owns the series handle from here: its release, or loadPackage's own failure, hands it back.
    loadPackage: (request) =>
      loadPackage(request.seriesTarget === undefined ? request : { ...request, metrics: options.metrics.forTarget(request.seriesTarget) }, loadDeps),
    warmUp: (model, request) => warmUpModel(model, logger.child({ model: request.label })),
    place: (model, request, book, sizeOf) => placeModel(model, request, placement, logger, book, copies, sizeOf),
    predictFiles: predictPackageFootprint,
    footprint: loadedFootprint,
    ...(options.idleRssBytes === undefined ? {} : { processGrowth: () => processRssBytes() - options.idleRssBytes! }),
    ...(options.concurrency === undefined ? {} : { concurrency: options.concurrency }),
    probe: { rssBytes: processRssBytes, ...(options.gpuVisible ? { gpuBytes: () => gpuProcessBytes() } : {}) },
    ...(options.reclaim ? { reclaim: options.reclaim } : {}),
    logger,
    metrics: options.metrics,
  });
}

/** A resident CPU package's measured figure, as the bookings' normalisation sees it. */
interface CpuBooking {
  /** Its load's own reading (alone, or its share of its group's growth). */
  readonly raw: number;
  readonly estimate: number;
  /** Set its measured figure and book `base` for it. */
  apply(measured: number, base: number): void;
}

/** A package the loader holds: what the registry sees, and what the booking updates. */
type ResidentPackage = LoadedModelPackage & { measuredBytes: number | undefined; released: boolean; onRelease: (() => void) | undefined };

/** A CPU load's reading: its own (undefined when it overlapped others), rounded, and the calibrated estimate. */
interface CpuReading {
  readonly own: number | undefined;
  readonly measured: number | undefined;
  readonly estimate: number;
  /** Its share of its group's growth, once the group ends (registry/load-measurement.ts). */
  readonly settled: Promise<number | undefined>;
}

/** What one load has taken hold of so far (released if it fails), and where its time went. */
interface LoadAttempt {
  pkg: LoadedPackage | undefined;
  reservation: Reservation | undefined;
  freeSlot: (() => void) | undefined;
  token: MeasureToken | undefined;
  /** ms per stage, logged with `model loaded`: what a raw create and first run do not do shows here. */
  readonly stages: Record<string, number>;
  /** Ends the stage `name` now (its time is added to what it took before). */
  stage(name: string): void;
  elapsedMs(): number;
}

function loadAttempt(): LoadAttempt {
  const started = process.hrtime.bigint();
  const stages: Record<string, number> = {};
  let mark = performance.now();
  return {
    pkg: undefined,
    reservation: undefined,
    freeSlot: undefined,
    token: undefined,
    stages,
    stage(name) {
      const now = performance.now();
      stages[name] = Math.round((stages[name] ?? 0) * 1000 + (now - mark) * 1000) / 1000;
      mark = now;
    },
    elapsedMs: () => Math.round(Number(process.hrtime.bigint() - started) / 1e6),
  };
}

/** A CPU package is booked at what it was measured to hold (bookingFor), or at the estimate while unmeasured. */
function cpuBooking(own: number | undefined, estimate: number): { measured: number | undefined; base: number } {
  const measured = own === undefined || !Number.isFinite(own) ? undefined : Math.round(own);
  return { measured, base: bookingFor(measured, estimate) };
}

/**
 * On a GPU: what this process gained on the devices its sessions use (other processes sharing the GPU do not count);
 * concurrent loads on one device may read each other's growth, so the booking is the larger of it and the fixed prediction.
 */
function gpuBooking(footprint: LoadFootprint, raw: number | undefined): { measured: number | undefined; base: number } {
  const measured = raw === undefined || !Number.isFinite(raw) ? undefined : Math.max(0, Math.round(raw));
  return { measured, base: Math.max(footprint.fileBytes + footprint.sessions * SESSION_OVERHEAD_BYTES, measured ?? 0) };
}

/** Bookings are normalised this long after a load settles, then every NORMALIZE_INTERVAL_MS while any is held. */
const NORMALIZE_DELAY_MS = 250;
const NORMALIZE_INTERVAL_MS = 1000;

export class PackageModelLoader implements ModelLoader {
  private readonly slots: LoadSlots;
  private readonly measurement: LoadMeasurement;
  private reclaimTimer: NodeJS.Timeout | undefined;
  private readonly cpuBookings = new Set<CpuBooking>();
  /** Bytes booked for main-thread copies and hot models' added instances now (they are measured in the process's total too). */
  private copyBytes = 0;
  private normalizeTimer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: ModelLoaderDeps) {
    this.slots = new LoadSlots(deps.concurrency ?? 1);
    this.measurement = new LoadMeasurement(() => deps.probe.rssBytes());
  }

  /** Loads in their measured section now, and waiting for a slot. */
  get activity(): { readonly loading: number; readonly queued: number } {
    return { loading: this.slots.inUse, queued: this.slots.queued };
  }

  /** A session's calibrated cost beyond its files (registry/load-measurement.ts). */
  get sessionOverheadBytes(): number {
    return this.measurement.sessionOverheadBytes;
  }

  /**
   * Take a load slot, reserve the load's peak (files plus the create
   * transient), load the package, warm it up, place its sessions, measure
   * what the process gained, and book what the package holds.
   *
   * Up to `concurrency` loads run at once (registry/load-slots.ts); each is
   * measured by registry/load-measurement.ts: exactly when it ran alone,
   * else its share of its group's growth once the group ends, and until
   * then the calibrated estimate of what it holds. The booking follows the
   * measurement (never below half the estimate, a floor against a reading
   * that allocator reuse made low); the load's peak is reserved only while
   * it lasts. Requests to other models still run meanwhile, and what they
   * allocate is caught by the reconciliation of measured memory against the
   * budget (memory-manager.ts). Downloads and extraction happen before (store/).
   */
  async load(request: PackageLoadRequest): Promise<LoadedModelPackage> {
    const attempt = loadAttempt();
    try {
      return await this.loadSteps(request, attempt);
    } catch (err) {
      throw await this.abandon(request, attempt, err);
    }
  }

  /** The load's steps in order; what each one takes hold of is kept in `a`, so a failure releases it. */
  private async loadSteps(request: PackageLoadRequest, a: LoadAttempt): Promise<LoadedModelPackage> {
    const { memory, metrics, logger, probe } = this.deps;
    const { signal } = request;
    // Cancellation (the model was unloaded while it loads) is seen between stages: a stage that has started
    // (a session being created, a warm-up run) finishes, nothing after it starts, and all of it is released (abandon).
    throwIfAborted(signal);
    const { predictedBytes: predicted, fileBytes: files, dirBytes } = await this.deps.predictFiles(request.dir);
    a.stage('predict');
    await yieldTurn();
    throwIfAborted(signal);
    request.onPhase?.('waiting for a load slot');
    a.freeSlot = await this.slots.acquire(signal);
    a.stage('slot');
    request.onPhase?.('waiting for memory');
    const held = (a.reservation = await memory.reserve(request, loadPeakBytes(predicted, files)));
    a.stage('reserve');
    const gpuBefore = probe.gpuBytes ? await probe.gpuBytes() : undefined;
    const token = (a.token = this.measurement.begin());
    // The package was walked once for the prediction: placement and the booking ask its version directories' bytes from that walk.
    const sizeOf = sizeMemo(dirBytes);
    request.onPhase?.('creating sessions');
    // Placement reads the graphs the package's load read (package-loader.ts creationThread), not the files again.
    const withMemo: PackageLoadRequest = { ...request, sizeOf, graphs: new Map() };
    const pkg = (a.pkg = await this.deps.loadPackage(withMemo));
    a.stage('package');
    await yieldTurn();
    await this.warmUpAndPlace(withMemo, pkg, this.copyBooking(held), sizeOf, a);
    throwIfAborted(signal);
    request.onPhase?.('measuring');
    const footprint = await this.deps.footprint(pkg, sizeOf);
    a.stage('footprint');
    const own = this.measurement.end(token, footprint);
    a.token = undefined;
    const devices = gpuDevices(pkg);
    const onGpu = devices.size > 0;
    const gpuAfter = onGpu && gpuBefore !== undefined && probe.gpuBytes ? await probe.gpuBytes() : undefined;
    a.freeSlot();
    a.freeSlot = undefined;
    const estimate = this.measurement.estimate(footprint);
    const { measured, base } = onGpu ? gpuBooking(footprint, gpuDelta(gpuBefore, gpuAfter, devices)) : cpuBooking(own, estimate);
    // The reservation holds the load's peak until here.
    const booked = { base: held.bytes };
    this.book(held, booked, base);
    const resident = this.resident(pkg, held, measured);
    if (!onGpu) this.trackCpuBooking(resident, held, booked, { own, measured, estimate, settled: token.settled });
    metrics.modelLoadDuration.observe({ outcome: 'success' }, a.elapsedMs() / 1000);
    logger.info(
      {
        model: request.label,
        entryModel: pkg.entry.name,
        models: [...pkg.models.keys()],
        bytes: held.bytes,
        predictedBytes: predicted,
        peakReservedBytes: loadPeakBytes(predicted, files),
        estimatedBytes: estimate,
        measuredBytes: measured,
        device: onGpu ? 'gpu' : 'cpu',
        durationMs: a.elapsedMs(),
        stagesMs: a.stages,
      },
      'model loaded',
    );
    watchSequences(pkg, held, memory, metrics.sequenceStateBytes, logger);
    return resident;
  }

  /** A main-thread copy, or a hot model's added instance, is booked while it exists (runtime/session-placement.ts, registry/hot-instances.ts): on top of whatever the load is booked at. */
  private copyBooking(held: Reservation): CopyBooking {
    return {
      tryGrow: (fileBytes) => {
        const bytes = this.measurement.estimate({ fileBytes, sessions: 1 });
        if (!held.tryGrow(bytes)) return undefined;
        this.copyBytes += bytes;
        return bytes;
      },
      shrink: (bytes) => {
        this.copyBytes -= bytes;
        held.resize(held.bytes - bytes);
      },
    };
  }

  /** Each model of the package warmed up, then placed. */
  private async warmUpAndPlace(request: PackageLoadRequest, pkg: LoadedPackage, book: CopyBooking, sizeOf: FilesBytes, a: LoadAttempt): Promise<void> {
    request.onPhase?.('warming up');
    for (const model of pkg.models.values()) {
      throwIfAborted(request.signal);
      await this.deps.warmUp(model, request);
      a.stage('warmup');
      await yieldTurn();
      throwIfAborted(request.signal);
      await this.deps.place(model, request, book, sizeOf);
      a.stage('place');
    }
  }

  /**
   * A CPU package's booking follows its measurement: normalised with the others' (normalize) once
   * measured alone, or, when its load overlapped others, booked at the estimate until the group ends
   * and at its share of the group's growth after.
   */
  private trackCpuBooking(resident: ResidentPackage, held: Reservation, booked: { base: number }, reading: CpuReading): void {
    const { own, measured, estimate } = reading;
    const track = (raw: number): void => {
      const entry: CpuBooking = {
        raw,
        estimate,
        apply: (m, b) => {
          resident.measuredBytes = m;
          this.book(held, booked, b);
        },
      };
      this.cpuBookings.add(entry);
      resident.onRelease = () => this.cpuBookings.delete(entry);
      this.scheduleNormalize();
    };
    if (own !== undefined && measured !== undefined) track(measured);
    else if (own === undefined) {
      // Overlapped: booked at the estimate now, at its share of the group's growth when the group ends.
      void reading.settled.then((share) => {
        if (share === undefined || resident.released) return;
        resident.measuredBytes = share;
        this.book(held, booked, bookingFor(share, estimate));
        track(share);
      });
    }
  }

  /** A failed or cancelled load: everything it took hold of is released; returns what to throw. */
  private async abandon(request: PackageLoadRequest, a: LoadAttempt, err: unknown): Promise<unknown> {
    const { metrics, logger } = this.deps;
    const { signal } = request;
    if (a.token !== undefined) this.measurement.end(a.token, undefined);
    a.freeSlot?.();
    await a.pkg?.release();
    a.reservation?.release();
    if (signal?.aborted) {
      // Not a failure of the model: it was unloaded (DELETE, shutdown) while it loaded; what it held is released.
      metrics.modelLoadDuration.observe({ outcome: 'cancelled' }, a.elapsedMs() / 1000);
      logger.info({ model: request.label, durationMs: a.elapsedMs() }, 'model load cancelled: the model was unloaded while it loaded');
      return signal.reason;
    }
    metrics.modelLoadDuration.observe({ outcome: 'failure' }, a.elapsedMs() / 1000);
    // The one place a load's errors get the model's name (the package's own errors carry it already).
    const named = err instanceof ServingError ? inModel(err, request.label) : err;
    logger.warn({ model: request.label, err: (named as Error).message, durationMs: a.elapsedMs() }, 'model load failed');
    return named;
  }

  /** Normalise the bookings `delayMs` from now (unless one is due sooner), and then every NORMALIZE_INTERVAL_MS while any is held. */
  private scheduleNormalize(delayMs = NORMALIZE_DELAY_MS): void {
    if (this.normalizeTimer !== undefined || this.deps.processGrowth === undefined) return;
    this.normalizeTimer = setTimeout(() => {
      this.normalizeTimer = undefined;
      this.normalize();
      if (this.cpuBookings.size > 0) this.scheduleNormalize(NORMALIZE_INTERVAL_MS);
    }, delayMs);
    this.normalizeTimer.unref();
  }

  /**
   * The loads' readings, summed, can exceed what the process holds for
   * models: a load's reading also holds transients the allocator keeps and
   * the next load reuses (a model of over 4 MiB that runs on the main thread
   * only was created in its worker first, and that session is freed after its
   * reading; session-placement.ts creationPlacement), so 300 tiny models read
   * about 250 KB each where the process grew 80 KB a model. Where the sum of
   * the CPU packages' readings is above the process's model memory (memory-manager.ts
   * measuredBytes, less what main-thread copies are booked at), every
   * reading is scaled down by the same factor, so the bookings add up to
   * what the process really holds. Never scaled up: a model that grew after
   * its load is the reconciliation's to catch.
   */
  private normalize(): void {
    const total = this.deps.processGrowth?.();
    if (total === undefined || this.cpuBookings.size === 0) return;
    const models = Math.max(0, total - this.copyBytes);
    let sum = 0;
    for (const b of this.cpuBookings) sum += b.raw;
    const factor = sum > models && sum > 0 ? models / sum : 1;
    for (const b of this.cpuBookings) {
      const m = Math.round(b.raw * factor);
      b.apply(m, bookingFor(m, Math.round(b.estimate * factor)));
    }
  }

  /** Move the load's own booking from `booked.base` to `base`, keeping what copies and sequence state added on top. */
  private book(reservation: Reservation, booked: { base: number }, base: number): void {
    const target = reservation.bytes - booked.base + base;
    booked.base = base;
    if (target === reservation.bytes) return;
    const grew = target > reservation.bytes;
    reservation.resize(target);
    if (grew) void this.deps.memory.trim().catch((err: unknown) => this.deps.logger.warn({ err }, 'trimming memory after a load failed'));
  }

  private resident(pkg: LoadedPackage, reservation: Reservation, measuredBytes: number | undefined): ResidentPackage {
    let released: Promise<void> | undefined;
    const out = {
      pkg,
      measuredBytes,
      released: false,
      onRelease: undefined as (() => void) | undefined,
      get bytes() {
        return reservation.bytes;
      },
      release: () =>
        (released ??= (async () => {
          out.released = true;
          out.onRelease?.();
          try {
            await pkg.release();
          } finally {
            // Loads measured meanwhile would read this much low: it is added back to their growth.
            this.measurement.released(reservation.bytes);
            reservation.release();
            this.scheduleReclaim();
          }
        })()),
    };
    return out;
  }

  /** One reclaim after a wave of unloads, then a reconciliation with what the process really holds. */
  private scheduleReclaim(): void {
    if (this.reclaimTimer !== undefined) clearTimeout(this.reclaimTimer);
    this.reclaimTimer = setTimeout(() => {
      this.reclaimTimer = undefined;
      void (this.deps.reclaim?.() ?? Promise.resolve())
        .then(() => this.deps.memory.reconcile())
        .catch((err: unknown) => this.deps.logger.warn({ err }, 'reclaiming memory after unloads failed'));
    }, RECLAIM_DELAY_MS);
    this.reclaimTimer.unref();
  }
}

/**
 * What a loaded CPU package is booked at: what it was measured to hold, never
 * below half its calibrated estimate (a reading that allocator reuse made low
 * must not book a model at nothing); the estimate itself when unmeasured.
 */
export function bookingFor(measured: number | undefined, estimate: number): number {
  return measured === undefined ? estimate : Math.max(measured, Math.round(estimate / 2));
}

/**
 * A stateful package's implicit state is part of its reservation, so the
 * budget counts it and idle models make room for it; the end of its last
 * live sequence unpins it (registry: pinned), so a load waiting for memory
 * looks again.
 */
function watchSequences(
  pkg: LoadedPackage,
  reservation: Reservation,
  memory: ModelLoaderDeps['memory'],
  stateBytes: Metrics['sequenceStateBytes'] | undefined,
  logger: Logger,
): void {
  const sequences = pkg.sequences;
  if (sequences === undefined) return;
  sequences.onChange = (stateDelta, live) => {
    if (stateDelta !== 0) {
      stateBytes?.inc(stateDelta);
      reservation.resize(reservation.bytes + stateDelta);
      // trim() evicts idle models only while the budget is exceeded.
      if (stateDelta > 0) void memory.trim().catch((err: unknown) => logger.warn({ err }, 'trimming memory for sequence state failed'));
    } else if (live === 0) {
      memory.notify?.();
    }
  };
}
