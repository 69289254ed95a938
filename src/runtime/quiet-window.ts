/**
 * @module runtime/quiet-window
 * Whether the whole server has been quiet lately: no model ran a batch with
 * other work waiting (requests queued behind it, another batch of the same
 * model in flight, or concurrent work at the front) for the last
 * `windowUs`. Every session of the server shares one; the scheduler reports
 * the batch's facts (scheduler/model-scheduler.ts BatchLoad) and the
 * transports' admission the front's (service/admission.ts), the runtime
 * decides from them.
 *
 * Why: a small CPU model's main-thread session copy (runtime/session-placement.ts)
 * runs with onnxruntime's intra-op threads on the cores (at most 4), which
 * spin between runs; that is what makes a lone request fast (MLP p50 at one connection
 * 0.107 ms against 0.181 with one thread), but under load a spinning thread
 * takes 80-90% of a core from the main thread and the workers, even when only
 * ~2.5% of runs use the copy (measured: throughput at 64 connections falls by
 * a third). Batches only use the copy once nothing anywhere has been busy for
 * the window, which is far longer than a run, so under load no run reaches
 * the spinning threads and they go back to sleep.
 */

/** Long enough to span many requests of any steady load; short enough that sparse traffic gets the fast path within a blink. */
export const QUIET_WINDOW_US = 50_000;

/** What a batch's scheduler knows of the load around it (the same shape as scheduler/ BatchLoad). */
export interface RunLoad {
  /** Requests still queued for the model behind this batch. */
  readonly queued: number;
  /** Batches of the model in flight, this one included. */
  readonly inFlight: number;
}

/** The transports' front, as the window reads it (service/admission.ts Admission). */
export interface FrontLoad {
  /** Whether the front has concurrent work now. */
  readonly busy: boolean;
}

export class QuietWindow {
  private lastBusyUs = Number.NEGATIVE_INFINITY;

  constructor(
    readonly windowUs: number = QUIET_WINDOW_US,
    /** Microseconds on a monotonic clock (injectable for tests). */
    private readonly nowUs: () => number = () => performance.now() * 1000,
    /**
     * The front, whose concurrent work makes the server busy: requests
     * admitted together in one event-loop turn (HTTP or gRPC) or waiting
     * for a turn, or refused connections held unread. A batch's own load
     * cannot see it: a batch run on the main thread blocks the event loop,
     * so without this each request of 16 connections would be read, batched
     * alone and run on the copy before the next is read (the MLP at a third
     * of its throughput, its worker idle); and while a turn starts only a
     * few requests, a flooded model's batches find their queue empty.
     */
    private readonly front: FrontLoad = { busy: false },
  ) {}

  /** A batch was dispatched with other work waiting behind it. */
  markBusy(nowUs: number = this.nowUs()): void {
    if (nowUs > this.lastBusyUs) this.lastBusyUs = nowUs;
  }

  /** True when no batch was dispatched busy during the last `windowUs`. */
  isQuiet(nowUs: number = this.nowUs()): boolean {
    return nowUs - this.lastBusyUs >= this.windowUs;
  }

  /**
   * Whether a run with this load should leave the main thread to other work:
   * its own model has work waiting, or the front has concurrent work (either
   * marks the whole server busy), or either was so within the window. No
   * load known (warm-up, a direct call): not busy, and nothing marked.
   */
  busy(load: RunLoad | undefined): boolean {
    if (load === undefined) return false;
    const now = this.nowUs();
    if (ownLoadBusy(load) || this.front.busy) {
      this.markBusy(now);
      return true;
    }
    return !this.isQuiet(now);
  }
}

/** Whether the run's own model has work waiting: requests queued behind its batch, or another batch in flight. */
export function ownLoadBusy(load: RunLoad | undefined): boolean {
  return load !== undefined && (load.queued > 0 || load.inFlight > 1);
}
