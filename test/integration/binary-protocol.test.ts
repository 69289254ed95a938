/**
 * The KServe v2 binary tensor extension through the real server, on every
 * inference route: /invocations (Inference-Header-Content-Length, and
 * SageMaker's application/vnd.sagemaker-triton.binary+json;json-header-size=N),
 * the MME invoke route, and /v2/models/{m}/infer. Requests are built and
 * answers read by the small encoder/decoder below, written here from the
 * protocol description and independent of the server's codec. Every
 * malformed body is a 400 with the reason, and the server keeps serving.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { IDENTITY_TYPES } from '../../examples/models/zoo.js';
import { buildModelSource, type SourceFixture } from '../support/model-source-fixture.js';
import { rawBytes as tensorBytes, readRaw as readValues, type Value } from '../support/raw-tensor.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();

let server: TestServer;
let fixture: SourceFixture;

// ------------------------------------------------------------ independent wire codec
// (tensor bytes: test/support/raw-tensor.ts, shared with the gRPC tests; none of it is the server's code)

interface WireInput {
  readonly name: string;
  readonly datatype: string;
  readonly shape: readonly number[];
  readonly values: readonly Value[];
  /** Send as JSON `data` instead of binary. */
  readonly json?: boolean;
}

/** JSON header + binary tensors, in input order. */
function encodeRequest(inputs: readonly WireInput[], extra: Record<string, unknown> = {}): { body: Buffer; headerLength: number } {
  const binary: Buffer[] = [];
  const header = {
    ...extra,
    inputs: inputs.map((i) => {
      if (i.json) return { name: i.name, datatype: i.datatype, shape: i.shape, data: i.values };
      const bytes = tensorBytes(i.datatype, i.values);
      binary.push(bytes);
      return { name: i.name, datatype: i.datatype, shape: i.shape, parameters: { binary_data_size: bytes.length } };
    }),
  };
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  return { body: Buffer.concat([json, ...binary]), headerLength: json.length };
}

interface WireOutput {
  readonly name: string;
  readonly datatype: string;
  readonly shape: number[];
  readonly values: Value[];
  readonly binary: boolean;
}

interface WireResponse {
  readonly status: number;
  readonly contentType: string;
  readonly headerLength: string | null;
  readonly json: {
    model_name?: string;
    outputs?: { name: string; datatype: string; shape: number[]; data?: Value[]; parameters?: { binary_data_size?: number } }[];
    error?: string;
    code?: string;
  };
  readonly outputs: Map<string, WireOutput>;
}

/** Split a response by its JSON length (header, or json-header-size in the content type) and read each binary output. */
async function decodeResponse(res: Response): Promise<WireResponse> {
  const body = Buffer.from(await res.arrayBuffer());
  const contentType = res.headers.get('content-type') ?? '';
  const headerLength = res.headers.get('inference-header-content-length');
  const fromType = /json-header-size=(\d+)/.exec(contentType)?.[1];
  const n = headerLength !== null ? Number(headerLength) : fromType !== undefined ? Number(fromType) : body.length;
  const json = JSON.parse(body.subarray(0, n).toString('utf8')) as WireResponse['json'];
  const outputs = new Map<string, WireOutput>();
  let offset = n;
  for (const o of json.outputs ?? []) {
    const size = o.parameters?.binary_data_size;
    if (size === undefined) {
      outputs.set(o.name, { name: o.name, datatype: o.datatype, shape: o.shape, values: o.data ?? [], binary: false });
    } else {
      outputs.set(o.name, {
        name: o.name,
        datatype: o.datatype,
        shape: o.shape,
        values: readValues(o.datatype, body.subarray(offset, offset + size)),
        binary: true,
      });
      offset += size;
    }
  }
  assert.equal(offset, body.length, 'the response has exactly the binary bytes its JSON announces');
  return { status: res.status, contentType, headerLength, json, outputs };
}

function post(url: string, body: Buffer, headers: Record<string, string>): Promise<Response> {
  return fetch(url, { method: 'POST', headers, body });
}

const SEQ = Array.from({ length: 16 }, (_, i) => i * 0.5);
const ONES = Array.from({ length: 16 }, () => 1);

function addSubRequest(extra: Record<string, unknown> = {}) {
  return encodeRequest(
    [
      { name: 'INPUT0', datatype: 'FP32', shape: [1, 16], values: SEQ },
      { name: 'INPUT1', datatype: 'FP32', shape: [1, 16], values: ONES, json: true },
    ],
    extra,
  );
}

before(async () => {
  const root = await tempDir(ctx);
  fixture = await buildModelSource(path.join(root, 'models'), path.join(root, 'work'));
  server = await startTestServer({ modelSource: fixture.root, cacheDir: path.join(root, 'cache') });
});

