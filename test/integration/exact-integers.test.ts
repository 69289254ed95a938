/**
 * INT64 and UINT64 values beyond 2^53 through every text protocol, both
 * ways, against a direct onnxruntime-node run of the same models: KServe v2
 * JSON, the SageMaker routes' JSON (/invocations and /models/{m}/invoke),
 * TF Serving JSON (row and columnar), text/csv and the classification
 * extension's strings, and gRPC (typed contents and raw). JSON.parse would
 * read 9007199254740993 as 9007199254740992; the answers here must hold
 * every digit, and a value that cannot be read exactly (a float beyond 2^53)
 * is refused with 400 naming the input and the value, never rounded.
 * Answers are read with a digit-exact reader of the test's own (a regular
 * expression over the answer text), never JSON.parse.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import ort from 'onnxruntime-node';
import { attr, buildModel, node, valueInfo } from '../../examples/models/onnx-builder.js';
import { configText, identity, writeModelDir } from '../../examples/models/zoo.js';
import { asValues, call, connect, inferRequest, type GrpcClients } from '../support/grpc-client.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();

const P53 = 2n ** 53n;
/** ±(2^53 + 1) and the type limits: each one a double cannot hold. */
const INT64_VALUES = [P53 + 1n, -(P53 + 1n), -(2n ** 63n), 2n ** 63n - 1n];
const UINT64_VALUES = [P53 + 1n, 9223372036854775810n, 2n ** 64n - 1n, 0n];
const TYPES = [
  { dt: 'INT64', model: 'id_int64', values: INT64_VALUES },
  { dt: 'UINT64', model: 'id_uint64', values: UINT64_VALUES },
] as const;

/** y = x + 1 over INT64: arithmetic, not only a copy. */
const ADD_ONE = buildModel({
  inputs: [valueInfo('x', 'INT64', ['batch', 4])],
  outputs: [valueInfo('y', 'INT64', ['batch', 4])],
  nodes: [node('Constant', [], ['one'], { attributes: { value_int: attr.int(1) } }), node('Add', ['x', 'one'], ['y'])],
});

let server: TestServer;
let clients: GrpcClients;
/** The direct onnxruntime-node answers: model → output values. */
const direct = new Map<string, bigint[]>();

async function runDirect(onnx: Uint8Array, dt: 'INT64' | 'UINT64', input: string, values: readonly bigint[]): Promise<bigint[]> {
  const session = await ort.InferenceSession.create(Buffer.from(onnx));
  try {
    const data = dt === 'INT64' ? BigInt64Array.from(values) : BigUint64Array.from(values);
    const out = await session.run({ [input]: new ort.Tensor(dt === 'INT64' ? 'int64' : 'uint64', data, [1, values.length]) });
    return Array.from(out[session.outputNames[0]!]!.data as BigInt64Array | BigUint64Array);
  } finally {
    await session.release();
  }
}

before(async () => {
  const root = await tempDir(ctx);
  const models = path.join(root, 'models');
  for (const { dt, model, values } of TYPES) {
    const m = identity(dt, [4]);
    await writeModelDir(models, model, m);
    await writeModelDir(path.join(root, 'sagemaker'), model, m);
    direct.set(model, await runDirect(m.onnx, dt, 'INPUT0', values));
  }
  await writeModelDir(models, 'add_one', {
    onnx: ADD_ONE,
    config: configText({ maxBatchSize: 8, inputs: [{ name: 'x', dataType: 'INT64', dims: [4] }], outputs: [{ name: 'y', dataType: 'INT64', dims: [4] }] }),
  });
  direct.set('add_one', await runDirect(ADD_ONE, 'INT64', 'x', [P53, -(P53 + 2n), 2n ** 62n, 2n ** 63n - 2n]));
  server = await startTestServer({ modelSource: models, cacheDir: path.join(root, 'cache'), env: { MME_GRPC_PORT: '0' } });
  ctx.after(() => server.close());
  for (const { model } of TYPES) {
    const r = await post('/models', JSON.stringify({ model_name: `sm_${model}`, url: path.join(root, 'sagemaker', model) }), {
      'content-type': 'application/json',
    });
    assert.equal(r.status, 200, r.text);
  }
  clients = connect(`127.0.0.1:${server.running.grpcPort}`);
});

after(async () => {
  clients?.close();
  await ctx.run();
});

async function post(route: string, body: string, headers: Record<string, string>): Promise<{ status: number; text: string }> {
  const res = await fetch(`${server.url}${route}`, { method: 'POST', headers, body });
  return { status: res.status, text: await res.text() };
}

