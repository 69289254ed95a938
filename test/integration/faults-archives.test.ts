/**
 * Issue 19, archives that cost more than they say: the disk budget counts
 * blocks as `du` does (thousands of tiny files cannot pass as a few KB), a
 * gzip bomb is refused by its compression ratio after a few MiB instead of
 * being written out to the byte limit, and a refused archive is remembered so
 * the next requests neither extract nor download it again. Measured from
 * outside: blocks summed with lstat over MME_CACHE_DIR, bytes the server
 * process wrote from /proc/<pid>/io, extractions and downloads counted in its
 * log. Real parts: `serve` as a process, a local source and s3rver on loopback.
 */
import assert from 'node:assert/strict';
import { createWriteStream } from 'node:fs';
import { lstat, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { finished } from 'node:stream/promises';
import { createGzip, gzipSync } from 'node:zlib';
import { addSub } from '../../examples/models/zoo.js';
import { header, tarBytes, type RawEntry } from '../support/raw-tar.js';
import { sample } from '../support/metric-value.js';
import { startLoopbackS3, S3RVER_CREDENTIALS, type LoopbackS3 } from '../support/s3rver.js';
import { startServe, type ServeProcess } from '../support/serve-process.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request } from '../support/test-server.js';

const MIB = 1024 * 1024;
const ctx = new Cleanups();
let root: string;
let s3: LoopbackS3;
const seq16 = Array.from({ length: 16 }, (_, i) => i);
const body = { inputs: [input('INPUT0', 'FP32', [1, 16], seq16), input('INPUT1', 'FP32', [1, 16], seq16)] };

before(async () => {
  root = await tempDir(ctx);
  s3 = await startLoopbackS3(['models']);
});

after(async () => {
  await s3?.close();
  await ctx.run();
});

/** add_sub plus `count` tiny files: what a careless (or hostile) package with many small assets looks like. */
function manyFilesArchive(count: number): Buffer {
  const model = addSub();
  const entries: RawEntry[] = [
    { name: 'add_sub/config.pbtxt', body: model.config },
    { name: 'add_sub/1/model.onnx', body: Buffer.from(model.onnx) },
  ];
  for (let i = 0; i < count; i++) entries.push({ name: `add_sub/assets/f${String(i).padStart(6, '0')}`, body: 'tiny' });
  return gzipSync(tarBytes(entries));
}

/** A .tar.gz of `files` files of `fileBytes` zeros each, written streaming (never in memory at once). */
async function writeBomb(file: string, files: number, fileBytes: number): Promise<void> {
  const gzip = createGzip();
  const out = gzip.pipe(createWriteStream(file));
  const write = async (chunk: Buffer): Promise<void> => {
    if (!gzip.write(chunk)) await new Promise((r) => gzip.once('drain', r));
  };
  const zeros = Buffer.alloc(MIB);
  for (let f = 0; f < files; f++) {
    await write(header({ name: `bomb/1/part${f}.bin` }, fileBytes));
    for (let left = fileBytes; left > 0; left -= zeros.length) await write(left >= zeros.length ? zeros : zeros.subarray(0, left));
    await write(Buffer.alloc((512 - (fileBytes % 512)) % 512));
  }
  await write(Buffer.alloc(1024));
  gzip.end();
  await finished(out);
}

/** What `du -s --block-size=1` says of `dir`: st_blocks × 512 summed over the tree, links not followed. */
async function du(dir: string): Promise<number> {
  const s = await lstat(dir);
  let total = s.blocks * 512;
  if (s.isDirectory()) for (const name of await readdir(dir)) total += await du(path.join(dir, name));
  return total;
}

/** Bytes the process has written (write syscalls of every thread), from /proc/<pid>/io. */
async function writtenBytes(pid: number): Promise<number> {
  const m = /^wchar:\s+(\d+)$/m.exec(await readFile(`/proc/${pid}/io`, 'utf8'));
  assert.ok(m, 'no wchar in /proc/<pid>/io');
  return Number(m[1]);
}

const invoke = (url: string, target: string) =>
  request(`${url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': target }, json: body });

const count = (child: ServeProcess, msg: string, target: string) => child.lines.filter((l) => l['msg'] === msg && l['model'] === target).length;

describe('disk budget in blocks', () => {
  it('archives of thousands of tiny files stay within MME_CACHE_MAX_BYTES as du measures it, and the metric says what du says', async (t) => {
    const source = path.join(root, 'many-source');
    const cacheDir = path.join(root, 'many-cache');
    await mkdir(source, { recursive: true });
    const many = manyFilesArchive(20_000); // 20k × one 4 KiB block = 80 MiB on disk, 80 KB of data
    for (const name of ['many-1', 'many-2', 'many-3']) await writeFile(path.join(source, `${name}.tar.gz`), many);
    await writeFile(path.join(source, 'fits.tar.gz'), manyFilesArchive(500)); // ~2 MiB on disk
    // Small, so that a refusal costs about a thousand file creations (this machine makes a few hundred a second).
    const budget = 4 * MIB;
    const child = await startServe({
      MME_MODEL_SOURCE: source,
      MME_CACHE_DIR: cacheDir,
      MME_CACHE_MAX_BYTES: String(budget),
      MME_ARCHIVE_MAX_ENTRIES: '100000', // the block count is under test here, not the entry count
      MME_RUNTIME_WORKERS: '1',
    });
    ctx.after(() => child.kill());

    const first = await invoke(child.url, 'many-1.tar.gz');
    assert.equal(first.status, 507, first.text);
    assert.equal(first.body.code, 'INSUFFICIENT_STORAGE');
    assert.match(first.body.error, /model 'many-1\.tar\.gz'.*in blocks/);
    assert.doesNotMatch(first.body.error, new RegExp(root.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')), 'no host path in the message');
    // Larger than the whole budget: remembered, so the next request is answered without extracting again.
    const again = await invoke(child.url, 'many-1.tar.gz');
    assert.equal(again.status, 507, again.text);
    assert.equal(count(child, 'extracting model archive', 'many-1.tar.gz'), 1, 'extracted once');

    assert.equal((await invoke(child.url, 'fits.tar.gz')).status, 200);
    for (const name of ['many-2', 'many-3']) assert.equal((await invoke(child.url, `${name}.tar.gz`)).status, 507);

    const used = await du(cacheDir);
    t.diagnostic(`cache on disk (du) ${used} bytes, budget ${budget}`);
    assert.ok(used <= budget, `the cache holds ${used} bytes on disk, over its ${budget}-byte budget`);
    const metric = sample((await request(`${child.url}/metrics`)).text, 'onnx_mme_disk_cache_bytes');
    assert.ok(metric !== undefined);
    t.diagnostic(`onnx_mme_disk_cache_bytes ${metric}`);
    // The cache directory itself is one block more than its entries.
    assert.ok(Math.abs(metric - used) <= 0.05 * used, `metric ${metric}, du ${used}`);
    assert.ok(metric > 500 * 4096, `metric ${metric}: the fitting model's 500 files take a block each`);
    const left = (await readdir(cacheDir)).filter((n) => n.startsWith('.tmp-'));
    assert.deepEqual(left, [], 'no half-written entry left');
  });
});

