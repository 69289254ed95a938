/**
 * @module clock
 * Time wherever it decides behaviour (the batchers' queue delays, the
 * registry's back-off and revalidation, the memory manager's idle times, the
 * store's retry delays and stall windows), injected so that tests drive it by
 * hand (no sleeps, no timing assertions). A root module like errors.ts: every
 * layer may read it. Microseconds, because Triton's knobs
 * (max_queue_delay_microseconds, default_timeout_microseconds) are.
 */
import { performance } from 'node:perf_hooks';

export interface Clock {
  /** Monotonic time in microseconds. */
  nowUs(): number;
  /** Call `fn` once, about `delayUs` from now. Returns a function that cancels it. */
  setTimer(delayUs: number, fn: () => void): () => void;
}

/**
 * Node timers have millisecond resolution, so a wait shorter than 1 ms uses
 * setImmediate (one turn of the event loop, in which newly arrived requests
 * are read) and the batcher re-arms for what is left: short delays cost a few
 * loop turns instead of a whole millisecond. A timer exists only while a
 * request waits, so it keeps the process alive as the request would.
 */
export const systemClock: Clock = {
  nowUs: () => performance.now() * 1000,
  setTimer(delayUs, fn) {
    if (delayUs < 1000) {
      const immediate = setImmediate(fn);
      return () => clearImmediate(immediate);
    }
    const timer = setTimeout(fn, Math.floor(delayUs / 1000));
    return () => clearTimeout(timer);
  },
};

/**
 * Waits `delayMs` on `clock`; rejects with the signal's reason (an Error)
 * when `signal` fires first (the timer is cancelled then).
 */
export function sleepOn(clock: Clock, delayMs: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortError(signal));
      return;
    }
    const onAbort = (): void => {
      cancel();
      reject(abortError(signal));
    };
    const cancel = clock.setTimer(delayMs * 1000, () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function abortError(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error ? reason : new Error('aborted', { cause: reason });
}
