/**
 * @module store/remote-fetch
 * What every remote model source needs around its own calls, whatever the
 * transport (S3 today; an HTTP or GCS source would reuse it as it is):
 *
 * - `withRetry`: runs a step until it succeeds, fails for good, or the retry
 *   budget is spent (attempts, and time spent failing), with exponential
 *   backoff and jitter between attempts, honouring cancellation;
 * - `callWithDeadline`: one call, aborted at its attempt's deadline;
 * - `guardedTransfer` (with `TransferGuard`): a streamed body fed to its
 *   consumer, failed as retryable when it is cut short, goes idle, or is slower
 *   than a floor over a window (a trickle an idle timeout cannot catch).
 *
 * The source keeps its own calls and says which of its failures are worth
 * another attempt (`markRetryable`). Time comes from a Clock, so the retry
 * delays, deadlines and windows are driven by hand in tests.
 */
import { Readable, Transform, type TransformCallback } from 'node:stream';
import { sleepOn, type Clock } from '../clock.js';
import { retryAfter, ServingError } from '../errors.js';
import { cancelled } from './abort.js';
import { messageOf } from './node-error.js';

export interface RetryPolicy {
  /** Most attempts per operation (1 = no retry). */
  readonly attempts: number;
  /** First backoff delay; doubled each retry (with jitter). */
  readonly baseDelayMs: number;
  /**
   * Longest time spent failing: no retry starts, and no request waits for an
   * answer, past this many ms after the first attempt (or after the last
   * attempt that received data, so a long healthy download is never cut short).
   */
  readonly maxTotalMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = Object.freeze({ attempts: 3, baseDelayMs: 200, maxTotalMs: 10_000 });

/**
 * The least a transfer must deliver: `bytesPerSecond` averaged over every
 * `windowMs` window. An idle timeout alone cannot catch a trickle (any byte
 * resets it): a body at 4 B/s would keep a request and shutdown waiting for
 * ever. 0 bytes per second disables the check.
 */
export interface MinimumProgress {
  readonly bytesPerSecond: number;
  readonly windowMs: number;
}

export function resolveRetryPolicy(partial: Partial<RetryPolicy> | undefined): RetryPolicy {
  const retry = { ...DEFAULT_RETRY_POLICY, ...partial };
  if (!Number.isInteger(retry.attempts) || retry.attempts < 1) {
    throw new RangeError(`retry.attempts must be a positive integer, got ${retry.attempts}`);
  }
  if (!(retry.baseDelayMs >= 0) || !(retry.maxTotalMs > 0)) {
    throw new RangeError('retry.baseDelayMs must be >= 0 and retry.maxTotalMs > 0');
  }
  return Object.freeze(retry);
}

export function checkMinimumProgress(minProgress: MinimumProgress): MinimumProgress {
  if (!(minProgress.bytesPerSecond >= 0) || !(minProgress.windowMs > 0)) {
    throw new RangeError('minProgress.bytesPerSecond must be >= 0 and minProgress.windowMs > 0');
  }
  return minProgress;
}

/** Exponential backoff with jitter: base·2^(n-1) scaled by [0.5, 1). `random` returns [0, 1). */
export function backoffDelay(baseDelayMs: number, attempt: number, random: () => number = Math.random): number {
  return baseDelayMs * 2 ** (attempt - 1) * (0.5 + random() / 2);
}

/** Milliseconds on `clock` (its unit is the microsecond). */
export function nowMs(clock: Clock): number {
  return clock.nowUs() / 1000;
}

/** ServingErrors worth another attempt (network, 5xx, throttling, a cut or stalled stream). */
const retryable = new WeakSet<ServingError>();

export function markRetryable(err: ServingError): ServingError {
  retryable.add(err);
  return err;
}

export function isRetryable(err: unknown): boolean {
  return err instanceof ServingError && retryable.has(err);
}

export interface FetchAttempt {
  /** 1 for the first attempt. */
  readonly number: number;
  /** Clock time (ms) after which a request is no longer waited for. */
  readonly deadlineMs: number;
  /** Set when the attempt received data: the next retry gets a fresh time budget. */
  progressed: boolean;
}

export interface RetryRun {
  readonly clock: Clock;
  readonly policy: RetryPolicy;
  /** What is being done, the start of a non-ServingError's message: `model 'a'`, `listing the model source`. */
  readonly what: string;
  /** The model the work is for, carried by the errors. */
  readonly model?: string | undefined;
  readonly signal?: AbortSignal | undefined;
  /** [0, 1) for the jitter; default Math.random. */
  readonly random?: () => number;
  /** Told before each wait between attempts (for a log line). */
  readonly onRetry?: (retry: { readonly attempt: number; readonly delayMs: number; readonly error: ServingError }) => void;
}

/**
 * Runs `step` until it succeeds, fails for good, or the retry budget is spent
 * (then UPSTREAM_UNAVAILABLE naming the attempts and the time). `step` throws
 * ServingErrors; those marked retryable are tried again, any other error is
 * thrown as it is (a non-ServingError becomes INTERNAL).
 */
export async function withRetry<T>(run: RetryRun, step: (attempt: FetchAttempt) => Promise<T>): Promise<T> {
  const { clock, policy, model, signal } = run;
  const firstStart = nowMs(clock);
  let windowStart = firstStart;
  for (let number = 1; ; number++) {
    if (signal?.aborted) throw cancelled(model, signal);
    const attempt: FetchAttempt = { number, deadlineMs: windowStart + policy.maxTotalMs, progressed: false };
    let failure: ServingError;
    try {
      return await step(attempt);
    } catch (err) {
      if (!(err instanceof ServingError)) {
        throw new ServingError('INTERNAL', `${run.what}: ${messageOf(err)}`, { cause: err, ...(model ? { model } : {}) });
      }
      if (!retryable.has(err)) throw err;
      failure = err;
    }
    if (attempt.progressed) windowStart = nowMs(clock);
    const delay = backoffDelay(policy.baseDelayMs, number, run.random);
    if (number >= policy.attempts || nowMs(clock) - windowStart + delay >= policy.maxTotalMs) {
      throw gaveUp(failure, number, Math.round(nowMs(clock) - firstStart), model, policy);
    }
    run.onRetry?.({ attempt: number, delayMs: Math.round(delay), error: failure });
    try {
      await sleepOn(clock, delay, signal);
    } catch {
      throw cancelled(model, signal);
    }
  }
}

/**
 * The retries are spent. The client is told to come back after the back-off the next attempt would have waited
 * (base·2^attempts, the top of its jitter, at most the retry budget): its retry starts a fresh round of attempts
 * against the store, which should not follow the last one sooner than the server's own would have.
 */
function gaveUp(failure: ServingError, attempts: number, elapsedMs: number, model: string | undefined, policy: RetryPolicy): ServingError {
  const nextDelayMs = Math.min(policy.baseDelayMs * 2 ** attempts, policy.maxTotalMs);
  return new ServingError('UPSTREAM_UNAVAILABLE', `${failure.message} (gave up after ${attempts} attempt${attempts === 1 ? '' : 's'} in ${elapsedMs} ms)`, {
    cause: failure,
    ...(model ? { model } : {}),
    details: { attempts, elapsedMs: Math.round(elapsedMs), ...retryAfter(nextDelayMs / 1000) },
  });
}

export interface DeadlineCall<T> {
  readonly clock: Clock;
  readonly attempt: FetchAttempt;
  /** The caller's own cancellation: CANCELLED or TIMEOUT, not a failure of the peer. */
  readonly signal?: AbortSignal | undefined;
  /** Even the last attempt gets this long to be answered. */
  readonly minMs: number;
  /** Who is waited for, in the timeout's message ("S3"). */
  readonly peer: string;
  readonly call: (abortSignal: AbortSignal) => Promise<T>;
  /** Maps what the call threw (a `TimeoutError` once the deadline passed) to the source's ServingError. */
  readonly failure: (err: unknown) => ServingError;
}

/**
 * One call, answered before the attempt's deadline (the call is aborted then;
 * a streamed body is not: only the call's own promise is waited for here).
 */
export async function callWithDeadline<T>(request: DeadlineCall<T>): Promise<T> {
  const { clock, signal } = request;
  const controller = new AbortController();
  const budget = Math.max(request.attempt.deadlineMs - nowMs(clock), request.minMs);
  const cancelTimer = clock.setTimer(budget * 1000, () => controller.abort());
  const onAbort = (): void => controller.abort();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    return await request.call(controller.signal);
  } catch (err) {
    if (signal?.aborted) throw cancelled(undefined, signal);
    if (controller.signal.aborted) {
      const timeout = new Error(`${request.peer} did not answer within ${Math.round(budget)} ms`);
      timeout.name = 'TimeoutError';
      throw request.failure(timeout);
    }
    throw request.failure(err);
  } finally {
    cancelTimer();
    signal?.removeEventListener('abort', onAbort);
  }
}

