/**
 * Dynamic batching end to end: the real server, real onnxruntime sessions in
 * runtime workers, real HTTP. 64 concurrent requests with different inputs
 * (and different row counts) each get exactly their own rows back, compared
 * with a direct onnxruntime-node run of each request alone, through
 * /invocations (target header) and through POST /models/{name}/invoke; /metrics
 * shows that requests were merged (executions < requests, rows = rows sent).
 * Also: an ensemble's steps batch, instance_group count 2 holds two sessions
 * on two workers, the request parameters, and MME_DYNAMIC_BATCHING=false.
 */
import { metricValue } from '../support/metric-value.js';
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as ort from 'onnxruntime-node';
import {
  configText,
  denseForward,
  ensembleRepository,
  identity,
  mlp,
  packTarGz,
  writeModelDir,
  writeRepository,
  type DenseModel,
} from '../../examples/models/zoo.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();

const FEATURES = 32;
const CLASSES = 8;
let model: DenseModel;
let reference: ort.InferenceSession;
let sourceRoot: string;
let sagemakerModels: string;
let server: TestServer;

/** Request i: `rows` rows of values unique to i. */
function requestInput(i: number, rows: number): Float32Array {
  return Float32Array.from({ length: rows * FEATURES }, (_, k) => Math.sin(i * 7.31 + k * 0.37) + i / 64);
}

function body(x: Float32Array, rows: number, parameters?: Record<string, unknown>): unknown {
  return { inputs: [input('INPUT0', 'FP32', [rows, FEATURES], Array.from(x))], ...(parameters ? { parameters } : {}) };
}

/** What onnxruntime gives for this request run alone. */
async function direct(x: Float32Array, rows: number): Promise<number[]> {
  const out = await reference.run({ INPUT0: new ort.Tensor('float32', x, [rows, FEATURES]) });
  return Array.from(out['OUTPUT0']!.data as Float32Array);
}

/** Equal up to float rounding (a batched GEMM may sum in another order than a single-row one). */
function assertClose(actual: number[], expected: number[], what: string): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  actual.forEach((v, k) => assert.ok(Math.abs(v - expected[k]!) <= 1e-5 * Math.max(1, Math.abs(expected[k]!)), `${what}[${k}]: ${v} vs ${expected[k]}`));
}

/** One series of a metric from the Prometheus text, by exact label set (0 when absent). */
async function metric(srv: TestServer, name: string, labels: Record<string, string>): Promise<number> {
  return (await metricValue(srv.url, name, labels)) ?? 0;
}

/** Send 64 concurrent requests of 1–3 rows each and check every answer against a direct run. */
async function sixtyFour(send: (b: unknown) => Promise<{ status: number; text: string; body: any }>, rowsOf: (i: number) => number): Promise<string> {
  const n = 64;
  const inputs = Array.from({ length: n }, (_, i) => requestInput(i, rowsOf(i)));
  const replies = await Promise.all(inputs.map((x, i) => send(body(x, rowsOf(i)))));
  for (let i = 0; i < n; i++) {
    const r = replies[i]!;
    assert.equal(r.status, 200, `request ${i}: ${r.text}`);
    const out = r.body.outputs[0];
    assert.deepEqual(out.shape, [rowsOf(i), CLASSES], `request ${i} got its own row count back`);
    assertClose(out.data, await direct(inputs[i]!, rowsOf(i)), `request ${i}`);
  }
  // And the reference itself is the model's maths (plain JS forward pass).
  assertClose(Array.from(denseForward(model.layers, inputs[5]!, rowsOf(5))), await direct(inputs[5]!, rowsOf(5)), 'reference');
  return replies[0]!.body.model_name as string;
}

