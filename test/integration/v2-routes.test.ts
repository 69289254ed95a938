/**
 * The KServe v2 / Triton HTTP routes on the real server: health, server and
 * model metadata, readiness (which never loads), config, inference on the
 * highest or a chosen version, the classification extension with a label
 * file, and the repository extension (index, load, unload) over both kinds
 * of model: targets of the model source and SageMaker-managed models.
 * Errors are Triton's statuses with {"error": ...} bodies.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildModel, node, valueInfo } from '../../examples/models/onnx-builder.js';
import { addSub, identity, writeModelDir } from '../../examples/models/zoo.js';
import { buildModelSource, type SourceFixture } from '../support/model-source-fixture.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { request, startTestServer, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();

let server: TestServer;
let fixture: SourceFixture;

const A = Array.from({ length: 16 }, (_, i) => i);
const B = Array.from({ length: 16 }, () => 3);
const addSubBody = (extra: Record<string, unknown> = {}) => ({
  inputs: [
    { name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: A },
    { name: 'INPUT1', datatype: 'FP32', shape: [1, 16], data: B },
  ],
  ...extra,
});

const LABELS = ['alpha', 'beta', 'gamma'];

before(async () => {
  const root = await tempDir(ctx);
  fixture = await buildModelSource(path.join(root, 'models'), path.join(root, 'work'));
  // Two served versions that compute different things, so a version-specific request is visible in the answer.
  const v2 = buildModel({
    inputs: [valueInfo('INPUT0', 'FP32', ['batch', 16]), valueInfo('INPUT1', 'FP32', ['batch', 16])],
    outputs: [valueInfo('OUTPUT0', 'FP32', ['batch', 16]), valueInfo('OUTPUT1', 'FP32', ['batch', 16])],
    nodes: [node('Sub', ['INPUT0', 'INPUT1'], ['OUTPUT0']), node('Add', ['INPUT0', 'INPUT1'], ['OUTPUT1'])],
  });
  const multi = await writeModelDir(fixture.root, 'multi', { ...addSub(), config: `${addSub().config!}version_policy: { all: { } }\n`, versions: [1, 2] });
  await writeFile(path.join(multi, '2', 'model.onnx'), v2);
  // Classification: an identity over 4 classes whose output names a label file (3 lines: class 3 has no label).
  const classes = identity('FP32', [4]);
  const classifier = await writeModelDir(fixture.root, 'classifier', {
    onnx: classes.onnx,
    config: classes.config!.replace(/(output \[\n\s*\{[^}]*dims: \[ 4 \])/, '$1 label_filename: "labels.txt"'),
  });
  await writeFile(path.join(classifier, 'labels.txt'), `${LABELS.join('\n')}\n`);
  await writeModelDir(fixture.root, 'nolabels', {
    onnx: classes.onnx,
    config: classes.config!.replace(/(output \[\n\s*\{[^}]*dims: \[ 4 \])/, '$1 label_filename: "missing.txt"'),
  });
  server = await startTestServer({ modelSource: fixture.root, cacheDir: path.join(root, 'cache') });
});

after(async () => {
  await server.close();
  await ctx.run();
});

const get = (p: string) => request(`${server.url}${p}`);
const post = (p: string, json?: unknown) => request(`${server.url}${p}`, { method: 'POST', ...(json === undefined ? {} : { json }) });

describe('health and server metadata', () => {
  it('live and ready: 200 with an empty body', async () => {
    for (const p of ['/v2/health/live', '/v2/health/ready']) {
      const r = await get(p);
      assert.equal(r.status, 200, p);
      assert.equal(r.text, '');
    }
  });

  it('GET /v2 names the server and only the extensions it implements', async () => {
    const r = await get('/v2');
    assert.equal(r.status, 200);
    assert.equal(r.body.name, 'onnx-mme');
    assert.match(r.body.version, /^\d+\.\d+\.\d+/);
    assert.deepEqual([...r.body.extensions].sort(), [
      'binary_tensor_data',
      'classification',
      'model_configuration',
      'model_repository',
      'model_repository(unload_dependents)',
      'statistics',
    ]);
  });
});

describe('model metadata, readiness, config', () => {
  it('readiness does not load; metadata loads the target; then it is ready', async () => {
    const before = await get('/v2/models/add_sub/ready');
    assert.equal(before.status, 400);
    assert.match(before.body.error, /model 'add_sub' is not ready/);
    const meta = await get('/v2/models/add_sub');
    assert.equal(meta.status, 200, meta.text);
    assert.deepEqual(meta.body, {
      name: 'add_sub',
      versions: ['1'],
      platform: 'onnxruntime_onnx',
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [-1, 16] },
        { name: 'INPUT1', datatype: 'FP32', shape: [-1, 16] },
      ],
      outputs: [
        { name: 'OUTPUT0', datatype: 'FP32', shape: [-1, 16] },
        { name: 'OUTPUT1', datatype: 'FP32', shape: [-1, 16] },
      ],
    });
    assert.equal((await get('/v2/models/add_sub/ready')).status, 200);
    assert.equal((await get('/v2/models/add_sub/versions/1/ready')).status, 200);
    assert.equal((await get('/v2/models/add_sub/versions/7/ready')).status, 400);
  });

  it('config is the effective config.pbtxt as Triton JSON', async () => {
    const r = await get('/v2/models/add_sub/config');
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.max_batch_size, 8);
    assert.deepEqual(
      r.body.input.map((t: { name: string }) => t.name),
      ['INPUT0', 'INPUT1'],
    );
    assert.equal(r.body.platform, 'onnxruntime_onnx');
  });

  it('every served version is listed; a version-specific metadata request names only it', async () => {
    const all = await get('/v2/models/multi');
    assert.deepEqual(all.body.versions, ['1', '2']);
    const one = await get('/v2/models/multi/versions/1');
    assert.deepEqual(one.body.versions, ['1']);
    const missing = await get('/v2/models/multi/versions/3');
    assert.equal(missing.status, 404);
    assert.match(missing.body.error, /version 3 is not available \(loaded versions: 1, 2\)/);
  });
});

describe('inference', () => {
  it('POST /v2/models/{m}/infer runs the model (KServe v2 JSON)', async () => {
    const r = await post('/v2/models/add_sub/infer', addSubBody({ id: 'k1' }));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.id, 'k1');
    assert.deepEqual(
      r.body.outputs[0].data,
      A.map((x) => x + 3),
    );
  });

  it('without a version the highest runs; /versions/{v}/infer runs that version', async () => {
    const latest = await post('/v2/models/multi/infer', addSubBody());
    assert.equal(latest.body.model_version, '2');
    assert.deepEqual(
      latest.body.outputs[0].data,
      A.map((x) => x - 3),
    );
    const v1 = await post('/v2/models/multi/versions/1/infer', addSubBody());
    assert.equal(v1.status, 200, v1.text);
    assert.equal(v1.body.model_version, '1');
    assert.deepEqual(
      v1.body.outputs[0].data,
      A.map((x) => x + 3),
    );
    const v2 = await post('/v2/models/multi/versions/2/infer', addSubBody());
    assert.deepEqual(
      v2.body.outputs[0].data,
      A.map((x) => x - 3),
    );
    const v9 = await post('/v2/models/multi/versions/9/infer', addSubBody());
    assert.equal(v9.status, 404);
  });

  it('an ensemble target addressed through the URL-encoded path', async () => {
    const r = await post(`/v2/models/${encodeURIComponent('team/pipeline.tar.gz')}/infer`, {
      inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }],
    });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.model_name, 'pipeline');
    assert.deepEqual(r.body.outputs[0].shape, [1, 3]);
  });
});

describe('classification extension', () => {
  it('top-k as "value:index:label", labels from label_filename, per batch item', async () => {
    const r = await post('/v2/models/classifier/infer', {
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [2, 4], data: [0.1, 0.7, 0.2, 0.9, 5, 1, 3, 2] }],
      outputs: [{ name: 'OUTPUT0', parameters: { classification: 2 } }],
    });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body.outputs[0], {
      name: 'OUTPUT0',
      datatype: 'BYTES',
      shape: [2, 2],
      data: ['0.900000:3', '0.700000:1:beta', '5.000000:0:alpha', '3.000000:2:gamma'],
    });
  });

  it('works on /invocations too, and as binary data', async () => {
    const res = await fetch(`${server.url}/invocations`, {
      method: 'POST',
      headers: { 'X-Amzn-SageMaker-Target-Model': 'classifier', 'content-type': 'application/json' },
      body: JSON.stringify({
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 4, 2, 3] }],
        outputs: [{ name: 'OUTPUT0', parameters: { classification: 1, binary_data: true } }],
      }),
    });
    assert.equal(res.status, 200);
    const body = Buffer.from(await res.arrayBuffer());
    const n = Number(res.headers.get('inference-header-content-length'));
    const header = JSON.parse(body.subarray(0, n).toString('utf8'));
    assert.deepEqual(header.outputs[0], { name: 'OUTPUT0', datatype: 'BYTES', shape: [1, 1], parameters: { binary_data_size: 4 + '4.000000:1:beta'.length } });
    assert.equal(body.readUInt32LE(n), '4.000000:1:beta'.length);
    assert.equal(body.subarray(n + 4).toString('utf8'), '4.000000:1:beta');
  });

  it('a missing label file is INVALID_MODEL naming it; the model still answers without classification', async () => {
    const body = { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] };
    const r = await post('/v2/models/nolabels/infer', { ...body, outputs: [{ name: 'OUTPUT0', parameters: { classification: 1 } }] });
    assert.equal(r.status, 400);
    assert.equal(r.body.code, 'INVALID_MODEL');
    assert.match(r.body.error, /cannot read label file 'missing.txt'/);
    assert.equal((await post('/v2/models/nolabels/infer', body)).status, 200);
  });
});

describe('repository extension', () => {
  it('index lists managed models and the source with their states; {"ready": true} keeps the ready ones', async () => {
    await post('/v2/models/add_sub/infer', addSubBody());
    const all = await post('/v2/repository/index');
    assert.equal(all.status, 200, all.text);
    const byName = new Map<string, { state: string; version?: string; reason: string }>(all.body.map((r: { name: string }) => [r.name, r]));
    assert.equal(byName.get('add_sub.tar.gz')?.state, 'READY');
    assert.equal(byName.get('add_sub.tar.gz')?.version, '1');
    assert.equal(byName.get('identity_uint16')?.state, 'UNAVAILABLE');
    // Where each source model is: extracted on local disk or not, and its archive size.
    const row = all.body.find((r: { name: string }) => r.name === 'add_sub.tar.gz');
    assert.equal(row.cached, true);
    assert.ok(row.size_bytes > 0);
    const ready = await post('/v2/repository/index', { ready: true });
    assert.ok(ready.body.length > 0);
    assert.ok(ready.body.every((r: { state: string }) => r.state === 'READY'));
    assert.equal((await post('/v2/repository/index', { ready: 'yes' })).status, 400);
  });

  it('load and unload a target; unloading what is not loaded is 404', async () => {
    assert.equal((await get('/v2/models/identity_uint16/ready')).status, 400);
    const load = await post('/v2/repository/models/identity_uint16/load');
    assert.equal(load.status, 200, load.text);
    assert.equal((await get('/v2/models/identity_uint16/ready')).status, 200);
    const unload = await post('/v2/repository/models/identity_uint16/unload', { parameters: { unload_dependents: true } });
    assert.equal(unload.status, 200, unload.text);
    assert.equal((await get('/v2/models/identity_uint16/ready')).status, 400);
    const again = await post('/v2/repository/models/identity_uint16/unload');
    assert.equal(again.status, 404);
    assert.match(again.body.error, /not loaded/);
  });

  it('a SageMaker-managed model is addressed by its model_name on every v2 route', async () => {
    const loaded = await request(`${server.url}/models`, { method: 'POST', json: { model_name: 'v2managed', url: path.join(fixture.root, 'identity_int8') } });
    assert.equal(loaded.status, 200, loaded.text);
    assert.equal((await get('/v2/models/v2managed/ready')).status, 200);
    assert.deepEqual((await get('/v2/models/v2managed')).body.inputs, [{ name: 'INPUT0', datatype: 'INT8', shape: [-1, 3] }]);
    const r = await post('/v2/models/v2managed/infer', { inputs: [{ name: 'INPUT0', datatype: 'INT8', shape: [1, 3], data: [-1, 0, 1] }] });
    assert.deepEqual(r.body.outputs[0].data, [-1, 0, 1]);
    const index = await post('/v2/repository/index');
    assert.ok(index.body.some((row: { name: string; state: string }) => row.name === 'v2managed' && row.state === 'READY'));
    assert.equal((await post('/v2/repository/models/v2managed/unload')).status, 200);
    const list = await get('/models');
    assert.ok(!list.body.models.some((m: { modelName: string }) => m.modelName === 'v2managed'));
  });

  it('config and file overrides on load are 501', async () => {
    const r = await post('/v2/repository/models/add_sub/load', { parameters: { config: '{}' } });
    assert.equal(r.status, 501);
    assert.match(r.body.error, /load parameters 'config' are not supported/);
  });
});

describe('errors: Triton statuses with {"error": ...} bodies', () => {
  const cases: { name: string; method: 'GET' | 'POST'; path: string; status: number; match: RegExp }[] = [
    { name: 'unknown model', method: 'GET', path: '/v2/models/nope', status: 404, match: /nope/ },
    { name: 'unknown model infer', method: 'POST', path: '/v2/models/nope.tar.gz/infer', status: 404, match: /nope\.tar\.gz/ },
    {
      name: 'version that is not a number',
      method: 'GET',
      path: '/v2/models/add_sub/versions/abc',
      status: 400,
      match: /model version must be a positive integer, got 'abc'/,
    },
    { name: 'a name that climbs out of the source', method: 'GET', path: `/v2/models/${encodeURIComponent('../etc/passwd')}`, status: 400, match: /\.\./ },
    { name: 'wrong method', method: 'GET', path: '/v2/models/add_sub/infer', status: 405, match: /method GET is not allowed/ },
    { name: 'wrong method on the index', method: 'GET', path: '/v2/repository/index', status: 405, match: /not allowed/ },
    { name: 'unknown v2 path', method: 'GET', path: '/v2/logging', status: 404, match: /no route/ },
  ];
  for (const c of cases) {
    it(`${c.name} → ${c.status}`, async () => {
      const r = await request(`${server.url}${c.path}`, { method: c.method, ...(c.method === 'POST' ? { json: addSubBody() } : {}) });
      assert.equal(r.status, c.status, r.text);
      assert.equal(typeof r.body.error, 'string');
      assert.match(r.body.error, c.match);
    });
  }

  it('a bad inference body on the v2 route is 400 naming the model', async () => {
    const r = await post('/v2/models/add_sub/infer', { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: [1] }] });
    assert.equal(r.status, 400);
    assert.match(r.body.error, /^model 'add_sub': input 'INPUT0': shape \[1,16\] needs 16 elements but 'data' has 1/);
  });
});
