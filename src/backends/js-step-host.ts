/**
 * @module backends/js-step-host
 * The process one loaded js step version runs in (js-step-worker.ts starts it
 * through js-step-sandbox.ts): reads its `init` message from fd 3, imports the
 * user's model.mjs, checks its exports, runs initialize(), then execute() per
 * batch and finalize() at unload, and writes the results back on fd 3.
 *
 * The step's own faults end this process, not the server: an exception thrown
 * from a timer or an unhandled rejection is reported (`crash`) and the
 * process exits; an endless loop blocks only this process (the server's
 * deadline kills it); memory over its bound fails the allocation, and an
 * allocation failure that escapes execute() ends the process the same way.
 *
 * Before the user's module is imported, process.kill and its raw form are
 * removed: with the server's uid (a server not run as root) they are the
 * only way left to signal it. The uid change is the wall; this is a fence.
 * This file imports nothing but node: and its siblings copied beside it.
 */
import net from 'node:net';
import { BulkLink, STEP_BULK_FDS } from './js-step-bulk.js';
import { FrameReader, FrameWriter } from './js-step-frames.js';
import { describeError, JS_STEP_TENSORS, UNHANDLED_REJECTION, type HostReply, type HostRequest, type JsHostData } from './js-step-protocol.js';

interface JsModule {
  readonly initialize?: (args: unknown) => unknown;
  readonly execute?: (batch: unknown) => unknown;
  readonly finalize?: () => unknown;
}

/** The exit code of a process that reported its crash (the server reads the report, not the code). */
const CRASH_EXIT = 70;

/** Every read lands in this one buffer (FrameReader copies out what it keeps): no fresh 64 KiB buffer per read. */
const readBuffer = Buffer.allocUnsafe(64 * 1024);
const channel = new net.Socket({
  fd: 3,
  readable: true,
  writable: true,
  onread: { buffer: readBuffer, callback: (n: number) => received(readBuffer.subarray(0, n)) },
});
/** The files for large tensors (js-step-bulk.ts), when the server passed them: `--bulk <cap bytes>` after this script. */
const bulkAt = process.argv.indexOf('--bulk');
const bulk = bulkAt > 0 ? new BulkLink(STEP_BULK_FDS.read, STEP_BULK_FDS.write, Number(process.argv[bulkAt + 1])) : undefined;
const writer = new FrameWriter(channel, JS_STEP_TENSORS, bulk);
let ending = false;

function post(reply: HostReply): void {
  writer.write(reply as unknown as Record<string, unknown>);
}

/** Report why the process ends, then end it (at once if the report cannot be written within a second). */
function crash(cause: string): void {
  if (ending) return;
  ending = true;
  setTimeout(() => process.exit(CRASH_EXIT), 1000).unref();
  // After what is queued (answers resolved before the fault), in order.
  writer.writeNow({ op: 'crash', cause }, () => process.exit(CRASH_EXIT));
}

function isOutOfMemory(err: unknown): boolean {
  return err instanceof RangeError && /allocation failed|out of memory|Invalid array buffer length/i.test(err.message);
}

process.on('uncaughtException', (err) => {
  if (err.name === UNHANDLED_REJECTION) crash(err.message);
  else if (isOutOfMemory(err)) crash(`it ran out of memory: ${err.message}`);
  else crash(`an uncaught exception: ${describeError(err).message}`);
});
process.on('unhandledRejection', (reason) => {
  crash(`an unhandled promise rejection: ${describeError(reason).message}`);
});
// The server is gone (or closed the channel): nothing will ask for anything again.
channel.on('end', () => process.exit(0));
channel.on('error', () => process.exit(0));

for (const name of ['kill', '_kill'] as const) {
  Object.defineProperty(process, name, {
    value: () => {
      throw Object.assign(new Error(`process.${name === '_kill' ? 'kill' : name} is not available to a js step`), { code: 'ERR_ACCESS_DENIED' });
    },
    writable: false,
    configurable: false,
  });
}

async function load(data: JsHostData): Promise<JsModule | undefined> {
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

async function execute(mod: JsModule, id: number, batch: unknown): Promise<void> {
  let value: unknown;
  try {
    value = await mod.execute!(batch);
  } catch (err) {
    if (isOutOfMemory(err)) return crash(`it ran out of memory: ${(err as Error).message}`);
    post({ op: 'result', id, ok: false, what: 'execute() failed', error: describeError(err) });
    return;
  }
  try {
    post({ op: 'result', id, ok: true, value });
  } catch (err) {
    if (isOutOfMemory(err)) return crash(`it ran out of memory: ${(err as Error).message}`);
    // A function, a symbol, …: nothing the server could read anyway.
    post({ op: 'result', id, ok: false, what: 'execute() returned a value that cannot leave its process', error: describeError(err) });
  }
}

let loaded: Promise<JsModule | undefined> | undefined;

function handle(request: HostRequest): void {
  if (request.op === 'init') {
    loaded ??= load(request.data).then((mod) => {
      if (mod) post({ op: 'ready' });
      return mod;
    });
    return;
  }
  void loaded?.then(async (mod) => {
    if (!mod) return;
    if (request.op === 'execute') return execute(mod, request.id, request.batch);
    let error;
    try {
      await mod.finalize?.();
    } catch (err) {
      error = describeError(err);
    }
    post({ op: 'finalized', id: request.id, error });
  });
}

post({ op: 'online' });
const reader = new FrameReader(JS_STEP_TENSORS, undefined, bulk);
function received(chunk: Buffer): true {
  let requests;
  try {
    requests = reader.push(chunk);
  } catch (err) {
    crash(
      isOutOfMemory(err) ? `it ran out of memory receiving a batch: ${(err as Error).message}` : `a broken message from the server: ${(err as Error).message}`,
    );
    return true;
  }
  for (const r of requests) handle(r as unknown as HostRequest);
  return true;
}
