/**
 * /invocations with X-Amzn-SageMaker-Target-Model against the real server,
 * real onnxruntime sessions and a local model source of tarballs and
 * directories. Results are compared with a direct onnxruntime-node run.
 */
import assert from 'node:assert/strict';
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as ort from 'onnxruntime-node';
import { denseForward, IDENTITY_TYPES } from '../../examples/models/zoo.js';
import { buildModelSource, runDirect, type SourceFixture } from '../support/model-source-fixture.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();

let server: TestServer;
let fixture: SourceFixture;
let cacheDir: string;

function invoke(target: string | undefined, body: unknown, headers: Record<string, string> = {}) {
  return request(`${server.url}/invocations`, {
    method: 'POST',
    headers: { ...(target === undefined ? {} : { 'X-Amzn-SageMaker-Target-Model': target }), ...headers },
    json: body,
  });
}

const ones16 = Array.from({ length: 16 }, () => 1);
const seq16 = Array.from({ length: 16 }, (_, i) => i);

function addSubBody(): unknown {
  return { inputs: [input('INPUT0', 'FP32', [1, 16], seq16), input('INPUT1', 'FP32', [1, 16], ones16)] };
}

before(async () => {
  const root = await tempDir(ctx);
  cacheDir = path.join(root, 'cache');
  fixture = await buildModelSource(path.join(root, 'models'), path.join(root, 'work'));
  server = await startTestServer({ modelSource: fixture.root, cacheDir });
});

after(async () => {
  await server.close();
  await ctx.run();
});