before(async () => {
  const root = await tempDir(ctx);
  sourceRoot = path.join(root, 'source');
  sagemakerModels = path.join(root, 'opt-ml-models');
  model = mlp({ in: FEATURES, hidden: [64], out: CLASSES, seed: 9 });
  reference = await ort.InferenceSession.create(Buffer.from(model.onnx));

  // mlp.tar.gz: max_batch_size 8 and no dynamic_batching block: the no-tuning default.
  await writeModelDir(path.join(root, 'work'), 'mlp', model);
  await packTarGz(path.join(root, 'work', 'mlp'), path.join(sourceRoot, 'mlp.tar.gz'));
  // pipeline.tar.gz: an ensemble whose two steps batch on their own.
  await writeRepository(path.join(root, 'work', 'pipeline'), ensembleRepository().models);
  await packTarGz(path.join(root, 'work', 'pipeline'), path.join(sourceRoot, 'pipeline.tar.gz'));
  // queued: a batch waits 2 s for rows that never come, and the queue policy refuses a request after 200 ms of it.
  await writeModelDir(sourceRoot, 'queued', {
    onnx: identity('FP32', [3]).onnx,
    config: configText({
      maxBatchSize: 8,
      inputs: [{ name: 'INPUT0', dataType: 'FP32', dims: [3] }],
      outputs: [{ name: 'OUTPUT0', dataType: 'FP32', dims: [3] }],
      extra:
        'dynamic_batching { max_queue_delay_microseconds: 2000000 preferred_batch_size: [ 8 ] default_queue_policy { default_timeout_microseconds: 200000 } }',
    }),
  });

  server = await startTestServer({
    modelSource: sourceRoot,
    cacheDir: path.join(root, 'cache'),
    env: { MME_RUNTIME_WORKERS: '2', SAGEMAKER_MULTI_MODEL: 'true' },
  });
});

after(async () => {
  await server.close();
  await reference.release();
  await ctx.run();
});

