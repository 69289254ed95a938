/**
 * The S3 flow over time, through the real server: an object replaced under
 * the same key is swapped in after MME_REVALIDATE_SECONDS (requests in flight
 * finish on the old version, whose disk copy then goes), a deleted object
 * becomes a 404, S3 trouble during a check keeps the cached copy serving,
 * MME_PRELOAD warms models without delaying /ping, and the disk cache answers
 * 507 when a model cannot fit (its byte budget, or a really full disk).
 * s3rver on loopback behind a counting proxy; the container uses the real SDK.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { addSub, packTarGz, scale, sizedModel, writeModelDir, type ZooModel } from '../../examples/models/zoo.js';
import { startProxiedBucket, type S3Proxy } from '../support/s3-proxy.js';
import type { LoopbackS3 } from '../support/s3rver.js';
import { slowModel } from '../support/slow-model.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer, type TestServer } from '../support/test-server.js';

const BUCKET = 'models';
const PREFIX = 'prefix/';
const ctx = new Cleanups();
let s3: LoopbackS3;
let proxy: S3Proxy;
let work: string;

before(async () => {
  work = await tempDir(ctx);
  ({ s3, proxy } = await startProxiedBucket(ctx, BUCKET));
});

after(() => ctx.run());

let archiveCount = 0;
async function archive(name: string, model: ZooModel, extra?: Buffer): Promise<Buffer> {
  archiveCount += 1;
  const staging = path.join(work, `staging-${archiveCount}`);
  const dir = await writeModelDir(staging, name, model);
  if (extra) await writeFile(path.join(dir, '1', 'extra.bin'), extra);
  const file = path.join(work, `${name}-${archiveCount}.tar.gz`);
  await packTarGz(dir, file);
  return readFile(file);
}

async function server(env: Record<string, string>, cacheDir?: string): Promise<TestServer> {
  const s = await startTestServer({
    modelSource: `s3://${BUCKET}/${PREFIX}`,
    cacheDir: cacheDir ?? path.join(await tempDir(ctx), 'cache'),
    env: { AWS_ENDPOINT_URL_S3: proxy.url, MME_LOG_LEVEL: 'info', ...env },
  });
  ctx.after(() => s.close());
  return s;
}

function invoke(s: TestServer, target: string, inputs: Record<string, unknown>[]) {
  return request(`${s.url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': target }, json: { inputs } });
}

const row = [1, 2, 3, 4];
const scaleInput = [input('INPUT0', 'FP32', [1, 4], row)];

async function cacheEntries(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((n) => !n.startsWith('.'));
}

/** Polls `check` (bounded): for effects that happen after the response, like unloading and disk cleanup. */
async function eventually(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('revalidation (MME_REVALIDATE_SECONDS)', () => {
  it('a replaced object is swapped in at the first request after the period, with one HeadObject, and the old copy removed', async () => {
    const key = `${PREFIX}swap.tar.gz`;
    await s3.upload(key, await archive('swap', scale(2)));
    const cacheDir = path.join(await tempDir(ctx), 'cache');
    const s = await server({ MME_REVALIDATE_SECONDS: '1' }, cacheDir);

    const first = await invoke(s, 'swap.tar.gz', scaleInput);
    assert.equal(first.status, 200, first.text);
    assert.deepEqual(first.body.outputs[0].data, [2, 4, 6, 8]);
    const headsAfterLoad = proxy.heads(key);

    await s3.upload(key, await archive('swap', scale(3)));
    const within = await invoke(s, 'swap.tar.gz', scaleInput);
    assert.deepEqual(within.body.outputs[0].data, [2, 4, 6, 8], 'within the period the cached version is trusted');
    assert.equal(proxy.heads(key), headsAfterLoad, 'and S3 is not asked');

    await sleep(1100);
    const after = await invoke(s, 'swap.tar.gz', scaleInput);
    assert.equal(after.status, 200, after.text);
    assert.deepEqual(after.body.outputs[0].data, [3, 6, 9, 12], 'the new object is served');
    assert.equal(proxy.gets(key), 2);
    await eventually('the superseded cache entry is removed', async () => (await cacheEntries(cacheDir)).length === 1);
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    assert.match(metrics, /onnx_mme_model_revalidations_total\{result="changed"\} 1/);
    assert.ok(s.logs.some((l) => l['msg'] === 'model changed in the source; loading the new version' && l['model'] === 'swap.tar.gz'));
  });

  it('a request in flight on the old version finishes on it while new requests get the new one', async () => {
    const key = `${PREFIX}slow.tar.gz`;
    const width = 128;
    // Same interface, different answer: output = input × (1/1.001)^layers.
    const v2 = await archive('slow', slowModel({ width, layers: 1, rowsInput: true }));
    // The request picks the work: about 2 s per run on this kind of machine, far longer than the 0.2 s period.
    await s3.upload(key, await archive('slow', slowModel({ width, layers: 1500, rowsInput: true })));
    const s = await server({ MME_REVALIDATE_SECONDS: '0.2', MME_RUNTIME_WORKERS: '2' });
    const x = Array.from({ length: width }, (_, i) => i + 1);
    const body = [input('INPUT0', 'FP32', [1, width], x), input('SHAPE', 'INT64', [2], [8192, width])];

    // The first request loads the old version (the period starts there) and runs on it.
    const inflight = invoke(s, 'slow.tar.gz', body);
    await eventually('the old version is loaded and running', () => s.running.service.inflightCount > 0 && s.logs.some((l) => l['msg'] === 'model loaded'));
    await s3.upload(key, v2);
    await sleep(300); // the period passes while that request runs: the next request revalidates
    const fresh = await invoke(s, 'slow.tar.gz', body);
    const old = await inflight;
    const swap = s.logs.find((l) => l['msg'] === 'model changed in the source; loading the new version');
    assert.equal(swap?.['inflight'], 1, 'the swap happened while the old version had a request in flight');
    assert.equal(old.status, 200, old.text);
    assert.equal(fresh.status, 200, fresh.text);
    const ratio = (r: typeof old) => (r.body.outputs[0].data as number[])[9]! / x[9]!;
    assert.ok(Math.abs(ratio(old) - 1.001 ** -1500) < 1e-3, `in-flight request answered by the old version (ratio ${ratio(old)})`);
    assert.ok(Math.abs(ratio(fresh) - 1.001 ** -1) < 1e-4, `new request answered by the new version (ratio ${ratio(fresh)})`);
  });

  it('a deleted object is a 404 after revalidation and its cached copy is removed', async () => {
    const key = `${PREFIX}gone.tar.gz`;
    await s3.upload(key, await archive('gone', scale(5)));
    const cacheDir = path.join(await tempDir(ctx), 'cache');
    const s = await server({ MME_REVALIDATE_SECONDS: '0.2' }, cacheDir);
    assert.equal((await invoke(s, 'gone.tar.gz', scaleInput)).status, 200);
    await s3.remove(key);
    await sleep(250);
    const r = await invoke(s, 'gone.tar.gz', scaleInput);
    assert.equal(r.status, 404, r.text);
    assert.equal(r.body.code, 'MODEL_NOT_FOUND');
    assert.match(r.body.error, /gone\.tar\.gz/);
    await eventually('the deleted model leaves the disk cache', async () => (await cacheEntries(cacheDir)).length === 0);
  });

  it('S3 failing during a check keeps the cached copy serving, and the next period checks again', async () => {
    const key = `${PREFIX}sturdy.tar.gz`;
    await s3.upload(key, await archive('sturdy', scale(7)));
    const s = await server({ MME_REVALIDATE_SECONDS: '0.2' });
    assert.equal((await invoke(s, 'sturdy.tar.gz', scaleInput)).status, 200);
    await sleep(250);
    proxy.failNext = 1000;
    let r;
    try {
      r = await invoke(s, 'sturdy.tar.gz', scaleInput);
    } finally {
      proxy.failNext = 0;
    }
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body.outputs[0].data, [7, 14, 21, 28]);
    assert.ok(s.logs.some((l) => l['msg'] === 'could not check the model source; serving the cached copy'));
    const heads = proxy.heads(key);
    await sleep(250);
    assert.equal((await invoke(s, 'sturdy.tar.gz', scaleInput)).status, 200);
    assert.equal(proxy.heads(key), heads + 1, 'checked again after the next period');
  });

  it('MME_REVALIDATE_SECONDS=0 never asks S3 again once a model is loaded', async () => {
    const key = `${PREFIX}pinned.tar.gz`;
    await s3.upload(key, await archive('pinned', scale(2)));
    const s = await server({ MME_REVALIDATE_SECONDS: '0' });
    assert.equal((await invoke(s, 'pinned.tar.gz', scaleInput)).status, 200);
    const heads = proxy.heads(key);
    await s3.upload(key, await archive('pinned', scale(3)));
    await sleep(100);
    const r = await invoke(s, 'pinned.tar.gz', scaleInput);
    assert.deepEqual(r.body.outputs[0].data, [2, 4, 6, 8]);
    assert.equal(proxy.heads(key), heads);
  });
});