/** JSON text of an array of integers, written as plain integer literals (what Python's json writes). */
function literals(values: readonly bigint[]): string {
  return `[${values.join(',')}]`;
}

/** The integers of the first JSON array after `key` in `text`, digit for digit. */
function integersAfter(text: string, key: string): bigint[] {
  const at = text.indexOf(key);
  assert.ok(at >= 0, `no ${key} in ${text}`);
  const m = /\[\s*(-?\d+(?:\s*,\s*-?\d+)*)\s*\]/.exec(text.slice(at));
  assert.ok(m, `no integer array after ${key} in ${text}`);
  return m[1]!.split(',').map((s) => BigInt(s.trim()));
}

function v2Body(dt: string, input: string, values: readonly bigint[], extra = ''): string {
  return `{"inputs":[{"name":"${input}","datatype":"${dt}","shape":[1,${values.length}],"data":${literals(values)}}]${extra}}`;
}

const JSON_ROUTES = [
  { name: 'KServe v2 /v2/models/{m}/infer', route: (m: string) => `/v2/models/${m}/infer`, headers: (_m: string) => ({}) },
  { name: 'SageMaker /invocations', route: (_m: string) => '/invocations', headers: (m: string) => ({ 'X-Amzn-SageMaker-Target-Model': m }) },
  { name: 'SageMaker /models/{m}/invoke', route: (m: string) => `/models/sm_${m}/invoke`, headers: (_m: string) => ({}) },
];

describe('64-bit integers beyond 2^53 are exact both ways', () => {
  for (const { dt, model, values } of TYPES) {
    for (const r of JSON_ROUTES) {
      it(`${dt} in JSON numbers over ${r.name}`, async () => {
        const a = await post(r.route(model), v2Body(dt, 'INPUT0', values), { ...r.headers(model), 'content-type': 'application/json' });
        assert.equal(a.status, 200, a.text);
        assert.deepEqual(integersAfter(a.text, '"data"'), direct.get(model));
      });

      it(`${dt} in TF Serving JSON over ${r.name} (row and columnar)`, async () => {
        const row = await post(r.route(model), `{"instances":[${literals(values)}]}`, { ...r.headers(model), 'content-type': 'application/json' });
        assert.equal(row.status, 200, row.text);
        assert.deepEqual(integersAfter(row.text, '"predictions"'), direct.get(model));
        const col = await post(r.route(model), `{"inputs":[${literals(values)}]}`, { ...r.headers(model), 'content-type': 'application/json' });
        assert.equal(col.status, 200, col.text);
        assert.deepEqual(integersAfter(col.text, '"outputs"'), direct.get(model));
      });

      it(`${dt} in text/csv over ${r.name}`, async () => {
        const a = await post(r.route(model), `${values.join(',')}\n`, { ...r.headers(model), 'content-type': 'text/csv', accept: 'text/csv' });
        assert.equal(a.status, 200, a.text);
        assert.deepEqual(a.text.trim().split(',').map(BigInt), direct.get(model));
      });
    }

    it(`${dt}: decimal strings keep working`, async () => {
      const body = `{"inputs":[{"name":"INPUT0","datatype":"${dt}","shape":[1,4],"data":${JSON.stringify(values.map(String))}}]}`;
      const a = await post(`/v2/models/${model}/infer`, body, { 'content-type': 'application/json' });
      assert.equal(a.status, 200, a.text);
      assert.deepEqual(integersAfter(a.text, '"data"'), direct.get(model));
    });

    it(`${dt}: the classification extension's strings carry every digit`, async () => {
      const a = await post(`/v2/models/${model}/infer`, v2Body(dt, 'INPUT0', values, ',"outputs":[{"name":"OUTPUT0","parameters":{"classification":4}}]'), {
        'content-type': 'application/json',
      });
      assert.equal(a.status, 200, a.text);
      const expected = direct
        .get(model)!
        .map((v, i) => [v, i] as const)
        .sort((x, y) => (x[0] > y[0] ? -1 : x[0] < y[0] ? 1 : x[1] - y[1]));
      assert.deepEqual(
        JSON.parse(a.text).outputs[0].data,
        expected.map(([v, i]) => `${v}:${i}`),
      );
    });

    it(`${dt} over gRPC, raw and typed contents`, async () => {
      const raw = await call(clients.inference, 'ModelInfer', inferRequest(model, [{ name: 'INPUT0', datatype: dt, shape: [1, 4], values }]));
      assert.equal(raw.error, null, raw.error?.message);
      assert.deepEqual(asValues(raw.response, 'OUTPUT0')?.values, direct.get(model));
      const typed = await call(clients.inference, 'ModelInfer', {
        model_name: model,
        inputs: [{ name: 'INPUT0', datatype: dt, shape: [1, 4], contents: { [dt === 'INT64' ? 'int64_contents' : 'uint64_contents']: values.map(String) } }],
      });
      assert.equal(typed.error, null, typed.error?.message);
      assert.deepEqual(asValues(typed.response, 'OUTPUT0')?.values, direct.get(model));
    });
  }

  it('arithmetic on INT64 near the limits matches onnxruntime-node (x + 1)', async () => {
    const a = await post('/v2/models/add_one/infer', v2Body('INT64', 'x', [P53, -(P53 + 2n), 2n ** 62n, 2n ** 63n - 2n]), {
      'content-type': 'application/json',
    });
    assert.equal(a.status, 200, a.text);
    assert.deepEqual(integersAfter(a.text, '"data"'), direct.get('add_one'));
    assert.deepEqual(direct.get('add_one'), [P53 + 1n, -(P53 + 1n), 2n ** 62n + 1n, 2n ** 63n - 1n]);
  });

  it('the binary extension with JSON data for another output stays exact (a JSON header read exactly)', async () => {
    const header = v2Body('INT64', 'INPUT0', INT64_VALUES, ',"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":false}}]');
    const a = await post('/v2/models/id_int64/infer', header, {
      'content-type': 'application/octet-stream',
      'inference-header-content-length': String(Buffer.byteLength(header)),
    });
    assert.equal(a.status, 200, a.text);
    assert.deepEqual(integersAfter(a.text, '"data"'), direct.get('id_int64'));
  });
});

