/**
 * docs/metrics-and-logs.md, "Progress of long loads": a download from S3 and
 * a load (session creation, warm-up) that last past MME_PROGRESS_LOG_SECONDS
 * log `model load in progress` at that interval, naming the model and the
 * request that started it, with bytes, percent, rate and ETA while
 * downloading; POST /v2/repository/index shows the same beside LOADING.
 * The download is slowed by the S3 proxy (a few KiB per tick).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, it } from 'node:test';
import { addSub, packTarGz, writeModelDir } from '../../examples/models/zoo.js';
import { startProxiedBucket, type S3Proxy } from '../support/s3-proxy.js';
import type { LoopbackS3 } from '../support/s3rver.js';
import { slowModel } from '../support/slow-model.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer, type TestServer } from '../support/test-server.js';

const BUCKET = 'models';
const PREFIX = 'prefix/';
const ctx = new Cleanups();
const seq16 = Array.from({ length: 16 }, (_, i) => i);
let s3: LoopbackS3;
let proxy: S3Proxy;
let work: string;

before(async () => {
  work = await tempDir(ctx);
  ({ s3, proxy } = await startProxiedBucket(ctx, BUCKET));
});

after(() => ctx.run());

interface IndexRow {
  name: string;
  state: string;
  progress?: { phase: string; percent?: number; bytes?: number; total_bytes?: number; bytes_per_second?: number; eta_seconds?: number; elapsed_ms: number };
}

it('a slow S3 download logs its progress at the interval (bytes, percent, rate, ETA, request id) and the index shows LOADING with its percent', async () => {
  const dir = await writeModelDir(path.join(work, 'build'), 'add_sub', addSub());
  // Incompressible padding: the archive is as large as what the proxy must trickle.
  await writeFile(path.join(dir, '1', 'padding.bin'), randomBytes(256 * 1024));
  await packTarGz(path.join(work, 'build'), path.join(work, 'big.tar.gz'));
  const archive = await readFile(path.join(work, 'big.tar.gz'));
  await s3.upload(`${PREFIX}big.tar.gz`, archive);
  const s: TestServer = await startTestServer({
    modelSource: `s3://${BUCKET}/${PREFIX}`,
    cacheDir: path.join(work, 'cache-download'),
    env: { AWS_ENDPOINT_URL_S3: proxy.url, AWS_REGION: 'us-east-1', MME_PROGRESS_LOG_SECONDS: '0.25' },
  });
  ctx.after(() => s.close());
  // ~2.5 s for the archive: 24 KiB every 100 ms.
  proxy.trickleNextGets = 1;
  proxy.trickleBytes = 24 * 1024;
  proxy.trickleEveryMs = 100;
  const invoked = request(`${s.url}/invocations`, {
    method: 'POST',
    headers: { 'X-Amzn-SageMaker-Target-Model': 'big.tar.gz', 'X-Request-Id': 'progress-req-1' },
    json: { inputs: [input('INPUT0', 'FP32', [1, 16], seq16), input('INPUT1', 'FP32', [1, 16], seq16)] },
  });
  const seen: NonNullable<IndexRow['progress']>[] = [];
  for (let i = 0; i < 200 && seen.filter((p) => p.phase === 'downloading' && (p.percent ?? 0) > 0).length < 2; i++) {
    const index = await request(`${s.url}/v2/repository/index`, { method: 'POST', json: {} });
    const row = (index.body as IndexRow[]).find((r) => r.name === 'big.tar.gz');
    if (row?.state === 'LOADING' && row.progress) seen.push(row.progress);
    await sleep(100);
  }
  const r = await invoked;
  assert.equal(r.status, 200, r.text);
  const downloading = seen.filter((p) => p.phase === 'downloading' && p.percent !== undefined);
  assert.ok(downloading.length >= 2, `the index showed ${JSON.stringify(seen)}`);
  for (const p of downloading) {
    assert.equal(p.total_bytes, archive.length);
    assert.ok(p.percent! >= 0 && p.percent! < 100 && p.bytes! < archive.length, JSON.stringify(p));
  }
  const lines = s.logs.filter((l) => l['msg'] === 'model load in progress' && l['model'] === 'big.tar.gz');
  // A line that falls before S3's answer has arrived (a busy machine) has no bytes to tell yet; every later one has.
  const downloadLines = lines.filter((l) => l['phase'] === 'downloading');
  const firstWithBytes = downloadLines.findIndex((l) => l['bytes'] !== undefined);
  const waiting = firstWithBytes < 0 ? downloadLines : downloadLines.slice(0, firstWithBytes);
  for (const l of waiting) assert.ok(l['totalBytes'] === undefined && l['percent'] === undefined, JSON.stringify(l));
  const during = downloadLines.slice(waiting.length);
  assert.ok(during.length >= 3, `${during.length} progress lines with bytes: ${JSON.stringify(lines)}`);
  for (const l of during) {
    assert.equal(l['reqId'], 'progress-req-1');
    assert.equal(l['totalBytes'], archive.length);
    assert.ok(typeof l['bytes'] === 'number' && typeof l['percent'] === 'number' && typeof l['bytesPerSecond'] === 'number', JSON.stringify(l));
  }
  // Steady: the bytes grow from line to line, and an ETA is given once bytes flow.
  const bytes = during.map((l) => l['bytes'] as number);
  assert.ok(bytes[bytes.length - 1]! > bytes[0]!, `bytes ${bytes.join(',')}`);
  assert.ok(
    during.some((l) => typeof l['etaSeconds'] === 'number'),
    'an ETA',
  );
  // The load after it is quiet again: no progress line once the model is loaded.
  const count = lines.length;
  await sleep(600);
  assert.equal(s.logs.filter((l) => l['msg'] === 'model load in progress' && l['model'] === 'big.tar.gz').length, count);
});

it('a slow warm-up logs its phase at the interval', async () => {
  const root = path.join(work, 'local');
  const slow = slowModel({ rows: 2048, layers: 32 });
  const config = `${slow.config}model_warmup [ { name: "heavy" batch_size: 1 count: 3 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 1, 512 ] zero_data: true } } } ]\n`;
  await writeModelDir(root, 'slow', { onnx: slow.onnx, config });
  const s = await startTestServer({ modelSource: root, cacheDir: path.join(work, 'cache-local'), env: { MME_PROGRESS_LOG_SECONDS: '0.1' } });
  ctx.after(() => s.close());
  // Loaded on first use (no load API needed, whatever MME_MODEL_CONTROL allows).
  const r = await request(`${s.url}/v2/models/slow/infer`, {
    method: 'POST',
    json: { inputs: [input('INPUT0', 'FP32', [1, 512], new Array(512).fill(0))] },
    headers: { 'X-Request-Id': 'progress-req-2' },
  });
  assert.equal(r.status, 200, r.text);
  const lines = s.logs.filter((l) => l['msg'] === 'model load in progress' && l['model'] === 'slow');
  const warming = lines.filter((l) => l['phase'] === 'warming up');
  assert.ok(warming.length >= 2, `progress lines: ${JSON.stringify(lines)}`);
  for (const l of warming) {
    assert.equal(l['reqId'], 'progress-req-2');
    assert.equal(l['bytes'], undefined, 'no download figures outside the download');
  }
});

it('a SageMaker load (POST /models) of a slow model logs its phases too', async () => {
  const root = path.join(work, 'managed');
  const slow = slowModel({ rows: 2048, layers: 32 });
  const config = `${slow.config}model_warmup [ { name: "heavy" batch_size: 1 count: 3 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 1, 512 ] zero_data: true } } } ]\n`;
  const dir = await writeModelDir(root, 'slowm', { onnx: slow.onnx, config });
  const s = await startTestServer({
    modelSource: path.join(work, 'local'),
    cacheDir: path.join(work, 'cache-managed'),
    env: { MME_PROGRESS_LOG_SECONDS: '0.1', SAGEMAKER_MULTI_MODEL: 'true', MME_MODEL_URL_ROOTS: root },
  });
  ctx.after(() => s.close());
  const r = await request(`${s.url}/models`, { method: 'POST', json: { model_name: 'slowm', url: dir } });
  assert.equal(r.status, 200, r.text);
  const lines = s.logs.filter((l) => l['msg'] === 'model load in progress' && l['model'] === 'slowm');
  assert.ok(
    lines.some((l) => l['phase'] === 'warming up'),
    `progress lines: ${JSON.stringify(lines)}`,
  );
});
