/**
 * @module registry/missing-targets
 * What a request for a target the source does not hold may cost. Without it,
 * every request for a missing key is a lookup in the source (one to three S3
 * requests), so a client can turn its request rate into the server's S3
 * request rate, and a spray of random keys into an unbounded one.
 *
 *  - A miss is remembered (per target spelling) for `ttlMs`: requests within
 *    it get the same 404 at once, without asking the source. Once it ends the
 *    next request asks again, so an object uploaded meanwhile is found through
 *    the source's own answer. At most `maxEntries` misses are held (oldest
 *    forgotten first).
 *  - Misses are also paid from a token bucket of `lookupsPerSecond` (a burst of
 *    twice that): while it is empty, a target that is neither resident nor
 *    known to the server is refused (OVERLOADED, 429 with Retry-After) before
 *    the source is asked. Lookups that find their object cost no token, so a
 *    burst of first requests for existing models is never refused; only a
 *    stream of misses (distinct keys nobody uploaded) empties it.
 * Time comes from the injected clock (milliseconds).
 */
import { ServingError } from '../errors.js';

export interface MissingTargetsOptions {
  /** How long a miss is remembered; 0 = never (every request asks the source). */
  readonly ttlMs: number;
  /** Misses the source may answer per second, on average; 0 = no bound. */
  readonly lookupsPerSecond: number;
  readonly maxEntries?: number;
  /** Monotonic milliseconds. */
  readonly now: () => number;
  /** Counts each outcome (onnx_mme_missing_target_requests_total). */
  readonly count?: (result: 'miss' | 'remembered' | 'refused') => void;
}

interface Miss {
  readonly error: ServingError;
  readonly until: number;
}

const DEFAULT_MAX_ENTRIES = 4096;

/** Errors handed out from memory: seeing one again is not a new miss (its TTL must not be renewed by its own answers). */
const rememberedErrors = new WeakSet<ServingError>();

export class MissingTargets {
  private readonly misses = new Map<string, Miss>();
  /** Targets whose object a load found (bounded): asking the source about them again is not a lookup of the unknown. */
  private readonly found = new Set<string>();
  private readonly maxEntries: number;
  private readonly burst: number;
  private tokens: number;
  private refilledAt: number;

  constructor(private readonly options: MissingTargetsOptions) {
    this.maxEntries = options.maxEntries ?? DEFAULT_MAX_ENTRIES;
    this.burst = Math.max(1, 2 * options.lookupsPerSecond);
    this.tokens = this.burst;
    this.refilledAt = options.now();
  }

  /** The remembered 404 of `target` while its TTL lasts; undefined otherwise. */
  remembered(target: string): ServingError | undefined {
    const miss = this.misses.get(target);
    if (miss === undefined) return undefined;
    if (this.options.now() >= miss.until) {
      this.misses.delete(target);
      return undefined;
    }
    this.options.count?.('remembered');
    return miss.error;
  }

  /** Before asking the source about a target the server does not know: OVERLOADED while the bucket of misses is empty. */
  admitLookup(target: string): void {
    if (this.options.lookupsPerSecond <= 0 || this.found.has(target)) return;
    this.refill();
    if (this.tokens >= 1) return;
    this.options.count?.('refused');
    const retryAfterSeconds = Math.max(1, Math.ceil((1 - this.tokens) / this.options.lookupsPerSecond));
    throw new ServingError(
      'OVERLOADED',
      `model '${target}': too many requests for models the source does not hold (more than ${this.options.lookupsPerSecond} per second, MME_MISSING_TARGET_LOOKUPS_PER_SECOND); retry in ${retryAfterSeconds} s`,
      { model: target, details: { retryAfterSeconds } },
    );
  }

  /** Whether `error` is a remembered miss handed out again (not a new answer of the source). */
  isRemembered(error: ServingError): boolean {
    return rememberedErrors.has(error);
  }

  /** The source said `target` does not exist: remember it and pay a token. */
  record(target: string, error: ServingError): void {
    if (rememberedErrors.has(error)) return;
    rememberedErrors.add(error);
    this.options.count?.('miss');
    if (this.options.lookupsPerSecond > 0) {
      this.refill();
      this.tokens = Math.max(this.tokens - 1, -this.burst);
    }
    this.found.delete(target);
    if (this.options.ttlMs <= 0) return;
    this.misses.delete(target);
    if (this.misses.size >= this.maxEntries) this.misses.delete(this.misses.keys().next().value!);
    this.misses.set(target, { error, until: this.options.now() + this.options.ttlMs });
  }

  /** An explicit load: the next request asks the source. */
  forget(target: string): void {
    this.misses.delete(target);
  }

  /** A load found the object of `target`: no longer a miss, and a later reload (after eviction) is not held to the bucket. */
  foundObject(target: string): void {
    this.misses.delete(target);
    this.found.delete(target);
    if (this.found.size >= this.maxEntries) this.found.delete(this.found.keys().next().value!);
    this.found.add(target);
  }

  get size(): number {
    return this.misses.size;
  }

  private refill(): void {
    const now = this.options.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.refilledAt) / 1000) * this.options.lookupsPerSecond);
    this.refilledAt = now;
  }
}
