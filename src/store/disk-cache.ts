/**
 * @module store/disk-cache
 * The disk cache of extracted models under a byte budget (MME_CACHE_MAX_BYTES).
 *
 * Entries are the directories cache-publish writes (one per target and source
 * version). This class keeps the index in memory: each entry's size, when it
 * was last used, and how many holders pin it. A pinned entry is in use (a model
 * loaded in memory from it, or a localization handing it to a caller) and is
 * never removed; unpinned entries are removed least recently used first when a
 * new model needs room. An entry superseded by a newer version of its object is
 * "retired": removed as soon as its last holder lets go, so requests in flight
 * on the old version finish on intact files.
 *
 * Accounting is in disk bytes as `du` counts them (store/disk-usage.ts):
 * allocated blocks, so a file of 100 bytes costs a block and so does each
 * directory. An entry's figure is measured from the filesystem when it is
 * published (or indexed at startup). A download in progress reserves the
 * size known in advance (the archive's size, a lower bound) and may grow up to
 * what the budget minus pinned entries leaves it, charged in blocks from each
 * entry's header before it is written; past that the extraction stops with
 * INSUFFICIENT_STORAGE (507) and nothing is cached.
 *
 * Removal renames the entry to a temporary name first (atomic), so a
 * concurrent reader never sees a half-deleted entry.
 */
import { mkdtemp, rename, rm, stat, statfs, utimes } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import { ServingError } from '../errors.js';
import type { Metrics } from '../observability/metrics.js';
import { measureDiskBytes } from './disk-usage.js';
import {
  ENTRY_CONTENT_DIR,
  ENTRY_METADATA_FILE,
  TEMP_PREFIX,
  cacheEntryName,
  cleanCacheDir,
  discardTempDir,
  publishDirectory,
  stageTempDir,
  readCacheEntry,
  type CacheEntry,
  type CacheEntryMetadata,
  type FillResult,
} from './cache-publish.js';

/** Share of the cache volume the default budget takes (free space + what the cache already holds). */
export const DEFAULT_BUDGET_SHARE = 0.8;

const NO_SLOTS: ReadonlySet<never> = new Set();

export type DiskCacheMetrics = Pick<Metrics, 'diskCacheBytes' | 'diskCacheBudgetBytes' | 'diskCacheEvictions' | 'modelCacheLookups'>;

export interface DiskCacheOptions {
  readonly dir: string;
  /** Byte budget; undefined = DEFAULT_BUDGET_SHARE of the volume at open(). */
  readonly maxBytes?: number | undefined;
  readonly logger?: Logger | undefined;
  readonly metrics?: DiskCacheMetrics | undefined;
  /**
   * Wall-clock milliseconds, which order the LRU (a use is kept on disk as the
   * entry's metadata mtime, so the order survives a restart); Date.now by
   * default, a fake in unit tests. A wall clock, not the
   * monotonic Clock (src/clock.ts): the time is compared with file times.
   */
  readonly nowMs?: (() => number) | undefined;
}

/** A hold on an entry: it stays on disk until released. Release is idempotent. */
export interface CachePin {
  readonly entry: CacheEntry;
  release(): void;
}

export interface CachedEntryInfo {
  readonly target: string;
  readonly version: string;
  /** File bytes of the model. */
  readonly bytes: number;
  /** What it takes on disk (blocks): what the budget counts. */
  readonly diskBytes: number;
  readonly pinned: boolean;
  readonly lastUsed: Date;
}

export interface CachePublishOptions {
  /** The entry's identity (the source object: a path, or an s3:// URI). */
  readonly target: string;
  /** The model's name in messages (the client's target); default `target`. */
  readonly model?: string;
  readonly version: string;
  /** Bytes known before extraction (the archive size): reserved up front. */
  readonly expectedBytes?: number | undefined;
  /** Writes the model into `contentDir`; must stop with INSUFFICIENT_STORAGE past `storageBytes`. */
  readonly fill: (contentDir: string, storageBytes: number) => Promise<FillResult>;
  /** The entry's temporary directory, made already (stage()): publish owns it from here, and removes it on failure. */
  readonly staged?: Promise<string>;
}

