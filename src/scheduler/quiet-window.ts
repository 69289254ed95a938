/**
 * @module scheduler/quiet-window
 * Whether the whole server has been quiet lately: no model dispatched a batch
 * with other work waiting (requests queued behind it, or another batch of the
 * same model in flight) for the last `windowUs`. Every model's batcher shares
 * one.
 *
 * Why: a small CPU model's main-thread session copy (registry/session-placement.ts)
 * runs with onnxruntime's intra-op threads on the cores (at most 4), which
 * spin between runs; that is what makes a lone request fast (MLP p50 at one connection
 * 0.107 ms against 0.181 with one thread), but a spinning thread took 80-90%
 * of a core from the main thread and the workers under load, even when only
 * ~2.5% of runs used the copy, and throughput at 64 connections fell by a
 * third. Batches only use the copy once nothing anywhere has been busy for
 * the window, which is far longer than a run, so under load no run reaches
 * the spinning threads and they go back to sleep.
 */

/** Long enough to span many requests of any steady load; short enough that sparse traffic gets the fast path within a blink. */
export const QUIET_WINDOW_US = 50_000;

export class QuietWindow {
  private lastBusyUs = Number.NEGATIVE_INFINITY;

  constructor(readonly windowUs: number = QUIET_WINDOW_US) {}

  /** A batch was dispatched with other work waiting behind it. */
  markBusy(nowUs: number): void {
    if (nowUs > this.lastBusyUs) this.lastBusyUs = nowUs;
  }

  /** True when no batch was dispatched busy during the last `windowUs`. */
  isQuiet(nowUs: number): boolean {
    return nowUs - this.lastBusyUs >= this.windowUs;
  }
}
