/**
 * @module scheduler/clock
 * Time as the dynamic batcher sees it, injected so that its tests drive time
 * by hand (no sleeps, no timing assertions). Microseconds, because Triton's
 * knobs (max_queue_delay_microseconds, default_timeout_microseconds) are.
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