export interface CachePublishResult {
  readonly pin: CachePin;
  readonly reused: boolean;
  readonly metadata: CacheEntryMetadata;
}

interface Slot {
  readonly name: string;
  readonly dir: string;
  readonly metadata: CacheEntryMetadata;
  /** Disk bytes (blocks) the entry takes: the budget's unit. */
  readonly diskBytes: number;
  lastUsed: number;
  /** Order of the last use in this process: breaks ties between uses in the same millisecond. */
  useSeq: number;
  pins: number;
  retired: boolean;
}

export class DiskCache {
  readonly dir: string;
  private uses = 0;
  private budget = Number.POSITIVE_INFINITY;
  private readonly slots = new Map<string, Slot>();
  /** Σ diskBytes over `slots`, kept with it (addSlot, evict): read on every publish and trim. */
  private slotBytes = 0;
  /** The slots of each target (every version), kept with `slots`: a request's lookups do not walk the whole cache. */
  private readonly byTarget = new Map<string, Set<Slot>>();
  /** Bytes promised to extractions in progress. */
  private reserved = 0;
  private opening: Promise<void> | undefined;
  /** Removals in progress (awaited by settled()). */
  private readonly removing = new Set<Promise<void>>();
  /** Use times being written to disk (awaited by settled()). */
  private readonly touching = new Set<Promise<void>>();
  private readonly nowMs: () => number;
  private readonly logger: Logger | undefined;
  private readonly metrics: DiskCacheMetrics | undefined;

  constructor(private readonly options: DiskCacheOptions) {
    if (options.maxBytes !== undefined && !(Number.isSafeInteger(options.maxBytes) && options.maxBytes > 0)) {
      throw new RangeError(`maxBytes must be a positive integer, got ${options.maxBytes}`);
    }
    this.dir = path.resolve(options.dir);
    this.logger = options.logger;
    this.metrics = options.metrics;
    this.nowMs = options.nowMs ?? Date.now;
  }

  /** The byte budget (Infinity until open() has run). */
  get maxBytes(): number {
    return this.budget;
  }

  /** Disk bytes (allocated blocks) of complete entries. */
  get usedBytes(): number {
    return this.slotBytes;
  }

  /**
   * Sweeps leftovers of a previous run (temporary and incomplete entries),
   * indexes the complete entries for reuse, sets the budget and trims to it.
   * Idempotent; every other method awaits it.
   */
  open(): Promise<void> {
    this.opening ??= this.openOnce().catch((err: unknown) => {
      this.opening = undefined;
      throw err;
    });
    return this.opening;
  }

  private async openOnce(): Promise<void> {
    const { kept, removed } = await cleanCacheDir(this.dir);
    for (const dir of kept) {
      const metadata = await readCacheEntry(dir);
      if (!metadata) continue;
      const touched = await stat(path.join(dir, ENTRY_METADATA_FILE)).then(
        (s) => s.mtimeMs,
        () => this.nowMs(),
      );
      const name = path.basename(dir);
      // Entries from before disk bytes were recorded are measured once here.
      const diskBytes = metadata.diskBytes ?? (await measureDiskBytes(dir));
      this.addSlot({ name, dir, metadata, diskBytes, lastUsed: touched, useSeq: 0, pins: 0, retired: false });
    }
    this.budget = this.options.maxBytes ?? (await this.defaultBudget());
    this.logger?.info(
      { cacheDir: this.dir, budgetBytes: this.budget, usedBytes: this.usedBytes, reused: this.slots.size, swept: removed.length },
      'disk cache ready',
    );
    await this.trim(0);
    this.report();
  }

  private async defaultBudget(): Promise<number> {
    try {
      const fs = await statfs(this.dir);
      const free = Number(fs.bavail) * Number(fs.bsize);
      return Math.max(1, Math.floor((free + this.usedBytes) * DEFAULT_BUDGET_SHARE));
    } catch (err) {
      this.logger?.warn({ cacheDir: this.dir, err }, 'cannot read the cache volume size: the disk cache has no byte budget');
      return Number.POSITIVE_INFINITY;
    }
  }

