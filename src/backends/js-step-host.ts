/**
 * @module backends/js-step-host
 * The worker thread one loaded js step version runs in (js-step-worker.ts
 * starts it): imports the user's model.mjs, checks its exports, runs
 * initialize(), then execute() per batch and finalize() at unload, and posts
 * the results back. The step's own faults stay here: an exception thrown from
 * a timer or an unhandled rejection ends this thread, not the server (the
 * main thread sees the worker's 'error' event and replaces it), and an
 * endless loop blocks only this thread (the main thread's deadline
 * terminates it).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { describeError, UNHANDLED_REJECTION, type HostReply, type HostRequest, type JsHostData } from './js-step-protocol.js';

interface JsModule {
  readonly initialize?: (args: unknown) => unknown;
  readonly execute?: (batch: unknown) => unknown;
  readonly finalize?: () => unknown;
}

const data = workerData as JsHostData;
const port = parentPort!;

// Node's default would end the thread too, but with a generic message; say what it was.
process.on('unhandledRejection', (reason) => {
  const err = new Error(`an unhandled promise rejection: ${describeError(reason).message}`);
  err.name = UNHANDLED_REJECTION;
  throw err;
});

function post(reply: HostReply, transfer: ArrayBuffer[] = []): void {
  port.postMessage(reply, transfer);
}

/**
 * The buffers of returned typed arrays that can move instead of being copied:
 * a buffer the array spans whole (a view of a larger one would hand over
 * bytes it does not own), each once, never a SharedArrayBuffer.
 */
function transferables(value: unknown): ArrayBuffer[] {
  const buffers = new Set<ArrayBuffer>();
  const tensors = value instanceof Map ? [...value.values()] : value !== null && typeof value === 'object' ? Object.values(value) : [];
  for (const t of tensors) {
    const d = (t as { data?: unknown } | null)?.data;
    if (ArrayBuffer.isView(d) && d.buffer instanceof ArrayBuffer && d.byteOffset === 0 && d.byteLength === d.buffer.byteLength) buffers.add(d.buffer);
  }
  return [...buffers];
}

async function load(): Promise<JsModule | undefined> {
  let mod: JsModule;
  try {
    mod = (await import(data.url)) as JsModule;
  } catch (err) {
    post({ op: 'load-failed', what: `${data.fileName} cannot be imported`, error: describeError(err) });
    return undefined;
  }
  if (typeof mod.execute !== 'function') {
    post({ op: 'load-failed', what: `${data.fileName} does not export an execute(batch) function`, error: undefined });
    return undefined;
  }
  for (const name of ['initialize', 'finalize'] as const) {
    if (mod[name] !== undefined && typeof mod[name] !== 'function') {
      post({ op: 'load-failed', what: `${data.fileName} exports ${name} but it is not a function`, error: undefined });
      return undefined;
    }
  }
  if (mod.initialize) {
    try {
      await mod.initialize(data.initArgs);
    } catch (err) {
      post({ op: 'load-failed', what: 'initialize() failed', error: describeError(err) });
      return undefined;
    }
  }
  return mod;
}

const loaded = load();
void loaded.then((mod) => {
  if (mod) post({ op: 'ready' });
});

port.on('message', (request: HostRequest) => {
  void loaded.then(async (mod) => {
    if (!mod) return;
    if (request.op === 'execute') {
      let value: unknown;
      try {
        value = await mod.execute!(request.batch);
      } catch (err) {
        post({ op: 'result', id: request.id, ok: false, what: 'execute() failed', error: describeError(err) });
        return;
      }
      try {
        post({ op: 'result', id: request.id, ok: true, value }, transferables(value));
      } catch (err) {
        // A function, a class instance with private state, …: nothing the server could read anyway.
        post({ op: 'result', id: request.id, ok: false, what: 'execute() returned a value that cannot leave its worker thread', error: describeError(err) });
      }
      return;
    }
    let error;
    try {
      await mod.finalize?.();
    } catch (err) {
      error = describeError(err);
    }
    post({ op: 'finalized', id: request.id, error });
  });
});
