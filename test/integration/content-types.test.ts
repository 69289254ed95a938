/**
 * The other content types through the real server, on /invocations, the MME
 * invoke route and /v2/models/{m}/infer: text/csv (answered as CSV or JSON by
 * Accept), application/x-npy in and out (files written and read by a small
 * independent .npy codec below), TF Serving JSON (row and columnar), and the
 * 415 / 406 / 400 answers for what cannot be served. Every answer is
 * compared with the KServe v2 JSON answer for the same numbers.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { denseForward } from '../../examples/models/zoo.js';
import { buildModelSource, type SourceFixture } from '../support/model-source-fixture.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();

let server: TestServer;
let fixture: SourceFixture;
let workDir: string;

const FEATURES = 32;
const BATCH = 3;
const X = Array.from({ length: BATCH * FEATURES }, (_, i) => Math.round(Math.sin(i) * 1000) / 1000);
const rows = (values: readonly number[], width: number): number[][] =>
  Array.from({ length: values.length / width }, (_, r) => values.slice(r * width, (r + 1) * width));

// ------------------------------------------------------------ a small independent .npy codec

function npy(descr: string, shape: readonly number[], data: Buffer, fortran = false): Buffer {
  const dims = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': ${fortran ? 'True' : 'False'}, 'shape': ${dims}, }`;
  header += ' '.repeat((64 - ((10 + header.length + 1) % 64)) % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1;
  pre.writeUInt16LE(header.length, 8);
  return Buffer.concat([pre, Buffer.from(header, 'latin1'), data]);
}

function f32(values: readonly number[]): Buffer {
  const b = Buffer.alloc(values.length * 4);
  values.forEach((v, i) => b.writeFloatLE(v, i * 4));
  return b;
}

function readNpy(file: Buffer): { descr: string; shape: number[]; values: number[] } {
  assert.equal(file.subarray(0, 6).toString('latin1'), '\x93NUMPY');
  const len = file.readUInt16LE(8);
  const header = file.subarray(10, 10 + len).toString('latin1');
  const descr = /'descr': '([^']+)'/.exec(header)![1]!;
  assert.match(header, /'fortran_order': False/);
  const shape = /'shape': \(([^)]*)\)/
    .exec(header)![1]!
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map(Number);
  const data = file.subarray(10 + len);
  assert.equal(descr, '<f4', 'these tests read float32 answers');
  const values = Array.from({ length: data.length / 4 }, (_, i) => data.readFloatLE(i * 4));
  return { descr, shape, values };
}

// ------------------------------------------------------------ helpers

interface Answer {
  readonly status: number;
  readonly type: string;
  readonly text: string;
  readonly bytes: Buffer;
}

async function send(url: string, body: string | Buffer, headers: Record<string, string>): Promise<Answer> {
  const res = await fetch(url, { method: 'POST', headers, body });
  const bytes = Buffer.from(await res.arrayBuffer());
  return { status: res.status, type: res.headers.get('content-type') ?? '', text: bytes.toString('utf8'), bytes };
}

function json(a: Answer): any {
  // test convenience
  return JSON.parse(a.text);
}

/** The v2 JSON answer for mlp on X: what every other format must agree with. */
let reference: number[];

interface Route {
  readonly name: string;
  url(): string;
  readonly headers: Record<string, string>;
}

const ROUTES: Route[] = [
  { name: '/invocations', url: () => `${server.url}/invocations`, headers: { 'X-Amzn-SageMaker-Target-Model': 'mlp.tar.gz' } },
  { name: '/models/{m}/invoke', url: () => `${server.url}/models/ct-mlp/invoke`, headers: {} },
  { name: '/v2/models/{m}/infer', url: () => `${server.url}/v2/models/mlp.tar.gz/infer`, headers: {} },
];

before(async () => {
  const root = await tempDir(ctx);
  workDir = path.join(root, 'work');
  fixture = await buildModelSource(path.join(root, 'models'), workDir);
  server = await startTestServer({ modelSource: fixture.root, cacheDir: path.join(root, 'cache') });
  const load = await send(`${server.url}/models`, JSON.stringify({ model_name: 'ct-mlp', url: path.join(workDir, 'mlp') }), {
    'content-type': 'application/json',
  });
  assert.equal(load.status, 200, load.text);
  const r = await send(ROUTES[0]!.url(), JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [BATCH, FEATURES], data: X }] }), {
    ...ROUTES[0]!.headers,
    'content-type': 'application/json',
  });
  assert.equal(r.status, 200, r.text);
  reference = json(r).outputs[0].data as number[];
  // And the reference itself is the model's maths.
  const expected = denseForward(fixture.mlp.layers, Float32Array.from(X), BATCH);
  reference.forEach((v, i) => assert.ok(Math.abs(v - expected[i]!) < 1e-4));
});

after(async () => {
  await server.close();
  await ctx.run();
});

