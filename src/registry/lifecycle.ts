/**
 * @module registry/lifecycle
 * The lifecycle of what is in memory, whatever it came from: entries under
 * opaque keys, their states (LOADING → READY → UNLOADING), single-flight
 * loads (concurrent requests for a key await one load; keys load in
 * parallel), leases (an entry is never released while a request holds one;
 * an unload waits for the last), and eviction when the MemoryManager picks an
 * idle entry.
 *
 * Nothing here knows where a model came from: the provenances
 * (registry/source-models.ts, managed-models.ts, default-model.ts) make the
 * keys (KeySpace), say how an entry loads (a LoadFn over the injected
 * ModelLoader) and what an eviction means to them (EntryHooks).
 *
 * Memory: every entry holds a reservation in the MemoryManager (made and
 * corrected by the loader); idle entries are evicted least recently used
 * first when a load needs room. Time (the wait for a load, an unload's
 * duration) is read from the injected Clock.
 */
import type { Cancellation } from '../cancellation.js';
import { ServingError, shuttingDown } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { CounterCell } from '../observability/metric-cells.js';
import type { Metrics } from '../observability/metrics.js';
import { systemClock, type Clock } from '../clock.js';
import { abortable } from '../store/abort.js';
import type { MemoryManager, Resident } from './memory-manager.js';
import type { LoadedModelPackage, ModelLoader } from './model-loader.js';
import type { LoadedPackage, PackageLoadRequest } from './package-loader.js';

export type EntryState = 'LOADING' | 'READY' | 'UNLOADING';

declare const ENTRY_KEY: unique symbol;
/** An entry's key: made by a KeySpace only, so two provenances never share one and no key is spelled by hand. */
export type EntryKey = string & { readonly [ENTRY_KEY]: true };

/** One provenance's keys (`target`, `managed`, `default`). */
export class KeySpace {
  constructor(private readonly prefix: string) {}

  key(name: string): EntryKey {
    return `${this.prefix}:${name}` as EntryKey;
  }

  /** The entry of `name` as the lifecycle loads it: its key and what logs and errors call it (`name` itself unless said otherwise). */
  id(name: string, shownAs: string = name): EntryId {
    return { key: this.key(name), label: shownAs };
  }
}

/** Which entry a load is for: its key, and the model's name for logs and errors, made together once (KeySpace.id). */
export interface EntryId {
  readonly key: EntryKey;
  readonly label: string;
}

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
  /** When a request last leased it (wall-clock epoch ms, for display); undefined when none has. */
  readonly lastUsedMs: number | undefined;
}

export interface Lease {
  readonly pkg: LoadedPackage;
  /** Name for logs and metrics (the provenance's label: a target, a model name or its target header). */
  readonly label: string;
  release(): void;
}

/** An entry as its provenance sees it (read-only). */
export interface LiveEntry extends EntryId {
  readonly state: EntryState;
  readonly pkg: LoadedPackage | undefined;
  readonly loaded: LoadedModelPackage | undefined;
  /** Leases held now. */
  readonly inflight: number;
}

/** What a provenance's load gets: the entry being loaded, its abort signal, the loader, and where to hang what goes with the entry. */
export interface LoadContext {
  readonly entry: LiveEntry;
  /** Aborted when the entry is unloaded while it loads (DELETE, a v2 unload, shutdown): the load stops and throws the reason. */
  readonly signal: AbortSignal;
  /** Reserve, load, warm up, place and measure (the injected ModelLoader), cancelled with the entry. */
  load(request: Omit<PackageLoadRequest, 'signal'>): Promise<LoadedModelPackage>;
  /** Run `fn` when the entry is released, after its package (a disk copy it was loaded from). */
  onRelease(fn: () => void): void;
}

export type LoadFn = (ctx: LoadContext) => Promise<LoadedModelPackage>;

export interface EntryHooks {
  /** The memory manager chose this idle entry; called before it is unloaded. */
  readonly onEvict?: (entry: LiveEntry) => void;
}

export interface LifecycleOptions {
  /** How a model is brought into memory and measured (registry/model-loader.ts; a fake in unit tests). */
  readonly loader: ModelLoader;
  /** The LRU the entries are tracked in (the loader reserves in the same manager). */
  readonly memory: Pick<MemoryManager, 'track' | 'touch' | 'forget' | 'notify'>;
  readonly logger: Logger;
  readonly metrics: Pick<Metrics, 'modelLoadingWait' | 'modelCacheLookups' | 'loadedModels' | 'modelUnloadDuration'>;
  readonly clock?: Clock;
}

interface Entry extends LiveEntry {
  state: EntryState;
  readonly ready: Promise<LoadedModelPackage>;
  pkg: LoadedPackage | undefined;
  loaded: LoadedModelPackage | undefined;
  inflight: number;
  /** clock.nowUs() of its last lease. */
  lastUsedUs: number | undefined;
  /** Requests waiting for its load to finish: it stays pinned until they hold their leases. */
  waiting: number;
  idle: (() => void) | undefined;
  readonly releases: (() => void)[];
  readonly hooks: EntryHooks;
  /** The handle the memory manager evicts it through. */
  readonly resident: Resident;
  readonly abort: AbortController;
}