describe('MME_PRELOAD', () => {
  it('loads the listed targets in the background: /ping answers while a download is stuck, the model is warm afterwards', async () => {
    const key = `${PREFIX}pre/warm.tar.gz`;
    await s3.upload(key, await archive('warm', scale(4), randomBytes(400 * 1024)));
    proxy.cutAfterBytes = 64 * 1024;
    proxy.stallInsteadOfCut = true;
    proxy.cutNextGets = 1;
    try {
      const s = await server({ MME_PRELOAD: 'pre/warm.tar.gz, pre/missing.tar.gz' });
      await eventually('the preload download is stuck mid-body', () => proxy.stalledCount === 1);
      const ping = await request(`${s.url}/ping`);
      assert.equal(ping.status, 200, '/ping does not wait for preloads');
      proxy.releaseStalls(); // the cut is retried and the download completes
      await eventually('the preload finished', () => s.logs.some((l) => l['msg'] === 'preloaded model' && l['model'] === 'pre/warm.tar.gz'));
      await eventually('the failed preload is logged', () =>
        s.logs.some((l) => l['msg'] === 'preloading model failed; it will be loaded on first use' && l['model'] === 'pre/missing.tar.gz'),
      );
      const r = await invoke(s, 'pre/warm.tar.gz', scaleInput);
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.body.outputs[0].data, [4, 8, 12, 16]);
      const metrics = await (await fetch(`${s.url}/metrics`)).text();
      assert.match(metrics, /onnx_mme_model_cache_lookups_total\{result="memory"\} 1/, 'the first request found it in memory');
    } finally {
      proxy.stallInsteadOfCut = false;
      proxy.cutNextGets = 0;
      proxy.cutAfterBytes = 200 * 1024;
    }
  });
});