for (const route of ROUTES) {
  describe(`content types on ${route.name}`, () => {
    const csvBody =
      rows(X, FEATURES)
        .map((r) => r.join(','))
        .join('\n') + '\n';

    it('text/csv in, JSON out (no Accept)', async () => {
      const r = await send(route.url(), csvBody, { ...route.headers, 'content-type': 'text/csv' });
      assert.equal(r.status, 200, r.text);
      assert.match(r.type, /^application\/json/);
      assert.deepEqual(json(r).outputs[0].shape, [BATCH, 8]);
      assert.deepEqual(json(r).outputs[0].data, reference);
    });

    it('text/csv in, text/csv out (Accept: text/csv)', async () => {
      const r = await send(route.url(), csvBody, { ...route.headers, 'content-type': 'text/csv', accept: 'text/csv' });
      assert.equal(r.status, 200, r.text);
      assert.match(r.type, /^text\/csv/);
      const lines = r.text.trimEnd().split('\n');
      assert.equal(lines.length, BATCH);
      assert.deepEqual(
        lines.flatMap((l) => l.split(',').map(Number)),
        reference,
      );
    });

    it('application/x-npy in and out', async () => {
      const r = await send(route.url(), npy('<f4', [BATCH, FEATURES], f32(X)), {
        ...route.headers,
        'content-type': 'application/x-npy',
        accept: 'application/x-npy',
      });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.type, 'application/x-npy');
      const back = readNpy(r.bytes);
      assert.deepEqual(back.shape, [BATCH, 8]);
      assert.deepEqual(back.values, reference);
    });

    it('application/x-npy in, JSON out', async () => {
      const r = await send(route.url(), npy('<f4', [BATCH, FEATURES], f32(X)), { ...route.headers, 'content-type': 'application/x-npy' });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(json(r).outputs[0].data, reference);
    });

    it('TF Serving {"instances"} → {"predictions"}', async () => {
      const r = await send(route.url(), JSON.stringify({ instances: rows(X, FEATURES) }), { ...route.headers, 'content-type': 'application/json' });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(json(r), { predictions: rows(reference, 8) });
    });

    it('TF Serving {"inputs"} (columnar) → {"outputs"}', async () => {
      const r = await send(route.url(), JSON.stringify({ inputs: rows(X, FEATURES) }), { ...route.headers, 'content-type': 'application/json' });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(json(r), { outputs: rows(reference, 8) });
    });

    const bad: { name: string; body: string | Buffer; headers: Record<string, string>; status: number; code: string; match: RegExp }[] = [
      {
        name: 'CSV with ragged rows',
        body: '1,2,3\n4,5\n',
        headers: { 'content-type': 'text/csv' },
        status: 400,
        code: 'INVALID_INPUT',
        match: /text\/csv: line 2 has 2 values but line 1 has 3/,
      },
      {
        name: 'CSV with a non-number',
        body: `${'1,'.repeat(31)}x\n`,
        headers: { 'content-type': 'text/csv' },
        status: 400,
        code: 'INVALID_INPUT',
        match: /row 1, column 32: 'x' is not a number/,
      },
      {
        name: 'CSV of the wrong width',
        body: '1,2,3\n',
        headers: { 'content-type': 'text/csv' },
        status: 400,
        code: 'INVALID_INPUT',
        match: /unexpected shape for input 'INPUT0'. Expected \[-1,32\], got \[1,3\]/,
      },
      {
        name: '.npy in Fortran order',
        body: npy('<f4', [BATCH, FEATURES], f32(X), true),
        headers: { 'content-type': 'application/x-npy' },
        status: 400,
        code: 'INVALID_INPUT',
        match: /Fortran-order/,
      },
      {
        name: '.npy with an unsupported dtype',
        body: npy('<c8', [1, FEATURES], Buffer.alloc(FEATURES * 8)),
        headers: { 'content-type': 'application/x-npy' },
        status: 400,
        code: 'INVALID_INPUT',
        match: /unsupported dtype '<c8'/,
      },
      {
        name: '.npy of float64 for a float32 model',
        body: npy('<f8', [1, FEATURES], Buffer.alloc(FEATURES * 8)),
        headers: { 'content-type': 'application/x-npy' },
        status: 400,
        code: 'INVALID_INPUT',
        match: /data-type is 'FP64', but the model expects 'FP32'/,
      },
      {
        name: 'TF Serving ragged instances',
        body: JSON.stringify({ instances: [[1, 2], [3]] }),
        headers: { 'content-type': 'application/json' },
        status: 400,
        code: 'INVALID_INPUT',
        match: /ragged values/,
      },
      {
        name: 'an unaccepted content type',
        body: 'x',
        headers: { 'content-type': 'image/png' },
        status: 415,
        code: 'UNSUPPORTED_MEDIA_TYPE',
        match: /content type 'image\/png' is not accepted; accepted: application\/json, .*text\/csv, application\/x-npy/,
      },
      {
        name: 'a malformed content type',
        body: 'x',
        headers: { 'content-type': 'not a type' },
        status: 415,
        code: 'UNSUPPORTED_MEDIA_TYPE',
        match: /malformed Content-Type/,
      },
      {
        name: 'an impossible Accept',
        body: '1\n',
        headers: { 'content-type': 'text/csv', accept: 'image/png' },
        status: 406,
        code: 'NOT_ACCEPTABLE',
        match: /cannot answer in any type of Accept 'image\/png'/,
      },
    ];
    for (const c of bad) {
      it(`${c.name} → ${c.status} ${c.code}, and the server keeps serving`, async () => {
        const r = await send(route.url(), c.body, { ...route.headers, ...c.headers });
        assert.equal(r.status, c.status, r.text);
        assert.equal(json(r).code, c.code);
        assert.match(json(r).error, c.match);
        const ok = await send(route.url(), csvBody, { ...route.headers, 'content-type': 'text/csv' });
        assert.equal(ok.status, 200);
      });
    }
  });
}

