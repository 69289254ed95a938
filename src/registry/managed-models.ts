/**
 * @module registry/managed-models
 * Models SageMaker loads and unloads itself (POST /models, DELETE
 * /models/{name}), keyed by `model_name`. SageMaker owns the list
 * (registry/managed-records.ts): a model stays registered, and listed, when
 * the memory LRU pages its sessions out, and is paged back in from its
 * directory on its next invoke. This provenance coordinates the calls on one
 * name: a POST waits for a DELETE in progress, a second POST waits for the
 * first (then 409), a DELETE cancels a POST still loading. Entries, leases and
 * eviction are the lifecycle core's (registry/lifecycle.ts).
 */
import { DEFAULT_PROGRESS_INTERVAL_MS, LoadProgressBoard, type LoadProgressView } from './load-progress.js';
import type { Cancellation } from '../cancellation.js';
import { ServingError, shuttingDown } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import { DEFAULT_EXTRACT_LIMITS } from '../store/extract-limits.js';
import { KeySpace, memoryOf, type EntryHooks, type Lease, type LiveEntry, type ModelLifecycle, type ResidentView } from './lifecycle.js';
import { checkModelName, checkTargetHeader, info, ManagedRecords, type ManagedModelInfo, type ManagedRecord } from './managed-records.js';
import { modelPathDir, resolveManagedUrl, type ManagedUrlLimits } from './managed-url.js';
import { loadAndRelease, type ModelHandle } from './model-handle.js';
import { predictPackageBytes } from './package-size.js';
import { flatModelName } from './repository-layout.js';
import { archiveBaseName } from './source-models.js';

export interface ManagedModelsOptions {
  readonly logger: Logger;
  /** What a POST /models url may name (registry/managed-url.ts); default: the archive entry limit's default, no cache dir. */
  readonly managedUrls?: ManagedUrlLimits | undefined;
  /** MME_CONFIG_MAX_BYTES, for reading a url's own config.pbtxt (the loads get it from the loader's deps). */
  readonly configMaxBytes?: number | undefined;
  /** A load logs `model load in progress` at this interval (ms; 0 = never): registry/load-progress.ts. */
  readonly progressIntervalMs?: number | undefined;
}

/** One page of GET /models. */
export interface ManagedPage {
  readonly models: ManagedModelInfo[];
  /** The cursor of the next page (its last name); undefined on the last page. */
  readonly next: string | undefined;
  /** Records the page touched (registry/sorted-names.ts): the page, not the list. */
  readonly visited: number;
}

/** A POST /models in progress: a DELETE of the name cancels it, another POST of the name waits for it. */
interface ManagedLoad {
  readonly targetHeader: string | undefined;
  /** Settles when the load is over: registered, failed, or cancelled and released. */
  readonly done: Promise<ManagedModelInfo>;
  cancel(reason: ServingError): void;
}

/** A registry built without `managedUrls` (unit tests): the archive limit's default. */
const DEFAULT_MANAGED_URLS: ManagedUrlLimits = Object.freeze({ maxEntries: DEFAULT_EXTRACT_LIMITS.maxEntries });

export class ManagedModels {
  private readonly keys = new KeySpace('managed');
  /** SageMaker-managed models by model_name (the source of truth for GET /models). */
  private readonly records = new ManagedRecords();
  /** POST /models loads in progress, by model_name (not yet in `records`). */
  private readonly loads = new Map<string, ManagedLoad>();
  /** DELETE /models/{name} in progress, by model_name (already out of `records`, its memory not yet free). */
  private readonly unloads = new Map<string, Promise<void>>();
  private readonly hooks: EntryHooks;
  /** Loads and page-ins in progress, by model name. */
  private readonly loading: LoadProgressBoard;

  constructor(
    private readonly lifecycle: ModelLifecycle,
    private readonly options: ManagedModelsOptions,
  ) {
    this.loading = new LoadProgressBoard({ logger: options.logger, intervalMs: options.progressIntervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS });
    this.hooks = {
      onEvict: (entry) => options.logger.info({ model: entry.label }, 'paging out a SageMaker-managed model (it stays loaded for SageMaker)'),
    };
  }

  /** The handle of `/models/{name}/invoke` (and of a v2 name SageMaker loaded); the header, when sent, must match the load's. */
  handle(modelName: string, targetHeader: string | undefined): ModelHandle {
    return new ManagedHandle(this, modelName, targetHeader);
  }

  /** Whether SageMaker loaded a model of this name (resident or paged out). */
  has(modelName: string): boolean {
    return this.records.has(modelName);
  }

