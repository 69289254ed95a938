/**
 * @module registry/model-registry
 * What is loaded, and where each model comes from. One lifecycle core
 * (registry/lifecycle.ts: entries, load states, single flight, leases,
 * eviction) serves three provenances, each in its own module:
 *  - models of the source, by target (registry/source-models.ts: naming,
 *    back-off after failed loads, revalidation);
 *  - models SageMaker loads and unloads itself, by `model_name`
 *    (registry/managed-models.ts: records, POST/DELETE coordination, page-in);
 *  - the default model of requests that name none, chosen once at start-up
 *    (registry/default-model.ts).
 * A request's model reference is resolved here, once, into a handle
 * (registry/model-handle.ts); the service uses the handle and never asks
 * which provenance it is.
 */
import type { LoadProgressView } from './load-progress.js';
import { shuttingDown } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Clock } from '../clock.js';
import type { ModelSource } from '../store/model-source.js';
import { DefaultModel, type DefaultChoice } from './default-model.js';
import { ModelLifecycle, type EntryState } from './lifecycle.js';
import { latestVersion, type LoadedModel } from './loaded-model.js';
import { ManagedModels } from './managed-models.js';
import type { LoadError } from './load-history.js';
import type { ManagedUrlLimits } from './managed-url.js';
import type { ModelHandle, ModelRef } from './model-handle.js';
import type { MemoryManager } from './memory-manager.js';
import type { ModelLoader } from './model-loader.js';
import { SourceModels } from './source-models.js';

export type { EntryState, Lease, ModelMemory, ResidentView } from './lifecycle.js';
export type { ManagedModelInfo } from './managed-records.js';
export type { ModelHandle, ModelRef } from './model-handle.js';

export interface RegistryOptions {
  readonly source: ModelSource;
  /** Local directory treated as a repository for requests without a target (single-model mode); undefined for remote sources. */
  readonly defaultRoot: string | undefined;
  readonly defaultModel: string | undefined;
  /** Revalidate a target of the source after this many ms; 0 = never. */
  readonly revalidateMs?: number;
  /** How long a target the source does not hold is remembered, and how many such misses per second (registry/missing-targets.ts). */
  readonly missingTtlMs?: number;
  readonly missingLookupsPerSecond?: number;
  /** A load logs its progress at this interval (ms; 0 = never), registry/load-progress.ts. */
  readonly progressIntervalMs?: number;
  /** How a model is brought into memory and measured (registry/model-loader.ts createModelLoader; a fake in unit tests). */
  readonly loader: ModelLoader;
  /** The LRU the entries are tracked in (the loader reserves in the same manager). */
  readonly memory: Pick<MemoryManager, 'track' | 'touch' | 'forget' | 'notify'>;
  readonly logger: Logger;
  readonly metrics: Pick<Metrics, 'modelRevalidations' | 'modelLoadingWait' | 'modelCacheLookups' | 'loadedModels' | 'modelUnloadDuration'> &
    Partial<Pick<Metrics, 'missingTargets'>>;
  /** What a POST /models url may name (registry/managed-url.ts); default: the archive entry limit's default, no cache dir. */
  readonly managedUrls?: ManagedUrlLimits;
  /** MME_CONFIG_MAX_BYTES, for reading a SageMaker url's own config.pbtxt (the loads get it from the loader's deps). */
  readonly configMaxBytes?: number;
  /** False where model names are restricted (the model-repository group): the no-default-model answer then lists none. Default true. */
  readonly listNames?: boolean;
  /** Where time decides (revalidation, back-off, load waits); the system clock by default, a fake in unit tests. */
  readonly clock?: Clock;
}

/** One row of the KServe v2 repository index. */
export interface RepositoryIndexEntry {
  readonly name: string;
  readonly version: string | undefined;
  readonly state: EntryState | 'UNAVAILABLE';
  readonly reason: string;
  /** Targets of the model source: extracted on local disk (the current version). */
  readonly cached: boolean | undefined;
  /** Targets of the model source: the archive's size. */
  readonly sizeBytes: number | undefined;
  /** While resident: its share of the memory budget, and what its load was measured to add to the process. */
  readonly reservedBytes?: number | undefined;
  readonly measuredBytes?: number | undefined;
  /** When a request last used it (wall-clock epoch ms), while resident. */
  readonly lastUsedMs?: number | undefined;
  /** Its last load's error (also its `reason` while it is not loaded), until a load succeeds. */
  readonly lastError?: LoadError | undefined;
  /** While LOADING (a target of the model source): its phase and how far the download has come. */
  readonly progress?: LoadProgressView | undefined;
}

