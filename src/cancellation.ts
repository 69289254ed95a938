/**
 * @module cancellation
 * How a request's cancellation (its client went away) travels through the
 * core: the queues it waits in register a callback, and code that hands the
 * cancellation to an API taking an AbortSignal (a model load's S3 download,
 * a wait for memory) asks for `signal`.
 *
 * Why not an AbortSignal throughout: every inference request carries one,
 * and almost none is ever cancelled. Creating an AbortController and adding
 * an EventTarget listener per request was measured at about 2.5 µs of the
 * main thread's ~33 µs per request on the invocations bench (tiny model, 64
 * connections). A CancelSource costs an object and, while the request waits
 * in a queue, a Set entry; the AbortSignal is made only when something asks
 * for it. An ensemble request registers in one queue per step without
 * touching an EventTarget at all.
 */

export interface Cancellation {
  readonly aborted: boolean;
  /**
   * Call `fn` once when cancelled (never if it already is: check `aborted`
   * first). Returns the function that unregisters it.
   */
  onCancel(fn: () => void): () => void;
  /** The same cancellation as an AbortSignal, for APIs that take one; made on first use. */
  readonly signal: AbortSignal;
  /** The id of the request it belongs to, for the log lines of work the request starts (a model load); none for startup work. */
  readonly requestId?: string | undefined;
}

/** The owner's side: a Cancellation and the `cancel()` that fires it. */
export class CancelSource implements Cancellation {
  private cancelled = false;

  constructor(readonly requestId?: string) {}

  /** Almost every request registers one callback (its batcher queue): kept in a field, a Set only from the second. */
  private first: (() => void) | undefined;
  private hooks: Set<() => void> | undefined;
  private controller: AbortController | undefined;

  get aborted(): boolean {
    return this.cancelled;
  }

  onCancel(fn: () => void): () => void {
    if (this.first === undefined && this.hooks === undefined) {
      this.first = fn;
      return () => {
        if (this.first === fn) this.first = undefined;
      };
    }
    const hooks = (this.hooks ??= new Set());
    hooks.add(fn);
    return () => void hooks.delete(fn);
  }

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.cancelled) this.controller.abort();
    }
    return this.controller.signal;
  }

  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.controller?.abort();
    // A callback may register or unregister others: run the ones registered now, once each.
    const due = this.hooks === undefined ? [] : [...this.hooks];
    this.hooks?.clear();
    const first = this.first;
    this.first = undefined;
    first?.();
    for (const fn of due) fn();
  }
}

const OF_SIGNAL = new WeakMap<AbortSignal, Cancellation>();

/**
 * An AbortSignal as a Cancellation, for callers that hold a signal (startup
 * preloading, tests). One 'abort' listener per signal however many queues
 * the request passes through; the same signal always gives the same object.
 */
export function cancellationOf(signal: AbortSignal): Cancellation {
  const known = OF_SIGNAL.get(signal);
  if (known !== undefined) return known;
  const source = new CancelSource();
  let listening = false;
  const cancellation: Cancellation = {
    get aborted() {
      return signal.aborted;
    },
    onCancel(fn) {
      if (!listening) {
        listening = true;
        // Never removed: it lives as long as the signal and holds only the source.
        signal.addEventListener('abort', () => source.cancel(), { once: true });
      }
      return source.onCancel(fn);
    },
    signal,
  };
  OF_SIGNAL.set(signal, cancellation);
  return cancellation;
}