export interface TransferGuardOptions {
  readonly clock: Clock;
  /** The length the peer announced; a body that ends short of it is a cut connection. */
  readonly expectedBytes: number | undefined;
  /** A body that sends nothing for this long is a cut connection (0 disables). */
  readonly idleMs: number;
  readonly minProgress: MinimumProgress;
  /** Who sends the body, in messages ("S3"). */
  readonly peer: string;
  /** The setting an operator changes the floor with, named in the stall's message. */
  readonly minProgressSetting: string;
  readonly onBytes: (bytes: number) => void;
}

/**
 * Counts body bytes and fails the stream (as `failure`, with a network-like
 * `code`) when the body ends short of its announced length, sends nothing for
 * `idleMs`, or delivers less than the floor over a window; emits 'slow' first
 * for the last (a trickle is not progress).
 */
export class TransferGuard extends Transform {
  bytes = 0;
  failure: Error | undefined;
  private cancelIdle: (() => void) | undefined;
  private cancelWindow: (() => void) | undefined;
  private bytesAtWindowStart = 0;

  constructor(private readonly options: TransferGuardOptions) {
    super();
    this.armIdle();
    if (options.minProgress.bytesPerSecond > 0) this.armWindow();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.bytes += chunk.length;
    this.options.onBytes(chunk.length);
    this.armIdle();
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    this.disarm();
    const expected = this.options.expectedBytes;
    if (expected !== undefined && this.bytes !== expected) {
      const err = Object.assign(new Error(`the connection closed after ${this.bytes} of ${expected} bytes`), { code: 'ECONNRESET' });
      this.failure ??= err;
      callback(err);
      return;
    }
    callback();
  }