const NO_HOOKS: EntryHooks = Object.freeze({});

/** A pending load the caller holds (a POST /models): pinned until `done` settles, cancellable while it runs. */
export interface PinnedLoad {
  readonly entry: LiveEntry;
  /** The package once loaded; the load's error otherwise. */
  readonly done: Promise<LoadedPackage>;
}

export class ModelLifecycle {
  private readonly entries = new Map<EntryKey, Entry>();
  private readonly clock: Clock;
  private closingState = false;
  /** Entries READY now (kept, not counted: a load or unload must not walk thousands of entries). */
  private readyCount = 0;
  /** The `memory` lookup cell, counted on every lease of a resident entry (made on first use). */
  private memoryLookups: CounterCell | undefined;

  constructor(private readonly options: LifecycleOptions) {
    this.clock = options.clock ?? systemClock;
  }

  get closing(): boolean {
    return this.closingState;
  }

  /** The entry under `key`, in whatever state; undefined when there is none. */
  find(key: EntryKey): LiveEntry | undefined {
    return this.entries.get(key);
  }

  /** A resident entry's state, package and memory, without loading anything. */
  view(key: EntryKey): ResidentView | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    const lastUsedMs = entry.lastUsedUs === undefined ? undefined : Date.now() - (this.clock.nowUs() - entry.lastUsedUs) / 1000;
    return { state: entry.state, pkg: entry.pkg, bytes: entry.loaded?.bytes ?? 0, lastUsedMs, ...memoryOf(entry) };
  }

  /**
   * The hot path: a lease on an entry that is READY, at once, with no
   * promise to settle (a request makes tens of thousands of these a second
   * on a small model). Undefined when it is not READY: acquire takes the
   * request then.
   */
  tryLease(found: LiveEntry | undefined): Lease | undefined {
    if (this.closingState || found === undefined) return undefined;
    const entry = found as Entry;
    // Detached entries are UNLOADING already (unload sets it before its first await).
    if (entry.state !== 'READY' || entry.pkg === undefined) return undefined;
    this.countMemoryLookup();
    return this.lease(entry, entry.pkg);
  }

  /** Lease the entry `id`, loading it with `load` first when there is none (one load for all who ask meanwhile). */
  async acquire(id: EntryId, cancel: Cancellation | undefined, load: LoadFn, hooks: EntryHooks = NO_HOOKS): Promise<Lease> {
    if (this.closingState) throw shuttingDown();
    const { key, label } = id;
    let entry = this.entries.get(key);
    if (entry?.state === 'UNLOADING') {
      await entry.ready.catch(() => undefined);
      entry = this.entries.get(key);
      if (entry?.state === 'UNLOADING') entry = undefined;
    }
    // Resident: lease at once. Nothing to wait for, so no abort listener.
    if (entry?.state === 'READY' && entry.pkg !== undefined) {
      this.countMemoryLookup();
      return this.lease(entry, entry.pkg);
    }
    const waitStarted = this.clock.nowUs();
    entry ??= this.start(id, load, hooks);
    const waited = entry;
    waited.waiting++;
    try {
      const { pkg } = await abortable(waited.ready, cancel?.signal, label);
      this.options.metrics.modelLoadingWait.observe((this.clock.nowUs() - waitStarted) / 1e6);
      if (waited.state === 'UNLOADING') throw new ServingError('MODEL_NOT_FOUND', `model '${label}' was unloaded`, { model: label });
      return this.lease(waited, pkg);
    } finally {
      waited.waiting--;
    }
  }

  /**
   * Start loading `id` for a caller that holds the load rather than a lease
   * (POST /models): the entry stays pinned until `done` settles. The key must
   * be free (the caller checked).
   */
  startPinned(id: EntryId, load: LoadFn, hooks: EntryHooks = NO_HOOKS): PinnedLoad {
    if (this.closingState) throw shuttingDown();
    const entry = this.start(id, load, hooks);
    entry.waiting++;
    const done = entry.ready.then((loaded) => loaded.pkg).finally(() => void entry.waiting--);
    return { entry, done };
  }

  /** Stop an entry's load if it is still loading (its load throws `reason`); a loaded entry is left alone. */
  cancelLoad(found: LiveEntry, reason: ServingError): void {
    const entry = found as Entry;
    if (entry.loaded === undefined && !entry.abort.signal.aborted) entry.abort.abort(reason);
  }

  /** Release the entry once its requests are done; one still loading is cancelled first (its load throws `reason`). */
  async unload(found: LiveEntry, reason?: ServingError): Promise<void> {
    const entry = found as Entry;
    if (entry.state === 'READY') this.readyCount--;
    entry.state = 'UNLOADING';
    if (entry.loaded === undefined && !entry.abort.signal.aborted) {
      entry.abort.abort(reason ?? new ServingError('MODEL_NOT_FOUND', `model '${entry.label}' was unloaded while it was loading`, { model: entry.label }));
    }
    const started = this.clock.nowUs();
    const loaded = await entry.ready.catch(() => undefined);
    if (entry.inflight > 0) {
      await new Promise<void>((resolve) => {
        entry.idle = resolve;
      });
    }
    const bytes = loaded?.bytes;
    await loaded?.release();
    for (const release of entry.releases.splice(0)) release();
    this.options.memory.forget(entry.resident);
    if (this.entries.get(entry.key) === entry) this.entries.delete(entry.key);
    const seconds = (this.clock.nowUs() - started) / 1e6;
    this.options.metrics.modelUnloadDuration.observe(seconds);
    this.options.metrics.loadedModels.set(this.readyCount);
    if (loaded) this.options.logger.info({ model: entry.label, bytes, durationMs: Math.round(seconds * 1000) }, 'model unloaded');
  }

  /** Take the entry off its key at once (the next request loads afresh), then unload it once its requests are done. */
  detach(found: LiveEntry, reason?: ServingError): Promise<void> {
    if (this.entries.get(found.key) === found) this.entries.delete(found.key);
    return this.unload(found, reason);
  }

  /** Packages resident now. */
  loadedCount(): number {
    return this.readyCount;
  }

  /**
   * A runtime worker died (runtime/runtime-pool.ts replaced it): every entry
   * with a session there is detached and unloaded (its requests in flight
   * fail with RUNTIME_UNAVAILABLE), so the next request loads it again on a
   * live worker.
   */
  dropSessionsOn(workerIndex: number, cause: string): void {
    for (const entry of [...this.entries.values()]) {
      if (entry.state !== 'READY' || entry.pkg === undefined || !usesWorker(entry.pkg, workerIndex)) continue;
      this.options.logger.warn({ model: entry.label, worker: workerIndex, cause }, 'runtime worker died: unloading the model; the next request loads it again');
      this.detach(entry).catch((err: unknown) => this.options.logger.warn({ model: entry.label, err }, 'unloading after a runtime worker died failed'));
    }
  }

  /** Refuse new work and release every entry, waiting for requests that still hold one. */
  async close(reason: ServingError = shuttingDown()): Promise<void> {
    this.closingState = true;
    await Promise.allSettled([...this.entries.values()].map((e) => this.unload(e, reason)));
  }

  // ---------------------------------------------------------------- internals

  private start(id: EntryId, load: LoadFn, hooks: EntryHooks): Entry {
    const { key, label } = id;
    const abort = new AbortController();
    const releases: (() => void)[] = [];
    const context = (entry: Entry): LoadContext => ({
      entry,
      signal: abort.signal,
      load: (request) => this.options.loader.load({ ...request, signal: abort.signal }),
      onRelease: (fn) => void releases.push(fn),
    });
    const entry: Entry = {
      key,
      label,
      state: 'LOADING',
      // On the next microtask, so the load sees its entry in the map.
      ready: Promise.resolve().then(() => load(context(entry))),
      pkg: undefined,
      loaded: undefined,
      inflight: 0,
      lastUsedUs: undefined,
      waiting: 0,
      idle: undefined,
      releases,
      hooks,
      abort,
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
        if (entry.state === 'LOADING') {
          entry.state = 'READY';
          this.readyCount++;
          this.options.memory.track(entry.resident);
        }
        this.options.metrics.loadedModels.set(this.readyCount);
      },
      () => {
        // A failed load leaves nothing behind but what it hung on the entry; the next request tries again.
        for (const release of entry.releases.splice(0)) release();
        if (this.entries.get(key) === entry) this.entries.delete(key);
      },
    );
    return entry;
  }

  private countMemoryLookup(): void {
    (this.memoryLookups ??= this.options.metrics.modelCacheLookups.cell({ result: 'memory' })).inc();
  }

  private lease(entry: Entry, pkg: LoadedPackage): Lease {
    entry.inflight++;
    entry.lastUsedUs = this.clock.nowUs();
    this.options.memory.touch(entry.key);
    return new EntryLease(entry, pkg, this.options.memory);
  }

  private async evict(entry: Entry): Promise<void> {
    entry.hooks.onEvict?.(entry);
    await this.unload(entry);
  }
}

export function memoryOf(entry: LiveEntry): ModelMemory {
  return { reservedBytes: entry.loaded?.bytes, measuredBytes: entry.loaded?.measuredBytes };
}

/** Whether any session of the package lives in runtime worker `index`, a hot model's added instances included. */
function usesWorker(pkg: LoadedPackage, index: number): boolean {
  for (const model of pkg.models.values()) {
    for (const version of model.versions.values()) {
      if (version.sessions.some((session) => session.worker === index) || version.elastic?.workers.includes(index)) return true;
    }
  }
  return false;
}

/** A class, not an object with a closure: every request holds one while it waits for its model (bench/README.md, "overload.bench"). */
class EntryLease implements Lease {
  private released = false;
  readonly label: string;

  constructor(
    private readonly entry: Entry,
    readonly pkg: LoadedPackage,
    private readonly memory: Pick<MemoryManager, 'notify'>,
  ) {
    this.label = entry.label;
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    const { entry } = this;
    entry.inflight--;
    if (entry.inflight === 0) {
      entry.idle?.();
      // It may now be evicted: a load waiting for memory looks again.
      this.memory.notify();
    }
  }
}