describe('POST /invocations with a target header', () => {
  it('runs a model from a tarball and returns KServe v2 JSON', async () => {
    const r = await invoke('add_sub.tar.gz', addSubBody());
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers.get('content-type'), 'application/json; charset=utf-8');
    assert.equal(r.body.model_name, 'add_sub');
    assert.equal(r.body.model_version, '1');
    assert.deepEqual(
      r.body.outputs.map((o: { name: string }) => o.name),
      ['OUTPUT0', 'OUTPUT1'],
    );
    assert.deepEqual(r.body.outputs[0], { name: 'OUTPUT0', datatype: 'FP32', shape: [1, 16], data: seq16.map((x) => x + 1) });
    assert.deepEqual(
      r.body.outputs[1].data,
      seq16.map((x) => x - 1),
    );
  });

  it('gives exactly what a direct onnxruntime-node run gives (MLP, batch 3, nested data)', async () => {
    const batch = 3;
    const x = Float32Array.from({ length: batch * 32 }, (_, i) => Math.sin(i) * 0.5);
    const nested = Array.from({ length: batch }, (_, b) => Array.from(x.subarray(b * 32, (b + 1) * 32)));
    const r = await invoke('mlp.tar.gz', { inputs: [input('INPUT0', 'FP32', [batch, 32], nested)] });
    assert.equal(r.status, 200, r.text);
    const direct = await runDirect(fixture.mlpOnnx, { INPUT0: new ort.Tensor('float32', x, [batch, 32]) });
    const expected = Array.from(direct['OUTPUT0']!.data as Float32Array);
    assert.deepEqual(r.body.outputs[0].shape, [batch, 8]);
    assert.deepEqual(r.body.outputs[0].data, expected);
    // And the model computes what its weights say (plain JS forward pass).
    const reference = denseForward(fixture.mlp.layers, x, batch);
    r.body.outputs[0].data.forEach((v: number, i: number) => assert.ok(Math.abs(v - reference[i]!) < 1e-4));
  });

  it('returns only the requested outputs', async () => {
    const r = await invoke('add_sub.tar.gz', { ...(addSubBody() as object), outputs: [{ name: 'OUTPUT1' }] });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(
      r.body.outputs.map((o: { name: string }) => o.name),
      ['OUTPUT1'],
    );
  });

  it('echoes the request id and passes custom attributes through', async () => {
    const r = await invoke(
      'add_sub.tar.gz',
      { id: 'req-7', ...(addSubBody() as object) },
      {
        'X-Amzn-SageMaker-Custom-Attributes': 'trace=abc',
        'X-Amzn-SageMaker-Inference-Id': 'inf-123',
      },
    );
    assert.equal(r.status, 200);
    assert.equal(r.body.id, 'req-7');
    assert.equal(r.headers.get('x-amzn-sagemaker-custom-attributes'), 'trace=abc');
    assert.equal(r.headers.get('x-request-id'), 'inf-123');
  });

  it('runs an ensemble from a nested target (team/pipeline.tar.gz)', async () => {
    const x = [1, 2, 3, 4, -1, 0, 0.5, 2];
    const r = await invoke('team/pipeline.tar.gz', { inputs: [input('INPUT', 'FP32', [2, 4], x)] });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.model_name, 'pipeline');
    const scaled = Float32Array.from(x, (v) => v * fixture.ensemble.factor);
    const expected = denseForward(fixture.ensemble.classifier.layers, scaled, 2);
    assert.deepEqual(r.body.outputs[0].shape, [2, 3]);
    r.body.outputs[0].data.forEach((v: number, i: number) => assert.ok(Math.abs(v - expected[i]!) < 1e-5, `${v} vs ${expected[i]}`));
  });

  it('auto-completes a model without config.pbtxt from the ONNX graph', async () => {
    const r = await invoke('autocomplete', addSubBody());
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(
      r.body.outputs[0].data,
      seq16.map((x) => x + 1),
    );
  });

  it('serves the highest version under the default version policy', async () => {
    const r = await invoke('versions', addSubBody());
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.model_version, '2');
  });

  for (const dt of IDENTITY_TYPES) {
    it(`round-trips datatype ${dt} through JSON`, async () => {
      const data: Record<string, unknown[]> = {
        BOOL: [true, false, true, false, false, true],
        BYTES: ['a', 'héllo', '', 'x y', '{"j":1}', 'z'],
        FP16: [0.5, -2, 1024, 0.099975586, 65504, -0.0001],
        INT64: [1, -2, '9007199254740993', '-9223372036854775808', 0, 7],
        UINT64: [1, 2, '18446744073709551615', 0, 5, 6],
        INT8: [-128, 127, 0, 1, -1, 5],
        UINT8: [0, 255, 1, 2, 3, 4],
      };
      const values = data[dt] ?? [1, -2, 3.5, 4, 0, 6].map((v) => (dt.startsWith('UINT') ? Math.abs(Math.trunc(v)) : dt.startsWith('INT') ? Math.trunc(v) : v));
      const r = await invoke(`identity_${dt.toLowerCase()}`, { inputs: [input('INPUT0', dt, [2, 3], values)] });
      assert.equal(r.status, 200, r.text);
      const out = r.body.outputs[0];
      assert.equal(out.datatype, dt);
      assert.deepEqual(out.shape, [2, 3]);
      if (dt === 'INT64' || dt === 'UINT64') {
        // exact digits past 2^53: compare on the raw text
        for (const v of values) assert.ok(r.text.includes(String(v)), `${String(v)} missing from ${r.text}`);
      } else if (dt === 'FP16') {
        values.forEach((v, i) => assert.ok(Math.abs(out.data[i] - (v as number)) <= Math.abs(v as number) * 1e-3, `${out.data[i]} vs ${String(v)}`));
      } else {
        assert.deepEqual(out.data, values);
      }
    });
  }

  it('extracts each archive once into the cache and leaves no temporary directories', async () => {
    const entries = await readdir(cacheDir);
    assert.ok(entries.length >= 3, entries.join(','));
    assert.ok(
      entries.every((e) => !e.startsWith('.tmp-')),
      entries.join(','),
    );
  });
});