  /** The transfer failed upstream (cut, stalled, truncated): fail the stream with it. */
  fail(err: Error): void {
    this.failure ??= err;
    this.destroy(err);
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    this.disarm();
    callback(err);
  }

  private armWindow(): void {
    const { clock, minProgress } = this.options;
    this.cancelWindow = clock.setTimer(minProgress.windowMs * 1000, () => {
      const got = this.bytes - this.bytesAtWindowStart;
      this.bytesAtWindowStart = this.bytes;
      if (got >= (minProgress.bytesPerSecond * minProgress.windowMs) / 1000) {
        this.armWindow();
        return;
      }
      this.cancelWindow = undefined;
      this.emit('slow');
      const rate = Math.round((got * 1000) / minProgress.windowMs);
      const message = `the download delivered ${got} bytes in ${minProgress.windowMs} ms (${rate} B/s), below the minimum of ${minProgress.bytesPerSecond} B/s (${this.options.minProgressSetting})`;
      this.fail(Object.assign(new Error(message), { code: 'ETIMEDOUT' }));
    });
  }

  private armIdle(): void {
    this.cancelIdle?.();
    this.cancelIdle = undefined;
    const { idleMs, clock, peer } = this.options;
    if (idleMs <= 0) return;
    this.cancelIdle = clock.setTimer(idleMs * 1000, () => {
      this.fail(Object.assign(new Error(`no data received from ${peer} for ${idleMs} ms`), { code: 'ETIMEDOUT' }));
    });
  }

  private disarm(): void {
    this.cancelIdle?.();
    this.cancelIdle = undefined;
    this.cancelWindow?.();
    this.cancelWindow = undefined;
  }
}