describe('models with several inputs or outputs', () => {
  const target = { 'X-Amzn-SageMaker-Target-Model': 'add_sub.tar.gz' };
  const a = Array.from({ length: 16 }, (_, i) => i);
  const b = Array.from({ length: 16 }, () => 2);

  it('CSV needs a model with one input: 400 naming the inputs', async () => {
    const r = await send(`${server.url}/invocations`, `${a.join(',')}\n`, { ...target, 'content-type': 'text/csv' });
    assert.equal(r.status, 400, r.text);
    assert.match(json(r).error, /text\/csv needs a model with exactly one input; this one has 'INPUT0', 'INPUT1'/);
  });

  it('a CSV answer needs one output: 406 naming the outputs; selecting one output works', async () => {
    const body = {
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: a },
        { name: 'INPUT1', datatype: 'FP32', shape: [1, 16], data: b },
      ],
    };
    const r = await send(`${server.url}/invocations`, JSON.stringify(body), { ...target, 'content-type': 'application/json', accept: 'text/csv' });
    assert.equal(r.status, 406, r.text);
    assert.match(json(r).error, /text\/csv carries one tensor but the request gets 2 outputs \('OUTPUT0', 'OUTPUT1'\)/);
    const one = await send(`${server.url}/invocations`, JSON.stringify({ ...body, outputs: [{ name: 'OUTPUT1' }] }), {
      ...target,
      'content-type': 'application/json',
      accept: 'text/csv',
    });
    assert.equal(one.status, 200, one.text);
    assert.equal(one.text, `${a.map((x) => x - 2).join(',')}\n`);
  });

  it('TF Serving named instances feed several inputs; predictions name the outputs', async () => {
    const r = await send(`${server.url}/invocations`, JSON.stringify({ instances: [{ INPUT0: a, INPUT1: b }] }), {
      ...target,
      'content-type': 'application/json',
    });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(json(r), { predictions: [{ OUTPUT0: a.map((x) => x + 2), OUTPUT1: a.map((x) => x - 2) }] });
  });

  it('JSON without a Content-Type, or as text/plain (fetch and curl defaults), is still read', async () => {
    const body = JSON.stringify({
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: a },
        { name: 'INPUT1', datatype: 'FP32', shape: [1, 16], data: b },
      ],
    });
    for (const ct of ['text/plain;charset=UTF-8', 'application/x-www-form-urlencoded']) {
      const r = await send(`${server.url}/invocations`, body, { ...target, 'content-type': ct });
      assert.equal(r.status, 200, `${ct}: ${r.text}`);
    }
    const res = await fetch(`${server.url}/invocations`, { method: 'POST', headers: target, body: Buffer.from(body) });
    assert.equal(res.status, 200);
  });
});

describe('SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT', () => {
  it('decides the answer when Accept is missing or */*', async () => {
    const dir = await tempDir(ctx);
    const s = await startTestServer({
      modelSource: fixture.root,
      cacheDir: path.join(dir, 'cache'),
      env: { SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT: 'text/csv' },
    });
    try {
      const body = `${X.slice(0, FEATURES).join(',')}\n`;
      const headers = { 'X-Amzn-SageMaker-Target-Model': 'mlp.tar.gz', 'content-type': 'text/csv' };
      const plain = await send(`${s.url}/invocations`, body, headers);
      assert.equal(plain.status, 200, plain.text);
      assert.match(plain.type, /^text\/csv/);
      assert.deepEqual(plain.text.trim().split(',').map(Number), reference.slice(0, 8));
      const any = await send(`${s.url}/invocations`, body, { ...headers, accept: '*/*' });
      assert.match(any.type, /^text\/csv/);
      const asked = await send(`${s.url}/invocations`, body, { ...headers, accept: 'application/json' });
      assert.match(asked.type, /^application\/json/);
    } finally {
      await s.close();
    }
  });
});
