/**
 * Issue 19 / issue 17 item 3: request memory is bounded by bytes in flight.
 * 100 sockets each declare a 4 MiB body, send 3 MiB of it and stall. With
 * MME_MAX_INFLIGHT_BYTES at 32 MiB the server admits what fits and refuses
 * the rest unread (429, connection closed), so its RSS (read from /proc of
 * the `serve` process) grows by about the limit, not by the 300 MiB the
 * clients sent; MME_REQUEST_TIMEOUT_SECONDS then drops the stalled ones
 * (408) and their bytes are free again. The routes that are not inference
 * (the repository index, loads and unloads) count their bodies under the same
 * limit: a hostile client cannot park its uploads there instead (and a
 * compressed body there is refused naming Content-Encoding).
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { after, it } from 'node:test';
import { addSub, writeModelDir } from '../../examples/models/zoo.js';
import { rssBytes, startServe } from '../support/serve-process.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';

/** Requests refused for bytes in flight, as the server counts them (onnx_mme_admission_refusals_total). */
async function refusedForBytes(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let total = 0;
  for (const line of text.split('\n'))
    if (line.startsWith('onnx_mme_admission_refusals_total{reason="inflight_bytes"')) total += Number(line.split(' ').at(-1));
  return total;
}

const ctx = new Cleanups();
after(() => ctx.run());

const MIB = 1024 * 1024;
const SOCKETS = 100;
const DECLARED = 4 * MIB;
const SENT = 3 * MIB;
const LIMIT = 32 * MIB;

interface Upload {
  /** The status line the server answered with, once it did. */
  status: string | undefined;
  closed: boolean;
  readonly socket: net.Socket;
}

/** Declares DECLARED bytes to `target`, sends SENT of them, then goes silent (the socket stays open). */
function stalledUpload(port: number, target = '/invocations'): Upload {
  const socket = net.connect(port, '127.0.0.1');
  const upload: Upload = { status: undefined, closed: false, socket };
  socket.on('error', () => undefined);
  socket.on('data', (d: Buffer) => {
    upload.status ??= d.toString('latin1').split('\r\n')[0];
  });
  socket.on('close', () => (upload.closed = true));
  socket.once('connect', () => {
    socket.write(
      `POST ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Amzn-SageMaker-Target-Model: add_sub\r\nContent-Length: ${DECLARED}\r\n\r\n`,
    );
    const chunk = Buffer.alloc(256 * 1024, 0x20);
    let sent = 0;
    const more = (): void => {
      while (sent < SENT && !socket.destroyed) {
        sent += chunk.length;
        if (!socket.write(chunk)) {
          socket.once('drain', more);
          return;
        }
      }
    };
    more();
  });
  return upload;
}

const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A `serve` with add_sub, MME_MAX_INFLIGHT_BYTES at LIMIT and short header and request timeouts, killed after the test. */
async function stallingServer(): Promise<Awaited<ReturnType<typeof startServe>>> {
  const root = await tempDir(ctx);
  await writeModelDir(path.join(root, 'models'), 'add_sub', addSub());
  const child = await startServe({
    MME_MODEL_SOURCE: path.join(root, 'models'),
    MME_CACHE_DIR: path.join(root, 'cache'),
    MME_MAX_INFLIGHT_BYTES: String(LIMIT),
    MME_HEADERS_TIMEOUT_SECONDS: '2',
    MME_REQUEST_TIMEOUT_SECONDS: '4',
  });
  ctx.after(() => child.kill());
  return child;
}

