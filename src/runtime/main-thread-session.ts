/**
 * @module runtime/main-thread-session
 * A session that runs on the main thread, for models so small that the trip
 * to a runtime worker costs more than the run. Measured on the 2-core bench
 * box (docs/batching-and-performance.md, "Where a model runs"): a worker round trip is two thread
 * wake-ups plus a structured clone each way, about 65 µs of a 0.21 ms request
 * at one connection, while a 16→4 model runs in about 6 µs and a
 * 256→1024→1024→16 MLP in about 45 µs. onnxruntime-node runs synchronously on the calling thread, so such
 * a session blocks the event loop for exactly its run time; session placement
 * (runtime/session-placement.ts) only puts a model here when that time was
 * measured small, and never a GPU session.
 */
// First: onnxruntime's telemetry is decided before onnxruntime-node loads (config/ort-env.ts).
import '../config/ort-env.js';
import * as ort from 'onnxruntime-node';
import type { Tensor } from '../protocol/tensor.js';
import { fromOrtTensor, sessionIo, toOrtTensor } from './onnx-io.js';
import { loadNativeSession } from './ort-native.js';
import { ortSessionOptions } from './provider-options.js';
import type { PooledSession } from './runtime-pool.js';
import type { CreateSessionOptions } from './worker-protocol.js';

/** The `worker` index of a session on the main thread. */
export const MAIN_THREAD = -1;

export async function createMainThreadSession(path: string, options: CreateSessionOptions): Promise<PooledSession> {
  const ortOptions = ortSessionOptions(options);
  const native = loadNativeSession(path, ortOptions);
  const session = native === undefined ? await ort.InferenceSession.create(path, ortOptions) : undefined;
  const io = await sessionIo(native ?? session!, path);
  const feedsOf = (feeds: ReadonlyMap<string, Tensor>): Record<string, ort.Tensor> => {
    const out: Record<string, ort.Tensor> = {};
    for (const [name, t] of feeds) out[name] = toOrtTensor(name, t);
    return out;
  };
  let released = false;
  return {
    worker: MAIN_THREAD,
    inputs: io.inputs,
    outputs: io.outputs,
    run: async (feeds, outputNames) => {
      // Through the binding the run happens here, in this turn (runtime/ort-native.ts says why).
      const result = native !== undefined ? native.runSync(feedsOf(feeds), outputNames) : await session!.run(feedsOf(feeds), outputNames as string[]);
      const out = new Map<string, Tensor>();
      for (const name of outputNames) {
        const t = result[name];
        if (!t) throw new Error(`onnxruntime returned no output '${name}'`);
        // Each output has its own ArrayBuffer (the worker path transfers them to the main thread the same way).
        out.set(name, fromOrtTensor(t));
      }
      return out;
    },
    release: async () => {
      if (released) return;
      released = true;
      if (native !== undefined) native.release();
      else await session!.release();
    },
  };
}