  /**
   * POST /models. Against the same name at the same time:
   *  - a DELETE in progress finishes first (its memory is free), then this loads;
   *  - a POST in progress: this answers when it ends, 409 once it loaded (SageMaker's contract), or its error;
   *  - a DELETE arriving during this load cancels it: this then answers 404.
   */
  async register(modelName: string, url: string, targetHeader: string | undefined): Promise<ManagedModelInfo> {
    if (this.lifecycle.closing) throw shuttingDown();
    checkModelName(modelName);
    checkTargetHeader(modelName, targetHeader);
    const unloading = this.unloads.get(modelName);
    if (unloading !== undefined) await unloading.catch(() => undefined);
    const pending = this.loads.get(modelName);
    if (pending !== undefined) {
      await pending.done;
      throw new ServingError('MODEL_ALREADY_LOADED', `model '${modelName}' is already loaded (by a load request that arrived first)`, { model: modelName });
    }
    if (this.lifecycle.closing) throw shuttingDown();
    if (this.records.has(modelName) || this.lifecycle.find(this.keys.key(modelName)) !== undefined) {
      throw new ServingError('MODEL_ALREADY_LOADED', `model '${modelName}' is already loaded`, { model: modelName });
    }
    return this.startLoad(modelName, url, targetHeader);
  }

  /** Lease a SageMaker-loaded model, paging its sessions back in if the LRU paged them out. */
  async acquire(modelName: string, targetHeader: string | undefined, cancel?: Cancellation): Promise<Lease> {
    const record = this.require(modelName, targetHeader);
    const fallbackName = record.targetHeader ? archiveBaseName(record.targetHeader) : modelName;
    return this.lifecycle.acquire(
      this.keys.id(modelName, record.label),
      cancel,
      (ctx) =>
        this.loading.run(modelName, { label: record.label, requestId: cancel?.requestId, firstPhase: 'preparing files' }, (progress) =>
          ctx.load({ dir: record.dir, label: record.label, fallbackName, seriesTarget: modelName, onPhase: (phase) => progress.setPhase(phase) }),
        ),
      this.hooks,
    );
  }

  /** The lease at once when the model's sessions are resident and ready (the header checked as acquire checks it). */
  leaseNow(modelName: string, targetHeader: string | undefined): Lease | undefined {
    const entry = this.lifecycle.find(this.keys.key(modelName));
    if (entry?.state !== 'READY') return undefined;
    this.require(modelName, targetHeader);
    return this.lifecycle.tryLease(entry);
  }

