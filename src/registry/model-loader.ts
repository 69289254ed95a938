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
import path from 'node:path';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { GpuMemory } from '../runtime/memory-usage.js';
import { gpuMemory, processRssBytes } from '../runtime/memory-usage.js';
import { DEFAULT_PLACEMENT, placeSessions, type PlacementSettings } from '../runtime/session-placement.js';
import type { LoadedModel } from './loaded-model.js';
import type { MemoryManager, Reservation } from './memory-manager.js';
import { loadPackage, type LoadedPackage, type PackageLoadDeps, type PackageLoadRequest } from './package-loader.js';
import { filesBytes, predictLoadedBytes, predictPackageBytes } from './package-size.js';
import { warmUpModel, zeroFeeds, type WarmupTimes } from './warmup.js';

/** A package in memory with its share of the budget; what the registry holds per entry. */
export interface LoadedModelPackage {
  readonly pkg: LoadedPackage;
  /** Bytes of the budget it holds now (its reservation). */
  readonly bytes: number;
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

/** Where memory is read: the process's resident set, and a GPU device's use when one is visible. */
export interface MemoryProbe {
  rssBytes(): number;
  /** undefined: no GPU to measure (or the driver could not be asked). */
  gpu?(deviceId: number): Promise<GpuMemory | undefined>;
}

export interface ModelLoaderDeps {
  readonly memory: Pick<MemoryManager, 'reserve' | 'trim'>;
  /** Build the package's sessions, schedulers and plan (registry/package-loader.ts loadPackage). */
  readonly loadPackage: (request: PackageLoadRequest) => Promise<LoadedPackage>;
  /** Run each session once before traffic (registry/warmup.ts); µs of each version's implicit run, where there was one. */
  readonly warmUp: (model: LoadedModel, label: string) => Promise<WarmupTimes | void>;
  /** Decide where each session runs (runtime/session-placement.ts), knowing the warm-up's run times. */
  readonly place: (model: LoadedModel, label: string, warmupRunUs?: WarmupTimes) => Promise<void>;
  /** Budget bytes predicted from the package's files, before loading. */
  readonly predictFiles: (dir: string) => Promise<number>;
  /** The same once loaded: the versions served and every session copy. */
  readonly predictLoaded: (pkg: LoadedPackage) => Promise<number>;
  readonly probe: MemoryProbe;
  readonly logger: Logger;
  readonly metrics: Pick<Metrics, 'modelLoadDuration'>;
}

/** The real loader's parts, as the server configures them. */
export interface ModelLoaderOptions {
  readonly memory: MemoryManager;
  readonly loadDeps: PackageLoadDeps;
  /** Whether GPU memory can be measured (a GPU is visible): packages on CUDA are measured there. */
  readonly gpuVisible?: boolean;
  readonly logger: Logger;
  /** forTarget: each package's series (observability/metrics.ts), handed to the package it is built for. */
  readonly metrics: Pick<Metrics, 'modelLoadDuration' | 'forTarget'>;
}

/** Placement of every ONNX version of a model (the runtime decides; this supplies the files and the zeros). */
export function placeModel(model: LoadedModel, label: string, settings: PlacementSettings, logger: Logger, warmupRunUs?: WarmupTimes): Promise<void> {
  const versions = [...model.versions.values()].map((v) => ({
    version: v.version,
    sessions: v.sessions,
    fileBytes: () => filesBytes(path.join(model.dir, String(v.version))),
    warmupRunUs: warmupRunUs?.get(v.version),
  }));
  return placeSessions(model.config, versions, (rows) => zeroFeeds(model.config, rows), label, settings, logger);
}

/** The loader the server runs: real packages, warm-up, placement and probes. */
export function createModelLoader(options: ModelLoaderOptions): PackageModelLoader {
  const { loadDeps, logger } = options;
  const placement = loadDeps.placement ?? DEFAULT_PLACEMENT;
  return new PackageModelLoader({
    memory: options.memory,
    // The package owns the series handle from here: its release, or loadPackage's own failure, hands it back.
    loadPackage: (request) =>
      loadPackage(request.seriesTarget === undefined ? request : { ...request, metrics: options.metrics.forTarget(request.seriesTarget) }, loadDeps),
    warmUp: (model, label) => warmUpModel(model, label, logger),
    place: (model, label, warmupRunUs) => placeModel(model, label, placement, logger, warmupRunUs),
    predictFiles: predictPackageBytes,
    predictLoaded: predictLoadedBytes,
    probe: { rssBytes: processRssBytes, ...(options.gpuVisible ? { gpu: gpuMemory } : {}) },
    logger,
    metrics: options.metrics,
  });
}

export class PackageModelLoader implements ModelLoader {
  /** Loads in progress, for telling whether a memory measurement was disturbed by another load. */
  private readonly measuring = new Set<{ overlapped: boolean }>();

