/**
 * Metrics and request logs on the real server: Triton's per-model names
 * (with the pending-request gauge and the compute-input/output phases)
 * after real requests, labels that only ever hold resolved model names,
 * process metrics on a default server, the separate MME_METRICS_PORT
 * listener, the SageMaker safe-port-range check at startup, and the fields
 * of the per-request and rejection log lines.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadServerConfig } from '../../src/config/server-config.js';
import { silentLogger } from '../../src/observability/logger.js';
import { startServer } from '../../src/server.js';
import { writeModelDir } from '../../examples/models/zoo.js';
import { buildModelSource, type SourceFixture } from '../support/model-source-fixture.js';
import { slowModel } from '../support/slow-model.js';
import { sample } from '../support/metric-value.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { request, startTestServer, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();

let server: TestServer;
let fixture: SourceFixture;
let root: string;

const A = Array.from({ length: 16 }, (_, i) => i);
const addSubBody = {
  inputs: [
    { name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: A },
    { name: 'INPUT1', datatype: 'FP32', shape: [1, 16], data: A },
  ],
};

async function metricsText(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
  return res.text();
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', () => resolve()));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

before(async () => {
  root = await tempDir(ctx);
  fixture = await buildModelSource(path.join(root, 'models'), path.join(root, 'work'));
  await writeModelDir(fixture.root, 'slow', slowModel({ rows: 1024, layers: 16 }));
  server = await startTestServer({ modelSource: fixture.root, cacheDir: path.join(root, 'cache') });
});

after(async () => {
  await server.close();
  await ctx.run();
});

describe('GET /metrics after real requests', () => {
  it("Triton's per-model counters, the compute phases, the pending gauge back at 0, latency histograms", async () => {
    for (let i = 0; i < 3; i++) {
      const r = await request(`${server.url}/invocations`, {
        method: 'POST',
        headers: { 'X-Amzn-SageMaker-Target-Model': 'add_sub.tar.gz' },
        json: addSubBody,
      });
      assert.equal(r.status, 200, r.text);
    }
    const bad = await request(`${server.url}/invocations`, {
      method: 'POST',
      headers: { 'X-Amzn-SageMaker-Target-Model': 'add_sub.tar.gz' },
      json: { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: [1] }] },
    });
    assert.equal(bad.status, 400);
    const badModel = await request(`${server.url}/v2/models/add_sub.tar.gz/infer`, {
      method: 'POST',
      json: { inputs: [{ name: 'NOPE', datatype: 'FP32', shape: [1, 16], data: A }] },
    });
    assert.equal(badModel.status, 400);
    const text = await metricsText(server.url);
    const labels = { model: 'add_sub', version: '1' };
    assert.equal(sample(text, 'nv_inference_request_success', labels), 3);
    assert.equal(sample(text, 'nv_inference_count', labels), 3);
    assert.equal(sample(text, 'nv_inference_exec_count', labels), 3);
    assert.equal(sample(text, 'nv_inference_request_failure', { ...labels, reason: 'OTHER' }), 1, 'the request that reached the model and failed validation');
    for (const name of [
      'nv_inference_request_duration_us',
      'nv_inference_compute_infer_duration_us',
      'nv_inference_compute_input_duration_us',
      'nv_inference_compute_output_duration_us',
    ]) {
      const v = sample(text, name, labels);
      assert.ok(v !== undefined && v >= 0, `${name} = ${v}`);
    }
    assert.ok(sample(text, 'nv_inference_compute_input_duration_us', labels)! > 0);
    assert.equal(sample(text, 'nv_inference_pending_request_count', labels), 0);
    assert.equal(sample(text, 'onnx_mme_request_duration_seconds_count', { model: 'add_sub' }), 3);
    assert.ok(sample(text, 'onnx_mme_request_duration_seconds_bucket', { model: 'add_sub', le: '+Inf' })! >= 3);
    assert.ok(sample(text, 'onnx_mme_http_requests_total', { route: '/invocations', status: '200' })! >= 3);
    assert.ok(sample(text, 'onnx_mme_http_requests_total', { route: '/v2/models/:model/infer', status: '400' })! >= 1);
    assert.ok(sample(text, 'onnx_mme_loaded_models', {})! >= 1);
    assert.match(text, /# HELP nv_inference_request_success Number of successful inference requests, all batch sizes/);
  });

  it('the pending gauge counts a request while it runs', async () => {
    const input = Array.from({ length: 512 }, () => 1);
    const running = request(`${server.url}/invocations`, {
      method: 'POST',
      headers: { 'X-Amzn-SageMaker-Target-Model': 'slow' },
      json: { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 512], data: input }] },
    });
    let done = false;
    void running.then(() => {
      done = true;
    });
    let seen = 0;
    while (!done && seen === 0) seen = sample(await metricsText(server.url), 'nv_inference_pending_request_count', { model: 'slow', version: '1' }) ?? 0;
    assert.equal(seen, 1, 'observed while the request was running');
    assert.equal((await running).status, 200);
    assert.equal(sample(await metricsText(server.url), 'nv_inference_pending_request_count', { model: 'slow', version: '1' }), 0);
  });

  it('labels never carry raw request input: unknown targets, paths and versions stay out', async () => {
    const marker = `zz-unknown-${Date.now()}`;
    await request(`${server.url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': `${marker}.tar.gz` }, json: addSubBody });
    await request(`${server.url}/v2/models/${marker}/infer`, { method: 'POST', json: addSubBody });
    await request(`${server.url}/v2/models/add_sub.tar.gz/versions/987654/infer`, { method: 'POST', json: addSubBody });
    await request(`${server.url}/${marker}/path`);
    const text = await metricsText(server.url);
    assert.ok(!text.includes(marker), 'no label holds the unknown name');
    assert.ok(!text.includes('987654'), 'no label holds the unknown version');
    assert.ok(sample(text, 'onnx_mme_http_requests_total', { route: 'unmatched', status: '404' })! >= 1);
  });
});

describe('process metrics', () => {
  it('a server started as main.ts starts it exports Node process metrics on its own registry', async () => {
    const dir = await tempDir(ctx);
    const config = loadServerConfig({
      MME_HOST: '127.0.0.1',
      SAGEMAKER_BIND_TO_PORT: '0',
      MME_MODEL_SOURCE: fixture.root,
      MME_CACHE_DIR: path.join(dir, 'cache'),
    });
    const running = await startServer(config, silentLogger());
    try {
      const text = await metricsText(`http://127.0.0.1:${running.port}`);
      for (const name of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'nodejs_heap_size_used_bytes']) {
        assert.match(text, new RegExp(`^${name} `, 'm'), name);
      }
    } finally {
      await running.shutdown('test');
    }
  });
});

describe('MME_METRICS_PORT', () => {
  it('a second listener serves GET /metrics only; the main port then answers 404 for /metrics', async () => {
    const dir = await tempDir(ctx);
    const s = await startTestServer({ modelSource: fixture.root, cacheDir: path.join(dir, 'cache'), env: { MME_METRICS_PORT: '0' } });
    try {
      const port = s.running.metricsPort;
      assert.ok(port !== undefined && port > 0 && port !== s.running.port);
      await request(`${s.url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': 'add_sub.tar.gz' }, json: addSubBody });
      const side = await metricsText(`http://127.0.0.1:${port}`);
      assert.equal(sample(side, 'nv_inference_request_success', { model: 'add_sub', version: '1' }), 1);
      // Scrapers have their port: clients of the main port cannot read the series.
      const main = await request(`${s.url}/metrics`);
      assert.equal(main.status, 404, main.text);
      assert.equal(main.body.code, 'ROUTE_NOT_FOUND');
      assert.match(main.body.error, /MME_METRICS_PORT/);
      const other = await request(`http://127.0.0.1:${port}/invocations`, { method: 'POST', json: addSubBody });
      assert.equal(other.status, 404);
      assert.equal(other.body.code, 'ROUTE_NOT_FOUND');
      const post = await request(`http://127.0.0.1:${port}/metrics`, { method: 'POST' });
      assert.equal(post.status, 405);
      const listening = s.logs.find((l) => l['msg'] === 'onnx-mme listening');
      assert.equal(listening?.['metricsPort'], port);
    } finally {
      await s.close();
    }
    // Closed with the server.
    await assert.rejects(fetch(`http://127.0.0.1:${s.running.metricsPort}/metrics`));
  });

  it('inside SAGEMAKER_SAFE_PORT_RANGE it starts; outside it startup fails with the reason', async () => {
    const dir = await tempDir(ctx);
    const port = await freePort();
    const s = await startTestServer({
      modelSource: fixture.root,
      cacheDir: path.join(dir, 'cache'),
      env: { SAGEMAKER_SAFE_PORT_RANGE: `${port}-${port}`, MME_METRICS_PORT: String(port) },
    });
    try {
      assert.equal(s.running.metricsPort, port);
      await metricsText(`http://127.0.0.1:${port}`);
    } finally {
      await s.close();
    }
    await assert.rejects(
      startTestServer({
        modelSource: fixture.root,
        cacheDir: path.join(dir, 'cache2'),
        env: { SAGEMAKER_SAFE_PORT_RANGE: '23000-23999', MME_METRICS_PORT: '9464' },
      }),
      /invalid server configuration: MME_METRICS_PORT 9464 is outside SAGEMAKER_SAFE_PORT_RANGE 23000-23999/,
    );
  });

  it('a metrics port already in use fails startup', async () => {
    const dir = await tempDir(ctx);
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', () => resolve()));
    const port = (blocker.address() as { port: number }).port;
    try {
      await assert.rejects(
        startTestServer({ modelSource: fixture.root, cacheDir: path.join(dir, 'cache'), env: { MME_METRICS_PORT: String(port) } }),
        /EADDRINUSE/,
      );
    } finally {
      await new Promise<void>((resolve) => blocker.close(() => resolve()));
    }
  });
});

describe('request logs', () => {
  it('one request line per request (the access line; at debug by default) with reqId, target, model, version, status and duration; rejections at warn with the same', async () => {
    const ok = await request(`${server.url}/v2/models/add_sub.tar.gz/infer`, { method: 'POST', headers: { 'X-Request-Id': 'log-ok-1' }, json: addSubBody });
    assert.equal(ok.status, 200);
    const bad = await request(`${server.url}/invocations`, {
      method: 'POST',
      headers: { 'X-Amzn-SageMaker-Target-Model': 'add_sub.tar.gz', 'X-Amzn-SageMaker-Inference-Id': 'log-bad-1' },
      json: { inputs: [] },
    });
    assert.equal(bad.status, 400);
    const line = server.logs.find((l) => l['msg'] === 'request' && l['reqId'] === 'log-ok-1');
    assert.ok(line, 'a request line for log-ok-1');
    // MME_ACCESS_LOG defaults to false: a fast 200's line is at debug (this server logs at debug); access-log.test.ts has it at info.
    assert.equal(line['level'], 'debug');
    assert.equal(line['target'], 'add_sub.tar.gz');
    assert.equal(line['model'], 'add_sub');
    assert.equal(line['version'], '1');
    assert.equal(line['status'], 200);
    assert.equal(line['method'], 'POST');
    assert.equal(typeof line['durationMs'], 'number');
    const warn = server.logs.find((l) => l['msg'] === 'request rejected' && l['reqId'] === 'log-bad-1');
    assert.ok(warn, 'a warn line for log-bad-1');
    assert.equal(warn['level'], 'warn');
    assert.equal(warn['status'], 400);
    assert.equal(warn['code'], 'INVALID_INPUT');
    assert.equal(warn['target'], 'add_sub.tar.gz');
    assert.equal(warn['model'], undefined, 'the target is not a model name: the model field is left out when the request never named one');
    assert.equal(typeof warn['durationMs'], 'number');
    assert.match(String(warn['err']), /expected input 'INPUT0'/);
    const end = server.logs.find((l) => l['msg'] === 'request' && l['reqId'] === 'log-bad-1');
    assert.equal(end?.['status'], 400);
    assert.equal(end?.['target'], 'add_sub.tar.gz');
    assert.equal(end?.['model'], undefined);
  });
});
