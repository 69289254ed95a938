/**
 * @module registry/model-registry
 * What is loaded, under which key, and who is using it. Two kinds of entry
 * share one mechanism:
 *  - self-managed, keyed by target (X-Amzn-SageMaker-Target-Model on
 *    /invocations): loaded from the model source on first use;
 *  - SageMaker-managed, keyed by `model_name` (POST /models): SageMaker owns
 *    the list, and only it loads and unloads them.
 * Loads are single-flight per key (concurrent requests await one promise) and
 * run in parallel across keys. A lease pins an entry: it is never released
 * while a request holds it, and an unload waits for the last lease.
 *
 * How a model gets into memory and what it costs (reserve, load, warm-up,
 * placement, measurement) is the injected ModelLoader's business
 * (registry/model-loader.ts); SageMaker's list is registry/managed-records.ts.
 * This module keeps the entries: their states, leases, single flight,
 * freshness, and eviction when the MemoryManager picks an idle one.
 *
 * Memory: every entry holds a reservation in the MemoryManager (made and
 * corrected by the loader). Idle entries are evicted least recently used
 * first when a load needs room.
 * A self-managed entry evicted is simply gone (the next request loads it again,
 * usually from the disk cache); a SageMaker-managed model stays registered
 * (`GET /models` is SageMaker's list, unchanged) and is paged back in from its
 * directory on its next invoke.
 *
 * Freshness (self-managed entries only): after `revalidateMs` the next request
 * asks the source for the object's current version (one HeadObject). A changed
 * or deleted object detaches the entry: new requests load the new version (or
 * get 404), requests in flight finish on the old one, which is then released
 * (and its disk copy removed). If the source cannot be reached the cached copy
 * keeps serving: a model that worked a minute ago is better than a 503.
 */