describe('dynamic batching through the real server', () => {
  it('/invocations: 64 concurrent requests of 1–3 rows each get exactly their own rows (default policy)', async () => {
    const rowsOf = (i: number): number => 1 + (i % 3);
    const name = await sixtyFour(
      (b) => request(`${server.url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': 'mlp.tar.gz' }, json: b }),
      rowsOf,
    );
    const labels = { model: name, version: '1' };
    const rows = Array.from({ length: 64 }, (_, i) => rowsOf(i)).reduce((a, b) => a + b, 0);
    // Every row ran exactly once, whatever the batches were.
    assert.equal(await metric(server, 'nv_inference_count', labels), rows);
    assert.equal(await metric(server, 'nv_inference_request_success', labels), 64);
    const execs = await metric(server, 'nv_inference_exec_count', labels);
    assert.ok(execs >= Math.ceil(rows / 8) && execs <= 64, `executions: ${execs}`);
    assert.equal(await metric(server, 'onnx_mme_batch_size_count', labels), execs, 'one batch-size observation per execution');
    assert.equal(await metric(server, 'onnx_mme_batch_size_sum', labels), rows);
    assert.equal(await metric(server, 'onnx_mme_batch_size_bucket', { ...labels, le: '8' }), execs, 'no batch passes max_batch_size 8');
  });

  it('POST /models/{name}/invoke: 64 concurrent requests, tuned batching on two instances; /metrics proves they were merged', async () => {
    const dir = path.join(sagemakerModels, 'tuned1', 'model');
    await writeModelDir(dir, 'tuned', {
      onnx: model.onnx,
      config:
        `${model.config!}dynamic_batching { preferred_batch_size: [ 8 ] max_queue_delay_microseconds: 2000000 }\n` +
        'instance_group [ { count: 2 kind: KIND_CPU } ]\n',
    });
    const loaded = await request(`${server.url}/models`, { method: 'POST', json: { model_name: 'tuned1', url: dir } });
    assert.equal(loaded.status, 200, loaded.text);

    const created = server.logs.find((l) => l['msg'] === 'model sessions created' && String(l['model']).includes('tuned'));
    assert.ok(created, 'load logged');
    assert.equal(created['instances'], 2);
    const workers = created['workers'] as number[];
    assert.equal(new Set(workers).size, 2, `two sessions on two runtime workers: ${JSON.stringify(workers)}`);

    const name = await sixtyFour(
      (b) => request(`${server.url}/models/tuned1/invoke`, { method: 'POST', json: b }),
      () => 1,
    );
    const labels = { model: name, version: '1' };
    assert.equal(await metric(server, 'nv_inference_count', labels), 64);
    const execs = await metric(server, 'nv_inference_exec_count', labels);
    // Single rows and a preferred size of 8 with a 2 s delay: batches leave full (8 rows) unless requests trickle in over seconds.
    assert.ok(execs >= 8 && execs < 64, `64 requests merged into ${execs} executions`);
    assert.equal(await metric(server, 'onnx_mme_batch_size_sum', labels), 64);
    assert.ok((await metric(server, 'nv_inference_queue_duration_us', labels)) > 0, 'queue time is recorded');
    assert.equal((await request(`${server.url}/models/tuned1`, { method: 'DELETE' })).status, 200);
  });

  it('an ensemble under concurrency: each request gets its own rows from both batched steps', async () => {
    const repo = ensembleRepository();
    const xs = Array.from({ length: 24 }, (_, i) => Float32Array.from({ length: 4 * (1 + (i % 2)) }, (_, k) => i + k / 10));
    const replies = await Promise.all(
      xs.map((x, i) =>
        request(`${server.url}/invocations`, {
          method: 'POST',
          headers: { 'X-Amzn-SageMaker-Target-Model': 'pipeline.tar.gz' },
          json: { inputs: [input('INPUT', 'FP32', [1 + (i % 2), 4], Array.from(x))] },
        }),
      ),
    );
    replies.forEach((r, i) => {
      assert.equal(r.status, 200, r.text);
      const rows = 1 + (i % 2);
      const scaled = Float32Array.from(xs[i]!, (v) => v * repo.factor);
      assert.deepEqual(r.body.outputs[0].shape, [rows, 3]);
      assertClose(r.body.outputs[0].data, Array.from(denseForward(repo.classifier.layers, scaled, rows)), `pipeline request ${i}`);
    });
  });

  it('request parameters: a bad priority or timeout is a 400 naming the parameter; valid ones are accepted', async () => {
    const x = requestInput(1, 1);
    const send = (parameters: Record<string, unknown>) =>
      request(`${server.url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': 'mlp.tar.gz' }, json: body(x, 1, parameters) });
    const bad = await send({ priority: -2 });
    assert.equal(bad.status, 400, bad.text);
    assert.equal(bad.body.code, 'INVALID_REQUEST');
    assert.match(bad.body.error, /request parameter 'priority' must be a non-negative integer/);
    assert.equal(bad.headers.get('retry-after'), null, 'a client fault: retrying it will not help');
    const ok = await send({ priority: 1, timeout: 1_000_000 });
    assert.equal(ok.status, 200, ok.text);
    assertClose(ok.body.outputs[0].data, await direct(x, 1), 'with parameters');
  });
});

describe('a queue policy timeout (default_timeout_microseconds, timeout_action REJECT)', () => {
  it('refuses a request that waited past it as overload: 504 on /invocations, 503 on /v2 (Triton), each with Retry-After: 1', async () => {
    const json = { inputs: [input('INPUT0', 'FP32', [1, 3], [1, 2, 3])] };
    const [sagemaker, kserve] = await Promise.all([
      request(`${server.url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': 'queued' }, json }),
      request(`${server.url}/v2/models/queued/infer`, { method: 'POST', json }),
    ]);
    for (const [r, expected] of [
      [sagemaker, 504],
      [kserve, 503],
    ] as const) {
      assert.equal(r.status, expected, r.text);
      assert.equal(r.body.code, 'TIMEOUT');
      assert.match(r.body.error, /timed out after waiting \d+ µs in the queue/);
      assert.equal(r.headers.get('retry-after'), '1', r.text);
      assert.equal(r.body.details.retryAfterSeconds, 1);
    }
  });
});

describe('MME_DYNAMIC_BATCHING=false', () => {
  let unbatched: TestServer;

  before(async () => {
    const root = await tempDir(ctx);
    unbatched = await startTestServer({ modelSource: sourceRoot, cacheDir: path.join(root, 'cache'), env: { MME_DYNAMIC_BATCHING: 'false' } });
  });

  after(async () => {
    await unbatched.close();
  });

  it('every request runs alone: executions = requests, and the answers are the same', async () => {
    const n = 16;
    const xs = Array.from({ length: n }, (_, i) => requestInput(100 + i, 2));
    const replies = await Promise.all(
      xs.map((x) => request(`${unbatched.url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': 'mlp.tar.gz' }, json: body(x, 2) })),
    );
    for (let i = 0; i < n; i++) {
      assert.equal(replies[i]!.status, 200, replies[i]!.text);
      assertClose(replies[i]!.body.outputs[0].data, await direct(xs[i]!, 2), `request ${i}`);
    }
    const labels = { model: replies[0]!.body.model_name as string, version: '1' };
    assert.equal(await metric(unbatched, 'nv_inference_exec_count', labels), n);
    assert.equal(await metric(unbatched, 'nv_inference_count', labels), 2 * n);
    assert.equal(await metric(unbatched, 'onnx_mme_batch_size_bucket', { ...labels, le: '2' }), n, 'every execution had one request of 2 rows');
    assert.equal(await metric(unbatched, 'onnx_mme_batch_size_bucket', { ...labels, le: '1' }), 0);
  });
});
