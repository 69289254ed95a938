/**
 * Issue 19, deadlines where a peer can stall: a trickling S3 download (a few
 * bytes a second, so an idle timeout never fires) fails as a retryable 503
 * instead of hanging the request, and SIGTERM while a download is stuck ends
 * the process within MME_SHUTDOWN_TIMEOUT_SECONDS. Real parts: s3rver on
 * loopback behind a trickling proxy, the real SDK, `serve` as a process.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { addSub, packTarGz, writeModelDir } from '../../examples/models/zoo.js';
import { ServingError } from '../../src/errors.js';
import { S3ModelSource } from '../../src/store/s3-source.js';
import { S3Client } from '@aws-sdk/client-s3';
import { S3Proxy } from '../support/s3-proxy.js';
import { startLoopbackS3, S3RVER_CREDENTIALS, type LoopbackS3 } from '../support/s3rver.js';
import { startServe } from '../support/serve-process.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request } from '../support/test-server.js';

const ctx = new Cleanups();
let s3: LoopbackS3;
let proxy: S3Proxy;
let root: string;
const seq16 = Array.from({ length: 16 }, (_, i) => i);
const body = { inputs: [input('INPUT0', 'FP32', [1, 16], seq16), input('INPUT1', 'FP32', [1, 16], seq16)] };
const LIMITS = { maxBytes: 64 * 1024 * 1024, maxEntries: 1000 };

before(async () => {
  s3 = await startLoopbackS3(['models']);
  proxy = new S3Proxy(Number(new URL(s3.endpoint).port), 'models');
  await proxy.start();
  root = await tempDir(ctx);
  await writeModelDir(path.join(root, 'work'), 'add_sub', addSub());
  await packTarGz(path.join(root, 'work'), path.join(root, 'add_sub.tar.gz'));
  const archive = await readFile(path.join(root, 'add_sub.tar.gz'));
  for (const name of ['trickle-source', 'trickle-served', 'stuck', 'healthy']) await s3.upload(`prefix/${name}.tar.gz`, archive);
});

after(async () => {
  proxy.trickleNextGets = 0;
  await proxy?.close();
  await s3?.close();
  await ctx.run();
});

function serveEnv(extra: Record<string, string>, cache: string): Record<string, string> {
  return {
    MME_MODEL_SOURCE: 's3://models/prefix/',
    MME_CACHE_DIR: path.join(root, cache),
    AWS_ENDPOINT_URL_S3: proxy.url,
    AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
    MME_RUNTIME_WORKERS: '1',
    ...extra,
  };
}

const invoke = (url: string, target: string) =>
  request(`${url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': target }, json: body });

describe('a trickling S3 download', () => {
  it('fails as a retryable UPSTREAM_UNAVAILABLE once it falls below the minimum rate, and a healthy download passes the same check', async () => {
    const client = new S3Client({ endpoint: proxy.url, region: 'us-east-1', forcePathStyle: true, credentials: S3RVER_CREDENTIALS, maxAttempts: 1 });
    ctx.after(async () => client.destroy());
    const source = new S3ModelSource({
      uri: 's3://models/prefix/',
      cacheDir: path.join(root, 'source-cache'),
      client,
      limits: LIMITS,
      retry: { attempts: 3, baseDelayMs: 20, maxTotalMs: 2_000 },
      minProgress: { bytesPerSecond: 20_000, windowMs: 500 },
    });
    proxy.trickleNextGets = 100;
    proxy.trickleBytes = 4;
    proxy.trickleEveryMs = 50; // 80 B/s: progress every 50 ms, so an idle timeout would never fire
    const started = performance.now();
    try {
      await assert.rejects(source.localize('trickle-source'), (err: unknown) => {
        assert.ok(err instanceof ServingError);
        assert.equal(err.code, 'UPSTREAM_UNAVAILABLE');
        assert.match(err.message, /trickle-source/);
        assert.match(err.message, /below the minimum of 20000 B\/s/);
        return true;
      });
    } finally {
      proxy.trickleNextGets = 0;
    }
    // One window per attempt: a trickle does not restart the retry budget as progress would.
    assert.ok(performance.now() - started < 5_000, `gave up after ${Math.round(performance.now() - started)} ms`);
    const local = await source.localize('healthy');
    assert.ok(local.dir.length > 0);
  });

  it('a request for a trickling model answers 503 (retryable) instead of hanging', async () => {
    const child = await startServe(serveEnv({ MME_S3_MIN_BYTES_PER_SECOND: '20000', MME_S3_PROGRESS_WINDOW_SECONDS: '1' }, 'served-cache'));
    ctx.after(() => child.kill());
    proxy.trickleNextGets = 100;
    proxy.trickleBytes = 4;
    proxy.trickleEveryMs = 100;
    try {
      const started = performance.now();
      const r = await invoke(child.url, 'trickle-served');
      assert.equal(r.status, 503, r.text);
      assert.equal(r.body.code, 'UPSTREAM_UNAVAILABLE');
      assert.match(r.body.error, /trickle-served/);
      // The retries are spent: come back after the back-off a next attempt would have waited (200 ms · 2³ by
      // default: 2 s), never past the retry budget (10 s).
      assert.equal(r.headers.get('retry-after'), String(r.body.details.retryAfterSeconds), r.text);
      assert.ok(r.body.details.retryAfterSeconds >= 1 && r.body.details.retryAfterSeconds <= 10, r.text);
      assert.ok(performance.now() - started < 10_000);
    } finally {
      proxy.trickleNextGets = 0;
    }
    // Nothing half-written stays: the same model loads once S3 is healthy again.
    assert.equal((await invoke(child.url, 'trickle-served')).status, 200);
  });
});

describe('shutdown with a stuck download', () => {
  it('SIGTERM exits within MME_SHUTDOWN_TIMEOUT_SECONDS although the load never ends', async () => {
    // The rate check off: the download is stuck for good (4 B/s, a byte every 250 ms).
    const child = await startServe(serveEnv({ MME_S3_MIN_BYTES_PER_SECOND: '0', MME_SHUTDOWN_TIMEOUT_SECONDS: '2' }, 'stuck-cache'));
    ctx.after(() => child.kill());
    proxy.trickleNextGets = 100;
    proxy.trickleBytes = 1;
    proxy.trickleEveryMs = 250;
    try {
      const pending = invoke(child.url, 'stuck').catch((err: unknown) => err);
      while (!child.lines.some((l) => l['msg'] === 'downloading model archive from S3')) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 300));
      const started = performance.now();
      child.proc.kill('SIGTERM');
      const code = await child.exited;
      const elapsed = performance.now() - started;
      // 2 s deadline; the margin is for process teardown on a loaded machine, not for waiting.
      assert.ok(elapsed < 2_000 + 1_500, `exited after ${Math.round(elapsed)} ms`);
      assert.equal(code, 0);
      const msgs = child.lines.map((l) => l['msg']);
      assert.ok(msgs.includes('shutdown deadline reached: exiting with work still pending'), JSON.stringify(msgs));
      await pending;
    } finally {
      proxy.trickleNextGets = 0;
    }
  });
});
