/**
 * @module test/support/slow-starting-runtime-worker
 * A stand-in runtime worker whose start takes 300 ms, as a real one's does
 * while node loads and registers onnxruntime-node's addon on a busy machine:
 * its module blocks, then writes the file `ONNX_MME_TEST_STARTED_MARKER`
 * names and posts the `ready` notice session-worker.ts posts. A thread
 * stopped during that start never writes the file.
 */
import { writeFileSync } from 'node:fs';
import { parentPort, threadId } from 'node:worker_threads';
import type { WorkerReply } from '../../src/runtime/worker-protocol.js';

// Outside a worker (the test runner lists every file under test/) it does nothing.
if (parentPort) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
  const marker = process.env['ONNX_MME_TEST_STARTED_MARKER'];
  if (marker !== undefined) writeFileSync(`${marker}.${threadId}`, 'started');
  parentPort.postMessage({ id: 0, ok: true, op: 'ready' } satisfies WorkerReply);
}
