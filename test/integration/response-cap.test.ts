/**
 * docs/security.md, "Work one request may cause": an 8-byte request to an
 * `Expand` model that would answer tens of MB is refused before its answer
 * is encoded, with a message naming MME_MAX_RESPONSE_BYTES, on every route
 * (SageMaker JSON and CSV, KServe v2 JSON and binary, .npy, TF Serving,
 * gRPC); the process grows by about the cap at most, and keeps serving.
 * The cap is SageMaker's default (6 MiB, SAGEMAKER_MULTI_MODEL=true), and
 * binary forms are held to their exact size: a 6.0 MB binary answer passes
 * where its JSON form could not.
 */
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { after, before, it } from 'node:test';
import { buildModel, node, tensor, valueInfo } from '../../examples/models/onnx-builder.js';
import { writeModelDir } from '../../examples/models/zoo.js';
import { call, connect, inferRequest, type GrpcClients } from '../support/grpc-client.js';
import { MIB, processTreeRssBytes, TreeRssSampler } from '../support/memory-scenario.js';
import { startServe, type ServeProcess } from '../support/serve-process.js';
import { tempDir } from '../support/temp-dir.js';

const cleanups: (() => Promise<void>)[] = [];
const ctx = { after: (fn: () => Promise<void>) => cleanups.push(fn) };
const CAP = 6 * MIB;
/** 1.5 M float32: 6.0 MB in binary (under the cap), ~36 MB as JSON. */
const UNDER_IN_BINARY = 1_500_000;
/** 2 M float32: 8 MB in binary, over the cap in every form. */
const OVER_IN_BINARY = 2_000_000;
let serve: ServeProcess;
let clients: GrpcClients;

/** OUTPUT0 = Expand(value, SHAPE): one INT64 (8 bytes) asks for SHAPE[0] float32 elements. */
function expandModel(): { onnx: Uint8Array; config: string } {
  const onnx = buildModel({
    inputs: [valueInfo('SHAPE', 'INT64', [1])],
    outputs: [valueInfo('OUTPUT0', 'FP32', ['n'])],
    nodes: [node('Expand', ['value', 'SHAPE'], ['OUTPUT0'])],
    // A value whose JSON is long: -1.2345678e-21 prints as -1.2345678360828476e-21.
    initializers: [tensor('value', 'FP32', [1], [-1.2345678e-21])],
    docString: 'expand',
  });
  const config = `platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "SHAPE" data_type: TYPE_INT64 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
`;
  return { onnx, config };
}

before(async () => {
  const root = await tempDir(ctx);
  await mkdir(path.join(root, 'source'));
  await writeModelDir(path.join(root, 'source'), 'expand', expandModel());
  serve = await startServe({
    MME_MODEL_SOURCE: path.join(root, 'source'),
    MME_CACHE_DIR: path.join(root, 'cache'),
    SAGEMAKER_MULTI_MODEL: 'true',
    MME_GRPC_PORT: '0',
    MME_MAX_RESPONSE_BYTES: undefined,
  });
  cleanups.push(() => serve.kill());
  const ready = serve.lines.find((l) => l['msg'] === 'onnx-mme listening')!;
  clients = connect(`127.0.0.1:${ready['grpcPort'] as number}`);
  cleanups.push(async () => clients.close());
});