  /**
   * The complete, current entry for exactly this target and version, pinned;
   * undefined when the cache does not hold it (or it was damaged on disk).
   */
  async lookup(target: string, version: string): Promise<CachePin | undefined> {
    await this.open();
    const name = cacheEntryName(target, version);
    const slot = this.slots.get(name);
    if (!slot || slot.retired || slot.metadata.target !== target || slot.metadata.version !== version) return undefined;
    const pin = this.pinSlot(slot);
    // Verify after pinning so an eviction cannot start in between; a damaged entry is dropped.
    if (!(await readCacheEntry(slot.dir))) {
      pin.release();
      if (this.slots.get(name) === slot && slot.pins === 0) await this.evict(slot, 'damaged');
      return undefined;
    }
    this.metrics?.modelCacheLookups.inc({ result: 'disk' });
    return pin;
  }

  /**
   * The most recently used complete entry for this target, whatever its version, pinned: what is
   * served when the source cannot say which version is current (S3 unreachable).
   */
  async lookupNewest(target: string): Promise<CachePin | undefined> {
    await this.open();
    let newest: Slot | undefined;
    for (const slot of this.slotsOf(target)) {
      if (!slot.retired && (newest === undefined || slot.lastUsed > newest.lastUsed)) newest = slot;
    }
    return newest === undefined ? undefined : this.lookup(target, newest.metadata.version);
  }

  /** Another hold on an entry someone already pins (shares one localization among its callers). */
  addPin(pin: CachePin): CachePin {
    const slot = this.slots.get(path.basename(pin.entry.dir));
    if (!slot) throw new Error(`cache entry ${pin.entry.dir} is not indexed`);
    return this.pinSlot(slot);
  }

  /**
   * A new entry's temporary directory, made now (cache-publish.ts stageTempDir), so a download can make it while
   * its request is in flight; hand it to publish() or discard() it. The cache must be open.
   */
  stage(): Promise<string> {
    const staged = stageTempDir(this.dir);
    // Heard here too: its holder may discard it before it settles.
    staged.catch(() => undefined);
    return staged;
  }

  /** A staged directory that will not be published, removed; never rejects. */
  discard(staged: Promise<string>): Promise<void> {
    return discardTempDir(staged);
  }

  /**
   * Makes room, extracts through `fill` into a temporary directory, renames it
   * into place and returns it pinned. Throws INSUFFICIENT_STORAGE when the model
   * cannot fit in the budget even after removing every unpinned entry.
   */
  async publish(options: CachePublishOptions): Promise<CachePublishResult> {
    const { target, version, staged } = options;
    const model = options.model ?? target;
    const expected = Math.max(0, Math.floor(options.expectedBytes ?? 0));
    try {
      await this.open();
      await this.makeRoom(model, expected);
    } catch (err) {
      if (staged !== undefined) await discardTempDir(staged);
      throw err;
    }
    this.reserved += expected;
    let result;
    try {
      // What this model may grow to: the budget minus what cannot be freed for it.
      const storageBytes = Math.max(0, this.budget - this.pinnedBytes() - (this.reserved - expected));
      result = await publishDirectory({
        cacheDir: this.dir,
        target,
        version,
        fill: (contentDir) => options.fill(contentDir, Number.isFinite(storageBytes) ? storageBytes : Number.MAX_SAFE_INTEGER),
        ...(staged === undefined ? {} : { staged }),
      });
    } catch (err) {
      throw this.explain(err, model);
    } finally {
      this.reserved -= expected;
    }
    const name = path.basename(result.dir);
    let slot = this.slots.get(name);
    if (!slot) {
      const diskBytes = result.metadata.diskBytes ?? (await measureDiskBytes(result.dir));
      slot = { name, dir: result.dir, metadata: result.metadata, diskBytes, lastUsed: this.nowMs(), useSeq: ++this.uses, pins: 0, retired: false };
      this.addSlot(slot);
    }
    // A new entry's metadata file was written just now: its mtime already records this use.
    const pin = this.pinSlot(slot, result.reused);
    if (!result.reused) this.metrics?.modelCacheLookups.inc({ result: 'source' });
    await this.trim(0);
    this.report();
    return { pin, reused: result.reused, metadata: slot.metadata };
  }

