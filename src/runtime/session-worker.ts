/**
 * @module runtime/session-worker
 * Entry point of a runtime worker thread. onnxruntime-node creates sessions
 * and runs them synchronously on the calling thread, so doing that on the
 * main thread would freeze HTTP (SageMaker's /ping has 2 s) for the length of
 * every load and every inference. Each worker owns a set of sessions and
 * handles one message at a time; different workers run in parallel.
 */
// First: onnxruntime's telemetry is decided before onnxruntime-node loads (config/ort-env.ts).
import '../config/ort-env.js';
import os from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import type { Tensor } from '../protocol/tensor.js';
import { fromOrtTensor, sessionIo, toOrtTensor } from './onnx-io.js';
import { primeThread } from './prime.js';
import { collectGarbage } from './reclaim.js';
import { ortSessionOptions } from './provider-options.js';
import type { WorkerSettings } from './runtime-pool.js';
import type { CreateSessionOptions, TensorList, WorkerReply, WorkerRequest } from './worker-protocol.js';

const sessions = new Map<number, ort.InferenceSession>();
let nextSession = 1;

async function create(path: string, o: CreateSessionOptions): Promise<WorkerReply & { op: 'create' }> {
  const session = await ort.InferenceSession.create(path, ortSessionOptions(o));
  const id = nextSession++;
  sessions.set(id, session);
  const io = await sessionIo(session, path);
  return { id: 0, ok: true, op: 'create', session: id, inputs: io.inputs, outputs: io.outputs };
}

function sessionOf(sessionId: number): ort.InferenceSession {
  const session = sessions.get(sessionId);
  if (!session) throw new Error(`session ${sessionId} is not loaded in this runtime worker`);
  return session;
}

function ortFeedsOf(feeds: TensorList): Record<string, ort.Tensor> {
  const ortFeeds: Record<string, ort.Tensor> = {};
  for (let i = 0; i < feeds.names.length; i++) {
    const name = feeds.names[i]!;
    ortFeeds[name] = toOrtTensor(name, { datatype: feeds.datatypes[i]!, shape: feeds.shapes[i]!, data: feeds.data[i]! });
  }
  return ortFeeds;
}

async function run(sessionId: number, feeds: TensorList, outputs: readonly string[]): Promise<TensorList> {
  const session = sessionOf(sessionId);
  const result = await session.run(ortFeedsOf(feeds), outputs as string[]);
  const out: { names: string[]; datatypes: Tensor['datatype'][]; shapes: (readonly number[])[]; data: Tensor['data'][] } = {
    names: [],
    datatypes: [],
    shapes: [],
    data: [],
  };
  for (const name of outputs) {
    const t = result[name];
    if (!t) throw new Error(`onnxruntime returned no output '${name}'`);
    const tensor = fromOrtTensor(t);
    out.names.push(name);
    out.datatypes.push(tensor.datatype);
    out.shapes.push(tensor.shape);
    out.data.push(tensor.data);
  }
  return out;
}

/** Transfer result buffers instead of copying them: the worker never reads them again. */
function transferables(outputs: TensorList): ArrayBuffer[] {
  const seen = new Set<ArrayBuffer>();
  for (const d of outputs.data) {
    if (!Array.isArray(d) && d.buffer instanceof ArrayBuffer) seen.add(d.buffer);
  }
  return [...seen];
}

async function handle(msg: WorkerRequest): Promise<void> {
  try {
    switch (msg.op) {
      case 'create': {
        const reply = await create(msg.path, msg.options);
        parentPort!.postMessage({ ...reply, id: msg.id });
        return;
      }
      case 'run': {
        const outputs = await run(msg.session, msg.feeds, msg.outputs);
        parentPort!.postMessage({ id: msg.id, ok: true, op: 'run', outputs } satisfies WorkerReply, transferables(outputs));
        return;
      }
      case 'prime': {
        await primeThread(msg.intraOpThreads);
        parentPort!.postMessage({ id: msg.id, ok: true, op: 'prime' } satisfies WorkerReply);
        return;
      }
      case 'reclaim': {
        collectGarbage();
        parentPort!.postMessage({ id: msg.id, ok: true, op: 'reclaim' } satisfies WorkerReply);
        return;
      }
      case 'release': {
        const s = sessions.get(msg.session);
        sessions.delete(msg.session);
        await s?.release();
        parentPort!.postMessage({ id: msg.id, ok: true, op: 'release' } satisfies WorkerReply);
        return;
      }
    }
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    parentPort!.postMessage({ id: msg.id, ok: false, error: { message } } satisfies WorkerReply);
  }
}

/**
 * MME_RUNTIME_WORKER_NICE: on Linux, setpriority with no process named applies to the calling thread alone, and
 * the threads it starts later (onnxruntime's) inherit it. Elsewhere it would renice the whole process, so it is
 * not called there (the server says so at start: core.ts warnWorkerNice). Returns why it failed, if it did.
 */
function takeNice(): string | undefined {
  const nice = (workerData as WorkerSettings | undefined)?.nice ?? 0;
  if (nice === 0 || process.platform !== 'linux') return undefined;
  try {
    // Never above the priority the process was started with (a server started under `nice` stays there).
    if (nice > os.getPriority(0)) os.setPriority(0, nice);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}
const niceError = takeNice();

// One message at a time: onnxruntime runs synchronously anyway, and a strict
// order keeps release-after-run safe.
let chain: Promise<void> = Promise.resolve();
parentPort!.on('message', (msg: WorkerRequest) => {
  chain = chain.then(() => handle(msg));
});

// Every import above has been evaluated, onnxruntime-node's addon registered: the pool may stop this thread from now on.
parentPort!.postMessage({ id: 0, ok: true, op: 'ready', ...(niceError === undefined ? {} : { niceError }) } satisfies WorkerReply);
