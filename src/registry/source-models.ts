/**
 * @module registry/source-models
 * Models of the model source, addressed by target (X-Amzn-SageMaker-Target-
 * Model on /invocations, a KServe v2 or gRPC name): loaded from the source on
 * first use, gone when evicted (the next request loads them again, usually
 * from the disk cache). This provenance owns what is particular to them:
 *  - naming: a target is normalised once, when its handle is made, and keyed
 *    by the canonical spelling of its object (`x` and `x.tar.gz` share one
 *    entry when they name one archive);
 *  - back-off: a load that failed because of the object is not retried until
 *    its window ends or the object changes (registry/failed-loads.ts);
 *  - misses: a target the source does not hold is remembered for a short TTL,
 *    and misses are paid from a bucket of lookups per second
 *    (registry/missing-targets.ts); one lookup per spelling at a time;
 *  - freshness: after `revalidateMs` the next request asks the source for the
 *    object's current version (one HeadObject). A changed or deleted object
 *    detaches the entry: new requests load the new version (or get 404),
 *    requests in flight finish on the old one, which is then released (and
 *    its disk copy removed). If the source cannot be reached the cached copy
 *    keeps serving: a model that worked a minute ago is better than a 503.
 * Entries, leases and eviction are the lifecycle core's (registry/lifecycle.ts).
 */
