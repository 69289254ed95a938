/**
 * @module registry/memory-manager
 * The memory budget of resident models and the LRU that enforces it.
 *
 * Every model package in memory (or being loaded) holds a reservation: first
 * its predicted size (from its files), then, after its load and warm-up, its
 * measured footprint if that is larger. When a load needs room, idle residents
 * are evicted least recently used first (a Map keeps the order). A
 * resident with requests in flight is pinned and never evicted; its bytes stay
 * counted until its release completes. If the room is held by pinned
 * residents, the load waits for requests to finish (bounded), so more models
 * requested at once than fit still all succeed, one after another. It fails
 * with 507 only when the model is larger than the whole budget, or when no
 * room could be made within the wait.
 *
 * Reservations are what the manager promises; `measure` is what the process
 * really holds for models (its resident set above the idle figure taken at
 * start-up, with onnxruntime's fixed costs paid: registry/model-loader.ts
 * modelMemoryProbe). The two are reconciled: while measured memory is above
 * the budget, idle residents are evicted least recently used first, on a
 * timer (reconcile) and before every reservation. Reservations stay the hard
 * limit: measured memory alone never refuses a load (a probe that reads high
 * after nothing is left to evict is logged, not obeyed), so a probe that lies
 * can cost evictions but never availability.
 *
 * The manager knows nothing of packages or sessions: residents are opaque
 * handles with `pinned()` and `evict()`, supplied by the registry.
 */
