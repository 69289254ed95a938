/**
 * @module scheduler/abort-hooks
 * Removal of queued requests when their client goes away, with one 'abort'
 * listener per request signal however many queues the request passes
 * through. An ensemble request waits in one queue per step; attaching and
 * removing an EventTarget listener at every step was measured at a few
 * percent of a request's main-thread time on the ensemble bench (c=32:
 * ensemble ÷ client-chain 2.34-2.47× with per-step listeners, 2.67× with
 * none). Here the first queue attaches the one listener; every queue then
 * only adds and deletes a callback in a Set.
 */

const HOOKS = new WeakMap<AbortSignal, Set<() => void>>();

/** Call `fn` when `signal` aborts; returns the function that unregisters it. */
export function onAbort(signal: AbortSignal, fn: () => void): () => void {
  let set = HOOKS.get(signal);
  if (set === undefined) {
    const callbacks = new Set<() => void>();
    set = callbacks;
    HOOKS.set(signal, callbacks);
    // Never removed: it lives as long as the signal (one request) and holds only the Set.
    signal.addEventListener(
      'abort',
      () => {
        const due = [...callbacks];
        callbacks.clear();
        for (const f of due) f();
      },
      { once: true },
    );
  }
  const callbacks = set;
  callbacks.add(fn);
  return () => void callbacks.delete(fn);
}