describe('bad input gets a clear error and loses nothing', () => {
  const cases: { name: string; target: string | undefined; body: unknown; raw?: string; status: number; code: string; match: RegExp }[] = [
    {
      name: 'malformed JSON',
      target: 'add_sub.tar.gz',
      body: undefined,
      raw: '{"inputs": [',
      status: 400,
      code: 'INVALID_REQUEST',
      match: /model 'add_sub.tar.gz'.*not valid JSON/,
    },
    { name: 'empty body', target: 'add_sub.tar.gz', body: undefined, raw: '', status: 400, code: 'INVALID_REQUEST', match: /body is empty/ },
    {
      name: 'no inputs',
      target: 'add_sub.tar.gz',
      body: { inputs: [] },
      status: 400,
      code: 'INVALID_INPUT',
      match: /model 'add_sub.tar.gz': expected input 'INPUT0'/,
    },
    {
      name: 'no inputs array',
      target: 'add_sub.tar.gz',
      body: { outputs: [] },
      status: 400,
      code: 'INVALID_REQUEST',
      match: /request must have an 'inputs' array/,
    },
    {
      name: 'missing input',
      target: 'add_sub.tar.gz',
      body: { inputs: [input('INPUT0', 'FP32', [1, 16], seq16)] },
      status: 400,
      code: 'INVALID_INPUT',
      match: /model 'add_sub.tar.gz': expected input 'INPUT1'/,
    },
    {
      name: 'wrong datatype',
      target: 'add_sub.tar.gz',
      body: { inputs: [input('INPUT0', 'INT32', [1, 16], seq16), input('INPUT1', 'FP32', [1, 16], ones16)] },
      status: 400,
      code: 'INVALID_INPUT',
      match: /input 'INPUT0' data-type is 'INT32', but the model expects 'FP32'/,
    },
    {
      name: 'wrong shape',
      target: 'add_sub.tar.gz',
      body: { inputs: [input('INPUT0', 'FP32', [2, 8], seq16), input('INPUT1', 'FP32', [1, 16], ones16)] },
      status: 400,
      code: 'INVALID_INPUT',
      match: /unexpected shape for input 'INPUT0'. Expected \[-1,16\], got \[2,8\]/,
    },
    {
      name: 'element count does not match the shape',
      target: 'add_sub.tar.gz',
      body: { inputs: [input('INPUT0', 'FP32', [1, 16], seq16.slice(1)), input('INPUT1', 'FP32', [1, 16], ones16)] },
      status: 400,
      code: 'INVALID_INPUT',
      match: /input 'INPUT0': shape \[1,16\] needs 16 elements but 'data' has 15/,
    },
    {
      name: 'batch larger than max_batch_size',
      target: 'add_sub.tar.gz',
      body: { inputs: [input('INPUT0', 'FP32', [9, 16], new Array(144).fill(0)), input('INPUT1', 'FP32', [9, 16], new Array(144).fill(0))] },
      status: 400,
      code: 'INVALID_INPUT',
      match: /batch-size must be between 1 and 8, got 9/,
    },
    { name: 'unknown target', target: 'nope.tar.gz', body: addSubBody(), status: 404, code: 'MODEL_NOT_FOUND', match: /model 'nope.tar.gz' not found/ },
    { name: 'target with ..', target: '../etc/passwd', body: addSubBody(), status: 400, code: 'INVALID_TARGET', match: /\.\./ },
    { name: 'absolute target', target: '/etc/passwd', body: addSubBody(), status: 400, code: 'INVALID_TARGET', match: /absolute/ },
    { name: 'syntax error in config.pbtxt', target: 'bad_syntax', body: addSubBody(), status: 400, code: 'INVALID_MODEL', match: /config\.pbtxt:\d+:\d+/ },
    {
      name: 'unknown config field',
      target: 'unknown_field',
      body: addSubBody(),
      status: 400,
      code: 'INVALID_MODEL',
      match: /config\.pbtxt:2:1: unknown field 'max_batch_sise' in message ModelConfig; did you mean 'max_batch_size'\?/,
    },
    {
      name: 'config that contradicts the ONNX model',
      target: 'mismatch',
      body: addSubBody(),
      status: 400,
      code: 'INVALID_MODEL',
      match:
        /input 'INPUT9' is in config.pbtxt but not in the ONNX model.*output 'OUTPUT0': config.pbtxt says INT32 but the ONNX model has FP32.*ONNX model input 'INPUT1' is missing/,
    },
    { name: 'a file that is not ONNX', target: 'not_onnx', body: addSubBody(), status: 400, code: 'INVALID_MODEL', match: /onnxruntime cannot load/ },
    { name: 'corrupt archive', target: 'corrupt.tar.gz', body: addSubBody(), status: 400, code: 'ARCHIVE_REJECTED', match: /corrupt/ },
    {
      name: 'archive entry climbing out with ..',
      target: 'traversal.tar.gz',
      body: addSubBody(),
      status: 400,
      code: 'ARCHIVE_REJECTED',
      match: /\.\.\/\.\.\/escaped\.txt/,
    },
    {
      name: 'archive entry with an absolute path',
      target: 'absolute.tar.gz',
      body: addSubBody(),
      status: 400,
      code: 'ARCHIVE_REJECTED',
      match: /onnx-mme-absolute-escape/,
    },
    { name: 'archive symlink to /etc/passwd', target: 'symlink.tar.gz', body: addSubBody(), status: 400, code: 'ARCHIVE_REJECTED', match: /model\.onnx/ },
    { name: 'archive with a device file', target: 'device.tar.gz', body: addSubBody(), status: 400, code: 'ARCHIVE_REJECTED', match: /m\/dev/ },
  ];
  it('a missing model: 404 says where it looked (the kind, no host path) and how to list what exists, naming no other model', async () => {
    const r = await invoke('nosuch.tar.gz', addSubBody());
    assert.equal(r.status, 404, r.text);
    assert.equal(
      r.body.error,
      "model 'nosuch.tar.gz' not found in the model source (local directory); POST /v2/repository/index (gRPC: RepositoryIndex) lists the models it holds",
    );
    assert.ok(!r.text.includes(fixture.root) && !r.text.includes('add_sub'), r.text);
    const nested = await invoke('team/nosuch', addSubBody());
    assert.match(nested.body.error, /^model 'team\/nosuch' not found in the model source \(local directory\); POST \/v2\/repository\/index/);
    const kserve = await request(`${server.url}/v2/models/nosuch/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      json: addSubBody(),
    });
    assert.equal(kserve.status, 404, kserve.text);
    assert.match(
      kserve.body.error,
      /^model 'nosuch' not found in the model source \(local directory\); POST \/v2\/repository\/index \(gRPC: RepositoryIndex\) lists the models it holds$/,
    );
    // The route the message names answers, and lists what the source holds.
    const index = await request(`${server.url}/v2/repository/index`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(index.status, 200, index.text);
    assert.ok(
      (index.body as unknown as { name: string }[]).some((m) => m.name === 'add_sub.tar.gz'),
      index.text,
    );
  });

  for (const c of cases) {
    it(`${c.name} → ${c.status} ${c.code}, and the server keeps serving`, async () => {
      const r =
        c.raw === undefined
          ? await invoke(c.target, c.body)
          : await request(`${server.url}/invocations`, {
              method: 'POST',
              headers: { 'X-Amzn-SageMaker-Target-Model': c.target!, 'content-type': 'application/json' },
              body: c.raw,
            });
      assert.equal(r.status, c.status, r.text);
      assert.equal(r.body.code, c.code, r.text);
      assert.match(r.body.error, c.match);
      const ok = await invoke('add_sub.tar.gz', addSubBody());
      assert.equal(ok.status, 200);
    });
  }

  it('a body over the limit → 413', async () => {
    const big = await tempDir(ctx);
    const s = await startTestServer({ modelSource: fixture.root, cacheDir: path.join(big, 'cache'), env: { SAGEMAKER_MAX_PAYLOAD_IN_MB: '1' } });
    try {
      const r = await request(`${s.url}/invocations`, {
        method: 'POST',
        headers: { 'X-Amzn-SageMaker-Target-Model': 'add_sub.tar.gz', 'content-type': 'application/json' },
        body: 'x'.repeat(1024 * 1024 + 1),
      });
      assert.equal(r.status, 413);
      assert.equal(r.body.code, 'PAYLOAD_TOO_LARGE');
      const ok = await request(`${s.url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': 'add_sub.tar.gz' }, json: addSubBody() });
      assert.equal(ok.status, 200);
    } finally {
      await s.close();
    }
  });

  it('failed loads leave nothing half-written in the cache, and nothing escaped', async () => {
    const entries = await readdir(cacheDir);
    for (const bad of ['corrupt', 'traversal', 'absolute', 'symlink', 'device']) assert.ok(!entries.some((e) => e.includes(bad)), entries.join(','));
    await assert.rejects(stat(path.join(cacheDir, '..', 'escaped.txt')), { code: 'ENOENT' });
    await assert.rejects(stat('/tmp/onnx-mme-absolute-escape.txt'), { code: 'ENOENT' });
    assert.ok(
      entries.every((e) => !e.startsWith('.tmp-')),
      entries.join(','),
    );
  });

  it('logs carry the request id and the model name', () => {
    const rejected = server.logs.find((l) => l['msg'] === 'request rejected' && l['target'] === 'nope.tar.gz');
    assert.ok(rejected, 'a warn line for the unknown target');
    assert.equal(typeof rejected['reqId'], 'string');
    const loaded = server.logs.find((l) => l['msg'] === 'model loaded' && l['model'] === 'add_sub.tar.gz');
    assert.ok(loaded);
    assert.equal(loaded['entryModel'], 'add_sub');
  });
});

describe('unknown routes and methods', () => {
  it('404 for an unknown path, 405 for a wrong method, JSON error bodies', async () => {
    const a = await request(`${server.url}/nope`);
    assert.equal(a.status, 404);
    assert.equal(a.body.code, 'ROUTE_NOT_FOUND');
    const b = await request(`${server.url}/invocations`);
    assert.equal(b.status, 405);
    assert.equal(b.body.code, 'METHOD_NOT_ALLOWED');
  });
});