after(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

const v2Json = (n: number, binary = false) =>
  JSON.stringify({ inputs: [{ name: 'SHAPE', datatype: 'INT64', shape: [1], data: [n] }], ...(binary ? { parameters: { binary_data_output: true } } : {}) });

interface Reply {
  readonly route: string;
  readonly status: number;
  readonly text: string;
  readonly bytes: number;
}

async function post(route: string, url: string, body: string, headers: Record<string, string>): Promise<Reply> {
  const res = await fetch(`${serve.url}${url}`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
  const buf = Buffer.from(await res.arrayBuffer());
  return { route, status: res.status, text: buf.subarray(0, 2000).toString('utf8'), bytes: buf.length };
}

const target = { 'X-Amzn-SageMaker-Target-Model': 'expand' };

/** One request per route, each asking for `n` elements. */
async function everyRoute(n: number): Promise<Reply[]> {
  const replies = [
    await post('sagemaker json', '/invocations', v2Json(n), target),
    await post('sagemaker csv', '/invocations', v2Json(n), { ...target, accept: 'text/csv' }),
    await post('sagemaker npy', '/invocations', v2Json(n), { ...target, accept: 'application/x-npy' }),
    await post('sagemaker tf serving', '/invocations', JSON.stringify({ inputs: { SHAPE: [n] } }), target),
    await post('v2 json', '/v2/models/expand/infer', v2Json(n), {}),
    await post('v2 binary', '/v2/models/expand/infer', v2Json(n, true), {}),
  ];
  const grpc = await call(clients.inference, 'ModelInfer', inferRequest('expand', [{ name: 'SHAPE', datatype: 'INT64', shape: [1], values: [BigInt(n)] }]));
  replies.push({
    route: 'grpc',
    status: grpc.error === null ? 200 : 400,
    text: grpc.error === null ? '' : `${grpc.error.code} ${grpc.error.details}`,
    bytes: grpc.error === null ? Buffer.concat(grpc.response.raw_output_contents as Buffer[]).length : 0,
  });
  return replies;
}

it('an 8-byte request for a 30+ MB answer is refused on every route, naming the setting, and the process grows by about the cap at most', async () => {
  // Loaded and warmed with a small answer first: the model's own memory is not the answer's.
  for (const r of await everyRoute(1000)) assert.equal(r.status, 200, `${r.route}: ${r.text}`);
  // One refused request alone: what it costs the process is its output tensor (onnxruntime computes it before
  // anything can be judged), never an encoded copy (its JSON would be ~48 MB as a string, more as a buffer).
  const sampler = new TreeRssSampler(serve.proc.pid!, 20);
  const baseline = await processTreeRssBytes(serve.proc.pid!);
  sampler.start();
  const alone = await post('v2 json', '/v2/models/expand/infer', v2Json(OVER_IN_BINARY), {});
  await sampler.stop();
  assert.equal(alone.status, 400, alone.text);
  const growth = sampler.peakBytes - baseline;
  const tensorBytes = 4 * OVER_IN_BINARY;
  assert.ok(
    growth <= tensorBytes + CAP + 16 * MIB,
    `RSS grew by ${(growth / MIB).toFixed(1)} MiB (output tensor ${(tensorBytes / MIB).toFixed(1)} MiB, cap ${CAP / MIB} MiB)`,
  );
  console.log(`RSS growth for one refused ${OVER_IN_BINARY}-element answer: ${(growth / MIB).toFixed(1)} MiB`);
  const over = await everyRoute(OVER_IN_BINARY);
  const under = await everyRoute(UNDER_IN_BINARY);
  for (const r of over) {
    assert.ok(r.status === 400, `${r.route} (${OVER_IN_BINARY} elements): ${r.status} ${r.text}`);
    assert.match(r.text, /MME_MAX_RESPONSE_BYTES/, r.route);
    if (r.route !== 'grpc') assert.match(r.text, /RESPONSE_TOO_LARGE/, r.route);
    else assert.match(r.text, /^8 /, 'gRPC RESOURCE_EXHAUSTED');
  }
  // Exact forms pass under the cap; text forms, whose bound is far larger, are refused.
  const passing = new Set(['sagemaker npy', 'v2 binary', 'grpc']);
  for (const r of under) {
    if (passing.has(r.route)) {
      assert.equal(r.status, 200, `${r.route}: ${r.text}`);
      assert.ok(r.bytes >= 4 * UNDER_IN_BINARY && r.bytes <= CAP, `${r.route}: ${r.bytes} bytes`);
    } else {
      assert.equal(r.status, 400, `${r.route}: ${r.text}`);
      assert.match(r.text, /MME_MAX_RESPONSE_BYTES/);
    }
  }
  // Still serving.
  for (const r of await everyRoute(10)) assert.equal(r.status, 200, `${r.route}: ${r.text}`);
});