export class ModelRegistry {
  private readonly lifecycle: ModelLifecycle;
  private readonly sources: SourceModels;
  /** SageMaker's models: POST/DELETE /models, GET /models and /models/{name}. */
  readonly managed: ManagedModels;
  private readonly defaultModel: DefaultModel;

  constructor(options: RegistryOptions) {
    const { logger, metrics, clock } = options;
    this.lifecycle = new ModelLifecycle({ loader: options.loader, memory: options.memory, logger, metrics, clock });
    this.sources = new SourceModels(this.lifecycle, {
      source: options.source,
      revalidateMs: options.revalidateMs,
      missingTtlMs: options.missingTtlMs,
      missingLookupsPerSecond: options.missingLookupsPerSecond,
      progressIntervalMs: options.progressIntervalMs,
      logger,
      metrics,
      clock,
    });
    this.managed = new ManagedModels(this.lifecycle, {
      logger,
      managedUrls: options.managedUrls,
      configMaxBytes: options.configMaxBytes,
      progressIntervalMs: options.progressIntervalMs,
    });
    this.defaultModel = new DefaultModel(this.lifecycle, this.sources, {
      source: options.source,
      defaultRoot: options.defaultRoot,
      defaultModel: options.defaultModel,
      configMaxBytes: options.configMaxBytes,
      listNames: options.listNames,
    });
  }

  /**
   * The handle of what a request names; the only place a reference's kind is
   * looked at. A target is normalised here (INVALID_TARGET), once per request.
   */
  resolve(ref: ModelRef): ModelHandle {
    switch (ref.kind) {
      case 'target':
        return this.sources.handle(ref.target);
      case 'managed':
        return this.managed.handle(ref.name, ref.targetHeader);
      case 'named':
        // A name SageMaker loaded (resident or paged out) is that model; any other is a target of the source.
        return this.managed.has(ref.name) ? this.managed.handle(ref.name, undefined) : this.sources.handle(ref.name);
      case 'default':
        return this.defaultModel.handle;
    }
  }

  /** Decide the default model now (start-up), so the first request without a target does not pay for it. */
  chooseDefault(): Promise<DefaultChoice> {
    return this.defaultModel.choice();
  }

  /**
   * The repository index: SageMaker-managed models, then every target of the
   * model source with its state (UNAVAILABLE = not loaded).
   */
  async repositoryIndex(): Promise<RepositoryIndexEntry[]> {
    const rows: RepositoryIndexEntry[] = [];
    const versionOf = (pkg: { entry: LoadedModel } | undefined): string | undefined => (pkg ? String(latestVersion(pkg.entry)?.version ?? 1) : undefined);
    for (const m of this.managed.all()) {
      let latest = m.versions.length > 0 ? m.versions[0]! : undefined;
      for (const v of m.versions) if (v > latest!) latest = v;
      const version = latest !== undefined ? String(latest) : versionOf(m.resident?.pkg);
      rows.push({
        name: m.modelName,
        version,
        state: m.state,
        reason: '',
        cached: undefined,
        sizeBytes: undefined,
        reservedBytes: m.reservedBytes,
        measuredBytes: m.measuredBytes,
        lastUsedMs: m.resident?.lastUsedMs,
        progress: m.progress,
      });
    }
    for (const t of await this.sources.list()) {
      const resident = t.resident;
      const state = resident?.state;
      const lastError = t.history?.lastError;
      rows.push({
        name: t.target,
        version: state === 'READY' ? versionOf(resident?.pkg) : undefined,
        state: state ?? 'UNAVAILABLE',
        // As Triton's index: a model whose load failed gives the load's error; one loaded before and since evicted or unloaded, "unloaded".
        reason: state !== undefined ? '' : (lastError?.message ?? (t.history?.loadedOnce === true ? 'unloaded' : 'not loaded')),
        cached: t.cached,
        sizeBytes: t.sizeBytes,
        reservedBytes: resident?.reservedBytes,
        measuredBytes: resident?.measuredBytes,
        lastUsedMs: resident?.lastUsedMs,
        lastError,
        progress: t.progress,
      });
    }
    return rows;
  }

  /** Packages resident now (every provenance). */
  loadedCount(): number {
    return this.lifecycle.loadedCount();
  }

  /**
   * A runtime worker died (runtime/runtime-pool.ts replaced it): every model
   * with a session there is unloaded (a SageMaker-managed one stays
   * registered, paged out), so the next request loads it again.
   */
  dropSessionsOn(workerIndex: number, cause: string): void {
    this.lifecycle.dropSessionsOn(workerIndex, cause);
  }

  /** Release every session, waiting for requests that still hold one. */
  async close(): Promise<void> {
    const reason = shuttingDown();
    this.managed.close(reason);
    await this.lifecycle.close(reason);
  }
}
