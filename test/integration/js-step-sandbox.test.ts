/**
 * Issue 36 item 4, JS steps apart from the server: a hostile `backend: "js"`
 * step, in a real model package served by a real `serve` process, tries
 * everything a step must not do: read the server's environment (a fake
 * AWS_SECRET_ACCESS_KEY is planted in it) and /proc/<server>/environ and
 * mem, read another model's files, write outside its scratch directory, start
 * a process or a worker thread, kill the server, write the file the server
 * passes large tensors in, grow a file past its memory bound, forge a frame
 * (V8 or JSON header), and (another step) hold 1 GiB of typed arrays under
 * `js_heap_limit_mb 64`. Each attempt fails or is contained, while the
 * server keeps serving another model. Connecting out is NOT blocked (Node's
 * permission model has no network rule in node 24): the test asserts it
 * succeeds, so docs/security.md's "what stays open" stays true. When the
 * tests run as root (CI), the step runs as uid 65534.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { addSub, writeModelDir } from '../../examples/models/zoo.js';
import { rssBytes, startServe, type ServeProcess } from '../support/serve-process.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request, type JsonReply } from '../support/test-server.js';

const SECRET = 'fake-secret-for-the-hostile-step-test-7f3a';
const ctx = new Cleanups();
let server: ServeProcess;
let exitCode: number | null | undefined;
let root: string;
let listener: net.Server;
let connections = 0;

/** Each attack is one function run by the step; it returns what it got, or 'denied: <code or message>'. */
function attacks(otherDir: string, outside: string, port: number): string {
  return `
import fs from 'node:fs';
import net from 'node:net';
const denied = (e) => 'denied: ' + (e.code ?? e.message);
const attempt = async (fn) => { try { return 'ok: ' + String(await fn()); } catch (e) { return denied(e); } };
export const ATTACKS = {
  env: () => attempt(() => JSON.stringify(process.env)),
  environ: () => attempt(() => fs.readFileSync('/proc/' + process.ppid + '/environ', 'latin1')),
  mem: () => attempt(() => fs.openSync('/proc/' + process.ppid + '/mem', 'r')),
  other_model: () => attempt(() => fs.readFileSync(${JSON.stringify(path.join(otherDir, 'config.pbtxt'))}, 'utf8')),
  other_listing: () => attempt(() => fs.readdirSync(${JSON.stringify(path.dirname(otherDir))}).join(',')),
  write_other: () => attempt(() => fs.writeFileSync(${JSON.stringify(path.join(otherDir, 'pwned'))}, 'x')),
  write_outside: () => attempt(() => fs.writeFileSync(${JSON.stringify(outside)}, 'x')),
  write_scratch: () => attempt(() => { fs.writeFileSync('own-scratch-file', 'x'); return fs.readFileSync('own-scratch-file', 'utf8'); }),
  kill: () => attempt(() => process.kill(process.ppid, 'SIGKILL')),
  child: async () => attempt(async () => (await import('node:child_process')).execFileSync('/bin/sh', ['-c', 'id']).toString()),
  worker: async () => attempt(async () => { const { Worker } = await import('node:worker_threads'); new Worker('1', { eval: true }); return 'started'; }),
  uid: () => attempt(() => String(process.getuid())),
  connect: () => attempt(() => new Promise((resolve, reject) => { const s = net.connect(${port}, '127.0.0.1', () => { s.end(); resolve('connected'); }); s.on('error', reject); })),
  // Garbage on the channel to the server (its fd 3, written directly): the server must drop the process, not parse its way into trouble.
  forge: () => { fs.writeSync(3, Buffer.from([255, 255, 255, 127, 1, 2, 3])); return new Promise(() => {}); },
  // A header that starts as JSON would and is not: parsed as untrusted all the same.
  forge_json: () => {
    const header = Buffer.from('{"msg":{"op":"result","id":1,"ok":true,"value":{"report":');
    const length = Buffer.alloc(4);
    length.writeUInt32LE(header.length, 0);
    fs.writeSync(3, Buffer.concat([length, header]));
    return new Promise(() => {});
  },
  // A well-formed frame announcing a 3 GB answer: the server must refuse it before allocating, not buffer it.
  oversize: async () => {
    const v8 = await import('node:v8');
    const header = v8.serialize({ msg: { op: 'result', id: 1, ok: true, value: { report: { datatype: 'BYTES', shape: [1, 1], data: null } } }, bins: [{ key: 'report', type: 'Uint8Array', bytes: 3e9 }] });
    const length = Buffer.alloc(4);
    length.writeUInt32LE(header.length, 0);
    fs.writeSync(3, Buffer.concat([length, header]));
    return new Promise(() => {});
  },
  // Its bulk files (js-step-bulk.ts: fd 4 from the server, read-only; fd 5 to it): no writing the server's,
  // no growing its own or any scratch file past its memory bound (RLIMIT_FSIZE, 2.3 GiB here), no path to either.
  bulk_write_in: () => attempt(() => fs.writeSync(4, Buffer.from('x'), 0, 1, 0)),
  bulk_grow: () => attempt(() => fs.writeSync(5, Buffer.from('x'), 0, 1, 3e9)),
  scratch_grow: () => attempt(() => { const fd = fs.openSync('big-scratch-file', 'w'); try { return fs.writeSync(fd, Buffer.from('x'), 0, 1, 3e9); } finally { fs.closeSync(fd); } }),
  bulk_path: () => attempt(() => fs.readlinkSync('/proc/self/fd/5')),
  // A frame naming a bulk section past the end of the file: the server must drop the process, not read garbage.
  bulk_forge: async () => {
    const v8 = await import('node:v8');
    const header = v8.serialize({ msg: { op: 'result', id: 1, ok: true, value: { report: { datatype: 'BYTES', shape: [1, 1], data: null } } }, bins: [{ key: 'report', type: 'Uint8Array', bytes: 16, at: 1e12 }], ack: 0 });
    const length = Buffer.alloc(4);
    length.writeUInt32LE(header.length, 0);
    fs.writeSync(3, Buffer.concat([length, header]));
    return new Promise(() => {});
  },
};
const NAMES = Object.keys(ATTACKS);
export async function execute({ inputs, rows }) {
  const out = [];
  for (let r = 0; r < rows; r++) out.push(await ATTACKS[NAMES[inputs.x.data[r]]]());
  return { report: { datatype: 'BYTES', shape: [rows, 1], data: out } };
}
`;
}
const ATTACK_NAMES = [
  'env',
  'environ',
  'mem',
  'other_model',
  'other_listing',
  'write_other',
  'write_outside',
  'write_scratch',
  'kill',
  'child',
  'worker',
  'uid',
  'connect',
  'forge',
  'forge_json',
  'oversize',
  'bulk_write_in',
  'bulk_grow',
  'scratch_grow',
  'bulk_path',
  'bulk_forge',
];

