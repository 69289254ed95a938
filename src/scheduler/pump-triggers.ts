/**
 * @module scheduler/pump-triggers
 * When a batcher's pump (the loop that forms and dispatches batches) runs:
 * soon after a request comes or a batch ends (PumpTrigger), and at the
 * earliest time a waiting batch or deadline needs it (WakeTimer). Both
 * batchers (dynamic-batcher.ts, sequence-batcher.ts) use these. Each holds
 * its callback once, so triggering allocates no closure.
 */
import type { Clock } from '../clock.js';

/**
 * Coalesce: requests enqueued in the same turn are considered together.
 * While a batch of the model is in flight, the pump waits for the end of
 * the event loop's I/O phase (setImmediate): every request read from the
 * sockets that were ready together then joins one batch, instead of the
 * first of them leaving alone in a free slot. Measured with the tiny model
 * at 64 connections (max_batch_size 8): batches of 8.0 rows instead of
 * 5.9, and 0.5 µs less main-thread CPU per request. With nothing in
 * flight the pump stays a microtask, so a lone request waits for nothing.
 * Nor does a request that no other can join (max_batch_size 0 or 1, or
 * dynamic batching off): waiting would merge nothing and only cost
 * event-loop turns (tiny 16→4 with max_batch_size 0 at 64 connections: 0.60
 * epoll_wait calls per request that way, 0.50 this way; 0.06 with
 * max_batch_size 64).
 */
export class PumpTrigger {
  private pending = false;
  private readonly run: () => void;

  /** `mergeable`: whether two requests of the model can share a batch (max_batch_size above 1). */
  constructor(
    private readonly mergeable: boolean,
    pump: () => void,
  ) {
    this.run = () => {
      this.pending = false;
      pump();
    };
  }

  /** Run the pump soon (once, however often this is called before it runs); `inFlight`: batches of the model running now. */
  request(inFlight: number): void {
    if (this.pending) return;
    this.pending = true;
    if (inFlight > 0 && this.mergeable) setImmediate(this.run);
    else queueMicrotask(this.run);
  }
}

/** One timer at most, for the earliest reason to wake the pump; none while nothing waits. */
export class WakeTimer {
  private atUs = Number.POSITIVE_INFINITY;
  private cancelTimer: (() => void) | undefined;
  private readonly fire: () => void;

  constructor(
    private readonly clock: Clock,
    pump: () => void,
  ) {
    this.fire = () => {
      this.cancelTimer = undefined;
      pump();
    };
  }

  /** Wake at `atUs` (Infinity: not at all), unless an earlier wake-up is already set. */
  arm(atUs: number, now: number): void {
    if (atUs !== Number.POSITIVE_INFINITY && this.cancelTimer !== undefined && this.atUs <= atUs && this.atUs > now) return;
    this.cancel();
    if (atUs === Number.POSITIVE_INFINITY) return;
    this.atUs = atUs;
    this.cancelTimer = this.clock.setTimer(Math.max(0, atUs - now), this.fire);
  }

  cancel(): void {
    this.cancelTimer?.();
    this.cancelTimer = undefined;
  }
}
