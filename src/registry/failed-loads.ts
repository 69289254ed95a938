/**
 * @module registry/failed-loads
 * Loads that failed because of what the object holds (a wrong config.pbtxt,
 * a graph that does not match, a rejected archive), remembered per target and
 * object version (ETag, or size+mtime), so a hot broken model answers its
 * requests with the same error at once instead of loading again on each one
 * (a load storm: every request re-reading the package, creating sessions,
 * logging its own `model load failed`).
 *
 * A failure holds for a back-off window that doubles with each failure of the
 * same version (BASE_MS, 2×, 4×, … up to MAX_MS). Inside it a request asks the
 * source for the object's current version (one HeadObject or stat, shared by
 * the requests that arrive while it runs): a changed object (new ETag) loads
 * at once; an unchanged one gets the remembered error. An explicit load (POST
 * /v2/repository/models/{m}/load) forgets the failure. Transient failures
 * (source unreachable, no memory, a disk held by models in use) are not
 * remembered: they say nothing about the object. A model larger than the
 * whole disk budget is (INSUFFICIENT_STORAGE with `wholeBudget`): no eviction
 * can make room, so without the back-off every request would download it
 * again just to be refused; the window keeps it from lasting for ever.
 */
import { retryAfter, ServingError, type ErrorCode } from '../errors.js';

/** Errors that are properties of the object version itself. */
const REMEMBERED: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['INVALID_MODEL', 'ARCHIVE_REJECTED']);

export const FAILED_LOAD_BASE_MS = 2_000;
export const FAILED_LOAD_MAX_MS = 60_000;
/** Targets remembered at most (oldest forgotten first): the map is bounded whatever clients send. */
const MAX_REMEMBERED = 1024;

interface Failure {
  readonly version: string | undefined;
  readonly error: ServingError;
  readonly failures: number;
  readonly failedAt: number;
  readonly until: number;
}

export interface FailedLoadsOptions {
  /** Monotonic milliseconds; performance.now() by default (tests inject a fake clock). */
  readonly now?: () => number;
}

export class FailedLoads {
  private readonly failures = new Map<string, Failure>();
  private readonly now: () => number;

  constructor(options: FailedLoadsOptions = {}) {
    this.now = options.now ?? (() => performance.now());
  }

  /** Whether `err` says something about the object (and so is remembered). */
  static remembers(err: unknown): err is ServingError {
    if (!(err instanceof ServingError)) return false;
    return REMEMBERED.has(err.code) || (err.code === 'INSUFFICIENT_STORAGE' && err.details?.['wholeBudget'] === true);
  }

  /**
   * Records a failed load of `target` at `version` (undefined when the version could not be learned), and returns the
   * error to answer with: `err`, carrying the back-off it starts as its Retry-After when the failure is the server's
   * (held), so the first answer says what every answer from memory will.
   */
  record(target: string, version: string | undefined, err: ServingError): ServingError {
    const previous = this.failures.get(target);
    const failures = previous !== undefined && previous.version === version ? previous.failures + 1 : 1;
    const now = this.now();
    const window = Math.min(FAILED_LOAD_MAX_MS, FAILED_LOAD_BASE_MS * 2 ** (failures - 1));
    this.failures.delete(target);
    if (this.failures.size >= MAX_REMEMBERED) this.failures.delete(this.failures.keys().next().value!);
    this.failures.set(target, { version, error: err, failures, failedAt: now, until: now + window });
    return held(err, window);
  }

  /** Whether `target` failed and its back-off window still lasts (then ask the source for its version, and call `stillFailing`). */
  inWindow(target: string): boolean {
    const f = this.failures.get(target);
    // Back-off over: try again (a repeat failure of the same version doubles the window).
    return f !== undefined && this.now() < f.until;
  }

  /** After a version check: the remembered error when the object is unchanged and the window lasts; undefined (load it) otherwise. */
  stillFailing(target: string, currentVersion: string | undefined): ServingError | undefined {
    const f = this.failures.get(target);
    if (f === undefined) return undefined;
    const now = this.now();
    if (now >= f.until) return undefined;
    if (currentVersion !== f.version) {
      this.failures.delete(target);
      return undefined;
    }
    return this.answer(f, now);
  }

  /** An explicit load, a successful load or an unload: the next request loads. */
  forget(target: string): void {
    this.failures.delete(target);
  }

  get size(): number {
    return this.failures.size;
  }

  private answer(f: Failure, now: number): ServingError {
    const seconds = Math.max(1, Math.ceil((f.until - now) / 1000));
    const { error } = f;
    const again = new ServingError(
      error.code,
      `${error.message} (the load failed ${f.failures === 1 ? 'once' : `${f.failures} times`}; not retried for ${seconds} s unless the model's object changes or it is loaded explicitly)`,
      { cause: error, ...(error.model === undefined ? {} : { model: error.model }), ...(error.details === undefined ? {} : { details: error.details }) },
    );
    return held(again, f.until - now);
  }
}

/**
 * A remembered failure that is the server's (a model larger than the whole disk budget, 507) says when the server
 * will try the load again: the back-off left (`ms`), as Retry-After. A package's own fault (400) does not: the client
 * cannot fix it by waiting, only the object's owner can (and a changed object loads at once).
 */
function held(err: ServingError, ms: number): ServingError {
  if (err.isClientFault) return err;
  const out = new ServingError(err.code, err.message, {
    ...(err.model === undefined ? {} : { model: err.model }),
    ...(err.cause === undefined ? {} : { cause: err.cause }),
    details: { ...err.details, ...retryAfter(ms / 1000) },
  });
  // Where it was thrown, not where it was remembered.
  if (err.stack !== undefined) out.stack = err.stack;
  return out;
}
