/**
 * @module test/support/dying-runtime-worker
 * A stand-in runtime worker for RuntimePool's supervision test. A real worker
 * cannot be stopped while a native onnxruntime run is on its stack without
 * aborting the whole process, so the in-flight path (calls waiting on a worker
 * that dies) is proven with this one: it answers the protocol like
 * session-worker.ts, but a run whose first feed is named `hang` never
 * answers, `crash` throws from a timer (an uncaught exception in the worker's
 * own code) and `exit` ends the thread with code 3.
 */
import { parentPort, threadId } from 'node:worker_threads';
import type { WorkerReply, WorkerRequest } from '../../src/runtime/worker-protocol.js';

let nextSession = 1;

// Outside a worker (the test runner lists every file under test/) it does nothing.
parentPort?.on('message', (msg: WorkerRequest) => {
  const reply = (r: object): void => parentPort!.postMessage({ ...r, id: msg.id } as WorkerReply);
  switch (msg.op) {
    case 'create':
      return reply({ ok: true, op: 'create', session: nextSession++, inputs: [], outputs: [] });
    case 'run': {
      const what = msg.feeds.names[0];
      if (what === 'crash')
        setTimeout(() => {
          throw new Error(`step fault in thread ${threadId}`);
        }, 20);
      else if (what === 'exit') setTimeout(() => process.exit(3), 20);
      else if (what !== 'hang') reply({ ok: true, op: 'run', outputs: { names: [], datatypes: [], shapes: [], data: [] } });
      return;
    }
    default:
      return reply({ ok: true, op: msg.op });
  }
});

// As session-worker.ts does once its modules have loaded: the pool stops a worker only after this.
parentPort?.postMessage({ id: 0, ok: true, op: 'ready' } satisfies WorkerReply);
