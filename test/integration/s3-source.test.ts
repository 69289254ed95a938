/**
 * @module test/integration/s3-source
 * S3ModelSource against a real S3 API (s3rver on 127.0.0.1) through a small
 * HTTP proxy that counts the requests the server receives (to prove single
 * flight and cache reuse) and can fail them: 503 answers, or a response cut
 * mid-body by destroying the socket. Archives are generated with the model zoo
 * and uploaded with the real @aws-sdk/client-s3.
 */

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { addSub, packTarGz, writeModelDir } from '../../examples/models/zoo.js';
import { ServingError, type ErrorCode } from '../../src/errors.js';
import { DiskCache } from '../../src/store/disk-cache.js';
import type { ExtractLimits } from '../../src/store/extract-limits.js';
import { S3ModelSource, type S3DownloadEvent, type S3ModelSourceOptions } from '../../src/store/s3-source.js';
import { isS3Uri, parseS3Uri } from '../../src/config/s3-uri.js';
import { tgz } from '../support/raw-tar.js';
import { S3Proxy } from '../support/s3-proxy.js';
import { allowS3rverContinuationTokens, S3rver, type S3rverInstance } from '../support/s3rver.js';

const BUCKET = 'models';
const PREFIX = 'prefix/';
const SOURCE_URI = `s3://${BUCKET}/${PREFIX}`;
const LIMITS: ExtractLimits = { maxBytes: 64 * 1024 * 1024, maxEntries: 1000 };
const CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };
/** Small delays so failure tests stay fast. */
const FAST_RETRY = { attempts: 3, baseDelayMs: 20, maxTotalMs: 3_000 };

// ---------------------------------------------------------------------------
// Fixture

let s3: S3rverInstance;
let proxy: S3Proxy;
let admin: S3Client;
let work: string;
let restoreCiphers: (() => void) | undefined;
const clients: S3Client[] = [];
/** Archives by name, built once. */
const archives = new Map<string, Buffer>();

before(async () => {
  restoreCiphers = allowS3rverContinuationTokens();
  work = await mkdtemp(path.join(tmpdir(), 'onnx-mme-s3-'));
  s3 = new S3rver({
    port: 0,
    address: '127.0.0.1',
    directory: path.join(work, 's3rver'),
    silent: true,
    configureBuckets: [{ name: BUCKET }],
  });
  const address = await s3.run();
  proxy = new S3Proxy(address.port, BUCKET);
  await proxy.start();
  admin = s3Client(`http://127.0.0.1:${address.port}`);

  archives.set('add_sub', await buildArchive('add_sub', addSub()));
  archives.set('add_sub_8', await buildArchive('add_sub_8', addSub('FP32', 8)));
  // ~1 MiB of incompressible data: big enough that a cut leaves files half-written.
  archives.set('big', await buildArchive('big', addSub(), randomBytes(1024 * 1024)));
});

after(async () => {
  for (const client of [...clients, admin]) client?.destroy();
  await proxy?.close();
  await s3?.close();
  if (work) await rm(work, { recursive: true, force: true });
  restoreCiphers?.();
});

function s3Client(endpoint: string, credentials = CREDENTIALS): S3Client {
  const client = new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true, credentials, maxAttempts: 1 });
  clients.push(client);
  return client;
}

async function buildArchive(name: string, model: { onnx: Uint8Array; config?: string }, extra?: Buffer): Promise<Buffer> {
  const staging = path.join(work, 'staging');
  const dir = await writeModelDir(staging, name, { onnx: model.onnx, ...(model.config === undefined ? {} : { config: model.config }) });
  if (extra) await writeFile(path.join(dir, '1', 'weights.bin'), extra);
  const file = path.join(work, `${name}.tar.gz`);
  await packTarGz(dir, file);
  return readFile(file);
}

function archive(name: string): Buffer {
  const bytes = archives.get(name);
  assert.ok(bytes, `archive ${name} was built`);
  return bytes;
}