describe('64-bit integers that cannot be read exactly are refused, never rounded', () => {
  const cases = [
    {
      name: 'a float beyond 2^53 in v2 JSON',
      route: '/v2/models/id_int64/infer',
      type: 'application/json',
      body: '{"inputs":[{"name":"INPUT0","datatype":"INT64","shape":[1,4],"data":[9.007199254740993e15,1,2,3]}]}',
      match: /input 'INPUT0': element 0 is 9007199254740992 written with a fraction or an exponent/,
    },
    {
      name: 'a fraction beyond 2^53 in v2 JSON',
      route: '/v2/models/id_uint64/infer',
      type: 'application/json',
      body: '{"inputs":[{"name":"INPUT0","datatype":"UINT64","shape":[1,4],"data":[1,2,3,9007199254740993.0]}]}',
      match: /input 'INPUT0': element 3 is 9007199254740992 written with a fraction or an exponent/,
    },
    {
      name: 'a float beyond 2^53 in TF Serving JSON',
      route: '/v2/models/id_int64/infer',
      type: 'application/json',
      body: '{"instances":[[1,2,3,-9.007199254740993e15]]}',
      match: /input 'INPUT0': element 3 is -9007199254740992 written with a fraction or an exponent/,
    },
    {
      name: 'a float beyond 2^53 in text/csv',
      route: '/v2/models/id_uint64/infer',
      type: 'text/csv',
      body: '1,2,3,9.007199254740993e15\n',
      match: /input 'INPUT0': element 3 is 9007199254740992 written with a fraction or an exponent/,
    },
    {
      name: 'UINT64 max + 1',
      route: '/v2/models/id_uint64/infer',
      type: 'application/json',
      body: '{"inputs":[{"name":"INPUT0","datatype":"UINT64","shape":[1,4],"data":[18446744073709551616,1,2,3]}]}',
      match: /input 'INPUT0': element 0 \(18446744073709551616\) is out of range for UINT64/,
    },
    {
      name: 'a float beyond INT64 max',
      route: '/v2/models/id_int64/infer',
      type: 'application/json',
      body: '{"inputs":[{"name":"INPUT0","datatype":"INT64","shape":[1,4],"data":[1,2,3,1e300]}]}',
      match: /input 'INPUT0': element 3 \(1e\+300\) is out of range for INT64/,
    },
    {
      name: 'INT64 min - 1',
      route: '/v2/models/id_int64/infer',
      type: 'application/json',
      body: '{"inputs":[{"name":"INPUT0","datatype":"INT64","shape":[1,4],"data":[1,-9223372036854775809,2,3]}]}',
      match: /input 'INPUT0': element 1 \(-9223372036854775809\) is out of range for INT64/,
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const a = await post(c.route, c.body, { 'content-type': c.type });
      assert.equal(a.status, 400, a.text);
      assert.match(JSON.parse(a.text).error, c.match);
    });
  }
});
