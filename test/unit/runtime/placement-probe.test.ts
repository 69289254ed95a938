/**
 * What the placement probe costs in runs of the model (runtime/session-placement.ts):
 * a small model is timed in one call to its worker (cold runs, then the runs
 * that decide), a model whose runs are past the small limit stops that call
 * within the small models' time and gets a median of a few runs, and a heavy
 * one runs once. A fake session stands for the worker: its runs take a fixed
 * time and it honours the call's time budget as the worker does
 * (test/support/fake-placed-session.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { configText } from '../../../examples/models/zoo.js';
import { parseModelConfig } from '../../../src/config/model-config.js';
import { silentLogger } from '../../../src/observability/logger.js';
import type { Tensor } from '../../../src/protocol/tensor.js';
import type { ModelSession } from '../../../src/runtime/onnx-session.js';
import { placeSessions } from '../../../src/runtime/session-placement.js';
import { fakePlacedSession } from '../../support/fake-placed-session.js';

const config = parseModelConfig(
  configText({ maxBatchSize: 8, inputs: [{ name: 'INPUT0', dataType: 'FP32', dims: [16] }], outputs: [{ name: 'OUTPUT0', dataType: 'FP32', dims: [4] }] }),
  { sourceName: 'm/config.pbtxt', directoryName: 'm' },
);

async function place(session: ModelSession): Promise<void> {
  await placeSessions(
    config,
    [{ version: 1, sessions: [session], fileBytes: async () => 1024, warmupRunUs: 50 }],
    () => new Map<string, Tensor>(),
    'm',
    { mainThreadMaxRunUs: 1000, mainThreadOnlyMaxRunUs: 15 },
    silentLogger(),
  );
}

describe('placement probe', () => {
  it('a small model: one call to its worker, 7 cold runs and 25 that decide', async () => {
    const s = fakePlacedSession(8);
    await place(s);
    assert.deepEqual(s.calls, [32]);
    assert.equal(s.placed, 'main only');
  });

  it('past the small limit: the call stops within what small models take, its median decides', async () => {
    const s = fakePlacedSession(300);
    await place(s);
    // 25 runs of 150 µs (10× the 15 µs limit) and 7 more: 4.8 ms, 16 runs of 300 µs.
    assert.deepEqual(s.calls, [16]);
    assert.equal(s.placed, 'copy');
  });

  it('a slow model: a first run, then a few more within the cap', async () => {
    const s = fakePlacedSession(8_000);
    await place(s);
    assert.deepEqual(s.calls, [1, 2], 'one run, then two more (20 ms of further runs at most)');
    assert.equal(s.placed, 'worker');
  });

  it('a heavy model: its first run settles it', async () => {
    const s = fakePlacedSession(60_000);
    await place(s);
    assert.deepEqual(s.calls, [1]);
    assert.equal(s.placed, 'worker');
  });
});