it('stalled uploads: RSS grows by about MME_MAX_INFLIGHT_BYTES, the rest get 429 unread, the stalled ones 408 after the request timeout', async () => {
  const child = await stallingServer();
  // Warm: the model loaded, the allocator past its first requests.
  const seq = Array.from({ length: 16 }, (_, i) => i);
  const body = JSON.stringify({
    inputs: [
      { name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: seq },
      { name: 'INPUT1', datatype: 'FP32', shape: [1, 16], data: seq },
    ],
  });
  const invoke = () =>
    fetch(`${child.url}/invocations`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-amzn-sagemaker-target-model': 'add_sub' }, body });
  for (let i = 0; i < 5; i++) assert.equal((await invoke()).status, 200);
  const pid = child.proc.pid!;
  const idle = rssBytes(pid);

  const uploads = Array.from({ length: SOCKETS }, () => stalledUpload(child.port));
  // Until every upload is either refused or has sent what it will send (bounded: the server reads at its pace).
  let peak = idle;
  // Generous: on a loaded machine the server reaches the last sockets' headers late.
  const deadline = performance.now() + 90_000;
  while (performance.now() < deadline) {
    peak = Math.max(peak, rssBytes(pid));
    if ((await refusedForBytes(child.url)) >= SOCKETS - Math.floor(LIMIT / DECLARED)) break;
    await settle(50);
  }
  for (let i = 0; i < 10; i++) {
    peak = Math.max(peak, rssBytes(pid));
    await settle(50);
  }
  // Counted by the server (its refusal counter): a client may not see its 429 (the refused connection closes with the
  // rest of the body unread, and the kernel answers that with a reset that can overtake the answer).
  const refused = await refusedForBytes(child.url);
  const admitted = Math.floor(LIMIT / DECLARED);
  const growth = peak - idle;
  const report = `idle ${Math.round(idle / MIB)} MiB, peak ${Math.round(peak / MIB)} MiB, refused ${refused}/${SOCKETS}`;
  // Everything past what fits was refused before its body was read.
  assert.ok(refused >= SOCKETS - admitted, report);
  // The admitted bodies (≤ the limit) plus socket buffers and allocator slack; the clients sent ~300 MiB.
  assert.ok(growth <= LIMIT + 64 * MIB, report);
  // /ping still answers while the stalled uploads hold their bytes.
  assert.equal((await fetch(`${child.url}/ping`)).status, 200);

  // The request timeout ends the stalled ones; their bytes are free again and new requests are served.
  const until = performance.now() + 15_000;
  while (performance.now() < until && uploads.some((u) => !u.closed)) await settle(100);
  assert.ok(
    uploads.every((u) => u.closed),
    `${uploads.filter((u) => !u.closed).length} stalled uploads still open`,
  );
  const timedOut = uploads.filter((u) => u.status?.startsWith('HTTP/1.1 408')).length;
  assert.equal((await invoke()).status, 200);
  process.stdout.write(`# ${report}, timed out ${timedOut}\n`);
});

it('the repository routes count their bodies too: stalled uploads to /v2/repository/index are refused past MME_MAX_INFLIGHT_BYTES', async () => {
  const child = await stallingServer();
  // The index is open by default (model control none restricts loads and unloads, not listing).
  assert.equal((await fetch(`${child.url}/v2/repository/index`, { method: 'POST' })).status, 200);
  const pid = child.proc.pid!;
  const idle = rssBytes(pid);
  const sockets = 40;
  const admitted = Math.floor(LIMIT / DECLARED);
  const uploads = Array.from({ length: sockets }, () => stalledUpload(child.port, '/v2/repository/index'));
  let peak = idle;
  const deadline = performance.now() + 30_000;
  while (performance.now() < deadline && (await refusedForBytes(child.url)) < sockets - admitted) {
    peak = Math.max(peak, rssBytes(pid));
    await settle(50);
  }
  for (let i = 0; i < 10; i++) {
    peak = Math.max(peak, rssBytes(pid));
    await settle(50);
  }
  const refused = await refusedForBytes(child.url);
  const report = `idle ${Math.round(idle / MIB)} MiB, peak ${Math.round(peak / MIB)} MiB, refused ${refused}/${sockets}`;
  assert.ok(refused >= sockets - admitted, report);
  assert.ok(peak - idle <= LIMIT + 64 * MIB, report);
  const until = performance.now() + 15_000;
  while (performance.now() < until && uploads.some((u) => !u.closed)) await settle(100);
  assert.equal((await fetch(`${child.url}/v2/repository/index`, { method: 'POST' })).status, 200);
  // Their bodies are read as sent: a compressed one is refused naming the header, not parsed as JSON.
  const gzipped = await fetch(`${child.url}/v2/repository/index`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    body: gzipSync('{"ready": true}'),
  });
  const refusal = (await gzipped.json()) as { code: string; error: string };
  assert.deepEqual([gzipped.status, refusal.code], [415, 'UNSUPPORTED_MEDIA_TYPE'], refusal.error);
  assert.match(refusal.error, /Content-Encoding 'gzip' is not accepted on POST \/v2\/repository\/index/);
  process.stdout.write(`# index: ${report}\n`);
});
