/**
 * A CPU ModelSession for session-placement tests: `placed` says where
 * placement put it (its runs are never called: placement decides from the
 * model's config and graph, runtime/run-estimate.ts).
 */
import type { ModelSession } from '../../src/runtime/onnx-session.js';

export interface PlacedSession extends ModelSession {
  placed: 'worker' | 'copy' | 'main only';
  worker: number;
}

/** `onMainThread`: created there (SessionOptions.mainThread), as creationPlacement decides for the cheapest models. */
export function fakePlacedSession(provider: ModelSession['provider'] = 'cpu', onMainThread = false): PlacedSession {
  const s: PlacedSession = {
    placed: onMainThread ? 'main only' : 'worker',
    worker: onMainThread ? -1 : 0,
    inputs: [],
    outputs: [],
    provider,
    deviceId: 0,
    copies: 1,
    run: () => Promise.reject(new Error('not run in this test')),
    allowMainThreadCopy: () => {
      s.placed = 'copy';
    },
    moveToMainThread: async () => {
      s.placed = 'main only';
      s.worker = -1;
    },
    moveToWorker: async () => {
      s.placed = 'worker';
      s.worker = 0;
    },
    release: async () => {},
  };
  return s;
}
