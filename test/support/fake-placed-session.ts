/**
 * A CPU ModelSession for session-placement tests: its runs take `runUs` each
 * as the worker would report them, a timing call answers `tripMs` later (so
 * the hop is known), the call's time budget is honoured as the worker does,
 * `calls` holds how many runs each timing call made, and `placed` says where
 * placement put it.
 */
import type { Tensor } from '../../src/protocol/tensor.js';
import type { ModelSession } from '../../src/runtime/onnx-session.js';

export interface PlacedSession extends ModelSession {
  placed: 'worker' | 'copy' | 'main only';
  readonly calls: number[];
}

export function fakePlacedSession(runUs: number, tripMs = 0): PlacedSession {
  const s: PlacedSession = {
    placed: 'worker',
    calls: [],
    worker: 0,
    inputs: [],
    outputs: [],
    provider: 'cpu' as const,
    deviceId: 0,
    copies: 1,
    run: () => Promise.reject(new Error('not run in this test')),
    timeRuns: async (_f: ReadonlyMap<string, Tensor>, _o: readonly string[], repeats: number, budgetUs?: number) => {
      if (tripMs > 0) await new Promise((r) => setTimeout(r, tripMs));
      const runs: number[] = [];
      for (let spent = 0; runs.length < repeats && spent < (budgetUs ?? Number.POSITIVE_INFINITY); spent += runUs) runs.push(runUs);
      s.calls.push(runs.length);
      return runs;
    },
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
