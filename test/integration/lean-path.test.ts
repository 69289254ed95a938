/**
 * Every spelling of an inference route is one route: each inference
 * request is sent in its canonical spelling and with a trailing slash (which
 * express also matches, and which the inference front, http/inference-front.ts,
 * now takes too), and the two answers must agree in status, body, content
 * type, request id and custom attributes, for successes, binary answers and
 * errors on both route families. The route metric and the request log lines
 * come out the same for both.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { addSub } from '../../examples/models/zoo.js';
import { Cleanups } from '../support/temp-dir.js';
import { input, serveModelDirs, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();
let server: TestServer;

before(async () => {
  server = await serveModelDirs(ctx, { add_sub: addSub() });
});

after(() => ctx.run());

const seq16 = Array.from({ length: 16 }, (_, i) => i);
const ones16 = Array.from({ length: 16 }, () => 1);
const goodBody = JSON.stringify({ inputs: [input('INPUT0', 'FP32', [1, 16], seq16), input('INPUT1', 'FP32', [1, 16], ones16)] });

interface Answer {
  readonly status: number;
  readonly contentType: string | null;
  readonly requestId: string | null;
  readonly attributes: string | null;
  readonly headerLength: string | null;
  readonly body: string;
}

async function post(p: string, body: string, headers: Record<string, string>): Promise<Answer> {
  const res = await fetch(`${server.url}${p}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const bytes = Buffer.from(await res.arrayBuffer());
  return {
    status: res.status,
    contentType: res.headers.get('content-type'),
    requestId: res.headers.get('x-request-id'),
    attributes: res.headers.get('x-amzn-sagemaker-custom-attributes'),
    headerLength: res.headers.get('inference-header-content-length'),
    body: bytes.toString('base64'),
  };
}

/** The same request in its canonical spelling and with a trailing slash. */
async function bothPaths(p: string, body: string, headers: Record<string, string> = {}): Promise<{ lean: Answer; express: Answer }> {
  const lean = await post(p, body, { 'X-Request-Id': 'parity-lean', ...headers });
  const express = await post(`${p}/`, body, { 'X-Request-Id': 'parity-express', ...headers });
  return { lean, express };
}

function assertSame(a: { lean: Answer; express: Answer }): void {
  assert.equal(a.lean.requestId, 'parity-lean');
  assert.equal(a.express.requestId, 'parity-express');
  const strip = ({ requestId: _r, ...rest }: Answer) => rest;
  assert.deepEqual(strip(a.lean), strip(a.express));
}

describe('lean inference path and express agree', () => {
  it('a successful inference on /invocations: status, JSON body, content type, custom attributes', async () => {
    const a = await bothPaths('/invocations', goodBody, { 'X-Amzn-SageMaker-Target-Model': 'add_sub', 'X-Amzn-SageMaker-Custom-Attributes': 'trace=1' });
    assert.equal(a.lean.status, 200);
    assert.equal(a.lean.contentType, 'application/json; charset=utf-8');
    assert.equal(a.lean.attributes, 'trace=1');
    assertSame(a);
  });

  it('binary answers (binary_data_output) on /invocations and /v2/models/{m}/infer', async () => {
    const body = JSON.stringify({ ...JSON.parse(goodBody), parameters: { binary_data_output: true } });
    const s = await bothPaths('/invocations', body, { 'X-Amzn-SageMaker-Target-Model': 'add_sub' });
    assert.equal(s.lean.status, 200);
    assert.match(s.lean.contentType ?? '', /^application\/vnd\.sagemaker-triton\.binary\+json;json-header-size=\d+$/);
    assertSame(s);
    const k = await bothPaths('/v2/models/add_sub/infer', body);
    assert.equal(k.lean.contentType, 'application/octet-stream');
    assert.ok(Number(k.lean.headerLength) > 0);
    assertSame(k);
  });

  it('CSV answers', async () => {
    const a = await bothPaths('/invocations', JSON.stringify({ ...JSON.parse(goodBody), outputs: [{ name: 'OUTPUT0' }] }), {
      'X-Amzn-SageMaker-Target-Model': 'add_sub',
      Accept: 'text/csv',
    });
    assert.equal(a.lean.status, 200);
    assert.equal(a.lean.contentType, 'text/csv; charset=utf-8');
    assertSame(a);
  });

  it('errors: unknown target, malformed JSON, bad input, unacceptable Accept, bad version (both route families)', async () => {
    for (const [p, body, headers, status] of [
      ['/invocations', goodBody, { 'X-Amzn-SageMaker-Target-Model': 'nope' }, 404],
      ['/invocations', '{"inputs": [', { 'X-Amzn-SageMaker-Target-Model': 'add_sub' }, 400],
      ['/invocations', JSON.stringify({ inputs: [input('INPUT0', 'FP32', [1, 3], [1, 2, 3])] }), { 'X-Amzn-SageMaker-Target-Model': 'add_sub' }, 400],
      ['/invocations', goodBody, { 'X-Amzn-SageMaker-Target-Model': 'add_sub', Accept: 'image/png' }, 406],
      ['/endpoints/ep/invocations', goodBody, { 'X-Amzn-SageMaker-Target-Model': '../etc' }, 400],
      ['/v2/models/nope/infer', goodBody, {}, 404],
      ['/v2/models/add_sub/versions/0/infer', goodBody, {}, 400],
      ['/models/not-loaded/invoke', goodBody, {}, 404],
    ] as const) {
      const a = await bothPaths(p, body, headers);
      assert.equal(a.lean.status, status, `${p}: ${Buffer.from(a.lean.body, 'base64').toString()}`);
      assert.equal(a.lean.contentType, 'application/json; charset=utf-8');
      const error = JSON.parse(Buffer.from(a.lean.body, 'base64').toString()) as { error: string; code: string };
      assert.equal(typeof error.error, 'string');
      assert.equal(typeof error.code, 'string');
      assertSame(a);
    }
  });

  it('lean requests count under their route pattern and log their request lines', async () => {
    const r = await post('/endpoints/my-endpoint/invocations', goodBody, { 'X-Amzn-SageMaker-Target-Model': 'add_sub', 'X-Request-Id': 'lean-log-1' });
    assert.equal(r.status, 200);
    const text = await (await fetch(`${server.url}/metrics`)).text();
    assert.match(text, /onnx_mme_http_requests_total\{route="\/endpoints\/:endpoint\/invocations",status="200"\} [1-9]/);
    assert.match(text, /onnx_mme_http_requests_total\{route="\/invocations",status="200"\} [1-9]/);
    assert.match(text, /onnx_mme_http_requests_total\{route="\/v2\/models\/:model\/versions\/:version\/infer",status="400"\} [1-9]/);
    const received = server.logs.find((l) => l['msg'] === 'request received' && l['reqId'] === 'lean-log-1');
    assert.equal(received?.['path'], '/endpoints/my-endpoint/invocations');
    const done = server.logs.find((l) => l['msg'] === 'request' && l['reqId'] === 'lean-log-1');
    assert.equal(done?.['status'], 200);
    assert.equal(done?.['model'], 'add_sub');
    assert.equal(done?.['version'], '1');
  });
});
