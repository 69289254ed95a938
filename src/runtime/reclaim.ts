/**
 * @module runtime/reclaim
 * Give freed memory back after models leave. onnxruntime frees a released
 * session's memory at once (and, with the allocator settings `serve` applies,
 * glibc returns it to the kernel), but the JavaScript heaps of the main thread
 * and the runtime workers keep the garbage their requests left (bodies,
 * answers, message clones) until V8 collects them, which an idle server may
 * not do for a long time: measured, 30-60 MB of RSS above idle after
 * unloading every model, falling only over tens of seconds. So after unloads
 * settle, each thread runs one full collection, as Python servers run
 * gc.collect() when they unload a model. Not on the request path.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

let collect: (() => void) | undefined;

/** V8's full collection, made callable without --expose-gc (the flag only adds a `gc` global to new contexts). */
function gcFunction(): (() => void) | undefined {
  if (collect !== undefined) return collect;
  try {
    setFlagsFromString('--expose-gc');
    const fn = runInNewContext('gc') as unknown;
    if (typeof fn === 'function') collect = fn as () => void;
  } catch {
    // not available: memory then comes back when V8 collects on its own
  }
  return collect;
}

/** One full garbage collection on the calling thread; false where V8 does not allow it. */
export function collectGarbage(): boolean {
  const fn = gcFunction();
  if (fn === undefined) return false;
  fn();
  return true;
}
