/**
 * Rank-0 (scalar) tensors with Triton's semantics, through the real server:
 * a graph with a 0-dim input and a 0-dim output (as every silero VAD model
 * has for `sr`) served with no config.pbtxt (auto-complete writes dims [1]),
 * with a hand-written config saying dims [1], dims [ ] or
 * `reshape { shape: [ ] }`; requests in v2 JSON, the binary extension,
 * application/x-npy and text/csv; answers compared with a direct
 * onnxruntime-node run of the same file.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import ort from 'onnxruntime-node';
import { attr, buildModel, node, tensor, valueInfo } from '../../examples/models/onnx-builder.js';
import { writeModelDir } from '../../examples/models/zoo.js';
import { tempDir } from '../support/temp-dir.js';
import { request, startTestServer, type TestServer } from '../support/test-server.js';

const cleanups: (() => Promise<void>)[] = [];
const ctx = { after: (fn: () => Promise<void>) => cleanups.push(fn) };
after(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

/** y[n] = x[n] * float(sr); total = sum(x) (rank 0): two inputs, one of them a scalar, and a scalar output. */
const VAD_LIKE = buildModel({
  inputs: [valueInfo('x', 'FP32', ['n']), valueInfo('sr', 'INT64', [])],
  outputs: [valueInfo('y', 'FP32', ['n']), valueInfo('total', 'FP32', [])],
  nodes: [
    node('Cast', ['sr'], ['srf'], { attributes: { to: attr.int(1) } }),
    node('Mul', ['x', 'srf'], ['y']),
    node('ReduceSum', ['x'], ['total'], { attributes: { keepdims: attr.int(0) } }),
  ],
});

/** half = s * 0.5, both rank 0: one input, so every single-tensor content type can carry it. */
const HALF = buildModel({
  inputs: [valueInfo('s', 'FP32', [])],
  outputs: [valueInfo('half', 'FP32', [])],
  nodes: [node('Mul', ['s', 'k'], ['half'])],
  initializers: [tensor('k', 'FP32', [], [0.5])],
});

const X = [1.5, -2, 4];
const SR = 16000;

function vadConfig(name: string, srDims: string, totalDims: string): string {
  return `name: "${name}"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "sr" data_type: TYPE_INT64 ${srDims} } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "total" data_type: TYPE_FP32 ${totalDims} } ]
`;
}

let server: TestServer;
let direct: { y: number[]; total: number };

before(async () => {
  const root = await tempDir(ctx);
  await writeModelDir(root, 'vad_auto', { onnx: VAD_LIKE });
  await writeModelDir(root, 'vad_one', { onnx: VAD_LIKE, config: vadConfig('vad_one', 'dims: [ 1 ]', 'dims: [ 1 ]') });
  await writeModelDir(root, 'vad_empty', { onnx: VAD_LIKE, config: vadConfig('vad_empty', 'dims: [ ]', 'dims: [ ]') });
  await writeModelDir(root, 'vad_reshape', {
    onnx: VAD_LIKE,
    config: vadConfig('vad_reshape', 'dims: [ 1 ] reshape: { shape: [ ] }', 'dims: [ 1 ] reshape { shape: [ ] }'),
  });
  await writeModelDir(root, 'half', { onnx: HALF });
  server = await startTestServer({ modelSource: root, cacheDir: path.join(await tempDir(ctx), 'cache') });
  cleanups.push(() => server.close());

  const session = await ort.InferenceSession.create(Buffer.from(VAD_LIKE));
  const out = await session.run({ x: new ort.Tensor('float32', Float32Array.from(X), [3]), sr: new ort.Tensor('int64', BigInt64Array.from([BigInt(SR)]), []) });
  direct = { y: Array.from(out['y']!.data as Float32Array), total: (out['total']!.data as Float32Array)[0]! };
  assert.deepEqual(out['total']!.dims, []);
  await session.release();
});

const infer = (model: string, body: unknown) => request(`${server.url}/v2/models/${model}/infer`, { method: 'POST', json: body });