  constructor(private readonly deps: ModelLoaderDeps) {}

  /**
   * Reserve memory (predicted from the files), load the package, warm it up,
   * measure its footprint and correct the reservation.
   */
  async load(request: PackageLoadRequest): Promise<LoadedModelPackage> {
    const { memory, metrics, logger, probe } = this.deps;
    const started = process.hrtime.bigint();
    const elapsedMs = (): number => Math.round(Number(process.hrtime.bigint() - started) / 1e6);
    let pkg: LoadedPackage | undefined;
    let reservation: Reservation | undefined;
    try {
      const predicted = await this.deps.predictFiles(request.dir);
      reservation = await memory.reserve(request.label, predicted);
      const measure = { overlapped: this.measuring.size > 0 };
      for (const other of this.measuring) other.overlapped = true;
      this.measuring.add(measure);
      const gpuBefore = probe.gpu ? await probe.gpu(0) : undefined;
      const rssBefore = probe.rssBytes();
      try {
        pkg = await this.deps.loadPackage(request);
        for (const model of pkg.models.values()) {
          const warmupRunUs = await this.deps.warmUp(model, request.label);
          await this.deps.place(model, request.label, warmupRunUs ?? undefined);
        }
      } finally {
        this.measuring.delete(measure);
      }
      const onGpu = [...pkg.models.values()].some((m) => [...m.versions.values()].some((v) => v.sessions.some((s) => s.provider !== 'cpu')));
      const gpuAfter = onGpu && gpuBefore && probe.gpu ? await probe.gpu(0) : undefined;
      const measured = onGpu ? (gpuAfter && gpuBefore ? gpuAfter.usedBytes - gpuBefore.usedBytes : undefined) : probe.rssBytes() - rssBefore;
      // Another load at the same time makes a process-wide delta meaningless: keep the prediction then.
      const trusted = measured !== undefined && !measure.overlapped;
      // Now exact about what was loaded (versions served, one weight copy per instance); a trusted measurement can only raise it.
      const loadedPrediction = await this.deps.predictLoaded(pkg);
      const bytes = Math.max(loadedPrediction, trusted ? measured : 0);
      if (bytes !== reservation.bytes) {
        reservation.resize(bytes);
        if (bytes > predicted) void memory.trim().catch((err: unknown) => logger.warn({ err }, 'trimming memory after a load failed'));
      }
      metrics.modelLoadDuration.observe({ outcome: 'success' }, elapsedMs() / 1000);
      logger.info(
        {
          model: request.label,
          entryModel: pkg.entry.name,
          models: [...pkg.models.keys()],
          bytes: reservation.bytes,
          predictedBytes: predicted,
          measuredBytes: trusted ? measured : undefined,
          device: onGpu ? 'gpu' : 'cpu',
          durationMs: elapsedMs(),
        },
        'model loaded',
      );
      return resident(pkg, reservation);
    } catch (err) {
      await pkg?.release();
      reservation?.release();
      metrics.modelLoadDuration.observe({ outcome: 'failure' }, elapsedMs() / 1000);
      logger.warn({ model: request.label, err: (err as Error).message, durationMs: elapsedMs() }, 'model load failed');
      throw err;
    }
  }
}

function resident(pkg: LoadedPackage, reservation: Reservation): LoadedModelPackage {
  let released: Promise<void> | undefined;
  return {
    pkg,
    get bytes() {
      return reservation.bytes;
    },
    release: () =>
      (released ??= (async () => {
        try {
          await pkg.release();
        } finally {
          reservation.release();
        }
      })()),
  };
}