  /**
   * Every other version of `target` is superseded: removed now when unused,
   * else as soon as its last holder releases it.
   */
  async retireOthers(target: string, keepDir: string | undefined): Promise<void> {
    const keep = keepDir === undefined ? undefined : path.basename(keepDir);
    const removals: Promise<void>[] = [];
    for (const slot of [...this.slotsOf(target)]) {
      if (slot.name === keep) continue;
      slot.retired = true;
      if (slot.pins === 0) removals.push(this.evict(slot, 'superseded'));
    }
    await Promise.all(removals);
    this.report();
  }

  /** Whether a complete entry for this target and version is on disk. */
  has(target: string, version: string): boolean {
    const slot = this.slots.get(cacheEntryName(target, version));
    return slot !== undefined && !slot.retired;
  }

  /** Whether any version of `target` is on disk. */
  hasAny(target: string): boolean {
    for (const slot of this.slotsOf(target)) if (!slot.retired) return true;
    return false;
  }

  /** Resolves when no removal is in progress (for shutdown and tests). */
  async settled(): Promise<void> {
    while (this.removing.size > 0 || this.touching.size > 0) await Promise.allSettled([...this.removing, ...this.touching]);
  }

  entries(): CachedEntryInfo[] {
    return [...this.slots.values()].map((s) => ({
      target: s.metadata.target,
      version: s.metadata.version,
      bytes: s.metadata.bytes,
      diskBytes: s.diskBytes,
      pinned: s.pins > 0,
      lastUsed: new Date(s.lastUsed),
    }));
  }

  // ---------------------------------------------------------------- internals

  private pinSlot(slot: Slot, recordOnDisk = true): CachePin {
    slot.pins++;
    this.touch(slot, recordOnDisk);
    let released = false;
    return {
      entry: { dir: slot.dir, contentDir: path.join(slot.dir, ENTRY_CONTENT_DIR), metadata: slot.metadata },
      release: () => {
        if (released) return;
        released = true;
        slot.pins--;
        this.touch(slot);
        if (slot.pins > 0) return;
        const done = slot.retired ? this.evict(slot, 'superseded') : this.trim(0);
        done.then(
          () => this.report(),
          (err: unknown) => this.logger?.warn({ err, dir: slot.dir }, 'disk cache cleanup failed'),
        );
      },
    };
  }

  /** Remembers the use in memory, and on disk (metadata mtime) so LRU order survives a restart. */
  private touch(slot: Slot, recordOnDisk = true): void {
    const now = this.nowMs();
    slot.lastUsed = now;
    slot.useSeq = ++this.uses;
    if (!recordOnDisk) return;
    const seconds = now / 1000;
    const write: Promise<void> = utimes(path.join(slot.dir, ENTRY_METADATA_FILE), seconds, seconds)
      .catch(() => undefined)
      .finally(() => this.touching.delete(write));
    this.touching.add(write);
  }

  private pinnedBytes(): number {
    let total = 0;
    for (const slot of this.slots.values()) if (slot.pins > 0) total += slot.diskBytes;
    return total;
  }

  /** Removes unpinned entries, least recently used first, until `need` more bytes fit; else 507. */
  private async makeRoom(target: string, need: number): Promise<void> {
    if (need > this.budget) {
      throw new ServingError(
        'INSUFFICIENT_STORAGE',
        `model '${target}': its archive alone is ${need} bytes, more than the whole disk cache budget of ${this.budget} bytes (MME_CACHE_MAX_BYTES)`,
        { model: target, details: { needBytes: need, budgetBytes: this.budget, wholeBudget: true } },
      );
    }
    await this.trim(need);
    const used = this.usedBytes + this.reserved;
    if (used + need > this.budget) {
      const pinned = this.pinnedBytes();
      throw new ServingError(
        'INSUFFICIENT_STORAGE',
        `model '${target}': needs at least ${need} bytes of disk cache, but ${pinned} of the ${this.budget}-byte budget (MME_CACHE_MAX_BYTES) are held by models in use and ${this.reserved} by downloads in progress`,
        { model: target, details: { needBytes: need, budgetBytes: this.budget, pinnedBytes: pinned, reservedBytes: this.reserved } },
      );
    }
  }