describe('rank-0 tensors', () => {
  for (const [model, shape] of [
    ['vad_auto', [1]],
    ['vad_one', [1]],
    ['vad_reshape', [1]],
    ['vad_empty', []],
  ] as const) {
    it(`${model}: the scalar is sent as shape [${shape.join(',')}] and answered as the direct onnxruntime run`, async () => {
      const r = await infer(model, {
        inputs: [
          { name: 'x', datatype: 'FP32', shape: [3], data: X },
          { name: 'sr', datatype: 'INT64', shape: [...shape], data: [SR] },
        ],
      });
      assert.equal(r.status, 200, r.text);
      const byName = new Map((r.body.outputs as { name: string; shape: number[]; data: number[] }[]).map((o) => [o.name, o]));
      assert.deepEqual(byName.get('y')?.data, direct.y);
      assert.deepEqual(byName.get('total')?.data, [direct.total]);
      assert.deepEqual(byName.get('total')?.shape, [...shape], 'the scalar output has the config shape');
    });
  }

  it('auto-complete shows dims [1] for the scalars, as Triton does, and the config loads back', async () => {
    const r = await request(`${server.url}/v2/models/vad_auto/config`);
    assert.equal(r.status, 200, r.text);
    const sr = (r.body.input as { name: string; dims: number[] }[]).find((t) => t.name === 'sr');
    assert.deepEqual(sr?.dims, [1]);
    assert.equal(r.body.max_batch_size, 0);
  });

  it('a scalar sent with the wrong shape is refused naming the input', async () => {
    const r = await infer('vad_one', {
      inputs: [
        { name: 'x', datatype: 'FP32', shape: [3], data: X },
        { name: 'sr', datatype: 'INT64', shape: [2], data: [SR, SR] },
      ],
    });
    assert.equal(r.status, 400, r.text);
    assert.match(r.body.error, /'sr'/);
  });

  it('binary tensor extension: a scalar input and a binary scalar output', async () => {
    const json = Buffer.from(
      JSON.stringify({
        inputs: [{ name: 's', datatype: 'FP32', shape: [1], parameters: { binary_data_size: 4 } }],
        outputs: [{ name: 'half', parameters: { binary_data: true } }],
      }),
    );
    const value = Buffer.alloc(4);
    value.writeFloatLE(3);
    const res = await fetch(`${server.url}/v2/models/half/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(json.length) },
      body: Buffer.concat([json, value]),
    });
    const body = Buffer.from(await res.arrayBuffer());
    assert.equal(res.status, 200, body.toString());
    const headerLength = Number(res.headers.get('inference-header-content-length'));
    const header = JSON.parse(body.subarray(0, headerLength).toString()) as { outputs: { shape: number[]; parameters: { binary_data_size: number } }[] };
    assert.deepEqual(header.outputs[0]?.shape, [1]);
    assert.equal(header.outputs[0]?.parameters.binary_data_size, 4);
    assert.equal(body.readFloatLE(headerLength), 1.5);
  });

  it('application/x-npy: a one-element array in (the config shape [1]), JSON out', async () => {
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";
    header += ' '.repeat((64 - ((10 + header.length + 1) % 64)) % 64) + '\n';
    const pre = Buffer.alloc(10);
    pre.write('\x93NUMPY', 0, 'latin1');
    pre[6] = 1;
    pre.writeUInt16LE(header.length, 8);
    const value = Buffer.alloc(4);
    value.writeFloatLE(5);
    const res = await fetch(`${server.url}/invocations`, {
      method: 'POST',
      headers: { 'x-amzn-sagemaker-target-model': 'half', 'content-type': 'application/x-npy', accept: 'application/json' },
      body: Buffer.concat([pre, Buffer.from(header, 'latin1'), value]),
    });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    const out = JSON.parse(text) as { outputs: { shape: number[]; data: number[] }[] };
    assert.deepEqual(out.outputs[0]?.data, [2.5]);
  });

  it('text/csv: one value', async () => {
    const res = await fetch(`${server.url}/invocations`, {
      method: 'POST',
      headers: { 'x-amzn-sagemaker-target-model': 'half', 'content-type': 'text/csv', accept: 'application/json' },
      body: '7\n',
    });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    assert.deepEqual((JSON.parse(text) as { outputs: { data: number[] }[] }).outputs[0]?.data, [3.5]);
  });
});
