/**
 * Triton's statistics extension from outside: GET /v2/models/stats,
 * /v2/models/{m}/stats and /v2/models/{m}/versions/{v}/stats answer Triton's
 * JSON shape, per target (two tenants whose configs share a name are two
 * entries), with numbers that agree with the same request's /metrics
 * scrape (one set of accumulators), batch_stats consistent with the
 * execution and inference counts, and nothing loaded to answer.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { packTarGz, scale, writeModelDir } from '../../examples/models/zoo.js';
import { sample } from '../support/metric-value.js';
import { tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer, type TestServer } from '../support/test-server.js';

const ctx = {
  cleanups: [] as (() => Promise<void>)[],
  after(fn: () => Promise<void>) {
    this.cleanups.push(fn);
  },
};
let server: TestServer;

const A = 'team/a.tar.gz';
const B = 'team/b.tar.gz';
const enc = encodeURIComponent;

interface Duration {
  count: number;
  ns: number;
}

function infer(target: string, rows: number, name = 'INPUT0') {
  const data = Array.from({ length: rows * 4 }, (_, i) => i);
  return request(`${server.url}/v2/models/${enc(target)}/infer`, { method: 'POST', json: { inputs: [input(name, 'FP32', [rows, 4], data)] } });
}

before(async () => {
  const root = await tempDir(ctx);
  const source = path.join(root, 'source');
  for (const [team, factor] of [
    ['a', 2],
    ['b', 3],
  ] as const) {
    await writeModelDir(path.join(root, 'work', team), 'model', scale(factor));
    await packTarGz(path.join(root, 'work', team), path.join(source, 'team', `${team}.tar.gz`));
  }
  server = await startTestServer({ modelSource: source, cacheDir: path.join(root, 'cache') });
});

after(async () => {
  await server.close();
  for (const c of ctx.cleanups.reverse()) await c();
});

describe('statistics extension', () => {
  it('answers Triton JSON per target, agreeing with /metrics', async () => {
    const t0 = Date.now();
    for (const rows of [1, 2, 2]) assert.equal((await infer(A, rows)).status, 200);
    assert.equal((await infer(B, 1)).status, 200);
    assert.equal((await infer(A, 1, 'NOPE')).status, 400);
    const r = await request(`${server.url}/v2/models/${enc(A)}/stats`);
    assert.equal(r.status, 200, r.text);
    const metrics = (await request(`${server.url}/metrics`)).text;
    assert.deepEqual(Object.keys(r.body), ['model_stats']);
    assert.equal(r.body.model_stats.length, 1);
    const s = r.body.model_stats[0];
    assert.equal(s.name, A);
    assert.equal(s.version, '1');
    for (const k of ['name', 'version', 'last_inference', 'inference_count', 'execution_count', 'inference_stats', 'batch_stats']) assert.ok(k in s, k);
    const stats = s.inference_stats as Record<string, Duration>;
    for (const k of ['success', 'fail', 'queue', 'compute_input', 'compute_infer', 'compute_output', 'cache_hit', 'cache_miss']) {
      assert.ok(Number.isInteger(stats[k]!.count) && Number.isInteger(stats[k]!.ns), `${k}: integer count and ns`);
    }
    const labels = { target: A, model: 'model', version: '1' };
    assert.equal(stats['success']!.count, 3);
    assert.equal(stats['success']!.count, sample(metrics, 'nv_inference_request_success', labels));
    assert.equal(stats['fail']!.count, 1);
    assert.ok(stats['fail']!.ns > 0);
    assert.equal(s.inference_count, 5, 'rows');
    assert.equal(s.inference_count, sample(metrics, 'nv_inference_count', labels));
    assert.equal(s.execution_count, sample(metrics, 'nv_inference_exec_count', labels));
    assert.equal(stats['compute_infer']!.count, 3);
    assert.equal(stats['compute_input']!.count, 3);
    for (const [k, metric] of [
      ['success', 'nv_inference_request_duration_us'],
      ['compute_infer', 'nv_inference_compute_infer_duration_us'],
      ['compute_input', 'nv_inference_compute_input_duration_us'],
      ['queue', 'nv_inference_queue_duration_us'],
    ] as const) {
      assert.equal(Math.floor(stats[k]!.ns / 1000), sample(metrics, metric, labels), `${k}.ns agrees with ${metric}`);
    }
    assert.ok(stats['success']!.ns >= stats['compute_infer']!.ns, 'a request lasts at least its run');
    const batches = s.batch_stats as { batch_size: number; compute_infer: Duration; compute_input: Duration; compute_output: Duration }[];
    assert.equal(
      batches.reduce((n, b) => n + b.compute_infer.count, 0),
      s.execution_count,
    );
    assert.equal(
      batches.reduce((n, b) => n + b.batch_size * b.compute_infer.count, 0),
      s.inference_count,
    );
    assert.deepEqual(
      batches.map((b) => b.batch_size),
      [...batches.map((b) => b.batch_size)].sort((x, y) => x - y),
    );
    assert.ok(s.last_inference >= t0 - 1000 && s.last_inference <= Date.now() + 1000, `last_inference ${s.last_inference} is ms since the epoch`);

    const one = await request(`${server.url}/v2/models/${enc(A)}/versions/1/stats`);
    assert.equal(one.status, 200);
    assert.equal(one.body.model_stats[0].inference_stats.success.count, 3);
  });

  it('GET /v2/models/stats lists every loaded target apart, though both configs say "model"', async () => {
    const r = await request(`${server.url}/v2/models/stats`);
    assert.equal(r.status, 200, r.text);
    const byName = new Map((r.body.model_stats as { name: string; inference_stats: { success: Duration } }[]).map((s) => [s.name, s]));
    assert.equal(byName.get(A)?.inference_stats.success.count, 3);
    assert.equal(byName.get(B)?.inference_stats.success.count, 1);
  });

  it("a model that is not loaded, or a version that is not, is an error with Triton's error body; nothing is loaded", async () => {
    const missing = await request(`${server.url}/v2/models/${enc('team/none.tar.gz')}/stats`);
    assert.equal(missing.status, 404);
    assert.match(missing.body.error, /team\/none\.tar\.gz/);
    const v2 = await request(`${server.url}/v2/models/${enc(A)}/versions/2/stats`);
    assert.equal(v2.status, 404);
    assert.match(v2.body.error, /version 2/);
    const bad = await request(`${server.url}/v2/models/${enc(A)}/versions/x/stats`);
    assert.equal(bad.status, 400);
    const loads = server.logs.filter((l) => l['msg'] === 'model loaded').length;
    assert.equal(loads, 2, 'only the two targets that served requests were loaded');
  });
});