import path from 'node:path';
import type { Cancellation } from '../cancellation.js';
import { ServingError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { systemClock, type Clock } from '../clock.js';
import { abortable } from '../store/abort.js';
import type { LocalModel, ModelSource } from '../store/model-source.js';
import { archiveStem, normalizeTarget } from '../store/target-path.js';
import { FailedLoads } from './failed-loads.js';
import { LoadHistory, type LoadRecord } from './load-history.js';
import { DEFAULT_PROGRESS_INTERVAL_MS, LoadProgressBoard, type LoadPhase, type LoadProgressView } from './load-progress.js';
import { MissingTargets } from './missing-targets.js';
import { KeySpace, type EntryKey, type Lease, type LiveEntry, type LoadContext, type ModelLifecycle, type ResidentView } from './lifecycle.js';
import { loadAndRelease, residentReady, type ModelHandle } from './model-handle.js';
import type { LoadedModelPackage } from './model-loader.js';
import type { LoadedPackage } from './package-loader.js';

/** One model of the source, with where it is (repository index). */
export interface RepositoryModel {
  readonly target: string;
  readonly sizeBytes: number | undefined;
  readonly lastModified: string | undefined;
  /** Extracted on local disk (the current version). */
  readonly cached: boolean;
  /** Resident under its name or its archive stem; undefined when not loaded. */
  readonly resident: ResidentView | undefined;
  /** Its last load's error, and whether it was ever loaded (registry/load-history.ts); undefined when never tried. */
  readonly history: LoadRecord | undefined;
  /** While it loads: its phase and the download's progress (registry/load-progress.ts). */
  readonly progress: LoadProgressView | undefined;
}

export interface SourceModelsOptions {
  readonly source: ModelSource;
  /** Revalidate a target after this many ms; 0 or undefined = never. */
  readonly revalidateMs?: number | undefined;
  readonly logger: Logger;
  readonly metrics: Pick<Metrics, 'modelRevalidations'> & Partial<Pick<Metrics, 'missingTargets'>>;
  readonly clock?: Clock | undefined;
  /** MME_MISSING_TARGET_TTL_SECONDS in ms (0 = misses are not remembered); default DEFAULT_MISSING_TTL_MS. */
  readonly missingTtlMs?: number | undefined;
  /** MME_MISSING_TARGET_LOOKUPS_PER_SECOND (0 = no bound); default DEFAULT_MISSING_LOOKUPS_PER_SECOND. */
  readonly missingLookupsPerSecond?: number | undefined;
  /** MME_PROGRESS_LOG_SECONDS in ms: a load logs `model load in progress` at this interval; 0 = never. Default DEFAULT_PROGRESS_INTERVAL_MS. */
  readonly progressIntervalMs?: number | undefined;
}

export const DEFAULT_MISSING_TTL_MS = 5_000;
export const DEFAULT_MISSING_LOOKUPS_PER_SECOND = 20;

/** Freshness of one loaded entry: the copy it was loaded from and when that was last confirmed current. */
interface Freshness {
  readonly local: LocalModel;
  /** clock.nowUs() of the last confirmation that `local.version` is current. */
  checkedAtUs: number;
  revalidating: Promise<void> | undefined;
}

/** The most spellings remembered (a map lookup each; a new spelling asks the source once). */
const MAX_SPELLINGS = 1024;

/** `team/b.tar.gz` → `b`: the name a package's root-level model gets when its config names none. */
export function archiveBaseName(target: string): string {
  return archiveStem(path.posix.basename(target));
}

export class SourceModels {
  private readonly keys = new KeySpace('target');
  private readonly clock: Clock;
  private readonly revalidateUs: number;
  /** Loads that failed because of the object itself, by canonical target. */
  private readonly failedLoads: FailedLoads;
  /** The last load's outcome per canonical target, for the repository index. */
  private readonly history = new LoadHistory();
  /** Normalised target → the canonical spelling of its object (ModelSource.canonicalTarget); bounded. */
  private readonly spellings = new Map<string, string>();
  /** Targets the source does not hold, remembered for a short TTL; the bucket of lookups that miss. */
  private readonly missing: MissingTargets;
  /** The spelling lookup in flight per target: concurrent requests for a new spelling ask the source once. */
  private readonly lookups = new Map<string, Promise<string>>();
  /** The version check in flight per target in a failed load's back-off. */
  private readonly versionChecks = new Map<string, Promise<string | undefined | null>>();
  private readonly freshness = new WeakMap<LiveEntry, Freshness>();
  /** Loads in progress by canonical target (the repository index shows them). */
  private readonly loading: LoadProgressBoard;

  constructor(
    private readonly lifecycle: ModelLifecycle,
    private readonly options: SourceModelsOptions,
  ) {
    this.clock = options.clock ?? systemClock;
    this.revalidateUs = (options.revalidateMs ?? 0) * 1000;
    this.failedLoads = new FailedLoads({ now: () => this.clock.nowUs() / 1000 });
    this.loading = new LoadProgressBoard({ logger: options.logger, intervalMs: options.progressIntervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS });
    this.missing = new MissingTargets({
      ttlMs: options.missingTtlMs ?? DEFAULT_MISSING_TTL_MS,
      lookupsPerSecond: options.missingLookupsPerSecond ?? DEFAULT_MISSING_LOOKUPS_PER_SECOND,
      now: () => this.clock.nowUs() / 1000,
      count: (result) => options.metrics.missingTargets?.inc({ result }),
    });
  }

  /** The handle of a target: normalised here, once (INVALID_TARGET for a target that could climb out of the source). */
  handle(rawTarget: string): ModelHandle {
    return new TargetHandle(this, normalizeTarget(rawTarget));
  }

  /** The lease at once for a resident target that is not due for revalidation; undefined otherwise. */
  leaseNow(target: string): Lease | undefined {
    const entry = this.lifecycle.find(this.keyOf(target));
    if (entry === undefined || this.isStale(entry)) return undefined;
    return this.lifecycle.tryLease(entry);
  }

  /** Lease the package of a (normalised) target, loading it from the source on first use. */
  async acquire(normalized: string, cancel?: Cancellation): Promise<Lease> {
    const remembered = this.missing.remembered(normalized);
    if (remembered !== undefined) throw remembered;
    const target = await this.canonicalTarget(normalized, cancel);
    const id = this.keys.id(target);
    const existing = this.lifecycle.find(id.key);
    if (existing?.state === 'READY' && this.isStale(existing)) await abortable(this.revalidate(existing), cancel?.signal, target);
    if (existing === undefined) await this.refuseRecentFailure(target, cancel);
    return this.lifecycle.acquire(id, cancel, (ctx) => this.loadFromSource(target, ctx, cancel?.requestId));
  }

  /** An explicit load: a remembered failure is forgotten, and a resident package with a step stopped for good is loaded afresh. */
  async prepareExplicitLoad(target: string): Promise<void> {
    this.missing.forget(target);
    const canonical = await this.canonicalTarget(target, undefined);
    this.missing.forget(canonical);
    this.failedLoads.forget(canonical);
    // As Triton reloads on load: a JS step that kept crashing gets a fresh start.
    const pkg = this.resident(target)?.pkg;
    if (pkg !== undefined && hasStoppedStep(pkg)) {
      await this.unload(target).catch((err: unknown) => {
        if (!(err instanceof ServingError && err.code === 'MODEL_NOT_FOUND')) throw err;
      });
    }
  }

  /** The resident entry of a target, without loading anything. */
  resident(target: string): ResidentView | undefined {
    return this.lifecycle.view(this.keyOf(target));
  }

  /** Unload a resident target, waiting for its requests; MODEL_NOT_FOUND when it is not resident. */
  async unload(target: string): Promise<void> {
    const entry = this.lifecycle.find(this.keyOf(target));
    if (!entry || entry.state === 'UNLOADING') throw new ServingError('MODEL_NOT_FOUND', `model '${target}' is not loaded`, { model: target });
    await this.lifecycle.unload(entry);
  }

  /** The source's models with their disk and memory state (the repository index), in the source's order. */
  async list(): Promise<RepositoryModel[]> {
    const listed = await this.options.source.list();
    return listed.map((m) => {
      const resident = this.lifecycle.view(this.keys.key(m.target)) ?? this.lifecycle.view(this.keys.key(archiveStem(m.target)));
      const history = this.history.get(m.target) ?? this.history.get(archiveStem(m.target));
      const progress = resident?.state === 'LOADING' ? (this.loading.view(m.target) ?? this.loading.view(archiveStem(m.target))) : undefined;
      return { target: m.target, sizeBytes: m.sizeBytes, lastModified: m.lastModified?.toISOString(), cached: m.cached, resident, history, progress };
    });
  }

  /** A load of a package of the source root itself (the default model of a repository, `entry`): with its progress lines and phases. */
  trackLoad<T>(entry: LiveEntry, requestId: string | undefined, load: (onPhase: (phase: LoadPhase) => void) => Promise<T>): Promise<T> {
    const { label } = entry;
    return this.loading.run(label, { label, requestId, firstPhase: 'preparing files' }, (progress) => load((phase) => progress.setPhase(phase)));
  }

  // ---------------------------------------------------------------- internals

  private keyOf(target: string): EntryKey {
    return this.keys.key(this.spellings.get(target) ?? target);
  }

  private loadFromSource(target: string, ctx: LoadContext, requestId: string | undefined): Promise<LoadedModelPackage> {
    const { source } = this.options;
    return this.loading.run(
      target,
      {
        label: target,
        requestId,
        transfer: () => source.transferProgress?.(target),
        firstPhase: source.transferProgress === undefined ? 'preparing files' : 'downloading',
      },
      (progress) => this.localizeAndLoad(target, ctx, (phase) => progress.setPhase(phase)),
    );
  }

  private async localizeAndLoad(target: string, ctx: LoadContext, onPhase: (phase: LoadPhase) => void): Promise<LoadedModelPackage> {
    // Not the caller's signal: the load is shared, one caller leaving must not fail the others.
    let version: string | undefined;
    try {
      const remembered = this.missing.remembered(target);
      if (remembered !== undefined) throw remembered;
      this.missing.admitLookup(target);
      const local = await this.options.source.localize(target);
      this.missing.foundObject(target);
      version = local.version;
      ctx.onRelease(() => local.release());
      const loaded = await ctx.load({ dir: local.dir, label: target, fallbackName: archiveBaseName(target), seriesTarget: target, onPhase });
      this.freshness.set(ctx.entry, { local, checkedAtUs: this.clock.nowUs(), revalidating: undefined });
      this.failedLoads.forget(target);
      this.history.loaded(target);
      return loaded;
    } catch (caught) {
      this.history.failed(target, caught);
      // A remembered failure is answered with its back-off (FailedLoads decides whether it says Retry-After).
      const err = FailedLoads.remembers(caught)
        ? this.failedLoads.record(target, version ?? (await this.options.source.currentVersion(target).catch(() => undefined)), caught)
        : caught;
      // Gone from the source: a spelling may now find another object (`x.tgz` after `x.tar.gz`).
      if (err instanceof ServingError && err.code === 'MODEL_NOT_FOUND' && err.model === target && !this.missing.isRemembered(err)) {
        this.missing.record(target, err);
        for (const [k, v] of this.spellings) if (v === target) this.spellings.delete(k);
      }
      throw err;
    }
  }

  /**
   * The spelling every request for this object is keyed by. Known spellings
   * (and targets resident under their own spelling) cost a map lookup; a new
   * one asks the source once.
   */
  private async canonicalTarget(target: string, cancel: Cancellation | undefined): Promise<string> {
    const known = this.spellings.get(target);
    if (known !== undefined) return known;
    const { source } = this.options;
    if (source.canonicalTarget === undefined || this.lifecycle.find(this.keys.key(target)) !== undefined) return target;
    let lookup = this.lookups.get(target);
    if (lookup === undefined) {
      this.missing.admitLookup(target);
      lookup = source
        .canonicalTarget(target)
        .then(
          (canonical) => {
            if (this.spellings.size >= MAX_SPELLINGS) this.spellings.clear();
            this.spellings.set(target, canonical);
            return canonical;
          },
          (err: unknown) => {
            if (err instanceof ServingError && err.code === 'MODEL_NOT_FOUND') this.missing.record(target, err);
            throw err;
          },
        )
        .finally(() => this.lookups.delete(target));
      // Every waiter may have left (abortable): the outcome is still heard.
      lookup.catch(() => undefined);
      this.lookups.set(target, lookup);
    }
    return abortable(lookup, cancel?.signal, target);
  }

  /** Within a failed load's back-off the same error at once, unless the object changed (one version check at a time per target). */
  private async refuseRecentFailure(target: string, cancel: Cancellation | undefined): Promise<void> {
    if (!this.failedLoads.inWindow(target)) return;
    let check = this.versionChecks.get(target);
    if (check === undefined) {
      // A source that cannot answer keeps the remembered error (`null` never equals a version).
      check = this.options.source
        .currentVersion(target)
        .catch(() => null)
        .finally(() => this.versionChecks.delete(target));
      this.versionChecks.set(target, check);
    }
    const current = await abortable(check, cancel?.signal, target);
    const again = this.failedLoads.stillFailing(target, current === null ? '\u0000unknown' : current);
    if (again !== undefined) throw again;
  }

  private isStale(entry: LiveEntry): boolean {
    if (this.revalidateUs <= 0) return false;
    const fresh = this.freshness.get(entry);
    return fresh !== undefined && this.clock.nowUs() - fresh.checkedAtUs >= this.revalidateUs;
  }

  /** One freshness check per entry at a time; every request that found it stale waits for it. */
  private revalidate(entry: LiveEntry): Promise<void> {
    const fresh = this.freshness.get(entry);
    if (fresh === undefined) return Promise.resolve();
    fresh.revalidating ??= this.checkFreshness(entry, fresh).finally(() => {
      fresh.revalidating = undefined;
    });
    return fresh.revalidating;
  }

  private async checkFreshness(entry: LiveEntry, fresh: Freshness): Promise<void> {
    const { source, metrics, logger } = this.options;
    const loadedVersion = fresh.local.version;
    let current: string | undefined;
    try {
      current = await source.currentVersion(entry.label);
    } catch (err) {
      fresh.checkedAtUs = this.clock.nowUs();
      metrics.modelRevalidations.inc({ result: 'error' });
      logger.warn({ model: entry.label, err: (err as Error).message }, 'could not check the model source; serving the cached copy');
      return;
    }
    fresh.checkedAtUs = this.clock.nowUs();
    if (current === loadedVersion) {
      metrics.modelRevalidations.inc({ result: 'unchanged' });
      return;
    }
    metrics.modelRevalidations.inc({ result: current === undefined ? 'deleted' : 'changed' });
    logger.info(
      { model: entry.label, loadedVersion, currentVersion: current, inflight: entry.inflight },
      current === undefined ? 'model was deleted from the source; unloading it' : 'model changed in the source; loading the new version',
    );
    // Detach first: the next request starts a fresh load; this one drains and goes.
    this.lifecycle.detach(entry).catch((err: unknown) => logger.warn({ model: entry.label, err }, 'unloading the superseded version failed'));
  }
}

/** A target of the source. */
class TargetHandle implements ModelHandle {
  get queueKey(): string {
    return `source:${this.label}`;
  }

  constructor(
    private readonly models: SourceModels,
    readonly label: string,
  ) {}

  leaseNow(): Lease | undefined {
    return this.models.leaseNow(this.label);
  }

  acquire(cancel?: Cancellation): Promise<Lease> {
    return this.models.acquire(this.label, cancel);
  }

  resident(): ResidentView | undefined {
    return this.models.resident(this.label);
  }

  /** Ready only while resident: readiness never loads (it would mean asking the source on every probe). */
  ready(version: number | undefined): boolean {
    return residentReady(this.resident(), version);
  }

  async load(cancel?: Cancellation): Promise<void> {
    await this.models.prepareExplicitLoad(this.label);
    await loadAndRelease(this, cancel);
  }

  unload(): Promise<void> {
    return this.models.unload(this.label);
  }
}

/** Whether any version of the package is a processing step stopped for good (registry/loaded-model.ts `stopped`). */
function hasStoppedStep(pkg: LoadedPackage): boolean {
  for (const model of pkg.models.values()) for (const v of model.versions.values()) if (v.stopped?.() === true) return true;
  return false;
}