describe('a gzip bomb', () => {
  let bomb: Buffer;
  before(async () => {
    const file = path.join(root, 'bomb.tar.gz');
    await writeBomb(file, 5, 40 * MIB); // 200 MiB of zeros, each file under any byte limit
    bomb = await readFile(file);
    assert.ok(bomb.length < 1 * MIB, `the bomb is ${bomb.length} bytes`);
  });

  it('a local archive is refused by its ratio after a few MiB, leaves nothing, and is not extracted again', async (t) => {
    const source = path.join(root, 'bomb-source');
    const cacheDir = path.join(root, 'bomb-cache');
    await mkdir(source, { recursive: true });
    await writeFile(path.join(source, 'bomb.tar.gz'), bomb);
    // The default limits: MME_ARCHIVE_MAX_BYTES (16 GiB) alone would let all 200 MiB reach the disk.
    const child = await startServe({ MME_MODEL_SOURCE: source, MME_CACHE_DIR: cacheDir, MME_RUNTIME_WORKERS: '1' });
    ctx.after(() => child.kill());
    const pid = child.proc.pid!;

    const before = await writtenBytes(pid);
    const r = await invoke(child.url, 'bomb.tar.gz');
    const written = (await writtenBytes(pid)) - before;
    t.diagnostic(`bytes written for the bomb: ${written} (${r.status} ${String(r.body?.code)})`);
    assert.equal(r.status, 400, r.text);
    assert.equal(r.body.code, 'ARCHIVE_REJECTED');
    assert.match(r.body.error, /model 'bomb\.tar\.gz'.*expands more than 200:1/);
    assert.ok(written < 40 * MIB, `the server wrote ${(written / MIB).toFixed(1)} MiB for a refused bomb`);

    const rest = await writtenBytes(pid);
    for (let i = 0; i < 4; i++) {
      const again = await invoke(child.url, 'bomb.tar.gz');
      assert.equal(again.status, 400);
      assert.equal(again.body.code, 'ARCHIVE_REJECTED');
    }
    assert.equal(count(child, 'extracting model archive', 'bomb.tar.gz'), 1, 'extracted once for five requests');
    assert.ok((await writtenBytes(pid)) - rest < 1 * MIB, 'nothing written for the repeats');
    assert.deepEqual(await readdir(cacheDir), [], 'no entry and no temporary directory');
  });

  it('from S3 it is downloaded once for five requests and refused the same way', async () => {
    await s3.upload('bombs/bomb.tar.gz', bomb);
    const cacheDir = path.join(root, 'bomb-s3-cache');
    const child = await startServe({
      MME_MODEL_SOURCE: 's3://models/bombs/',
      // Over the byte limit too: the refusal that must be remembered whichever limit trips first.
      MME_ARCHIVE_MAX_BYTES: String(100 * MIB),
      MME_CACHE_DIR: cacheDir,
      AWS_ENDPOINT_URL_S3: s3.endpoint,
      AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
      MME_RUNTIME_WORKERS: '1',
    });
    ctx.after(() => child.kill());
    for (let i = 0; i < 5; i++) {
      const r = await invoke(child.url, 'bomb.tar.gz');
      assert.equal(r.status, 400, r.text);
      assert.equal(r.body.code, 'ARCHIVE_REJECTED');
      assert.match(r.body.error, /model 'bomb\.tar\.gz'.*expands more than 200:1/);
    }
    assert.equal(count(child, 'downloading model archive from S3', 'bomb.tar.gz'), 1, 'one GetObject for five requests');
    assert.deepEqual(await readdir(cacheDir), [], 'no entry and no temporary directory');
  });
});
