/**
 * tritonclient's HTTP requests, byte for byte as tritonclient/http/_client.py
 * builds them: URLs from Python's quote(model_name) (which keeps `/`, so a
 * nested target arrives raw: /v2/models/team/x.tar.gz/infer), binary tensors
 * with Inference-Header-Content-Length and no Content-Type,
 * request_compression_algorithm (Content-Encoding gzip / deflate = zlib) and
 * response_compression_algorithm (Accept-Encoding). Every /v2/models route
 * takes the raw and the %2F spelling alike. Compressed bodies are bounded
 * after decoding (size and ratio); unknown codings are refused by name.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import path from 'node:path';
import zlib from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import { packTarGz, scale, writeModelDir } from '../../examples/models/zoo.js';
import { tempDir } from '../support/temp-dir.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

const ctx = {
  cleanups: [] as (() => Promise<void>)[],
  after(fn: () => Promise<void>) {
    this.cleanups.push(fn);
  },
};
let server: TestServer;
let port: number;

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** A raw HTTP/1.1 exchange (no client-side decompression, headers exactly as given). */
function raw(method: string, urlPath: string, headers: Record<string, string | number> = {}, body?: Buffer): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, method, path: urlPath, headers: { ...(body ? { 'Content-Length': body.length } : {}), ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Python's urllib.parse.quote(s) with its default safe='/'. */
function pyQuote(s: string): string {
  return encodeURIComponent(s)
    .replace(/%2F/g, '/')
    .replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** tritonclient's _get_inference_request with binary_data=True for the input and the output. */
function tritonBody(values: number[], rows: number, features = 4): { body: Buffer; jsonSize: number } {
  const data = Buffer.from(new Float32Array(values).buffer);
  const header = JSON.stringify({
    inputs: [{ name: 'INPUT0', shape: [rows, features], datatype: 'FP32', parameters: { binary_data_size: data.length } }],
    outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
  });
  return { body: Buffer.concat([Buffer.from(header), data]), jsonSize: Buffer.byteLength(header) };
}

/** InferResult: decompress by Content-Encoding, split at Inference-Header-Content-Length, read the FP32 output. */
function tritonResult(r: Reply): number[] {
  assert.equal(r.status, 200, r.body.toString());
  const enc = r.headers['content-encoding'];
  const body = enc === 'gzip' ? zlib.gunzipSync(r.body) : enc === 'deflate' ? zlib.inflateSync(r.body) : r.body;
  const jsonSize = Number(r.headers['inference-header-content-length']);
  const header = JSON.parse(body.subarray(0, jsonSize).toString());
  const size = header.outputs[0].parameters.binary_data_size as number;
  const out = body.subarray(jsonSize, jsonSize + size);
  return [...new Float32Array(out.buffer.slice(out.byteOffset, out.byteOffset + out.length))];
}

before(async () => {
  const root = await tempDir(ctx);
  const source = path.join(root, 'source');
  await writeModelDir(path.join(root, 'work', 'x'), 'model', scale(2));
  await packTarGz(path.join(root, 'work', 'x'), path.join(source, 'team', 'x.tar.gz'));
  // 8 rows × 64 FP32 features: answers of 2 KiB, above the compression threshold.
  await writeModelDir(path.join(root, 'work', 'wide'), 'model', scale(2, 64));
  await packTarGz(path.join(root, 'work', 'wide'), path.join(source, 'team', 'wide.tar.gz'));
  server = await startTestServer({ modelSource: source, cacheDir: path.join(root, 'cache'), env: { SAGEMAKER_MAX_PAYLOAD_IN_MB: '1' } });
  port = Number(new URL(server.url).port);
});

after(async () => {
  await server.close();
  for (const c of ctx.cleanups.reverse()) await c();
});

const NAME = 'team/x.tar.gz';

describe('nested model names, as tritonclient sends them and percent-encoded', () => {
  it('infer, with and without a version, raw and %2F', async () => {
    const { body, jsonSize } = tritonBody([1, 2, 3, 4], 1);
    for (const name of [pyQuote(NAME), encodeURIComponent(NAME)]) {
      for (const route of ['infer', 'versions/1/infer']) {
        const r = await raw('POST', `/v2/models/${name}/${route}`, { 'Inference-Header-Content-Length': jsonSize }, body);
        assert.deepEqual(tritonResult(r), [2, 4, 6, 8], `${name}/${route}`);
      }
    }
    assert.equal(pyQuote(NAME), 'team/x.tar.gz', 'tritonclient leaves the slash raw');
  });

  it('ready, metadata, config, stats, repository load/unload: every route takes both spellings', async () => {
    for (const name of [pyQuote(NAME), encodeURIComponent(NAME)]) {
      assert.equal((await raw('POST', `/v2/repository/models/${name}/load`)).status, 200, `load ${name}`);
      assert.equal((await raw('GET', `/v2/models/${name}/ready`)).status, 200, `ready ${name}`);
      assert.equal((await raw('GET', `/v2/models/${name}/versions/1/ready`)).status, 200);
      const meta = await raw('GET', `/v2/models/${name}`);
      assert.equal(meta.status, 200, meta.body.toString());
      assert.deepEqual(JSON.parse(meta.body.toString()).versions, ['1']);
      assert.equal((await raw('GET', `/v2/models/${name}/versions/1`)).status, 200);
      assert.equal((await raw('GET', `/v2/models/${name}/config`)).status, 200);
      const stats = await raw('GET', `/v2/models/${name}/stats?x=1`);
      assert.equal(stats.status, 200, stats.body.toString());
      assert.equal(JSON.parse(stats.body.toString()).model_stats[0].name, NAME);
      assert.equal((await raw('GET', `/v2/models/${name}/versions/1/stats`)).status, 200);
      assert.equal((await raw('POST', `/v2/repository/models/${name}/unload`)).status, 200, `unload ${name}`);
      assert.equal((await raw('GET', `/v2/models/${name}/ready`)).status, 400, 'not ready after unload');
    }
  });

  it('a method the route does not take is still 405, an unknown tail 404', async () => {
    assert.equal((await raw('DELETE', `/v2/models/${NAME}/infer`)).status, 405);
    assert.equal((await raw('POST', `/v2/models/${NAME}/ready`)).status, 405);
  });
});

describe('compressed bodies (request_compression_algorithm) and answers (response_compression_algorithm)', () => {
  const rows = 8;
  const values = Array.from({ length: rows * 64 }, (_, i) => i % 7);
  const expected = values.map((v) => 2 * v);

  for (const [algorithm, compress] of [
    ['gzip', zlib.gzipSync],
    ['deflate', zlib.deflateSync],
  ] as const) {
    it(`${algorithm} request body, ${algorithm} answer`, async () => {
      const { body, jsonSize } = tritonBody(values, rows, 64);
      const r = await raw(
        'POST',
        `/v2/models/${pyQuote('team/wide.tar.gz')}/infer`,
        { 'Content-Encoding': algorithm, 'Accept-Encoding': algorithm, 'Inference-Header-Content-Length': jsonSize },
        compress(body),
      );
      assert.equal(r.headers['content-encoding'], algorithm);
      assert.equal(Number(r.headers['content-length']), r.body.length);
      assert.deepEqual(tritonResult(r), expected);
    });
  }

  it('a raw-deflate body and a JSON body on /invocations are decoded too; small answers go out uncompressed', async () => {
    const json = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] }));
    const r = await raw(
      'POST',
      '/invocations',
      { 'Content-Type': 'application/json', 'Content-Encoding': 'deflate', 'Accept-Encoding': 'gzip', 'X-Amzn-SageMaker-Target-Model': NAME },
      zlib.deflateRawSync(json),
    );
    assert.equal(r.status, 200, r.body.toString());
    assert.equal(r.headers['content-encoding'], undefined, 'a small answer is not compressed');
    assert.deepEqual(JSON.parse(r.body.toString()).outputs[0].data, [2, 4, 6, 8]);
  });

  it('a bomb (tiny body, huge expansion) is refused by ratio; a body over the limit once decoded is 413; bad data 400; br 415', async () => {
    const bomb = zlib.gzipSync(Buffer.alloc(4 * 1024 * 1024));
    const b = await raw('POST', `/v2/models/${pyQuote(NAME)}/infer`, { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' }, bomb);
    assert.equal(b.status, 413);
    assert.match(JSON.parse(b.body.toString()).error, /expands more than \d+ times/);

    const big = Buffer.from(
      JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: Array.from({ length: 300_000 }, (_, i) => i) }] }),
    );
    assert.ok(big.length > 1024 * 1024);
    const over = await raw('POST', `/v2/models/${pyQuote(NAME)}/infer`, { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' }, zlib.gzipSync(big));
    assert.equal(over.status, 413);
    assert.match(JSON.parse(over.body.toString()).error, /decompressed request body exceeds the limit of 1048576 bytes/);

    const bad = await raw(
      'POST',
      `/v2/models/${pyQuote(NAME)}/infer`,
      { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' },
      Buffer.from('not gzip'),
    );
    assert.equal(bad.status, 400);
    assert.match(JSON.parse(bad.body.toString()).error, /not valid gzip/);

    const br = await raw('POST', `/v2/models/${pyQuote(NAME)}/infer`, { 'Content-Type': 'application/json', 'Content-Encoding': 'br' }, Buffer.from('x'));
    assert.equal(br.status, 415);
    assert.match(JSON.parse(br.body.toString()).error, /Content-Encoding 'br'/);
  });
});
