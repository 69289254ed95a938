/**
 * A CPU ModelSession for session-placement tests: `placed` says where
 * placement put it (its runs are never called: placement decides from the
 * model's config and graph, runtime/run-estimate.ts).
 */
import type { ModelSession } from '../../src/runtime/onnx-session.js';

export interface PlacedSession extends ModelSession {
  placed: 'worker' | 'copy' | 'main only';
}

export function fakePlacedSession(provider: ModelSession['provider'] = 'cpu'): PlacedSession {
  const s: PlacedSession = {
    placed: 'worker',
    worker: 0,
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
    },
    release: async () => {},
  };
  return s;
}