async function upload(key: string, body: Buffer): Promise<void> {
  await admin.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: body }));
}

interface Harness {
  readonly source: S3ModelSource;
  readonly cacheDir: string;
  readonly downloads: S3DownloadEvent[];
  /** Another source on the same cache, as after a restart. */
  readonly restart: () => S3ModelSource;
}

let harnessCount = 0;
function harness(overrides: Partial<S3ModelSourceOptions> = {}): Harness {
  harnessCount += 1;
  const cacheDir = path.join(work, `cache-${harnessCount}`);
  const downloads: S3DownloadEvent[] = [];
  const make = (): S3ModelSource =>
    new S3ModelSource({
      uri: SOURCE_URI,
      cacheDir,
      limits: LIMITS,
      client: s3Client(proxy.url),
      retry: FAST_RETRY,
      onDownload: (event) => downloads.push(event),
      ...overrides,
    });
  return { source: make(), cacheDir, downloads, restart: make };
}

async function rejectsWith(promise: Promise<unknown>, code: ErrorCode, pattern?: RegExp): Promise<ServingError> {
  let caught: unknown;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof ServingError, `expected ServingError ${code}, got ${String(caught)}`);
  assert.equal(caught.code, code, caught.message);
  if (pattern) assert.match(caught.message, pattern);
  return caught;
}

/** Names in the cache dir (none when it was never created). */
async function cacheContents(cacheDir: string): Promise<string[]> {
  try {
    return (await readdir(cacheDir)).sort();
  } catch {
    return [];
  }
}

async function assertTritonLayout(dir: string, name = 'config.pbtxt'): Promise<void> {
  assert.ok((await stat(path.join(dir, name))).isFile(), `${dir}/${name} exists`);
  assert.ok((await stat(path.join(dir, '1', 'model.onnx'))).isFile(), `${dir}/1/model.onnx exists`);
}

// ---------------------------------------------------------------------------

