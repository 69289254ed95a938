/**
 * What the server's heap holds, measured the way an operator can: `serve`
 * with Node's `--heapsnapshot-signal`, heap snapshots (live objects only:
 * taking one collects first). docs/memory-and-caching.md gives both figures
 * this bounds:
 * - idle, one small model loaded, a local source and no gRPC ("What an idle
 *   server holds"): nothing is allocated for capacity the server may never
 *   use, and nothing loaded that this configuration does not use;
 * - per request waiting for its batch ("Requests waiting for their batch"),
 *   hundreds of them, each on its own keep-alive connection. The requests
 *   wait on the model's own max_queue_delay (30 s for a batch that never
 *   fills), not on a slow run, so the wait does not depend on the machine's
 *   speed.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { configText, scale, writeModelDir } from '../../examples/models/zoo.js';
import { metricValue } from '../support/metric-value.js';
import { startServe, type ServeProcess } from '../support/serve-process.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request } from '../support/test-server.js';

/** Requests held waiting: enough that the per-request figure is not lost in the heap's own drift. */
const WAITING = 400;
/** The bound: docs/memory-and-caching.md gives about 12 KB per waiting request and its connection (15.7 KB before they were cut). */
const MAX_BYTES_PER_WAITING_REQUEST = 20 * 1024;
/**
 * The bound on the idle heap: docs/memory-and-caching.md gives about 21.5 MiB; 27.5 with the AWS SDK and
 * grpc-js loaded though the server uses neither, 54 while the LRU's index was allocated for a million models.
 */
const MAX_IDLE_HEAP_BYTES = 26 * 1024 * 1024;

const cleanups = new Cleanups();
let root: string;
let diagnostics: string;
let server: ServeProcess;
const sockets: Socket[] = [];
/** The heap with the model loaded and no request in flight: the first test takes it, the second measures from it. */
let idle: { all: number; js: number } | undefined;

before(async () => {
  root = await tempDir(cleanups);
  diagnostics = await tempDir(cleanups);
  const features = { dataType: 'FP32' as const, dims: [4] };
  await writeModelDir(path.join(root, 'models'), 'scaled', {
    onnx: scale(2).onnx,
    config: configText({
      maxBatchSize: 1024,
      inputs: [{ name: 'INPUT0', ...features }],
      outputs: [{ name: 'OUTPUT0', ...features }],
      // One-row requests wait up to 30 s for a batch of 1,024 rows; a 1,024-row request goes at once.
      extra: 'dynamic_batching { preferred_batch_size: [ 1024 ] max_queue_delay_microseconds: 30000000 }',
    }),
  });
  server = await startServe({
    MME_MODEL_SOURCE: path.join(root, 'models'),
    MME_CACHE_DIR: path.join(root, 'cache'),
    NODE_OPTIONS: `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${diagnostics}`,
  });
});

after(async () => {
  for (const s of sockets) s.destroy();
  await server?.kill();
  await cleanups.run();
});

/** The live heap's bytes from a snapshot taken now: all of it, and without the backing stores of buffers and typed arrays. */
async function snapshot(): Promise<{ all: number; js: number }> {
  const before = new Set(readdirSync(diagnostics));
  server.proc.kill('SIGUSR2');
  const deadline = Date.now() + 60_000;
  let file: string | undefined;
  while (file === undefined && Date.now() < deadline) {
    file = readdirSync(diagnostics).find((f) => f.endsWith('.heapsnapshot') && !before.has(f));
    if (file === undefined) await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(file !== undefined, 'the server wrote no heap snapshot within 60 s of SIGUSR2');
  // The main thread writes the snapshot before it reads another request: once /ping answers, the file is whole.
  assert.equal((await request(`${server.url}/ping`)).status, 200);
  const snap = JSON.parse(readFileSync(path.join(diagnostics, file), 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
  };
  const fields = snap.snapshot.meta.node_fields;
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const sizeAt = fields.indexOf('self_size');
  const native = snap.snapshot.meta.node_types[0].indexOf('native');
  let all = 0;
  let js = 0;
  for (let i = 0; i < snap.nodes.length; i += width) {
    const size = snap.nodes[i + sizeAt]!;
    all += size;
    if (snap.nodes[i + typeAt] !== native) js += size;
  }
  return { all, js };
}

function oneRowRequest(port: number): Socket {
  const body = JSON.stringify({ inputs: [input('INPUT0', 'FP32', [1, 4], [1, 2, 3, 4])] });
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  socket.write(
    `POST /v2/models/scaled/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  return socket;
}

test(`an idle server with one model loaded holds at most ${MAX_IDLE_HEAP_BYTES / 1024 / 1024} MiB of heap`, async (t) => {
  // Load the model and take the request path once at full batches, so what is made once per process is made before.
  const full = { inputs: [input('INPUT0', 'FP32', [1024, 4], new Array(4096).fill(1))] };
  for (let i = 0; i < 3; i++) assert.equal((await request(`${server.url}/v2/models/scaled/infer`, { method: 'POST', json: full })).status, 200);
  idle = await snapshot();
  const mib = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
  t.diagnostic(`idle heap: ${mib(idle.all)}, of which JavaScript objects ${mib(idle.js)}`);
  assert.ok(idle.all <= MAX_IDLE_HEAP_BYTES, `idle heap ${mib(idle.all)}`);
});

test(`a request waiting for its batch holds at most ${MAX_BYTES_PER_WAITING_REQUEST / 1024} KB of the server's heap, its connection included`, async (t) => {
  assert.ok(idle !== undefined, 'the idle heap was measured first');

  for (let i = 0; i < WAITING; i++) sockets.push(oneRowRequest(server.port));
  const deadline = Date.now() + 20_000;
  let pending = 0;
  while (pending < WAITING && Date.now() < deadline) {
    pending = (await metricValue(server.url, 'nv_inference_pending_request_count', { model: 'scaled' })) ?? 0;
    if (pending < WAITING) await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(pending, WAITING, 'every request is waiting in the model queue');
  const waiting = await snapshot();

  const perRequest = (waiting.all - idle.all) / WAITING;
  const jsPerRequest = (waiting.js - idle.js) / WAITING;
  t.diagnostic(`per waiting request: ${(perRequest / 1024).toFixed(1)} KB, of which JavaScript objects ${(jsPerRequest / 1024).toFixed(1)} KB`);
  assert.ok(perRequest <= MAX_BYTES_PER_WAITING_REQUEST, `${(perRequest / 1024).toFixed(1)} KB per waiting request`);
});