import { ServingError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { systemClock, type Clock } from '../clock.js';

export interface Resident {
  readonly key: string;
  /** Name for messages and logs. */
  readonly label: string;
  /** Its current reservation. */
  readonly bytes: number;
  /** True while requests hold it or it is not fully loaded: never evicted then. */
  pinned(): boolean;
  /** Release it (the registry unloads it); resolves when its memory is freed. */
  evict(): Promise<void>;
}

export interface MemoryManagerOptions {
  /** Bytes the resident models may use (MME_MEMORY_BUDGET_BYTES or its default). */
  readonly budgetBytes: number;
  /** Most resident packages (MME_MAX_LOADED_MODELS); undefined = no count cap. */
  readonly maxModels: number | undefined;
  /** How long a load waits for pinned models to become evictable before 507. */
  readonly waitMs: number;
  readonly logger: Logger;
  readonly metrics: Pick<Metrics, 'loadedModelBytes' | 'memoryBudgetBytes' | 'modelEvictions'> & Partial<Pick<Metrics, 'measuredModelBytes'>>;
  /** Model memory the process really holds now (bytes above idle); undefined or omitted: reservations only. */
  readonly measure?: () => number | undefined;
  /** Time for the memory wait's deadline and the over-budget warning's rate; default the system's. */
  readonly clock?: Clock;
}

/** Who asks for memory: a model's load (registry/package-loader.ts PackageLoadRequest is one), named in its errors and logs. */
export interface Claimant {
  /** The model's name for messages and logs. */
  readonly label: string;
  /** Aborted when the load is cancelled: the wait for memory ends with CANCELLED. */
  readonly signal?: AbortSignal | undefined;
}

/** A model's share of the budget; release() gives it back (idempotent). */
export interface Reservation {
  readonly bytes: number;
  /** Set the reservation to `bytes` (after measuring); may put the budget over until idle models are trimmed. */
  resize(bytes: number): void;
  /** Grow by `bytes` only if the budget has that much free now (no eviction, no wait): for what is optional, like a main-thread copy. */
  tryGrow(bytes: number): boolean;
  release(): void;
}

export class MemoryManager {
  readonly budgetBytes: number;
  readonly maxModels: number | undefined;
  private used = 0;
  private count = 0;
  /**
   * Residents that can be evicted, least recently used first: a Map iterates in
   * insertion order, and a use moves its entry to the end. Not lru-cache: its
   * capacity is allocated when it is built, and an index with room for every
   * model an instance may ever hold (a million) cost 180 ms of the start
   * and 26 MB of heap and typed arrays, which every full garbage collection
   * scanned.
   */
  private readonly lru = new Map<string, Resident>();
  private reconcileTimer: NodeJS.Timeout | undefined;
  private reconciling: Promise<void> | undefined;
  /** Last warning about measured memory over budget with nothing to evict (at most one a minute). */
  private warnedAt = Number.NEGATIVE_INFINITY;
  /** Resolved and replaced whenever memory may have been freed or a pin dropped. */
  private wake: { promise: Promise<void>; resolve: () => void } = deferred();

  private readonly clock: Clock;

  constructor(private readonly options: MemoryManagerOptions) {
    this.clock = options.clock ?? systemClock;
    if (!(options.budgetBytes > 0)) throw new RangeError(`budgetBytes must be positive, got ${options.budgetBytes}`);
    this.budgetBytes = options.budgetBytes;
    this.maxModels = options.maxModels;
    options.metrics.memoryBudgetBytes.set(this.budgetBytes);
  }

  get usedBytes(): number {
    return this.used;
  }

  get reservations(): number {
    return this.count;
  }

  /** Model memory measured now (bytes above idle), or undefined without a probe; reported as a metric. */
  measuredBytes(): number | undefined {
    let bytes: number | undefined;
    try {
      bytes = this.options.measure?.();
    } catch {
      bytes = undefined;
    }
    if (bytes !== undefined && Number.isFinite(bytes)) {
      bytes = Math.max(0, Math.round(bytes));
      this.options.metrics.measuredModelBytes?.set(bytes);
      return bytes;
    }
    return undefined;
  }

  /**
   * Evict idle residents, least recently used first, while measured memory
   * is above the budget (a model grew after warm-up, a measurement missed
   * something, the allocator kept what it was given); with `extraBytes`, while
   * measured memory plus that much (a load about to start) would be. One pass
   * at a time.
   */
  reconcile(extraBytes = 0): Promise<void> {
    const pass = (this.reconciling ?? Promise.resolve()).then(() => this.reconcileOnce(extraBytes));
    this.reconciling = pass.finally(() => {
      if (this.reconciling === pass) this.reconciling = undefined;
    });
    return pass;
  }

  /** Reconcile every `intervalMs` until stop(). */
  startReconciling(intervalMs: number): void {
    if (this.options.measure === undefined || this.reconcileTimer !== undefined) return;
    this.reconcileTimer = setInterval(
      () => void this.reconcile().catch((err: unknown) => this.options.logger.warn({ err }, 'memory reconciliation failed')),
      intervalMs,
    );
    this.reconcileTimer.unref();
  }

  stop(): void {
    clearInterval(this.reconcileTimer);
    this.reconcileTimer = undefined;
  }

  private async reconcileOnce(extraBytes: number): Promise<void> {
    for (let pass = 0; pass < 64; pass++) {
      const measured = this.measuredBytes();
      if (measured === undefined || measured + extraBytes <= this.budgetBytes) return;
      const victims = this.pickVictims(measured + extraBytes - this.budgetBytes, 0);
      if (victims.length === 0) {
        if (extraBytes === 0 && this.nowMs() - this.warnedAt > 60_000) {
          this.warnedAt = this.nowMs();
          this.options.logger.warn(
            { measuredBytes: measured, reservedBytes: this.used, budgetBytes: this.budgetBytes },
            'measured model memory is above the memory budget and no idle model is left to evict',
          );
        }
        return;
      }
      // One at a time: each eviction's effect is measured before the next is chosen.
      await this.evict(victims[0]!, `measured model memory ${measured} bytes is above the ${this.budgetBytes}-byte budget`);
    }
  }

  /**
   * Reserve `bytes` for `claimant`, evicting idle residents (LRU first) and, if
   * pinned ones hold the room, waiting for them. Throws INSUFFICIENT_MEMORY.
   */
  async reserve(claimant: Claimant, bytes: number): Promise<Reservation> {
    const { label, signal } = claimant;
    const need = Math.max(0, Math.ceil(bytes));
    if (need > this.budgetBytes) {
      throw new ServingError(
        'INSUFFICIENT_MEMORY',
        `model '${label}' needs about ${need} bytes of memory, more than the whole memory budget of ${this.budgetBytes} bytes (MME_MEMORY_BUDGET_BYTES)`,
        { model: label, details: { needBytes: need, budgetBytes: this.budgetBytes } },
      );
    }
    const deadline = this.nowMs() + this.options.waitMs;
    let waited = false;
    for (;;) {
      if (signal?.aborted) throw new ServingError('CANCELLED', `model '${label}': cancelled while waiting for memory`, { model: label });
      // The process's real memory first: idle models go while measured memory plus this load would be over the budget.
      // (Then the reservations are checked and granted with no await in between.)
      if (this.options.measure !== undefined) await this.reconcile(need);
      if (signal?.aborted) throw new ServingError('CANCELLED', `model '${label}': cancelled while waiting for memory`, { model: label });
      const bytesOver = this.used + need - this.budgetBytes;
      const countOver = this.maxModels === undefined ? 0 : this.count + 1 - this.maxModels;
      if (bytesOver <= 0 && countOver <= 0) {
        if (waited) this.options.logger.info({ model: label, bytes: need }, 'memory became available');
        return this.grant(need);
      }
      const victims = this.pickVictims(bytesOver, countOver);
      if (victims.length > 0) {
        await Promise.all(victims.map((v) => this.evict(v, `to make room for '${label}'`)));
        continue;
      }
      const left = deadline - this.nowMs();
      if (left <= 0) {
        const why =
          countOver > 0 && bytesOver <= 0
            ? `all ${this.count} model slots (MME_MAX_LOADED_MODELS) are held by models with requests in flight or loading`
            : `${this.used} of the ${this.budgetBytes}-byte memory budget (MME_MEMORY_BUDGET_BYTES) are held by models with requests in flight or loading`;
        throw new ServingError('INSUFFICIENT_MEMORY', `model '${label}' needs about ${need} bytes but ${why}; retry later`, {
          model: label,
          details: { needBytes: need, budgetBytes: this.budgetBytes, usedBytes: this.used },
        });
      }
      if (!waited) this.options.logger.info({ model: label, needBytes: need, usedBytes: this.used }, 'waiting for memory held by models in use');
      waited = true;
      await waitFor(this.wake.promise, left, signal, this.clock);
    }
  }

  /** A resident became idle-capable: track it for eviction (most recently used). */
  track(resident: Resident): void {
    this.lru.delete(resident.key);
    this.lru.set(resident.key, resident);
  }

  /** Mark a use (moves it to most recently used). */
  touch(key: string): void {
    const resident = this.lru.get(key);
    if (resident === undefined) return;
    this.lru.delete(key);
    this.lru.set(key, resident);
  }

  /** It is leaving memory by other means (unload, revalidation). A newer resident under the same key stays. */
  forget(resident: Resident): void {
    if (this.lru.get(resident.key) === resident) this.lru.delete(resident.key);
  }

  /** Something was unpinned or released: waiting loads look again. */
  notify(): void {
    const { resolve } = this.wake;
    this.wake = deferred();
    resolve();
  }

  /** Evict idle residents until within budget (after a reservation grew past it). */
  async trim(): Promise<void> {
    const bytesOver = this.used - this.budgetBytes;
    const countOver = this.maxModels === undefined ? 0 : this.count - this.maxModels;
    if (bytesOver <= 0 && countOver <= 0) return;
    await Promise.all(this.pickVictims(bytesOver, countOver).map((v) => this.evict(v, 'over the memory budget after measuring')));
  }

  private pickVictims(bytesOver: number, countOver: number): Resident[] {
    const victims: Resident[] = [];
    let freed = 0;
    for (const resident of this.lru.values()) {
      if (freed >= bytesOver && victims.length >= countOver) break;
      if (resident.pinned()) continue;
      victims.push(resident);
      freed += resident.bytes;
    }
    return victims;
  }

  private async evict(resident: Resident, why: string): Promise<void> {
    this.forget(resident);
    const bytes = resident.bytes;
    const started = this.nowMs();
    this.options.metrics.modelEvictions.inc();
    await resident.evict();
    this.options.logger.info({ model: resident.label, bytes, durationMs: Math.round(this.nowMs() - started), reason: why }, 'evicted model from memory');
  }

  private nowMs(): number {
    return this.clock.nowUs() / 1000;
  }

  private grant(bytes: number): Reservation {
    this.used += bytes;
    this.count += 1;
    this.report();
    let size = bytes;
    let released = false;
    return {
      get bytes() {
        return size;
      },
      resize: (next) => {
        if (released) return;
        const n = Math.max(0, Math.ceil(next));
        const shrank = n < size;
        this.used += n - size;
        size = n;
        this.report();
        if (shrank) this.notify();
      },
      tryGrow: (extra) => {
        const n = Math.max(0, Math.ceil(extra));
        if (released || this.used + n > this.budgetBytes) return false;
        this.used += n;
        size += n;
        this.report();
        return true;
      },
      release: () => {
        if (released) return;
        released = true;
        this.used -= size;
        this.count -= 1;
        this.report();
        this.notify();
      },
    };
  }

  private report(): void {
    this.options.metrics.loadedModelBytes.set(this.used);
  }
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** Resolves when `wake` resolves, `ms` passes on `clock`, or `signal` aborts (the caller re-checks). */
function waitFor(wake: Promise<void>, ms: number, signal: AbortSignal | undefined, clock: Clock): Promise<void> {
  return new Promise<void>((resolve) => {
    const cancel = clock.setTimer(ms * 1000, done);
    function done(): void {
      cancel();
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
    void wake.then(done);
  });
}
