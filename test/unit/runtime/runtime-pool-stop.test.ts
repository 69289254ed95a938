/**
 * @module test/unit/runtime/runtime-pool-stop
 * Closing the pool never stops a runtime worker in the middle of its start:
 * a thread stopped while node registers onnxruntime-node's addon takes the
 * whole process down with SIGABRT (runtime-pool.ts, STOP_WAITS_FOR_START_MS).
 * The workers here are stand-ins whose start takes 300 ms
 * (test/support/slow-starting-runtime-worker.ts) and leaves a file behind
 * once it is through.
 */
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { after, test } from 'node:test';
import { RuntimePool } from '../../../src/runtime/runtime-pool.js';
import { Cleanups, tempDir } from '../../support/temp-dir.js';

const SLOW_START = new URL('../../support/slow-starting-runtime-worker.js', import.meta.url);
const ctx = new Cleanups();
after(() => ctx.run());

test('a pool closed while its workers are still starting lets them finish starting, then stops them', async () => {
  const dir = await tempDir(ctx);
  process.env['ONNX_MME_TEST_STARTED_MARKER'] = path.join(dir, 'started');
  try {
    const pool = new RuntimePool(2, {}, SLOW_START);
    await pool.close();
    assert.equal((await readdir(dir)).length, 2, 'both workers got through their start before they were stopped');
  } finally {
    delete process.env['ONNX_MME_TEST_STARTED_MARKER'];
  }
});