  /**
   * DELETE /models/{name}: unload and free memory before returning; waits for
   * requests that hold the model. A load of the name in progress (POST, or a
   * page-in) is cancelled and released first; a DELETE in progress is waited
   * for. Only a name that was never registered (or is already gone) is 404.
   */
  async unregister(modelName: string, targetHeader: string | undefined): Promise<void> {
    const loading = this.loads.get(modelName);
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
      if (!this.records.has(modelName)) return;
    }
    const unloading = this.unloads.get(modelName);
    if (unloading !== undefined) return unloading;
    this.records.require(modelName, targetHeader);
    this.records.delete(modelName);
    const entry = this.lifecycle.find(this.keys.key(modelName));
    if (entry === undefined) return;
    const done: Promise<void> = this.lifecycle.unload(entry).finally(() => {
      if (this.unloads.get(modelName) === done) this.unloads.delete(modelName);
    });
    this.unloads.set(modelName, done);
    await done;
  }

  /** The memory a package directory would need, predicted before loading it; the url checked as POST /models checks it. */
  async predictBytes(modelName: string, url: string): Promise<number> {
    const { dir } = await resolveManagedUrl(modelName, url, this.options.managedUrls ?? DEFAULT_MANAGED_URLS);
    return predictPackageBytes(dir);
  }

  /** ModelMesh's modelPath as a package directory, checked against MME_MODEL_URL_ROOTS before anything there is looked at. */
  packageDirOf(modelName: string, modelPath: string): Promise<string> {
    return modelPathDir(modelName, modelPath, this.options.managedUrls ?? DEFAULT_MANAGED_URLS);
  }

  /** One page of GET /models: up to `limit` models after the name `after`, by name, with their memory; costs the page. */
  page(after: string | undefined, limit: number): ManagedPage {
    const page = this.records.page(after, limit);
    const models = page.records.map((r) => this.describeRecord(r));
    return { models, next: page.more ? models[models.length - 1]?.modelName : undefined, visited: page.visited };
  }

  /** Every model SageMaker loaded, by name (no sort: the order is kept). */
  *all(): IterableIterator<
    ManagedModelInfo & { readonly versions: readonly number[]; readonly resident: ResidentView | undefined; readonly progress: LoadProgressView | undefined }
  > {
    for (const r of this.records.all())
      yield { ...this.describeRecord(r), versions: r.versions, resident: this.resident(r.modelName), progress: this.loading.view(r.modelName) };
  }

  describe(modelName: string): ManagedModelInfo {
    return this.describeRecord(this.require(modelName, undefined));
  }

  /** Versions a SageMaker-managed model serves (known even while it is paged out); undefined when not loaded. */
  versions(modelName: string): readonly number[] | undefined {
    return this.records.versions(modelName);
  }

  /** Its sessions' state while resident (undefined after a page-out). */
  resident(modelName: string): ResidentView | undefined {
    return this.lifecycle.view(this.keys.key(modelName));
  }

  /** Shutdown: loads in progress are cancelled and the list emptied (the lifecycle releases the sessions). */
  close(reason: ServingError): void {
    for (const load of this.loads.values()) load.cancel(reason);
    this.records.clear();
  }

  // ---------------------------------------------------------------- internals

  /** Registered in `loads` before its first await, so a DELETE or POST right after sees it. */
  private startLoad(modelName: string, url: string, targetHeader: string | undefined): Promise<ManagedModelInfo> {
    const id = this.keys.id(modelName, targetHeader ?? modelName);
    const { label } = id;
    let cancelled: ServingError | undefined;
    let entry: LiveEntry | undefined;
    // A DELETE sets `cancelled` during an await; TypeScript cannot see that, and after a first check would type it `never`.
    const throwIfCancelled = (): void => {
      if (cancelled !== undefined) throw cancelled;
    };
    const run = async (): Promise<ManagedModelInfo> => {
      const { url: modelUrl, dir } = await resolveManagedUrl(modelName, url, this.options.managedUrls ?? DEFAULT_MANAGED_URLS);
      throwIfCancelled();
      // A url that is itself one model directory whose config names it after the directory is that model, as in Triton.
      const { configMaxBytes } = this.options;
      const fallbackName =
        (await flatModelName(dir, configMaxBytes === undefined ? {} : { configMaxBytes })) ?? (targetHeader ? archiveBaseName(targetHeader) : modelName);
      throwIfCancelled();
      const loading = this.lifecycle.startPinned(
        id,
        (ctx) =>
          this.loading.run(modelName, { label, requestId: undefined, firstPhase: 'preparing files' }, (progress) =>
            ctx.load({ dir, label, fallbackName, seriesTarget: modelName, onPhase: (phase) => progress.setPhase(phase) }),
          ),
        this.hooks,
      );
      entry = loading.entry;
      const pkg = await loading.done;
      if (cancelled !== undefined) {
        // Its last stage finished before it could see the cancel: release it before the DELETE answers.
        await this.lifecycle.unload(loading.entry);
        throwIfCancelled();
      }
      const versions = [...pkg.entry.versions.keys()];
      const record: ManagedRecord = { modelName, url: modelUrl, dir, targetHeader, label, loadedAt: new Date(), entryModel: pkg.entry.name, versions };
      this.records.add(record);
      return info(record);
    };
    const load: ManagedLoad = {
      targetHeader,
      done: run().finally(() => {
        if (this.loads.get(modelName) === load) this.loads.delete(modelName);
      }),
      cancel: (reason) => {
        cancelled ??= reason;
        if (entry !== undefined) this.lifecycle.cancelLoad(entry, reason);
      },
    };
    this.loads.set(modelName, load);
    return load.done;
  }

  /** The record; MODEL_NOT_FOUND (saying so when its POST /models is still loading it) or TARGET_MISMATCH otherwise. */
  private require(modelName: string, targetHeader: string | undefined): ManagedRecord {
    if (!this.records.has(modelName) && this.loads.has(modelName)) {
      throw new ServingError('MODEL_NOT_FOUND', `model '${modelName}' is not loaded yet: its POST /models is still loading it`, { model: modelName });
    }
    return this.records.require(modelName, targetHeader);
  }

  private describeRecord(r: ManagedRecord): ManagedModelInfo {
    const entry = this.lifecycle.find(this.keys.key(r.modelName));
    const m = info(r);
    return entry === undefined ? m : { ...m, ...memoryOf(entry) };
  }
}

/** A model SageMaker loaded. */
class ManagedHandle implements ModelHandle {
  get queueKey(): string {
    return `managed:${this.label}`;
  }

  constructor(
    private readonly models: ManagedModels,
    readonly label: string,
    private readonly targetHeader: string | undefined,
  ) {}

  leaseNow(): Lease | undefined {
    return this.models.leaseNow(this.label, this.targetHeader);
  }

  acquire(cancel?: Cancellation): Promise<Lease> {
    return this.models.acquire(this.label, this.targetHeader, cancel);
  }

  resident(): ResidentView | undefined {
    return this.models.resident(this.label);
  }

  /** Ready while SageMaker has it loaded, paged out or not: the next request pages it back in. */
  ready(version: number | undefined): boolean {
    const versions = this.models.versions(this.label);
    if (versions === undefined) return false;
    return version === undefined || versions.includes(version) || (versions.length === 0 && version === 1);
  }

  /** Loaded already (SageMaker loaded it): a load pages it in when it is paged out. */
  load(cancel?: Cancellation): Promise<void> {
    return loadAndRelease(this, cancel);
  }

  unload(): Promise<void> {
    return this.models.unregister(this.label, this.targetHeader);
  }
}