describe('disk cache limits', () => {
  it('a model larger than MME_CACHE_MAX_BYTES is 507 naming it, nothing is cached, other models keep serving', async () => {
    await s3.upload(`${PREFIX}small.tar.gz`, await archive('small', addSub()));
    await s3.upload(`${PREFIX}large.tar.gz`, await archive('large', sizedModel(300_000)));
    const cacheDir = path.join(await tempDir(ctx), 'cache');
    const s = await server({ MME_CACHE_MAX_BYTES: '100000' }, cacheDir);
    const r = await invoke(s, 'large.tar.gz', [input('INPUT0', 'FP32', [1, 4], row)]);
    assert.equal(r.status, 507, r.text);
    assert.equal(r.body.code, 'INSUFFICIENT_STORAGE');
    assert.match(r.body.error, /model 'large\.tar\.gz'/);
    assert.match(r.body.error, /MME_CACHE_MAX_BYTES/);
    // Remembered (no eviction can make room): not tried again for the back-off window, which Retry-After says,
    // and a request inside it is answered from memory with the seconds left.
    assert.equal(r.body.details.wholeBudget, true, r.text);
    assert.equal(r.headers.get('retry-after'), '2', r.text);
    const again = await invoke(s, 'large.tar.gz', [input('INPUT0', 'FP32', [1, 4], row)]);
    assert.equal(again.status, 507, again.text);
    assert.match(again.body.error, /not retried for [12] s/);
    assert.ok(['1', '2'].includes(again.headers.get('retry-after') ?? ''), `Retry-After ${again.headers.get('retry-after')}`);
    assert.deepEqual(await readdir(cacheDir), [], 'no entry and no temporary directory');
    const seq = Array.from({ length: 16 }, (_, i) => i);
    const ok = await invoke(s, 'small.tar.gz', [input('INPUT0', 'FP32', [1, 16], seq), input('INPUT1', 'FP32', [1, 16], seq)]);
    assert.equal(ok.status, 200, ok.text);
  });

  it('a full disk (ENOSPC on a 2 MiB tmpfs) is 507, nothing half-written is left, and the server keeps serving', async (t) => {
    const mountPoint = path.join(await tempDir(ctx), 'tiny-volume');
    await mkdir(mountPoint);
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', mountPoint], { stdio: 'ignore' });
    } catch {
      t.skip('mounting a tmpfs needs root (CAP_SYS_ADMIN); the budget test above covers the 507 path');
      return;
    }
    t.after(() => execFileSync('umount', ['-l', mountPoint], { stdio: 'ignore' }));
    await s3.upload(`${PREFIX}disk/full.tar.gz`, await archive('full', scale(2), randomBytes(3 * 1024 * 1024)));
    await s3.upload(`${PREFIX}disk/fits.tar.gz`, await archive('fits', scale(6)));
    // A budget bigger than the volume, so the kernel, not the budget, says no.
    const s = await server({ MME_CACHE_MAX_BYTES: String(1024 ** 3) }, mountPoint);
    const r = await invoke(s, 'disk/full.tar.gz', scaleInput);
    assert.equal(r.status, 507, r.text);
    assert.equal(r.body.code, 'INSUFFICIENT_STORAGE');
    assert.match(r.body.error, /disk\/full\.tar\.gz/);
    assert.match(r.body.error, /no space|disk/i);
    assert.deepEqual(await readdir(mountPoint), [], 'the temporary directory was removed');
    const ok = await invoke(s, 'disk/fits.tar.gz', scaleInput);
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.body.outputs[0].data, [6, 12, 18, 24]);
  });
});
