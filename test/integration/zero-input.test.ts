/**
 * Models that declare no inputs (a constant, or outputs computed from
 * initializers only) are served from an empty `inputs` list on every route:
 * KServe v2 JSON, /invocations, the SageMaker MME invoke route, TF Serving's
 * columnar JSON and gRPC, answered as a direct onnxruntime-node run of the
 * same file answers. Such a model never batches (no request carries a batch
 * dimension): auto-complete gives it max_batch_size 0, a config asking for
 * more is refused naming why, and concurrent requests through a dynamic
 * batcher each get the whole answer.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import ort from 'onnxruntime-node';
import { buildModel, node, tensor, valueInfo } from '../../examples/models/onnx-builder.js';
import { writeModelDir } from '../../examples/models/zoo.js';
import { call, connect, asValues, type GrpcClients } from '../support/grpc-client.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { request, startTestServer, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();

/** y = a + b, both initializers; n = a constant INT64 count. */
const NO_INPUTS = buildModel({
  inputs: [],
  outputs: [valueInfo('y', 'FP32', [2, 3]), valueInfo('n', 'INT64', [1])],
  nodes: [node('Add', ['a', 'b'], ['y']), node('Identity', ['count'], ['n'])],
  initializers: [
    tensor('a', 'FP32', [2, 3], [1, 2, 3, 4, 5, 6]),
    tensor('b', 'FP32', [2, 3], [0.5, 0.25, -1, -2, 0.125, 10]),
    tensor('count', 'INT64', [1], [42n]),
  ],
});

const CONFIG = (name: string, extra = '') => `name: "${name}"
platform: "onnxruntime_onnx"
max_batch_size: 0
output [ { name: "y" data_type: TYPE_FP32 dims: [ 2, 3 ] }, { name: "n" data_type: TYPE_INT64 dims: [ 1 ] } ]
${extra}`;

let server: TestServer;
let clients: GrpcClients;
let direct: { y: number[]; n: number[] };

before(async () => {
  const root = await tempDir(ctx);
  const models = path.join(root, 'models');
  await writeModelDir(models, 'const_auto', { onnx: NO_INPUTS });
  await writeModelDir(models, 'const_batcher', {
    onnx: NO_INPUTS,
    config: CONFIG('const_batcher', 'dynamic_batching { max_queue_delay_microseconds: 50000 }'),
  });
  await writeModelDir(models, 'const_mbs', { onnx: NO_INPUTS, config: CONFIG('const_mbs').replace('max_batch_size: 0', 'max_batch_size: 4') });
  await writeModelDir(path.join(root, 'sagemaker'), 'const', { onnx: NO_INPUTS });
  server = await startTestServer({ modelSource: models, cacheDir: path.join(root, 'cache'), env: { MME_GRPC_PORT: '0' } });
  ctx.after(() => server.close());
  const load = await request(`${server.url}/models`, { method: 'POST', json: { model_name: 'sm_const', url: path.join(root, 'sagemaker', 'const') } });
  assert.equal(load.status, 200, load.text);
  clients = connect(`127.0.0.1:${server.running.grpcPort}`);

  const session = await ort.InferenceSession.create(Buffer.from(NO_INPUTS));
  assert.deepEqual(session.inputNames, []);
  const out = await session.run({});
  direct = { y: Array.from(out['y']!.data as Float32Array), n: Array.from(out['n']!.data as BigInt64Array, Number) };
  await session.release();
});

after(async () => {
  clients?.close();
  await ctx.run();
});

function outputs(body: { outputs: { name: string; shape: number[]; data: number[] }[] }): Record<string, { shape: number[]; data: number[] }> {
  return Object.fromEntries(body.outputs.map((o) => [o.name, { shape: o.shape, data: o.data }]));
}

describe('a model that declares no inputs', () => {
  for (const [name, url, headers] of [
    ['KServe v2', () => `${server.url}/v2/models/const_auto/infer`, {}],
    ['/invocations', () => `${server.url}/invocations`, { 'X-Amzn-SageMaker-Target-Model': 'const_auto' }],
    ['/models/{m}/invoke', () => `${server.url}/models/sm_const/invoke`, {}],
  ] as const) {
    it(`is answered from {"inputs": []} over ${name}, as onnxruntime-node answers`, async () => {
      const r = await request(url(), { method: 'POST', headers, json: { inputs: [] } });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(outputs(r.body), { y: { shape: [2, 3], data: direct.y }, n: { shape: [1], data: direct.n } });
    });
  }

  it('is answered from TF Serving\'s columnar {"inputs": {}}', async () => {
    const r = await request(`${server.url}/v2/models/const_auto/infer`, { method: 'POST', json: { inputs: {} } });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body.outputs, { y: [direct.y.slice(0, 3), direct.y.slice(3)], n: direct.n });
  });

  it('is answered over gRPC from a request with no inputs', async () => {
    const r = await call(clients.inference, 'ModelInfer', { model_name: 'const_auto', inputs: [] });
    assert.equal(r.error, null, r.error?.message);
    assert.deepEqual(asValues(r.response, 'y'), { datatype: 'FP32', shape: [2, 3], values: direct.y });
    assert.deepEqual(asValues(r.response, 'n')?.values, direct.n.map(BigInt));
  });

  it('auto-complete gives it max_batch_size 0 and no inputs', async () => {
    const r = await request(`${server.url}/v2/models/const_auto/config`);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.max_batch_size, 0);
    assert.deepEqual(r.body.input, []);
  });

  it('through a dynamic batcher, concurrent requests each get the whole answer', async () => {
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => request(`${server.url}/v2/models/const_batcher/infer`, { method: 'POST', json: { inputs: [] } })),
    );
    for (const r of answers) {
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(outputs(r.body), { y: { shape: [2, 3], data: direct.y }, n: { shape: [1], data: direct.n } });
    }
  });

  it('a config with max_batch_size > 0 is refused, saying a model without inputs cannot batch', async () => {
    const r = await request(`${server.url}/v2/models/const_mbs/infer`, { method: 'POST', json: { inputs: [] } });
    assert.equal(r.status, 400, r.text);
    assert.match(r.body.error, /model 'const_mbs': .*declares no inputs.*max_batch_size: 0/);
  });

  it('an input sent to it is refused by name', async () => {
    const r = await request(`${server.url}/v2/models/const_auto/infer`, {
      method: 'POST',
      json: { inputs: [{ name: 'x', datatype: 'FP32', shape: [1], data: [1] }] },
    });
    assert.equal(r.status, 400, r.text);
    assert.match(r.body.error, /unexpected inference input 'x'; the model declares no inputs \(send "inputs": \[\]\)/);
  });
});