import path from 'node:path';
import type { Cancellation } from '../cancellation.js';
import { ServingError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { CounterCell } from '../observability/metric-cells.js';
import type { Metrics } from '../observability/metrics.js';
import { abortable } from '../store/abort.js';
import { DEFAULT_EXTRACT_LIMITS } from '../store/extract-limits.js';
import type { LocalModel, ModelSource } from '../store/model-source.js';
import { archiveStem, normalizeTarget } from '../store/target-path.js';
import { checkModelName, checkTargetHeader, info, ManagedRecords, type ManagedModelInfo, type ManagedRecord } from './managed-records.js';
import { resolveManagedUrl, type ManagedUrlLimits } from './managed-url.js';
import type { MemoryManager, Resident } from './memory-manager.js';
import { FailedLoads } from './failed-loads.js';
import type { LoadedModelPackage, ModelLoader } from './model-loader.js';
import type { LoadedPackage, PackageLoadRequest } from './package-loader.js';
import { predictPackageBytes } from './package-size.js';
import { flatModelName } from './repository-layout.js';

export type { ManagedModelInfo } from './managed-records.js';

export type EntryKind = 'target' | 'managed' | 'default';

/** A model's memory as the repository index and GET /models/{name} report it (undefined while not resident). */
export interface ModelMemory {
  /** Its share of the budget now (the loader's reservation). */
  readonly reservedBytes: number | undefined;
  /** What its load was measured to add to the process; undefined when it could not be measured. */
  readonly measuredBytes: number | undefined;
}

/** A resident entry seen from outside: its state, package and memory. */
export interface ResidentView extends ModelMemory {
  readonly state: EntryState;
  readonly pkg: LoadedPackage | undefined;
  /** What the budget counts for it now (0 until loaded). */
  readonly bytes: number;
}
export type EntryState = 'LOADING' | 'READY' | 'UNLOADING';

export interface Lease {
  readonly pkg: LoadedPackage;
  /** Name for logs and metrics: the target, or the managed model's target header / name. */
  readonly label: string;
  release(): void;
}

/** One model of the source, with where it is (repository index / listing). */
export interface RepositoryModel {
  readonly target: string;
  readonly sizeBytes: number | undefined;
  readonly lastModified: string | undefined;
  /** Extracted on local disk (the current version). */
  readonly cached: boolean;
  /** In memory: READY, or LOADING/UNLOADING while that happens; undefined when not loaded. */
  readonly state: EntryState | undefined;
  readonly reservedBytes: number | undefined;
  readonly measuredBytes: number | undefined;
}

interface Entry {
  readonly key: string;
  readonly kind: EntryKind;
  readonly label: string;
  readonly url: string | undefined;
  readonly targetHeader: string | undefined;
  state: EntryState;
  readonly ready: Promise<LoadedModelPackage>;
  pkg: LoadedPackage | undefined;
  /** The loaded package with its reservation (the loader's); set when the load succeeds. */
  loaded: LoadedModelPackage | undefined;
  inflight: number;
  /** Requests waiting for its load to finish: it stays pinned until they hold their leases. */
  waiting: number;
  idle: (() => void) | undefined;
  loadedAt: Date | undefined;
  /** The source's copy the package was loaded from (self-managed entries); released with the entry. */
  local: LocalModel | undefined;
  /** performance.now() of the last confirmation that `local.version` is current. */
  checkedAt: number;
  revalidating: Promise<void> | undefined;
  /** The handle the memory manager evicts it through. */
  readonly resident: Resident;
  /** Aborted when the entry is unloaded while it loads (DELETE, a v2 unload, shutdown): its load stops and throws the reason. */
  readonly abort: AbortController;
}

/** A POST /models in progress: a DELETE of the name cancels it, another POST of the name waits for it. */
interface ManagedLoad {
  readonly targetHeader: string | undefined;
  /** Settles when the load is over: registered, failed, or cancelled and released. */
  readonly done: Promise<ManagedModelInfo>;
  cancel(reason: ServingError): void;
}

export interface RegistryOptions {
  readonly source: ModelSource;
  /** Local directory treated as a repository for requests without a target (single-model mode); undefined for remote sources. */
  readonly defaultRoot: string | undefined;
  readonly defaultModel: string | undefined;
  /** Revalidate a self-managed target after this many ms; 0 = never. */
  readonly revalidateMs?: number;
  /** How a model is brought into memory and measured (registry/model-loader.ts createModelLoader; a fake in unit tests). */
  readonly loader: ModelLoader;
  /** The LRU the entries are tracked in (the loader reserves in the same manager). */
  readonly memory: Pick<MemoryManager, 'track' | 'touch' | 'forget' | 'notify'>;
  readonly logger: Logger;
  readonly metrics: Pick<Metrics, 'modelRevalidations' | 'modelLoadingWait' | 'modelCacheLookups' | 'loadedModels' | 'modelUnloadDuration'>;
  /** What a POST /models url may name (registry/managed-url.ts); default: the archive entry limit's default, no cache dir. */
  readonly managedUrls?: ManagedUrlLimits;
  /** MME_CONFIG_MAX_BYTES, for reading a SageMaker url's own config.pbtxt (the loads get it from the loader's deps). */
  readonly configMaxBytes?: number;
}

/** A registry built without `managedUrls` (unit tests): the archive limit's default. */
const DEFAULT_MANAGED_URLS: ManagedUrlLimits = Object.freeze({ maxEntries: DEFAULT_EXTRACT_LIMITS.maxEntries });

function memoryOf(entry: Entry): ModelMemory {
  return { reservedBytes: entry.loaded?.bytes, measuredBytes: entry.loaded?.measuredBytes };
}

/** `team/b.tar.gz` → `b`: the name a package's root-level model gets when its config names none. */
function archiveBaseName(target: string): string {
  return archiveStem(path.posix.basename(target));
}

export class ModelRegistry {
  private readonly entries = new Map<string, Entry>();
  /** SageMaker-managed models by model_name (the source of truth for GET /models). */
  private readonly managed = new ManagedRecords();
  private closing = false;
  /** The `memory` lookup cell, counted on every request (made on first use). */
  private memoryLookups: CounterCell | undefined;
  /** Loads that failed because of the object itself, by canonical target (registry/failed-loads.ts). */
  private readonly failedLoads = new FailedLoads();
  /** Normalised target → the canonical spelling of its object (ModelSource.canonicalTarget); bounded. */
  private readonly spellings = new Map<string, string>();
  /** The version check in flight per target in a failed load's back-off. */
  private readonly versionChecks = new Map<string, Promise<string | undefined | null>>();
  /** POST /models loads in progress, by model_name (not yet in `managed`). */
  private readonly managedLoads = new Map<string, ManagedLoad>();
  /** DELETE /models/{name} in progress, by model_name (already out of `managed`, its memory not yet free). */
  private readonly managedUnloads = new Map<string, Promise<void>>();

  constructor(private readonly options: RegistryOptions) {}

  // ------------------------------------------------------------ self-managed

  /**
   * The hot path of a request to a target already in memory: the lease at
   * once, with no promise to settle and no microtask turns (a request makes
   * tens of thousands of these a second on a small model). Undefined when the
   * target is not resident and ready, or is due for revalidation: then
   * acquireTarget takes the request, exactly as before.
   */
  leaseResidentTarget(rawTarget: string): Lease | undefined {
    if (this.closing) return undefined;
    const target = normalizeTarget(rawTarget);
    const entry = this.entries.get(`target:${this.spellings.get(target) ?? target}`);
    if (entry?.state !== 'READY' || entry.pkg === undefined || this.isStale(entry)) return undefined;
    this.countMemoryLookup();
    return this.lease(entry, entry.pkg);
  }

  /** Lease the package for a target, loading it from the source on first use. */
  async acquireTarget(rawTarget: string, cancel?: Cancellation): Promise<Lease> {
    const target = await this.canonicalTarget(normalizeTarget(rawTarget), cancel);
    const key = `target:${target}`;
    const existing = this.entries.get(key);
    if (existing?.state === 'READY' && this.isStale(existing)) await abortable(this.revalidate(existing), cancel?.signal, target);
    if (existing === undefined) await this.refuseRecentFailure(target, cancel);
    return this.acquireOrLoad(key, 'target', target, cancel, async (entry) => {
      // Not the caller's signal: the load is shared, one caller leaving must not fail the others.
      let version: string | undefined;
      try {
        const local = await this.options.source.localize(target);
        version = local.version;
        try {
          const loaded = await this.load({ dir: local.dir, label: target, fallbackName: archiveBaseName(target), seriesTarget: target }, entry);
          entry.local = local;
          entry.checkedAt = performance.now();
          this.failedLoads.forget(target);
          return loaded;
        } catch (err) {
          local.release();
          throw err;
        }
      } catch (err) {
        if (FailedLoads.remembers(err)) this.failedLoads.record(target, version ?? (await this.options.source.currentVersion(target).catch(() => undefined)), err);
        // Gone from the source: a spelling may now find another object (`x.tgz` after `x.tar.gz`).
        if (err instanceof ServingError && err.code === 'MODEL_NOT_FOUND') for (const [k, v] of this.spellings) if (v === target) this.spellings.delete(k);
        throw err;
      }
    });
  }

  /** An explicit load (the repository API): a remembered failure of `rawTarget` is forgotten, so it loads now. */
  async forgetFailedLoad(rawTarget: string): Promise<void> {
    this.failedLoads.forget(await this.canonicalTarget(normalizeTarget(rawTarget), undefined));
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
    if (source.canonicalTarget === undefined || this.entries.has(`target:${target}`)) return target;
    const canonical = await abortable(source.canonicalTarget(target), cancel?.signal, target);
    if (this.spellings.size >= 1024) this.spellings.clear();
    this.spellings.set(target, canonical);
    return canonical;
  }

  /** Within a failed load's back-off the same error at once, unless the object changed (one version check at a time per target). */
  private async refuseRecentFailure(target: string, cancel: Cancellation | undefined): Promise<void> {
    if (!this.failedLoads.inWindow(target)) return;
    let check = this.versionChecks.get(target);
    if (check === undefined) {
      // A source that cannot answer keeps the remembered error (`null` never equals a version).
      check = this.options.source.currentVersion(target).catch(() => null).finally(() => this.versionChecks.delete(target));
      this.versionChecks.set(target, check);
    }
    const current = await abortable(check, cancel?.signal, target);
    const again = this.failedLoads.stillFailing(target, current === null ? '\u0000unknown' : current);
    if (again !== undefined) throw again;
  }

  /** The source's models with their disk and memory state (the repository index). */
  async repositoryIndex(): Promise<RepositoryModel[]> {
    const listed = await this.options.source.list();
    return listed.map((m) => {
      const entry = this.entries.get(`target:${m.target}`) ?? this.entries.get(`target:${archiveStem(m.target)}`);
      return {
        target: m.target,
        sizeBytes: m.sizeBytes,
        lastModified: m.lastModified?.toISOString(),
        cached: m.cached,
        state: entry?.state,
        reservedBytes: entry?.loaded?.bytes,
        measuredBytes: entry?.loaded?.measuredBytes,
      };
    });
  }

  /** Lease the default model (requests without a target header). */
  async acquireDefault(cancel?: Cancellation): Promise<Lease> {
    const { defaultModel, defaultRoot, source } = this.options;
    const where = source.publicDescription ?? source.description;
    if (defaultModel !== undefined) {
      try {
        return await this.acquireTarget(defaultModel, cancel);
      } catch (err) {
        if (!(err instanceof ServingError) || (err.code !== 'MODEL_NOT_FOUND' && err.code !== 'INVALID_TARGET')) throw err;
        // Not a target of the source: it names a model directory inside the source root (Triton's single-model mode).
      }
    }
    if (defaultRoot === undefined) {
      throw new ServingError(
        'MODEL_NOT_FOUND',
        defaultModel === undefined
          ? `no default model: send the X-Amzn-SageMaker-Target-Model header naming an archive in ${where}, or set MME_DEFAULT_MODEL`
          : `default model '${defaultModel}' not found in ${where}`,
      );
    }
    const label = defaultModel ?? path.basename(defaultRoot);
    return this.acquireOrLoad('default', 'default', label, cancel, async (entry) => {
      try {
        return await this.load(
          {
            dir: defaultRoot,
            label,
            fallbackName: defaultModel ?? 'model',
            seriesTarget: label,
            ...(defaultModel === undefined ? {} : { preferredEntry: defaultModel }),
          },
          entry,
        );
      } catch (err) {
        if (err instanceof ServingError && (err.code === 'INVALID_MODEL' || err.code === 'MODEL_NOT_FOUND') && /no model found|not a directory/.test(err.message)) {
          throw new ServingError(
            'MODEL_NOT_FOUND',
            `no default model: ${where} is not a model repository; send the X-Amzn-SageMaker-Target-Model header (e.g. one of the archives in the source) or set MME_DEFAULT_MODEL`,
          );
        }
        throw err;
      }
    });
  }

  // ------------------------------------------------------- SageMaker-managed

  /**
   * POST /models. Against the same name at the same time:
   *  - a DELETE in progress finishes first (its memory is free), then this loads;
   *  - a POST in progress: this answers when it ends, 409 once it loaded (SageMaker's contract), or its error;
   *  - a DELETE arriving during this load cancels it (ManagedLoad.cancel): this then answers 404.
   */
  async loadManaged(modelName: string, url: string, targetHeader: string | undefined): Promise<ManagedModelInfo> {
    if (this.closing) throw new ServingError('SHUTTING_DOWN', 'the server is shutting down');
    checkModelName(modelName);
    checkTargetHeader(modelName, targetHeader);
    const unloading = this.managedUnloads.get(modelName);
    if (unloading !== undefined) await unloading.catch(() => undefined);
    const pending = this.managedLoads.get(modelName);
    if (pending !== undefined) {
      await pending.done;
      throw new ServingError('MODEL_ALREADY_LOADED', `model '${modelName}' is already loaded (by a load request that arrived first)`, { model: modelName });
    }
    if (this.closing) throw new ServingError('SHUTTING_DOWN', 'the server is shutting down');
    if (this.managed.has(modelName) || this.entries.has(`managed:${modelName}`)) {
      throw new ServingError('MODEL_ALREADY_LOADED', `model '${modelName}' is already loaded`, { model: modelName });
    }
    return this.startManagedLoad(modelName, url, targetHeader);
  }

  /** Registered in `managedLoads` before its first await, so a DELETE or POST right after sees it. */
  private startManagedLoad(modelName: string, url: string, targetHeader: string | undefined): Promise<ManagedModelInfo> {
    const key = `managed:${modelName}`;
    const label = targetHeader ?? modelName;
    let cancelled: ServingError | undefined;
    let entry: Entry | undefined;
    const run = async (): Promise<ManagedModelInfo> => {
      const { url: modelUrl, dir } = await resolveManagedUrl(modelName, url, this.options.managedUrls ?? DEFAULT_MANAGED_URLS);
      if (cancelled !== undefined) throw cancelled;
      // A url that is itself one model directory whose config names it after the directory is that model, as in Triton.
      const fallbackName = (await flatModelName(dir, this.options.configMaxBytes === undefined ? {} : { configMaxBytes: this.options.configMaxBytes })) ?? (targetHeader ? archiveBaseName(targetHeader) : modelName);
      if (cancelled !== undefined) throw cancelled;
      const loading = this.startLoad(key, 'managed', label, { url: dir, targetHeader }, (e) => this.load({ dir, label, fallbackName, seriesTarget: modelName }, e));
      entry = loading;
      loading.waiting++;
      const { pkg } = await loading.ready.finally(() => loading.waiting--);
      if (cancelled !== undefined) {
        // Its last stage finished before it could see the cancel: release it before the DELETE answers.
        await this.unload(loading);
        throw cancelled;
      }
      const versions = [...pkg.entry.versions.keys()];
      const record = { modelName, url: modelUrl, dir, targetHeader, label, loadedAt: new Date(), entryModel: pkg.entry.name, versions };
      this.managed.add(record);
      return info(record);
    };
    const load: ManagedLoad = {
      targetHeader,
      done: run().finally(() => {
        if (this.managedLoads.get(modelName) === load) this.managedLoads.delete(modelName);
      }),
      cancel: (reason) => {
        cancelled ??= reason;
        if (entry !== undefined && !entry.abort.signal.aborted && entry.loaded === undefined) entry.abort.abort(reason);
      },
    };
    this.managedLoads.set(modelName, load);
    return load.done;
  }

  /** Lease a SageMaker-loaded model, paging its sessions back in if the LRU paged them out. */
  async acquireManaged(modelName: string, targetHeader: string | undefined, cancel?: Cancellation): Promise<Lease> {
    const record = this.requireManaged(modelName, targetHeader);
    const fallbackName = record.targetHeader ? archiveBaseName(record.targetHeader) : modelName;
    return this.acquireOrLoad(`managed:${modelName}`, 'managed', record.label, cancel, (entry) => this.load({ dir: record.dir, label: record.label, fallbackName, seriesTarget: modelName }, entry), {
      url: record.dir,
      targetHeader: record.targetHeader,
    });
  }

  /**
   * DELETE /models/{name}: unload and free memory before returning; waits for
   * requests that hold the model. A load of the name in progress (POST, or a
   * page-in) is cancelled and released first; a DELETE in progress is waited
   * for. Only a name that was never registered (or is already gone) is 404.
   */
  async unloadManaged(modelName: string, targetHeader: string | undefined): Promise<void> {
    const loading = this.managedLoads.get(modelName);
    if (loading !== undefined) {
      if (targetHeader !== undefined && loading.targetHeader !== undefined && targetHeader !== loading.targetHeader) {
        throw new ServingError(
          'TARGET_MISMATCH',
          `X-Amzn-SageMaker-Target-Model header '${targetHeader}' does not match the model requested in the URL ('${modelName}' is loading as '${loading.targetHeader}')`,
          { model: modelName },
        );
      }
      loading.cancel(
        new ServingError('MODEL_NOT_FOUND', `model '${modelName}' was unloaded (DELETE /models/{name}) while it was loading`, { model: modelName }),
      );
      await loading.done.catch(() => undefined);
      // Registered before the cancel arrived: unloaded below like any loaded model.
      if (!this.managed.has(modelName)) return;
    }
    const unloading = this.managedUnloads.get(modelName);
    if (unloading !== undefined) return unloading;
    this.managed.require(modelName, targetHeader);
    this.managed.delete(modelName);
    const entry = this.entries.get(`managed:${modelName}`);
    if (entry === undefined) return;
    const done: Promise<void> = this.unload(entry).finally(() => {
      if (this.managedUnloads.get(modelName) === done) this.managedUnloads.delete(modelName);
    });
    this.managedUnloads.set(modelName, done);
    await done;
  }

  /** The memory a package directory would need, predicted before loading it; the url checked as POST /models checks it. */
  async predictManagedBytes(modelName: string, url: string): Promise<number> {
    const { dir } = await resolveManagedUrl(modelName, url, this.options.managedUrls ?? DEFAULT_MANAGED_URLS);
    return predictPackageBytes(dir);
  }

  listManaged(): ManagedModelInfo[] {
    return [...this.managed.all()].map((r) => this.withMemory(info(r)));
  }

  /**
   * One page of GET /models: up to `limit` models after the name `after`, by
   * name, with their memory. Costs the page, not the list; `visited` counts
   * the records it touched (a test's measure of that).
   */
  pageManaged(after: string | undefined, limit: number): { models: ManagedModelInfo[]; next: string | undefined; visited: number } {
    const page = this.managed.page(after, limit);
    const models = page.records.map((r) => this.withMemory(info(r)));
    return { models, next: page.more ? models[models.length - 1]?.modelName : undefined, visited: page.visited };
  }

  describeManaged(modelName: string): ManagedModelInfo {
    return this.withMemory(info(this.requireManaged(modelName, undefined)));
  }

  /** The record; MODEL_NOT_FOUND (saying so when its POST /models is still loading it) or TARGET_MISMATCH otherwise. */
  private requireManaged(modelName: string, targetHeader: string | undefined): ManagedRecord {
    if (!this.managed.has(modelName) && this.managedLoads.has(modelName)) {
      throw new ServingError('MODEL_NOT_FOUND', `model '${modelName}' is not loaded yet: its POST /models is still loading it`, { model: modelName });
    }
    return this.managed.require(modelName, targetHeader);
  }

  private withMemory(m: ManagedModelInfo): ManagedModelInfo {
    const entry = this.entries.get(`managed:${m.modelName}`);
    return entry === undefined ? m : { ...m, ...memoryOf(entry) };
  }

  /** Whether SageMaker loaded a model of this name (resident or paged out). */
  isManaged(modelName: string): boolean {
    return this.managed.has(modelName);
  }

  /** Versions a SageMaker-managed model serves (known even while it is paged out); undefined when not loaded. */
  managedVersions(modelName: string): readonly number[] | undefined {
    return this.managed.versions(modelName);
  }

  /** Whether a SageMaker-managed model's sessions are in memory now (false after a page-out). */
  isManagedResident(modelName: string): boolean {
    return this.entries.get(`managed:${modelName}`)?.state === 'READY';
  }

  /** Packages currently resident (self-managed and managed). */
  loadedCount(): number {
    return [...this.entries.values()].filter((e) => e.state === 'READY').length;
  }

  /**
   * A runtime worker died (runtime/runtime-pool.ts replaced it): every model
   * with a session there is unloaded (its requests in flight fail with
   * RUNTIME_UNAVAILABLE; a SageMaker-managed one stays registered, paged out),
   * so the next request loads it again on a live worker.
   */
  dropSessionsOn(workerIndex: number, cause: string): void {
    for (const entry of [...this.entries.values()]) {
      if (entry.state !== 'READY' || entry.pkg === undefined || !usesWorker(entry.pkg, workerIndex)) continue;
      this.options.logger.warn({ model: entry.label, worker: workerIndex, cause }, 'runtime worker died: unloading the model; the next request loads it again');
      if (this.entries.get(entry.key) === entry) this.entries.delete(entry.key);
      this.unload(entry).catch((err: unknown) => this.options.logger.warn({ model: entry.label, err }, 'unloading after a runtime worker died failed'));
    }
  }

  /** Release every session, waiting for requests that still hold one. */
  async close(): Promise<void> {
    this.closing = true;
    const reason = new ServingError('SHUTTING_DOWN', 'the server is shutting down');
    for (const load of this.managedLoads.values()) load.cancel(reason);
    this.managed.clear();
    await Promise.allSettled([...this.entries.values()].map((e) => this.unload(e, reason)));
  }

  // ---------------------------------------------------------------- internals

  private isStale(entry: Entry): boolean {
    const ms = this.options.revalidateMs ?? 0;
    return ms > 0 && entry.kind === 'target' && entry.local !== undefined && performance.now() - entry.checkedAt >= ms;
  }

  /** One freshness check per entry at a time; every request that found it stale waits for it. */
  private revalidate(entry: Entry): Promise<void> {
    entry.revalidating ??= this.checkFreshness(entry).finally(() => {
      entry.revalidating = undefined;
    });
    return entry.revalidating;
  }

  private async checkFreshness(entry: Entry): Promise<void> {
    const { source, metrics, logger } = this.options;
    const loadedVersion = entry.local?.version;
    let current: string | undefined;
    try {
      current = await source.currentVersion(entry.label);
    } catch (err) {
      entry.checkedAt = performance.now();
      metrics.modelRevalidations.inc({ result: 'error' });
      logger.warn({ model: entry.label, err: (err as Error).message }, 'could not check the model source; serving the cached copy');
      return;
    }
    entry.checkedAt = performance.now();
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
    if (this.entries.get(entry.key) === entry) this.entries.delete(entry.key);
    this.unload(entry).catch((err: unknown) => logger.warn({ model: entry.label, err }, 'unloading the superseded version failed'));
  }

  /** Reserve, load, warm up, place and measure: the injected loader's work (registry/model-loader.ts), cancelled if the entry is unloaded meanwhile. */
  private load(request: PackageLoadRequest, entry: Entry): Promise<LoadedModelPackage> {
    return this.options.loader.load({ ...request, signal: entry.abort.signal });
  }

  private startLoad(
    key: string,
    kind: EntryKind,
    label: string,
    extra: { url: string | undefined; targetHeader: string | undefined },
    loader: (entry: Entry) => Promise<LoadedModelPackage>,
  ): Entry {
    const entry: Entry = {
      key,
      kind,
      label,
      url: extra.url,
      targetHeader: extra.targetHeader,
      state: 'LOADING',
      // On the next microtask, so the loader can record what it localizes on the entry.
      ready: Promise.resolve().then(() => loader(entry)),
      pkg: undefined,
      loaded: undefined,
      inflight: 0,
      waiting: 0,
      idle: undefined,
      loadedAt: undefined,
      local: undefined,
      checkedAt: performance.now(),
      revalidating: undefined,
      abort: new AbortController(),
      resident: {
        key,
        label,
        get bytes() {
          return entry.loaded?.bytes ?? 0;
        },
        // Also while requests that waited for its load have not leased it yet: a just-loaded model must not be
        // evicted (by another load or the reconciliation) between its load and the requests it was loaded for.
        // Live sequences pin it too: evicting it would lose their implicit state mid-sequence.
        pinned: () => entry.inflight > 0 || entry.waiting > 0 || entry.state !== 'READY' || (entry.pkg?.sequences?.live ?? 0) > 0,
        evict: () => this.evict(entry),
      },
    };
    this.entries.set(key, entry);
    entry.ready.then(
      (loaded) => {
        entry.loaded = loaded;
        entry.pkg = loaded.pkg;
        entry.loadedAt = new Date();
        if (entry.state === 'LOADING') {
          entry.state = 'READY';
          this.options.memory.track(entry.resident);
        }
        this.options.metrics.loadedModels.set(this.loadedCount());
      },
      () => {
        // A failed load leaves nothing behind; the next request tries again.
        if (this.entries.get(key) === entry) this.entries.delete(key);
      },
    );
    return entry;
  }

  private async acquireOrLoad(
    key: string,
    kind: EntryKind,
    label: string,
    cancel: Cancellation | undefined,
    loader: (entry: Entry) => Promise<LoadedModelPackage>,
    extra: { url: string | undefined; targetHeader: string | undefined } = { url: undefined, targetHeader: undefined },
  ): Promise<Lease> {
    if (this.closing) throw new ServingError('SHUTTING_DOWN', 'the server is shutting down');
    let entry = this.entries.get(key);
    if (entry?.state === 'UNLOADING') {
      await entry.ready.catch(() => undefined);
      entry = this.entries.get(key);
      if (entry?.state === 'UNLOADING') entry = undefined;
    }
    const resident = entry?.state === 'READY';
    if (resident) this.countMemoryLookup();
    const waitStarted = resident ? 0 : performance.now();
    // Resident: lease at once. Nothing to wait for, so no abort listener (the hot path of every request).
    if (resident && entry!.pkg !== undefined) return this.lease(entry!, entry!.pkg);
    entry ??= this.startLoad(key, kind, label, extra, loader);
    const waited = entry;
    waited.waiting++;
    try {
      const { pkg } = await abortable(waited.ready, cancel?.signal, label);
      if (!resident) this.options.metrics.modelLoadingWait.observe((performance.now() - waitStarted) / 1000);
      if (waited.state === 'UNLOADING') throw new ServingError('MODEL_NOT_FOUND', `model '${label}' was unloaded`, { model: label });
      return this.lease(waited, pkg);
    } finally {
      waited.waiting--;
    }
  }

  private countMemoryLookup(): void {
    (this.memoryLookups ??= this.options.metrics.modelCacheLookups.cell({ result: 'memory' })).inc();
  }

  private lease(entry: Entry, pkg: LoadedPackage): Lease {
    entry.inflight++;
    this.options.memory.touch(entry.key);
    let released = false;
    return {
      pkg,
      label: entry.label,
      release: () => {
        if (released) return;
        released = true;
        entry.inflight--;
        if (entry.inflight === 0) {
          entry.idle?.();
          // It may now be evicted: a load waiting for memory looks again.
          this.options.memory.notify();
        }
      },
    };
  }

  /** The memory manager chose this idle entry: release it (a managed model stays registered, paged out). */
  private async evict(entry: Entry): Promise<void> {
    if (entry.kind === 'managed') this.options.logger.info({ model: entry.label }, 'paging out a SageMaker-managed model (it stays loaded for SageMaker)');
    await this.unload(entry);
  }

  /** Release the entry once its requests are done; one still loading is cancelled first (its load throws `reason`). */
  private async unload(entry: Entry, reason?: ServingError): Promise<void> {
    entry.state = 'UNLOADING';
    if (entry.loaded === undefined && !entry.abort.signal.aborted) {
      entry.abort.abort(reason ?? new ServingError('MODEL_NOT_FOUND', `model '${entry.label}' was unloaded while it was loading`, { model: entry.label }));
    }
    const started = process.hrtime.bigint();
    const loaded = await entry.ready.catch(() => undefined);
    if (entry.inflight > 0) {
      await new Promise<void>((resolve) => {
        entry.idle = resolve;
      });
    }
    const bytes = loaded?.bytes;
    await loaded?.release();
    entry.local?.release();
    this.options.memory.forget(entry.resident);
    if (this.entries.get(entry.key) === entry) this.entries.delete(entry.key);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    this.options.metrics.modelUnloadDuration.observe(seconds);
    this.options.metrics.loadedModels.set(this.loadedCount());
    if (loaded) this.options.logger.info({ model: entry.label, bytes, durationMs: Math.round(seconds * 1000) }, 'model unloaded');
  }

  // ---------------------------------------------------------------------------
  // Added for the KServe v2 routes (issue 7, owned by the HTTP work): look at a
  // resident entry without loading it (model readiness), and unload a
  // self-managed target on request (POST /v2/repository/models/{m}/unload).

  /** A resident entry's state and package, without loading anything; undefined when not resident. */
  peekResident(kind: 'target' | 'managed', name: string): ResidentView | undefined {
    const entry = this.entries.get(kind === 'target' ? this.targetKey(normalizeTarget(name)) : `managed:${name}`);
    // bytes: what the budget counts for it (0 until loaded).
    return entry === undefined ? undefined : { state: entry.state, pkg: entry.pkg, bytes: entry.loaded?.bytes ?? 0, ...memoryOf(entry) };
  }

  private targetKey(target: string): string {
    return `target:${this.spellings.get(target) ?? target}`;
  }

  /** Unload a resident self-managed target, waiting for its requests; MODEL_NOT_FOUND when it is not resident. */
  async unloadTarget(rawTarget: string): Promise<void> {
    const target = normalizeTarget(rawTarget);
    const entry = this.entries.get(this.targetKey(target));
    if (!entry || entry.state === 'UNLOADING') throw new ServingError('MODEL_NOT_FOUND', `model '${target}' is not loaded`, { model: target });
    await this.unload(entry);
  }
}

/** Whether any session of the package lives in runtime worker `index`. */
function usesWorker(pkg: LoadedPackage, index: number): boolean {
  for (const model of pkg.models.values()) {
    for (const version of model.versions.values()) {
      if (version.sessions.some((session) => session.worker === index)) return true;
    }
  }
  return false;
}