after(async () => {
  await server.close();
  await ctx.run();
});

describe('binary requests and answers on every inference route', () => {
  it('/invocations with Inference-Header-Content-Length: binary and JSON inputs mixed, one binary output', async () => {
    const { body, headerLength } = addSubRequest({ outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }, { name: 'OUTPUT1' }] });
    const r = await decodeResponse(
      await post(`${server.url}/invocations`, body, {
        'X-Amzn-SageMaker-Target-Model': 'add_sub.tar.gz',
        'Content-Type': 'application/octet-stream',
        'Inference-Header-Content-Length': String(headerLength),
      }),
    );
    assert.equal(r.status, 200, JSON.stringify(r.json));
    // SageMaker routes answer with SageMaker's content type, which carries the JSON length.
    assert.equal(r.contentType, `application/vnd.sagemaker-triton.binary+json;json-header-size=${r.headerLength}`);
    assert.equal(r.json.model_name, 'add_sub');
    const out0 = r.outputs.get('OUTPUT0')!;
    assert.equal(out0.binary, true);
    assert.deepEqual(out0.shape, [1, 16]);
    assert.deepEqual(
      out0.values,
      SEQ.map((x) => x + 1),
    );
    const out1 = r.outputs.get('OUTPUT1')!;
    assert.equal(out1.binary, false);
    assert.deepEqual(
      out1.values,
      SEQ.map((x) => x - 1),
    );
  });

  it('/invocations with the SageMaker content type and binary_data_output: every output binary', async () => {
    const { body, headerLength } = addSubRequest({ parameters: { binary_data_output: true } });
    const r = await decodeResponse(
      await post(`${server.url}/invocations`, body, {
        'X-Amzn-SageMaker-Target-Model': 'add_sub.tar.gz',
        'Content-Type': `application/vnd.sagemaker-triton.binary+json;json-header-size=${headerLength}`,
      }),
    );
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.match(r.contentType, /^application\/vnd\.sagemaker-triton\.binary\+json;json-header-size=\d+$/);
    assert.deepEqual(
      r.outputs.get('OUTPUT0')!.values,
      SEQ.map((x) => x + 1),
    );
    assert.equal(r.outputs.get('OUTPUT1')!.binary, true);
    assert.deepEqual(
      r.outputs.get('OUTPUT1')!.values,
      SEQ.map((x) => x - 1),
    );
  });

  it('the SageMaker Runtime path /endpoints/{e}/invocations takes it too', async () => {
    const { body, headerLength } = addSubRequest({ parameters: { binary_data_output: true } });
    const res = await post(`${server.url}/endpoints/ep/invocations`, body, {
      'X-Amzn-SageMaker-Target-Model': 'add_sub.tar.gz',
      'Content-Type': `application/vnd.sagemaker-triton.binary+json;json-header-size=${headerLength}`,
    });
    assert.deepEqual(
      (await decodeResponse(res)).outputs.get('OUTPUT0')!.values,
      SEQ.map((x) => x + 1),
    );
  });

  it('the MME invoke route /models/{name}/invoke', async () => {
    const load = await fetch(`${server.url}/models`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model_name: 'bin-identity', url: path.join(fixture.root, 'identity_int32') }),
    });
    assert.equal(load.status, 200, await load.text());
    const { body, headerLength } = encodeRequest([{ name: 'INPUT0', datatype: 'INT32', shape: [2, 3], values: [1, -2, 3, 2147483647, -2147483648, 0] }], {
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
    });
    const r = await decodeResponse(
      await post(`${server.url}/models/bin-identity/invoke`, body, {
        'Content-Type': `application/vnd.sagemaker-triton.binary+json;json-header-size=${headerLength}`,
      }),
    );
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.deepEqual(r.outputs.get('OUTPUT0')!.values, [1, -2, 3, 2147483647, -2147483648, 0]);
    const unload = await fetch(`${server.url}/models/bin-identity`, { method: 'DELETE' });
    assert.equal(unload.status, 200);
  });

  it('/v2/models/{m}/infer answers application/octet-stream with Inference-Header-Content-Length', async () => {
    const { body, headerLength } = addSubRequest({ outputs: [{ name: 'OUTPUT1', parameters: { binary_data: true } }] });
    const res = await post(`${server.url}/v2/models/add_sub.tar.gz/infer`, body, {
      'Content-Type': 'application/octet-stream',
      'Inference-Header-Content-Length': String(headerLength),
    });
    const r = await decodeResponse(res);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.contentType, 'application/octet-stream');
    assert.ok(Number(r.headerLength) > 0);
    assert.deepEqual([...r.outputs.keys()], ['OUTPUT1']);
    assert.deepEqual(
      r.outputs.get('OUTPUT1')!.values,
      SEQ.map((x) => x - 1),
    );
  });

  it('a JSON request may ask for binary outputs', async () => {
    const res = await fetch(`${server.url}/v2/models/add_sub.tar.gz/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        inputs: [
          { name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: SEQ },
          { name: 'INPUT1', datatype: 'FP32', shape: [1, 16], data: ONES },
        ],
        outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
      }),
    });
    const r = await decodeResponse(res);
    assert.equal(r.outputs.get('OUTPUT0')!.binary, true);
    assert.deepEqual(
      r.outputs.get('OUTPUT0')!.values,
      SEQ.map((x) => x + 1),
    );
  });

  it('a raw binary request (header length 0): the body is the one input, batch 1, outputs binary', async () => {
    const bytes = tensorBytes('FP32', [1.5, -2, 8]);
    const r = await decodeResponse(
      await post(`${server.url}/invocations`, bytes, {
        'X-Amzn-SageMaker-Target-Model': 'identity_fp32',
        'Inference-Header-Content-Length': '0',
        'Content-Type': 'application/octet-stream',
      }),
    );
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const out = r.outputs.get('OUTPUT0')!;
    assert.equal(out.binary, true);
    assert.deepEqual(out.shape, [1, 3]);
    assert.deepEqual(out.values, [1.5, -2, 8]);
  });
});

describe('every datatype round-trips through binary data unchanged', () => {
  const samples: Readonly<Record<string, readonly Value[]>> = {
    BOOL: [true, false, true, true, false, false],
    UINT8: [0, 1, 255, 7, 8, 9],
    INT8: [-128, 127, 0, -1, 5, 6],
    UINT16: [0, 65535, 1, 2, 3, 4],
    INT16: [-32768, 32767, 0, -5, 5, 1],
    FP16: [0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x7e00],
    UINT32: [0, 4294967295, 1, 2, 3, 4],
    INT32: [-2147483648, 2147483647, 0, 1, 2, 3],
    FP32: [1.5, -0.25, 3.4028234663852886e38, 0, -0, Math.fround(1e-30)],
    UINT64: [0n, 18446744073709551615n, 2n ** 53n + 1n, 1n, 2n, 3n],
    INT64: [-(2n ** 63n), 2n ** 63n - 1n, -(2n ** 53n) - 1n, 0n, 1n, -1n],
    FP64: [Math.PI, -Math.E, Number.MAX_VALUE, Number.MIN_VALUE, 0, 1],
    BYTES: ['hello', '', 'naïve ✓', 'a'.repeat(300), '0', 'x y'],
  };
  for (const dt of IDENTITY_TYPES) {
    it(`${dt}`, async () => {
      const values = samples[dt]!;
      const { body, headerLength } = encodeRequest([{ name: 'INPUT0', datatype: dt, shape: [2, 3], values }], { parameters: { binary_data_output: true } });
      const r = await decodeResponse(
        await post(`${server.url}/v2/models/identity_${dt.toLowerCase()}/infer`, body, { 'Inference-Header-Content-Length': String(headerLength) }),
      );
      assert.equal(r.status, 200, JSON.stringify(r.json));
      const out = r.outputs.get('OUTPUT0')!;
      assert.equal(out.datatype, dt);
      assert.deepEqual(out.shape, [2, 3]);
      assert.deepEqual(out.values, [...values]);
    });
  }
});

describe('malformed binary requests are 400s with the reason, and the server keeps serving', () => {
  const add = () => addSubRequest();
  const huge = () => {
    const json = Buffer.from(
      JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [2 ** 40, 2 ** 40], parameters: { binary_data_size: 8 } }] }),
    );
    return { body: Buffer.concat([json, Buffer.alloc(8)]), headerLength: json.length };
  };
  const bytesPastEnd = () => {
    const { body, headerLength } = encodeRequest([{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 3], values: ['a', 'b', 'c'] }]);
    body.writeUInt32LE(1_000_000, headerLength + 5); // second element claims a megabyte
    return { body, headerLength };
  };
  const cases: {
    name: string;
    target?: string;
    make: () => { body: Buffer; headerLength: number };
    headers: (n: number, len: number) => Record<string, string>;
    match: RegExp;
  }[] = [
    {
      name: 'header length larger than the body',
      make: add,
      headers: (_n, len) => ({ 'Inference-Header-Content-Length': String(len + 1) }),
      match: /Inference-Header-Content-Length must be an integer in \[0, \d+\]/,
    },
    { name: 'negative header length', make: add, headers: () => ({ 'Inference-Header-Content-Length': '-5' }), match: /got '-5'/ },
    { name: 'non-numeric header length', make: add, headers: () => ({ 'Inference-Header-Content-Length': 'twelve' }), match: /got 'twelve'/ },
    {
      name: 'json-header-size larger than the body',
      make: add,
      headers: (_n, len) => ({ 'Content-Type': `application/vnd.sagemaker-triton.binary+json;json-header-size=${len + 10}` }),
      match: /json-header-size in the Content-Type must be an integer/,
    },
    {
      name: 'negative json-header-size',
      make: add,
      headers: () => ({ 'Content-Type': 'application/vnd.sagemaker-triton.binary+json;json-header-size=-123' }),
      match: /got '-123'/,
    },
    {
      name: 'json-header-size missing',
      make: add,
      headers: () => ({ 'Content-Type': 'application/vnd.sagemaker-triton.binary+json' }),
      match: /needs the parameter json-header-size/,
    },
    {
      name: 'header length and json-header-size disagree',
      make: add,
      headers: (n) => ({
        'Content-Type': `application/vnd.sagemaker-triton.binary+json;json-header-size=${n}`,
        'Inference-Header-Content-Length': String(n - 1),
      }),
      match: /contradicts json-header-size/,
    },
    {
      name: 'header length cutting the JSON short',
      make: add,
      headers: (n) => ({ 'Inference-Header-Content-Length': String(n - 3) }),
      match: /not valid JSON/,
    },
    {
      name: 'binary_data_size not matching datatype × shape',
      make: () => {
        const json = Buffer.from(
          JSON.stringify({
            inputs: [
              { name: 'INPUT0', datatype: 'FP32', shape: [1, 16], parameters: { binary_data_size: 60 } },
              { name: 'INPUT1', datatype: 'FP32', shape: [1, 16], data: ONES },
            ],
          }),
        );
        return { body: Buffer.concat([json, Buffer.alloc(60)]), headerLength: json.length };
      },
      headers: (n) => ({ 'Inference-Header-Content-Length': String(n) }),
      match: /input 'INPUT0': binary_data_size is 60 bytes but datatype FP32 with shape \[1,16\] needs 16 × 4 = 64 bytes/,
    },
    {
      name: 'binary_data_size running past the body',
      make: () => {
        const json = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], parameters: { binary_data_size: 64 } }] }));
        return { body: Buffer.concat([json, Buffer.alloc(10)]), headerLength: json.length };
      },
      headers: (n) => ({ 'Inference-Header-Content-Length': String(n) }),
      match: /binary_data_size 64 runs past the end of the body \(10 bytes of binary data left\)/,
    },
    {
      name: 'BYTES length running past the buffer',
      target: 'identity_bytes',
      make: bytesPastEnd,
      headers: (n) => ({ 'Inference-Header-Content-Length': String(n) }),
      match: /BYTES element 1 claims 1000000 bytes but only \d+ remain/,
    },
    { name: 'shape whose element count overflows', make: huge, headers: (n) => ({ 'Inference-Header-Content-Length': String(n) }), match: /too many elements/ },
    {
      name: 'bytes left after the last binary input',
      make: () => {
        const r = addSubRequest();
        return { body: Buffer.concat([r.body, Buffer.alloc(4)]), headerLength: r.headerLength };
      },
      headers: (n) => ({ 'Inference-Header-Content-Length': String(n) }),
      match: /unexpected additional input data: 4 bytes/,
    },
    {
      name: 'octet-stream without a header length (read as JSON)',
      make: add,
      headers: () => ({ 'Content-Type': 'application/octet-stream' }),
      match: /not valid JSON.*application\/octet-stream body is read as JSON; for binary tensor data send the JSON length in Inference-Header-Content-Length/,
    },
  ];
  for (const c of cases) {
    for (const route of ['invocations', 'v2'] as const) {
      it(`${c.name} (${route === 'v2' ? '/v2/models/{m}/infer' : '/invocations'})`, async () => {
        const target = c.target ?? 'add_sub.tar.gz';
        const { body, headerLength } = c.make();
        const headers = { 'Content-Type': 'application/octet-stream', ...c.headers(headerLength, body.length) };
        const res =
          route === 'v2'
            ? await post(`${server.url}/v2/models/${encodeURIComponent(target)}/infer`, body, headers)
            : await post(`${server.url}/invocations`, body, { ...headers, 'X-Amzn-SageMaker-Target-Model': target });
        const text = await res.text();
        assert.equal(res.status, 400, text);
        const err = JSON.parse(text) as { error: string; code: string };
        assert.match(err.error, c.match);
        assert.match(err.error, new RegExp(`^model '${target.replace(/\./g, '\\.')}'`));
        const ok = await post(`${server.url}/invocations`, addSubRequest().body, {
          'X-Amzn-SageMaker-Target-Model': 'add_sub.tar.gz',
          'Inference-Header-Content-Length': String(addSubRequest().headerLength),
        });
        assert.equal(ok.status, 200);
      });
    }
  }
});