export interface GuardedTransfer<R> {
  readonly body: Readable;
  readonly guard: TransferGuardOptions;
  readonly attempt: FetchAttempt;
  readonly model: string;
  /** What is transferred, in messages: `downloading 'a.tar.gz'`. */
  readonly action: string;
  /** Reads the guarded stream to its end (e.g. an archive extraction). */
  readonly consume: (stream: Readable) => Promise<R>;
}

/**
 * `body` through a TransferGuard into `consume`. An upstream failure (the body
 * cut, idle, too slow or short) is a retryable UPSTREAM_UNAVAILABLE, whatever
 * the consumer made of it; the consumer's own verdicts (a rejected archive, a
 * full disk) stand. Receiving data marks the attempt as progressed, unless the
 * guard found it a trickle.
 */
export async function guardedTransfer<R>(transfer: GuardedTransfer<R>): Promise<R> {
  const { body, attempt, model, action } = transfer;
  if (body.destroyed) throw closedUnread(body, model, action);
  const guard = new TransferGuard({
    ...transfer.guard,
    onBytes: (bytes) => {
      attempt.progressed = true;
      transfer.guard.onBytes(bytes);
    },
  });
  // A cut before the consumer has attached to `guard` (an extraction opens its files first) would otherwise leave the
  // error unheard once `pipe` lets go of it: an uncaught exception. The consumer still sees it (a destroyed stream).
  guard.on('error', () => undefined);
  guard.once('slow', () => {
    attempt.progressed = false;
  });
  // Not stream.pipeline: an error the consumer destroys `guard` with must not look like an upstream failure. Body
  // errors (a cut connection) do.
  body.on('error', (err: Error) => guard.fail(err));
  guard.on('close', () => {
    if (!body.readableEnded && !body.destroyed) body.destroy();
  });
  body.pipe(guard);
  try {
    return await transfer.consume(guard);
  } catch (err) {
    throw transferFailure(err, guard.failure, model, action);
  } finally {
    if (!guard.destroyed) guard.destroy();
    if (!body.readableEnded && !body.destroyed) body.destroy();
  }
}

function transferFailure(err: unknown, upstream: Error | undefined, model: string, action: string): unknown {
  if (err instanceof ServingError && err.code === 'UPSTREAM_UNAVAILABLE') {
    return markRetryable(prefixedFor(err, model, `${action} failed: `));
  }
  if (upstream && !(err instanceof ServingError && err.code !== 'INTERNAL')) {
    // The stream broke first; whatever the consumer said is a consequence.
    return markRetryable(new ServingError('UPSTREAM_UNAVAILABLE', `model '${model}': ${action} failed: ${messageOf(upstream)}`, { model, cause: upstream }));
  }
  return err instanceof ServingError ? prefixedFor(err, model, '') : err;
}

/**
 * The connection closed while the body waited to be read (the cache was preparing its directory): a stream destroyed
 * before anyone listened says so only here; piping it would wait for the idle timeout.
 */
function closedUnread(body: Readable, model: string, action: string): ServingError {
  const cause = body.errored ?? undefined;
  return markRetryable(
    new ServingError(
      'UPSTREAM_UNAVAILABLE',
      `model '${model}': ${action} failed: the connection closed before the body was read${cause ? ` (${messageOf(cause)})` : ''}`,
      {
        model,
        ...(cause ? { cause } : {}),
      },
    ),
  );
}

/** A consumer's error does not know the model: prefix it so logs and clients see which model failed. */
function prefixedFor(err: ServingError, model: string, context: string): ServingError {
  if (err.message.startsWith(`model '${model}'`)) return err;
  return new ServingError(err.code, `model '${model}': ${context}${err.message}`, {
    model,
    cause: err,
    ...(err.details === undefined ? {} : { details: err.details }),
  });
}

/**
 * A body waits unread while its consumer gets ready; a connection cut then
 * errors it with no listener yet, which would be an uncaught exception. Heard
 * here; guardedTransfer sees it as `destroyed` and `errored`.
 */
export function listenEarly(body: unknown): void {
  if (body instanceof Readable) body.on('error', () => undefined);
}

/** Close a response body that will not be read (its connection goes back to the pool or is dropped). */
export function destroyBody(body: unknown): void {
  if (body instanceof Readable && !body.destroyed) body.destroy();
}