describe('parseS3Uri', () => {
  it('parses bucket and prefix and normalises the prefix', () => {
    assert.deepEqual(parseS3Uri('s3://models/prefix/'), { bucket: 'models', prefix: 'prefix/', uri: 's3://models/prefix/' });
    assert.deepEqual(parseS3Uri('s3://models/a/b'), { bucket: 'models', prefix: 'a/b/', uri: 's3://models/a/b/' });
    assert.deepEqual(parseS3Uri('s3://my.bucket-1'), { bucket: 'my.bucket-1', prefix: '', uri: 's3://my.bucket-1/' });
    assert.deepEqual(parseS3Uri('S3://models/'), { bucket: 'models', prefix: '', uri: 's3://models/' });
    assert.ok(isS3Uri(' s3://x/'));
    assert.ok(!isS3Uri('/opt/ml/model'));
  });

  it('rejects other schemes and bad bucket names with the reason', () => {
    assert.throws(() => parseS3Uri('gs://models/x/'), /unsupported scheme 'gs:'/);
    assert.throws(() => parseS3Uri('/opt/ml/model'), /expected s3:\/\/bucket\/prefix\//);
    assert.throws(() => parseS3Uri('s3://'), /bucket name is missing/);
    assert.throws(() => parseS3Uri('s3:///prefix'), /bucket name is missing/);
    assert.throws(() => parseS3Uri('s3://My_Bucket/'), /bad bucket name 'My_Bucket'/);
    assert.throws(() => parseS3Uri('s3://ab/'), /3 to 63 characters/);
    assert.throws(() => parseS3Uri('s3://a..b/'), /adjacent dots/);
    assert.throws(() => parseS3Uri('s3://192.168.1.1/'), /IP address/);
    assert.throws(() => parseS3Uri('s3://models/a/../b/'), /"\." or "\.\." segment/);
    assert.throws(() => parseS3Uri('s3://models//a'), /starts with "\/"/);
  });
});

describe('S3ModelSource', () => {
  it('localizes a tarball into the cache in Triton layout, named by its ETag', async () => {
    await upload(`${PREFIX}add_sub.tar.gz`, archive('add_sub'));
    const { source, cacheDir, downloads } = harness();
    assert.equal(source.description, SOURCE_URI);
    const local = await source.localize('add_sub.tar.gz');
    assert.equal(local.target, 'add_sub.tar.gz');
    assert.ok(local.dir.startsWith(cacheDir + path.sep));
    await assertTritonLayout(local.dir);
    const head = await source.head('add_sub.tar.gz');
    assert.ok(head);
    assert.equal(local.version, head.etag);
    assert.equal(head.version, head.etag);
    assert.match(head.etag, /^[0-9a-f]{32}$/);
    assert.equal(head.sizeBytes, archive('add_sub').length);
    assert.equal(downloads.length, 1);
    assert.equal(downloads[0]?.bytes, archive('add_sub').length);
    assert.equal(downloads[0]?.key, `${PREFIX}add_sub.tar.gz`);
    assert.equal(source.bytesDownloaded, archive('add_sub').length);
    // Without a suffix, the target is looked up as `<target>.tar.gz`.
    const bare = await source.localize('add_sub');
    assert.equal(bare.target, 'add_sub');
    assert.equal(bare.dir, local.dir);
  });

  it('reuses the cached entry without a GetObject, also after a restart', async () => {
    const key = `${PREFIX}reuse.tar.gz`;
    await upload(key, archive('add_sub'));
    const { source, restart, downloads } = harness();
    const first = await source.localize('reuse.tar.gz');
    assert.equal(proxy.gets(key), 1);
    assert.equal(proxy.heads(key), 0, 'nothing cached: the GetObject alone says what the object is, no HeadObject');
    const second = await source.localize('reuse.tar.gz');
    const third = await restart().localize('reuse.tar.gz');
    assert.equal(proxy.gets(key), 1, 'no GetObject for a cached ETag');
    assert.equal(proxy.heads(key), 2, 'a cached copy is checked with one HeadObject per localization, also after a restart');
    assert.equal(second.dir, first.dir);
    assert.equal(third.dir, first.dir);
    assert.equal(third.version, first.version);
    assert.equal(downloads.length, 1);
  });

  it('single flight: 16 concurrent localizations of a cold target cause one GET and one extraction', async () => {
    const key = `${PREFIX}team/b.tar.gz`;
    await upload(key, archive('big'));
    const { source, cacheDir, downloads } = harness();
    const results = await Promise.all(Array.from({ length: 16 }, () => source.localize('team/b.tar.gz')));
    assert.equal(proxy.gets(key), 1);
    assert.equal(proxy.heads(key), 0);
    assert.equal(downloads.length, 1);
    assert.equal(new Set(results.map((r) => r.dir)).size, 1);
    await assertTritonLayout(results[0]?.dir ?? '');
    const entries = await cacheContents(cacheDir);
    assert.equal(entries.length, 1, `one cache entry: ${entries.join(', ')}`);
  });

  it('NoSuchKey is MODEL_NOT_FOUND naming the target and the keys tried under the prefix, never the bucket or prefix', async () => {
    const { source, cacheDir } = harness();
    const hint = '; POST /v2/repository/index (gRPC: RepositoryIndex) lists the models it holds';
    const missing = await rejectsWith(source.localize('missing.tar.gz'), 'MODEL_NOT_FOUND');
    assert.equal(missing.message, `model 'missing.tar.gz' not found in the model source (S3 prefix)${hint}`);
    await assert.rejects(source.localize('team/missing'), (err: ServingError) => {
      assert.equal(err.message, `model 'team/missing' not found in the model source (S3 prefix; tried team/missing.tar.gz, team/missing.tgz)${hint}`);
      assert.deepEqual(err.details, { uris: ['team/missing.tar.gz', 'team/missing.tgz'] });
      return true;
    });
    assert.equal(await source.head('missing.tar.gz'), undefined);
    assert.equal(proxy.gets(`${PREFIX}missing.tar.gz`), 1, 'one GetObject, not retried');
    assert.equal(proxy.gets(`${PREFIX}team/missing.tar.gz`) + proxy.gets(`${PREFIX}team/missing.tgz`), 2, 'one per candidate key');
    assert.deepEqual(await cacheContents(cacheDir), []);
    await rejectsWith(source.localize('../etc/passwd'), 'INVALID_TARGET');
  });

  it('a new object under the same key has a new ETag: head() tells, localize() fetches it and drops the old entry once released', async () => {
    const key = `${PREFIX}versioned.tar.gz`;
    await upload(key, archive('add_sub'));
    const { source, cacheDir, downloads } = harness();
    const v1 = await source.localize('versioned.tar.gz');
    assert.equal((await source.head('versioned.tar.gz'))?.etag, v1.version, 'unchanged: still current');

    await upload(key, archive('add_sub_8'));
    const head = await source.head('versioned.tar.gz');
    assert.ok(head);
    assert.notEqual(head.etag, v1.version, 'the registry sees the model is stale');
    const v2 = await source.localize('versioned.tar.gz');
    assert.equal(v2.version, head.etag);
    assert.notEqual(v2.dir, v1.dir);
    assert.equal(proxy.gets(key), 2);
    assert.equal(downloads.length, 2);
    await assertTritonLayout(v2.dir);
    assert.match(await readFile(path.join(v2.dir, 'config.pbtxt'), 'utf8'), /dims: \[ 8 \]/);
    assert.ok(existsSync(v1.dir), 'the superseded entry stays while a loaded model uses it');
    v1.release();
    await source.cache.settled();
    assert.ok(!existsSync(path.dirname(v1.dir)), 'the superseded entry is removed once released');
    assert.equal((await cacheContents(cacheDir)).length, 1);
  });

  it('a corrupt archive is ARCHIVE_REJECTED, not retried, and leaves nothing in the cache', async () => {
    const notGzip = `${PREFIX}corrupt.tar.gz`;
    const truncated = `${PREFIX}truncated.tar.gz`;
    await upload(notGzip, randomBytes(4096));
    const good = archive('big');
    await upload(truncated, good.subarray(0, Math.floor(good.length / 2)));
    const { source, cacheDir } = harness();
    await rejectsWith(source.localize('corrupt.tar.gz'), 'ARCHIVE_REJECTED', /corrupt\.tar\.gz/);
    await rejectsWith(source.localize('truncated.tar.gz'), 'ARCHIVE_REJECTED', /truncated\.tar\.gz/);
    assert.equal(proxy.gets(notGzip), 1);
    assert.equal(proxy.gets(truncated), 1);
    assert.deepEqual(await cacheContents(cacheDir), []);
  });

  it('a hostile archive (`..` entry) is ARCHIVE_REJECTED and writes nothing outside', async () => {
    await upload(
      `${PREFIX}hostile.tar.gz`,
      tgz([
        { name: 'config.pbtxt', body: '' },
        { name: '../escaped.txt', body: 'pwned' },
      ]),
    );
    const { source, cacheDir } = harness();
    await rejectsWith(source.localize('hostile.tar.gz'), 'ARCHIVE_REJECTED', /'\.\.\/escaped\.txt' rejected/);
    assert.deepEqual(await cacheContents(cacheDir), []);
    assert.ok(!existsSync(path.join(work, 'escaped.txt')));
  });

  it('401/403 is ACCESS_DENIED without retries', async () => {
    const key = `${PREFIX}add_sub.tar.gz`;
    await upload(key, archive('add_sub'));
    const before = proxy.heads(key) + proxy.gets(key);
    const { source } = harness({ client: s3Client(proxy.url, { accessKeyId: 'WRONG', secretAccessKey: 'WRONG' }) });
    await rejectsWith(source.localize('add_sub.tar.gz'), 'ACCESS_DENIED', /add_sub\.tar\.gz/);
    assert.equal(proxy.heads(key) + proxy.gets(key) - before, 1);
  });

  it('throttling (503 SlowDown) is retried with backoff, then succeeds', async () => {
    const key = `${PREFIX}throttled.tar.gz`;
    await upload(key, archive('add_sub'));
    const { source } = harness();
    proxy.failNext = 2;
    const local = await source.localize('throttled.tar.gz');
    await assertTritonLayout(local.dir);
    assert.equal(proxy.heads(key), 0);
    assert.equal(proxy.gets(key), 3, 'two throttled GetObjects, then the one that succeeds');
  });

  it('an unreachable store is UPSTREAM_UNAVAILABLE after the retries, within the bounded time', async () => {
    const closedPort = await freePort();
    const { source, cacheDir } = harness({ client: s3Client(`http://127.0.0.1:${closedPort}`) });
    const started = performance.now();
    const err = await rejectsWith(source.localize('add_sub.tar.gz'), 'UPSTREAM_UNAVAILABLE', /gave up after 3 attempts/);
    assert.ok(performance.now() - started < FAST_RETRY.maxTotalMs);
    assert.match(err.message, /ECONNREFUSED/);
    assert.equal(err.model, 'add_sub.tar.gz');
    assert.deepEqual(await cacheContents(cacheDir), []);

    // maxTotalMs bounds the retries even when many attempts are allowed.
    const bounded = harness({
      client: s3Client(`http://127.0.0.1:${closedPort}`),
      retry: { attempts: 100, baseDelayMs: 100, maxTotalMs: 600 },
    });
    const t0 = performance.now();
    const e2 = await rejectsWith(bounded.source.localize('add_sub.tar.gz'), 'UPSTREAM_UNAVAILABLE');
    assert.ok(performance.now() - t0 < 1_000, `gave up in ${Math.round(performance.now() - t0)} ms`);
    assert.ok(Number(e2.details?.attempts) < 10);
  });

  it('a store that accepts but never answers is UPSTREAM_UNAVAILABLE within the bounded time', async () => {
    const sockets = new Set<net.Socket>();
    const blackHole = net.createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => blackHole.listen(0, '127.0.0.1', resolve));
    try {
      const port = (blackHole.address() as AddressInfo).port;
      const { source } = harness({
        client: s3Client(`http://127.0.0.1:${port}`),
        retry: { attempts: 3, baseDelayMs: 20, maxTotalMs: 800 },
      });
      const started = performance.now();
      await rejectsWith(source.localize('add_sub.tar.gz'), 'UPSTREAM_UNAVAILABLE', /did not answer/);
      assert.ok(performance.now() - started < 1_500, `gave up in ${Math.round(performance.now() - started)} ms`);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => blackHole.close(() => resolve()));
    }
  });

  it('a connection cut mid-stream is retried and the clean attempt succeeds', async () => {
    const key = `${PREFIX}cut-once.tar.gz`;
    await upload(key, archive('big'));
    const { source, cacheDir, downloads } = harness();
    proxy.cutNextGets = 1;
    const local = await source.localize('cut-once.tar.gz');
    assert.equal(proxy.gets(key), 2);
    await assertTritonLayout(local.dir);
    const weights = await stat(path.join(local.dir, '1', 'weights.bin'));
    assert.equal(weights.size, 1024 * 1024);
    assert.equal(downloads.length, 1);
    assert.equal(downloads[0]?.attempts, 2);
    const received = downloads[0]?.bytes ?? 0;
    assert.ok(received > archive('big').length, `bytes over both attempts: ${received}`);
    assert.equal((await cacheContents(cacheDir)).length, 1, 'one entry and no temp leftovers');
  });

  it('a connection cut on every attempt is UPSTREAM_UNAVAILABLE and leaves nothing half-written', async () => {
    const key = `${PREFIX}cut-always.tar.gz`;
    await upload(key, archive('big'));
    const { source, cacheDir, downloads } = harness();
    proxy.cutNextGets = 100;
    try {
      await rejectsWith(source.localize('cut-always.tar.gz'), 'UPSTREAM_UNAVAILABLE', /gave up after 3 attempts/);
    } finally {
      proxy.cutNextGets = 0;
    }
    assert.equal(proxy.gets(key), 3);
    assert.equal(downloads.length, 0);
    assert.deepEqual(await cacheContents(cacheDir), []);
  });

  it('a body that stalls mid-stream is dropped after the idle timeout and retried', async () => {
    const key = `${PREFIX}stall-once.tar.gz`;
    await upload(key, archive('big'));
    const { source, cacheDir } = harness({ idleTimeoutMs: 300 });
    proxy.cutNextGets = 1;
    proxy.stallInsteadOfCut = true;
    try {
      const started = performance.now();
      const local = await source.localize('stall-once.tar.gz');
      assert.ok(performance.now() - started >= 300);
      await assertTritonLayout(local.dir);
    } finally {
      proxy.stallInsteadOfCut = false;
      proxy.cutNextGets = 0;
    }
    assert.equal(proxy.gets(key), 2);
    assert.equal((await cacheContents(cacheDir)).length, 1);
  });

  it('a caller that aborts stops waiting; the shared download still completes', async () => {
    const key = `${PREFIX}abort.tar.gz`;
    await upload(key, archive('big'));
    const { source } = harness();
    const controller = new AbortController();
    const abandoned = source.localize('abort.tar.gz', controller.signal);
    const waiting = source.localize('abort.tar.gz');
    controller.abort();
    await rejectsWith(abandoned, 'CANCELLED');
    await assertTritonLayout((await waiting).dir);
    assert.equal(proxy.gets(key), 1);
    await rejectsWith(source.localize('abort.tar.gz', AbortSignal.abort()), 'CANCELLED');
  });

  it('list() pages through ListObjectsV2 and returns the archives under the prefix', async () => {
    const listPrefix = 'listing/';
    const archiveKeys = ['a.tar.gz', 'b.tgz', 'c.tar.gz', 'd.tar.gz', 'team/e.tar.gz', 'team/f.tgz', 'z.tar.gz'];
    const sizes = new Map<string, number>();
    for (const [i, rel] of archiveKeys.entries()) {
      const body = randomBytes(100 + i);
      sizes.set(rel, body.length);
      await upload(`${listPrefix}${rel}`, body);
    }
    await upload(`${listPrefix}README.md`, Buffer.from('not a model'));
    await upload(`${listPrefix}notes.tar.gz.txt`, Buffer.from('not a model'));
    await upload('elsewhere/outside.tar.gz', Buffer.from('outside the prefix'));

    const { source } = harness({ uri: `s3://${BUCKET}/listing`, listPageSize: 2 });
    assert.equal(source.description, `s3://${BUCKET}/listing/`);
    const listingsBefore = proxy.listings();
    const entries = await source.list();
    assert.ok(proxy.listings() - listingsBefore >= 5, 'more than one page was requested');
    assert.deepEqual(
      entries.map((e) => e.target),
      [...archiveKeys].sort(),
    );
    for (const entry of entries) {
      assert.equal(entry.sizeBytes, sizes.get(entry.target));
      assert.ok(entry.lastModified instanceof Date);
    }
  });

  it('different targets extracted at the same time never mix files', async () => {
    const names = ['mix-a', 'mix-b', 'mix-c', 'mix-d'];
    const bodies = names.map((_, i) => randomBytes(256 * 1024 + i));
    for (const [i, name] of names.entries()) {
      await upload(
        `${PREFIX}${name}.tar.gz`,
        tgz([
          { name: `${name}/config.pbtxt`, body: `name: "${name}"` },
          { name: `${name}/1/model.onnx`, body: bodies[i]! },
          { name: `${name}/1/only-in-${name}.txt`, body: name },
        ]),
      );
    }
    const { source } = harness();
    const locals = await Promise.all(names.map((name) => source.localize(`${name}.tar.gz`)));
    for (const [i, local] of locals.entries()) {
      const name = names[i]!;
      assert.deepEqual((await readdir(local.dir)).sort(), [name]);
      assert.deepEqual((await readdir(path.join(local.dir, name, '1'))).sort(), ['model.onnx', `only-in-${name}.txt`]);
      assert.ok((await readFile(path.join(local.dir, name, '1', 'model.onnx'))).equals(bodies[i]!), `${name} holds its own bytes`);
      local.release();
    }
  });

  it('list() tells which archives are cached at their current ETag', async () => {
    await upload(`${PREFIX}listed/one.tar.gz`, archive('add_sub'));
    await upload(`${PREFIX}listed/two.tar.gz`, archive('add_sub'));
    const { source } = harness({ uri: `s3://${BUCKET}/${PREFIX}listed/` });
    const one = await source.localize('one.tar.gz');
    const cachedOf = async () => Object.fromEntries((await source.list()).map((e) => [e.target, e.cached]));
    assert.deepEqual(await cachedOf(), { 'one.tar.gz': true, 'two.tar.gz': false });
    await upload(`${PREFIX}listed/one.tar.gz`, archive('add_sub_8'));
    assert.deepEqual(await cachedOf(), { 'one.tar.gz': false, 'two.tar.gz': false }, 'a replaced object is no longer cached at its ETag');
    one.release();
  });

  it('under a byte budget, released models are evicted least recently used first and fetched again on demand', async () => {
    const names = ['lru-a', 'lru-b', 'lru-c'];
    for (const name of names) await upload(`${PREFIX}${name}.tar.gz`, archive('big'));
    const entryBytes = await (async () => {
      const probe = harness();
      const local = await probe.source.localize('lru-a.tar.gz');
      local.release();
      return probe.source.cache.usedBytes;
    })();
    // Room for two extracted copies, not three.
    const cacheDir = path.join(work, 'lru-cache');
    const cache = new DiskCache({ dir: cacheDir, maxBytes: Math.floor(entryBytes * 2.5) });
    const { source } = harness({ cache, cacheDir });
    const getsBefore = (name: string) => proxy.gets(`${PREFIX}${name}.tar.gz`);
    const before = names.map(getsBefore);
    for (const name of ['lru-a', 'lru-b']) (await source.localize(`${name}.tar.gz`)).release();
    (await source.localize('lru-a.tar.gz')).release(); // a is now more recently used than b
    const held = await source.localize('lru-c.tar.gz');
    await cache.settled();
    assert.equal(cache.hasAny(`s3://${BUCKET}/${PREFIX}lru-b.tar.gz`), false, 'b, least recently used, was evicted');
    assert.equal(cache.hasAny(`s3://${BUCKET}/${PREFIX}lru-a.tar.gz`), true);
    assert.ok(cache.usedBytes <= cache.maxBytes);
    // b comes back with a new download; a, still cached, does not need one.
    (await source.localize('lru-b.tar.gz')).release();
    assert.deepEqual(names.map(getsBefore), [before[0]! + 1, before[1]! + 2, before[2]! + 1]);
    held.release();
  });

  it('builds its own client from endpoint/region (path-style) with the default credential chain', async () => {
    await upload(`${PREFIX}add_sub.tar.gz`, archive('add_sub'));
    const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };
    process.env.AWS_ACCESS_KEY_ID = CREDENTIALS.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = CREDENTIALS.secretAccessKey;
    try {
      const cacheDir = path.join(work, 'cache-default-client');
      const source = new S3ModelSource({ uri: SOURCE_URI, cacheDir, limits: LIMITS, endpoint: proxy.url, region: 'us-east-1' });
      await assertTritonLayout((await source.localize('add_sub.tar.gz')).dir);
    } finally {
      restoreEnv('AWS_ACCESS_KEY_ID', saved.id);
      restoreEnv('AWS_SECRET_ACCESS_KEY', saved.secret);
    }
  });
});

function restoreEnv(name: string, value: string | undefined): void {
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
