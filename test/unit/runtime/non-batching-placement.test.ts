/**
 * Session placement for a model without a batch dimension
 * (max_batch_size 0), which pays the hop to its worker on every request: it
 * lives on the main thread only when its run costs less than the hop (both
 * timed at load) and at most 4× MME_MAIN_THREAD_ONLY_MAX_RUN_US; a batching
 * model with the same timings keeps its worker. A fake session reports the
 * runs and takes as long as told to answer, so the hop is known.
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

const tensors = (dims: number[]) => ({
  inputs: [{ name: 'INPUT0', dataType: 'FP32' as const, dims }],
  outputs: [{ name: 'OUTPUT0', dataType: 'FP32' as const, dims }],
});
const config = (maxBatchSize: number) =>
  parseModelConfig(configText({ maxBatchSize, ...tensors(maxBatchSize === 0 ? [1, 16] : [16]) }), { sourceName: 'm/config.pbtxt', directoryName: 'm' });
const zeros = (): Map<string, Tensor> => new Map();

async function place(maxBatchSize: number, session: ModelSession, onlyMaxRunUs = 15): Promise<void> {
  await placeSessions(
    config(maxBatchSize),
    [{ version: 1, sessions: [session], fileBytes: async () => 1024 }],
    zeros,
    'm',
    { mainThreadMaxRunUs: 1000, mainThreadOnlyMaxRunUs: onlyMaxRunUs },
    silentLogger(),
  );
}

describe('placement of a model without a batch dimension', () => {
  it('runs on the main thread only when its run costs less than the hop', async () => {
    // 40 µs runs, answers 2 ms later: the hop is far over the run.
    const s = fakePlacedSession(40, 2);
    await place(0, s);
    assert.equal(s.placed, 'main only');
  });

  it('a batching model with the same timings keeps its worker (and gets a copy)', async () => {
    const s = fakePlacedSession(40, 2);
    await place(8, s);
    assert.equal(s.placed, 'copy');
  });

  it('keeps its worker when the run is over 4× MME_MAIN_THREAD_ONLY_MAX_RUN_US, or that is 0', async () => {
    const long = fakePlacedSession(70, 2);
    await place(0, long);
    assert.equal(long.placed, 'copy');
    const off = fakePlacedSession(40, 2);
    await place(0, off, 0);
    assert.equal(off.placed, 'copy');
  });

  it('keeps its worker when the hop costs less than the run', async () => {
    // Answers at once: the round trip is the run's own time (well under 40 µs of hop).
    const s = fakePlacedSession(40, 0);
    await place(0, s);
    assert.equal(s.placed, 'copy');
  });
});