const HOSTILE_CONFIG = `name: "hostile"
backend: "js"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "report" data_type: TYPE_STRING dims: [ 1 ] } ]
`;

/** 1 in x[0]: hold 1 GiB of typed arrays; else y = x + 1. */
const HOG_MJS = `
const kept = [];
export function execute({ inputs }) {
  if (inputs.x.data[0] === 1) for (let i = 0; i < 16; i++) { const a = new Float64Array(8 << 20); a.fill(i); kept.push(a); }
  return { y: { datatype: 'FP32', shape: inputs.x.shape, data: Float32Array.from(inputs.x.data, (v) => v + 1) } };
}
`;
const HOG_CONFIG = `name: "hog"
backend: "js"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] } ]
parameters { key: "js_heap_limit_mb" value: { string_value: "64" } }
`;

before(async () => {
  root = await tempDir(ctx);
  listener = net.createServer((s) => {
    connections++;
    s.destroy();
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  ctx.after(() => new Promise<void>((resolve) => listener.close(() => resolve())));
  const models = path.join(root, 'models');
  await writeModelDir(models, 'add_sub', addSub());
  const port = (listener.address() as net.AddressInfo).port;
  await mkdir(path.join(models, 'hostile', '1'), { recursive: true });
  await writeFile(path.join(models, 'hostile', 'config.pbtxt'), HOSTILE_CONFIG);
  await writeFile(path.join(models, 'hostile', '1', 'model.mjs'), attacks(path.join(models, 'add_sub'), path.join(root, 'outside'), port));
  await mkdir(path.join(models, 'hog', '1'), { recursive: true });
  await writeFile(path.join(models, 'hog', 'config.pbtxt'), HOG_CONFIG);
  await writeFile(path.join(models, 'hog', '1', 'model.mjs'), HOG_MJS);
  server = await startServe({ MME_MODEL_SOURCE: models, MME_CACHE_DIR: path.join(root, 'cache'), MME_RUNTIME_WORKERS: '1', AWS_SECRET_ACCESS_KEY: SECRET });
  void server.exited.then((code) => (exitCode = code));
  ctx.after(() => server.kill());
});

after(() => ctx.run());

const invoke = (target: string, json: unknown): Promise<JsonReply> =>
  request(`${server.url}/invocations`, {
    method: 'POST',
    headers: { 'X-Amzn-SageMaker-Target-Model': target },
    json,
    signal: AbortSignal.timeout(30_000),
  });

async function attack(name: string): Promise<string> {
  const reply = await invoke('hostile', { inputs: [input('x', 'INT32', [1, 1], [ATTACK_NAMES.indexOf(name)])] });
  assert.equal(reply.status, 200, reply.text);
  return String(reply.body.outputs[0].data[0]);
}

async function assertServing(): Promise<void> {
  assert.equal(exitCode, undefined, `the server process exited with code ${exitCode}`);
  const reply = await invoke('add_sub', {
    inputs: [input('INPUT0', 'FP32', [1, 16], new Array(16).fill(2)), input('INPUT1', 'FP32', [1, 16], new Array(16).fill(1))],
  });
  assert.equal(reply.status, 200, reply.text);
}

describe('a hostile js step', () => {
  it("cannot read the server's environment, nor /proc/<server>/environ or mem", async () => {
    const env = await attack('env');
    assert.match(env, /^ok: /, 'its own environment is readable (and scrubbed)');
    assert.doesNotMatch(env, new RegExp(SECRET), env);
    assert.doesNotMatch(env, /AWS_|MME_/, env);
    assert.match(await attack('environ'), /^denied: /);
    assert.match(await attack('mem'), /^denied: /);
    await assertServing();
  });

  it("cannot read, list or write another model's files, nor write anywhere but its scratch directory", async () => {
    assert.match(await attack('other_model'), /^denied: /);
    assert.match(await attack('other_listing'), /^denied: /);
    assert.match(await attack('write_other'), /^denied: /);
    assert.match(await attack('write_outside'), /^denied: /);
    assert.equal(existsSync(path.join(root, 'models', 'add_sub', 'pwned')), false);
    assert.equal(existsSync(path.join(root, 'outside')), false);
    // The walls are not just "nothing works": its own scratch directory is writable.
    assert.equal(await attack('write_scratch'), 'ok: x');
    await assertServing();
  });

  it('cannot signal the server, start a process or a worker thread; runs as uid 65534 when the server is root', async () => {
    assert.match(await attack('kill'), /^denied: /);
    assert.match(await attack('child'), /^denied: /);
    assert.match(await attack('worker'), /^denied: /);
    const uid = await attack('uid');
    if (process.getuid?.() === 0) assert.equal(uid, 'ok: 65534');
    else assert.equal(uid, `ok: ${process.getuid?.()}`);
    await assertServing();
  });

  it("another local user cannot find or read the step's mirrored model files (server as root)", async (t) => {
    if (process.getuid?.() !== 0) {
      t.skip('needs root: the mirror exists only when the step runs as another user');
      return;
    }
    assert.equal(await attack('write_scratch'), 'ok: x');
    // As root: the hostile step's sandbox and its mirror of the model, so the check below cannot pass for want of one.
    const sandboxes = readdirSync(os.tmpdir())
      .filter((n) => n.startsWith('onnx-mme-js-'))
      .map((n) => path.join(os.tmpdir(), n));
    const mirrors = sandboxes.flatMap((dir) =>
      readdirSync(dir)
        .filter((n) => n.startsWith('model') && existsSync(path.join(dir, n, 'config.pbtxt')))
        .map((n) => path.join(dir, n)),
    );
    const ours = mirrors.find((m) => readFileSync(path.join(m, 'config.pbtxt'), 'utf8') === HOSTILE_CONFIG);
    assert.ok(ours !== undefined, `no mirror of the hostile model among ${mirrors.length}`);
    const sandbox = path.dirname(ours);
    // uid 65533: a local user that is neither the server (root) nor the step (65534).
    const probe = `
const fs = require('node:fs');
const tryIt = (fn) => { try { return 'ok: ' + fn(); } catch (e) { return 'denied: ' + e.code; } };
console.log(JSON.stringify({
  list: tryIt(() => fs.readdirSync(${JSON.stringify(sandbox)}).join(',')),
  guessed: tryIt(() => fs.readFileSync(${JSON.stringify(path.join(sandbox, 'model', 'config.pbtxt'))}, 'utf8')),
}));`;
    const run = spawnSync(process.execPath, ['-e', probe], { uid: 65533, gid: 65533, encoding: 'utf8', timeout: 30_000 });
    assert.equal(run.status, 0, run.stderr);
    const seen = JSON.parse(run.stdout) as { list: string; guessed: string };
    assert.equal(seen.list, 'denied: EACCES');
    assert.equal(seen.guessed, 'denied: ENOENT');
    await assertServing();
  });

  it('the cache directory the server made is 0700: other local users cannot list its entries (their names are targets)', () => {
    assert.equal(statSync(path.join(root, 'cache')).mode & 0o777, 0o700);
  });

  it('CAN connect out (documented as open in docs/security.md): a loopback listener sees the connection', async () => {
    const before = connections;
    assert.equal(await attack('connect'), 'ok: connected');
    for (let i = 0; i < 50 && connections === before; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(connections, before + 1);
    await assertServing();
  });

  it('cannot confuse the server with a forged frame (V8 or JSON header): the process is dropped (500), restarted, and answers again', async () => {
    for (const name of ['forge', 'forge_json']) {
      const reply = await invoke('hostile', { inputs: [input('x', 'INT32', [1, 1], [ATTACK_NAMES.indexOf(name)])] });
      assert.equal(reply.status, 500, `${name}: ${reply.text}`);
      assert.match(reply.text, /model 'hostile': the js step crashed: it wrote a malformed message/);
      assert.equal(await attack('write_scratch'), 'ok: x');
    }
    await assertServing();
  });

  it('cannot make the server buffer more than the step could hold: a frame announcing 3 GB is refused before anything is allocated', async () => {
    const rssBefore = rssBytes(server.proc.pid!);
    const reply = await invoke('hostile', { inputs: [input('x', 'INT32', [1, 1], [ATTACK_NAMES.indexOf('oversize')])] });
    assert.equal(reply.status, 500, reply.text);
    assert.match(reply.text, /the js step crashed: it wrote a malformed message \(a frame of \d+ bytes, over the \d+ it may hold\)/);
    assert.ok(rssBytes(server.proc.pid!) - rssBefore < 256 * 1024 * 1024, 'the server did not allocate the announced answer');
    assert.equal(await attack('write_scratch'), 'ok: x');
    await assertServing();
  });

  it('cannot write the bulk file the server fills, grow its own or a scratch file past its memory bound, find either by path, or forge an offset', async () => {
    assert.match(await attack('bulk_write_in'), /^denied: EBADF/);
    assert.match(await attack('bulk_grow'), /^denied: EFBIG/);
    assert.match(await attack('scratch_grow'), /^denied: EFBIG/);
    assert.match(await attack('bulk_path'), /^denied: /);
    const reply = await invoke('hostile', { inputs: [input('x', 'INT32', [1, 1], [ATTACK_NAMES.indexOf('bulk_forge')])] });
    assert.equal(reply.status, 500, reply.text);
    assert.match(reply.text, /the js step crashed: it wrote a malformed message \(a tensor section past the end of its file\)/);
    assert.equal(await attack('write_scratch'), 'ok: x');
    await assertServing();
  });

  it('cannot hold 1 GiB of typed arrays under js_heap_limit_mb 64: the batch fails with a 5xx, the step restarts, the server is unaffected', async () => {
    const ok = await invoke('hog', { inputs: [input('x', 'FP32', [1, 1], [0])] });
    assert.equal(ok.status, 200, ok.text);
    const rssBefore = rssBytes(server.proc.pid!);
    const hog = await invoke('hog', { inputs: [input('x', 'FP32', [1, 1], [1])] });
    assert.ok(hog.status >= 500 && hog.status < 600, `${hog.status} ${hog.text}`);
    assert.match(hog.text, /model 'hog': the js step crashed: it ran out of memory/);
    const again = await invoke('hog', { inputs: [input('x', 'FP32', [1, 1], [4])] });
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(again.body.outputs[0].data, [5]);
    assert.ok(rssBytes(server.proc.pid!) - rssBefore < 256 * 1024 * 1024, 'the server did not grow by the hog');
    await assertServing();
  });
});
