/**
 * docs/security.md, "Work one request may cause": requests for a target the
 * S3 source does not hold are answered from memory for
 * MME_MISSING_TARGET_TTL_SECONDS (50 requests for one missing key cost at most
 * 6 S3 requests), an object uploaded meanwhile is found once the TTL ends,
 * and a spray of distinct missing keys is bounded by
 * MME_MISSING_TARGET_LOOKUPS_PER_SECOND (429 with Retry-After past it).
 * s3rver behind the counting proxy; the server uses the real AWS SDK.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, it } from 'node:test';
import { addSub, packTarGz, writeModelDir } from '../../examples/models/zoo.js';
import { metricValue } from '../support/metric-value.js';
import { startProxiedBucket, type S3Proxy } from '../support/s3-proxy.js';
import type { LoopbackS3 } from '../support/s3rver.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { addSubBody, request, startTestServer, type TestServer } from '../support/test-server.js';

const BUCKET = 'models';
const PREFIX = 'prefix/';
const ctx = new Cleanups();
const seq16 = Array.from({ length: 16 }, (_, i) => i);
const body = addSubBody();
let s3: LoopbackS3;
let proxy: S3Proxy;
let work: string;
let archive: Buffer;

before(async () => {
  work = await tempDir(ctx);
  ({ s3, proxy } = await startProxiedBucket(ctx, BUCKET));
  await writeModelDir(path.join(work, 'build'), 'add_sub', addSub());
  await packTarGz(path.join(work, 'build'), path.join(work, 'add_sub.tar.gz'));
  archive = await readFile(path.join(work, 'add_sub.tar.gz'));
});

after(() => ctx.run());

async function server(name: string, env: Record<string, string> = {}): Promise<TestServer> {
  const s = await startTestServer({
    modelSource: `s3://${BUCKET}/${PREFIX}`,
    cacheDir: path.join(work, `cache-${name}`),
    env: { AWS_ENDPOINT_URL_S3: proxy.url, AWS_REGION: 'us-east-1', ...env },
  });
  ctx.after(() => s.close());
  return s;
}

const invoke = (s: TestServer, target: string) =>
  request(`${s.url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': target }, json: body });

/** S3 requests (any kind) whose path is under `stem` in the bucket. */
const s3Requests = (stem: string): number => proxy.requests.filter((r) => r.url.split('?')[0]!.startsWith(`/${BUCKET}/${PREFIX}${stem}`)).length;

it('50 requests for one missing key (with and without an archive suffix) cost at most 6 S3 requests', async () => {
  const s = await server('fifty');
  for (const target of ['team/nothing', 'team/absent.tar.gz']) {
    const stem = target.replace(/\.tar\.gz$/, '');
    const started = performance.now();
    // Half at once (one lookup shared), half one after another (each answered from memory).
    const burst = await Promise.all(Array.from({ length: 25 }, () => invoke(s, target)));
    const serial = [];
    for (let i = 0; i < 25; i++) serial.push(await invoke(s, target));
    const seconds = (performance.now() - started) / 1000;
    for (const r of [...burst, ...serial]) {
      assert.equal(r.status, 404, r.text);
      assert.equal(r.body.code, 'MODEL_NOT_FOUND');
    }
    assert.ok(seconds < 10, `the 50 requests took ${seconds.toFixed(1)} s`);
    assert.ok(s3Requests(stem) <= 6, `${target}: ${s3Requests(stem)} S3 requests for 50 requests`);
  }
  // Operators see what the misses cost: most of the 100 were answered from memory.
  const remembered = (await metricValue(s.url, 'onnx_mme_missing_target_requests_total', { result: 'remembered' })) ?? 0;
  const misses = (await metricValue(s.url, 'onnx_mme_missing_target_requests_total', { result: 'miss' })) ?? 0;
  assert.ok(remembered >= 40 && misses >= 2 && misses <= 6, `remembered ${remembered}, miss ${misses}`);
});

it('an object uploaded under a remembered missing key is found once the TTL ends', async () => {
  const s = await server('upload', { MME_MISSING_TARGET_TTL_SECONDS: '1' });
  assert.equal((await invoke(s, 'late/add_sub')).status, 404);
  await s3.upload(`${PREFIX}late/add_sub.tar.gz`, archive);
  const before = s3Requests('late/');
  assert.equal((await invoke(s, 'late/add_sub')).status, 404, 'still remembered within the TTL');
  assert.equal(s3Requests('late/'), before, 'answered without asking S3');
  await sleep(1100);
  const r = await invoke(s, 'late/add_sub');
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(
    r.body.outputs[0].data,
    seq16.map((x) => 2 * x),
  );
});

it('distinct missing keys are bounded per second: past the bucket 429 with Retry-After, and the bucket refills', async () => {
  await s3.upload(`${PREFIX}spray/add_sub.tar.gz`, archive);
  const rate = 4;
  const s = await server('spray', { MME_MISSING_TARGET_LOOKUPS_PER_SECOND: String(rate) });
  const started = performance.now();
  const statuses: number[] = [];
  let refused: Awaited<ReturnType<typeof invoke>> | undefined;
  for (let i = 0; i < 40; i++) {
    const r = await invoke(s, `spray/random-${i}.tar.gz`);
    statuses.push(r.status);
    if (r.status === 429) refused ??= r;
  }
  const seconds = (performance.now() - started) / 1000;
  const misses = statuses.filter((x) => x === 404).length;
  // A burst of twice the rate, then the rate: whatever the machine's speed.
  assert.ok(misses <= 2 * rate + Math.ceil(rate * seconds) + 1, `${misses} lookups in ${seconds.toFixed(1)} s`);
  assert.ok(s3Requests('spray/random-') <= misses + 1, `${s3Requests('spray/random-')} S3 requests for ${misses} misses`);
  assert.ok(refused, `no 429 among ${statuses.join(',')}`);
  assert.equal(await metricValue(s.url, 'onnx_mme_missing_target_requests_total', { result: 'refused' }), statuses.filter((x) => x === 429).length);
  assert.equal(refused.body.code, 'OVERLOADED');
  assert.match(refused.body.error, /MME_MISSING_TARGET_LOOKUPS_PER_SECOND/);
  const retryAfter = Number(refused.headers.get('retry-after'));
  assert.ok(retryAfter >= 1 && retryAfter <= 10, `Retry-After ${refused.headers.get('retry-after')}`);
  await sleep(retryAfter * 1000);
  const ok = await invoke(s, 'spray/add_sub.tar.gz');
  assert.equal(ok.status, 200, ok.text);
});