  /** Evicts unpinned entries (LRU first) until used + reserved + need ≤ budget, or none is left. */
  private async trim(need: number): Promise<void> {
    // Within the budget (every publish but those that overflow it): nothing to sort.
    if (!Number.isFinite(this.budget) || this.usedBytes + this.reserved + need <= this.budget) return;
    const candidates = [...this.slots.values()].filter((s) => s.pins === 0).sort((a, b) => a.lastUsed - b.lastUsed || a.useSeq - b.useSeq);
    const removals: Promise<void>[] = [];
    let used = this.usedBytes + this.reserved;
    for (const slot of candidates) {
      if (used + need <= this.budget) break;
      used -= slot.diskBytes;
      removals.push(this.evict(slot, 'budget'));
    }
    await Promise.all(removals);
  }

  private addSlot(slot: Slot): void {
    this.slots.set(slot.name, slot);
    this.slotBytes += slot.diskBytes;
    const versions = this.byTarget.get(slot.metadata.target);
    if (versions) versions.add(slot);
    else this.byTarget.set(slot.metadata.target, new Set([slot]));
  }

  private slotsOf(target: string): ReadonlySet<Slot> {
    return this.byTarget.get(target) ?? NO_SLOTS;
  }

  private evict(slot: Slot, why: 'budget' | 'superseded' | 'damaged'): Promise<void> {
    if (this.slots.get(slot.name) !== slot) return Promise.resolve();
    this.slots.delete(slot.name);
    this.slotBytes -= slot.diskBytes;
    const versions = this.byTarget.get(slot.metadata.target);
    versions?.delete(slot);
    if (versions?.size === 0) this.byTarget.delete(slot.metadata.target);
    if (why === 'budget') this.metrics?.diskCacheEvictions.inc();
    const removal = this.remove(slot, why).finally(() => this.removing.delete(removal));
    this.removing.add(removal);
    return removal;
  }

  private async remove(slot: Slot, why: string): Promise<void> {
    try {
      // Rename first: the entry vanishes atomically, then the bytes go.
      const aside = await mkdtemp(path.join(this.dir, TEMP_PREFIX));
      await rename(slot.dir, path.join(aside, 'old')).catch(() => undefined);
      await rm(aside, { recursive: true, force: true, maxRetries: 3 });
      await rm(slot.dir, { recursive: true, force: true, maxRetries: 3 });
    } catch (err) {
      this.logger?.warn({ err, dir: slot.dir }, 'could not remove a disk cache entry');
    }
    this.logger?.info(
      { model: slot.metadata.target, version: slot.metadata.version, bytes: slot.metadata.bytes, diskBytes: slot.diskBytes, reason: why },
      'removed model from the disk cache',
    );
  }

  private report(): void {
    this.metrics?.diskCacheBytes.set(this.usedBytes);
    if (Number.isFinite(this.budget)) this.metrics?.diskCacheBudgetBytes.set(this.budget);
  }

  private explain(err: unknown, target: string): unknown {
    if (!(err instanceof ServingError) || err.code !== 'INSUFFICIENT_STORAGE') return err;
    if (err.details?.['storageLimitBytes'] === undefined) return err;
    return new ServingError(
      'INSUFFICIENT_STORAGE',
      `model '${target}': it takes more than the ${String(err.details['storageLimitBytes'])} bytes of disk (counted in blocks, as du does) the disk cache can give it (budget ${this.budget} bytes, MME_CACHE_MAX_BYTES; ${this.pinnedBytes()} held by models in use)`,
      { model: target, cause: err, details: { ...err.details, wholeBudget: Number(err.details['storageLimitBytes']) >= this.budget } },
    );
  }
}
