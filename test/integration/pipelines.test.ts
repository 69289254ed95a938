/**
 * Ensembles with processing steps, end to end, as the examples run
 * them: both example pipelines (examples/pipelines/) built offline, packed as
 * .tar.gz, uploaded to a real S3-compatible server, and invoked on ONE running
 * server with two target-model headers.
 *
 * - text_embedding.tar.gz: the embedding equals the reference maths on token
 *   ids spelled out here (tokenize by hand, encode, pool, normalize);
 * - image_classifier.tar.gz: the ensemble's answer equals running its three
 *   steps by hand, each as its own target, chained by the client;
 * - a diamond DAG mixing ONNX and JS steps: every answer equals the maths,
 *   and 8 concurrent requests are merged at every step (exec_count < 8 and
 *   batch-size sum = 8 in /metrics);
 * - a broken ensemble: one 400 lists the config's wiring problem and the
 *   cross-model ones (unknown model, max_batch_size, shape, datatype)
 *   together, and the server keeps serving;
 * - MME_ALLOW_JS_BACKEND=false: a package with a JS step is refused (501).
 */
import { metricValue } from '../support/metric-value.js';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildPipelines, imageRequest, textRequest, type BuiltPipelines } from '../../examples/pipelines/build-pipelines.js';
import { IMAGE_LABELS } from '../../examples/pipelines/image-pipeline.js';
import { TEXT_HIDDEN, TEXT_MAX_LENGTH, TEXT_VOCAB, textEmbeddingReference, textEncoderWeights } from '../../examples/pipelines/text-pipeline.js';
import { writePipelineRepository, type PipelineModel } from '../../examples/pipelines/write-repository.js';
import { addSub, packTarGz, scale } from '../../examples/models/zoo.js';
import { S3RVER_CREDENTIALS, startLoopbackS3, type LoopbackS3 } from '../support/s3rver.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer, type JsonReply, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();
const saved = { id: process.env['AWS_ACCESS_KEY_ID'], secret: process.env['AWS_SECRET_ACCESS_KEY'] };
const FEATURES = 16;
const BATCHED = 'dynamic_batching { preferred_batch_size: [ 8 ] max_queue_delay_microseconds: 3000000 }\n';

let s3: LoopbackS3;
let server: TestServer;
let built: BuiltPipelines;
let work: string;

/** x → a = 2x (ONNX), b = x² + 1 (JS), then add_sub(a, b) (ONNX): a diamond. */
function diamondRepository(name: string): Record<string, PipelineModel> {
  const named = (model: string, config: string): string => `name: "${model}"\n${config}${BATCHED}`;
  return {
    scale2: { onnx: scale(2, FEATURES).onnx, config: named('scale2', scale(2, FEATURES).config!) },
    add_sub: { onnx: addSub('FP32', FEATURES).onnx, config: named('add_sub', addSub('FP32', FEATURES).config!) },
    square: {
      config: named(
        'square',
        [
          'backend: "js"',
          'max_batch_size: 8',
          `input [ { name: "x" data_type: TYPE_FP32 dims: [ ${FEATURES} ] } ]`,
          `output [ { name: "y" data_type: TYPE_FP32 dims: [ ${FEATURES} ] } ]`,
          '',
        ].join('\n'),
      ),
      versionFiles: {
        'model.mjs':
          'export function execute(batch) {\n  const x = batch.inputs.x;\n  return { y: { datatype: "FP32", shape: x.shape, data: x.data.map((v) => v * v + 1) } };\n}\n',
      },
    },
    [name]: {
      config: [
        `name: "${name}"`,
        'platform: "ensemble"',
        'max_batch_size: 8',
        `input [ { name: "IN" data_type: TYPE_FP32 dims: [ ${FEATURES} ] } ]`,
        `output [ { name: "SUM" data_type: TYPE_FP32 dims: [ ${FEATURES} ] }, { name: "DIFF" data_type: TYPE_FP32 dims: [ ${FEATURES} ] } ]`,
        'ensemble_scheduling { step [',
        '  { model_name: "add_sub" model_version: -1 input_map { key: "INPUT0" value: "A" } input_map { key: "INPUT1" value: "B" }',
        '    output_map { key: "OUTPUT0" value: "SUM" } output_map { key: "OUTPUT1" value: "DIFF" } },',
        '  { model_name: "square" model_version: -1 input_map { key: "x" value: "IN" } output_map { key: "y" value: "B" } },',
        '  { model_name: "scale2" model_version: -1 input_map { key: "INPUT0" value: "IN" } output_map { key: "OUTPUT0" value: "A" } }',
        '] }',
        '',
      ].join('\n'),
      versions: [1],
    },
  };
}

/** Wiring, batch-size, shape and datatype problems at once. */
function brokenRepository(): Record<string, PipelineModel> {
  const models = diamondRepository('unused');
  delete models['unused'];
  return {
    ...models,
    broken: {
      config: [
        'name: "broken"',
        'platform: "ensemble"',
        'max_batch_size: 16',
        'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 8 ] }, { name: "IDS" data_type: TYPE_INT32 dims: [ 16 ] } ]',
        'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 16 ] } ]',
        'ensemble_scheduling { step [',
        '  { model_name: "scale2" input_map { key: "INPUT0" value: "IN" } output_map { key: "OUTPUT0" value: "MID" } },',
        '  { model_name: "add_sub" input_map { key: "INPUT0" value: "MID" } input_map { key: "INPUT1" value: "IDS" }',
        '    output_map { key: "OUTPUT0" value: "OUT" } output_map { key: "OUTPUT1" value: "LEFTOVER" } },',
        '  { model_name: "nosuch" input_map { key: "x" value: "MID" } output_map { key: "y" value: "Z" } }',
        '] }',
        '',
      ].join('\n'),
      versions: [1],
    },
  };
}

async function pack(name: string, models: Record<string, PipelineModel>): Promise<Buffer> {
  const dir = await writePipelineRepository(path.join(work, 'repos', name), models);
  const file = path.join(work, `${name}.tar.gz`);
  await packTarGz(dir, file);
  return readFile(file);
}

function invoke(target: string, body: unknown): Promise<JsonReply> {
  return request(`${server.url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': target }, json: body });
}

function output(reply: JsonReply, name: string): { shape: number[]; data: unknown[] } {
  assert.equal(reply.status, 200, reply.text);
  const o = (reply.body.outputs as { name: string; shape: number[]; data: unknown[] }[]).find((x) => x.name === name);
  assert.ok(o, `output ${name} in ${reply.text.slice(0, 300)}`);
  return o;
}

function assertClose(actual: readonly unknown[], expected: readonly number[], what: string, tolerance = 1e-5): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  actual.forEach((v, i) =>
    assert.ok(Math.abs(Number(v) - expected[i]!) <= tolerance * Math.max(1, Math.abs(expected[i]!)), `${what}[${i}]: ${String(v)} vs ${expected[i]}`),
  );
}

async function metric(name: string, labels: Record<string, string>): Promise<number> {
  const value = await metricValue(server.url, name, labels);
  if (value === undefined) throw new Error(`metric ${name}${JSON.stringify(labels)} not found`);
  return value;
}

before(async () => {
  work = await tempDir(ctx);
  built = await buildPipelines(path.join(work, 'out'));
  s3 = await startLoopbackS3(['models']);
  await s3.upload('prefix/image_classifier.tar.gz', await readFile(built.imageTarball));
  await s3.upload('prefix/text_embedding.tar.gz', await readFile(built.textTarball));
  // The image pipeline's steps as targets of their own, for the by-hand chain.
  for (const step of ['preprocess', 'inception', 'postprocess']) {
    const file = path.join(work, `${step}.tar.gz`);
    await packTarGz(path.join(built.outDir, 'repositories', 'image_classifier', step), file);
    await s3.upload(`prefix/steps/${step}.tar.gz`, await readFile(file));
  }
  await s3.upload('prefix/diamond.tar.gz', await pack('diamond', diamondRepository('diamond')));
  await s3.upload('prefix/broken.tar.gz', await pack('broken', brokenRepository()));
  process.env['AWS_ACCESS_KEY_ID'] = S3RVER_CREDENTIALS.accessKeyId;
  process.env['AWS_SECRET_ACCESS_KEY'] = S3RVER_CREDENTIALS.secretAccessKey;
  server = await startTestServer({
    modelSource: 's3://models/prefix/',
    cacheDir: path.join(work, 'cache'),
    // The by-hand chain sends the 3×299×299 pixel tensor as JSON.
    env: { AWS_ENDPOINT_URL_S3: s3.endpoint, SAGEMAKER_MAX_PAYLOAD_IN_MB: '64' },
  });
});

after(async () => {
  await server?.close();
  await s3?.close();
  for (const [k, v] of [
    ['AWS_ACCESS_KEY_ID', saved.id],
    ['AWS_SECRET_ACCESS_KEY', saved.secret],
  ] as const) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  await ctx.run();
});

describe('example pipelines from S3, two targets on one server', () => {
  it('text_embedding.tar.gz: each sentence embedding equals the reference maths on hand-tokenized ids', async () => {
    const sentences = ['The quick brown dog jumped over the lazy cat.', 'Hello, world!', 'zebras run'];
    const tokens = [
      ['[CLS]', 'the', 'quick', 'brown', 'dog', 'jumped', '[UNK]', 'the', 'lazy', 'cat', '.', '[SEP]'],
      ['[CLS]', 'hello', ',', 'world', '!', '[SEP]'],
      ['[CLS]', '[UNK]', 'run', '[SEP]'],
    ];
    const reply = await invoke('text_embedding.tar.gz', textRequest(sentences));
    const emb = output(reply, 'EMBEDDING');
    assert.deepEqual(emb.shape, [3, TEXT_HIDDEN]);
    const weights = textEncoderWeights();
    tokens.forEach((t, row) => {
      const ids = [...t.map((tok) => TEXT_VOCAB.indexOf(tok)), ...Array(TEXT_MAX_LENGTH - t.length).fill(0)];
      const mask = ids.map((_, i) => (i < t.length ? 1 : 0));
      const expected = textEmbeddingReference(
        weights,
        ids,
        mask,
        ids.map(() => 0),
      );
      assertClose(emb.data.slice(row * TEXT_HIDDEN, (row + 1) * TEXT_HIDDEN), expected, `sentence ${row}`);
      const norm = Math.hypot(...emb.data.slice(row * TEXT_HIDDEN, (row + 1) * TEXT_HIDDEN).map(Number));
      assert.ok(Math.abs(norm - 1) < 1e-5, `unit length: ${norm}`);
    });
  });

  it('image_classifier.tar.gz on the same server: the ensemble equals its three steps run by hand', async () => {
    const jpeg = await readFile(built.sampleJpeg);
    const ensemble = await invoke('image_classifier.tar.gz', imageRequest(jpeg));
    const ids = output(ensemble, 'CLASS_IDS');
    assert.deepEqual(ids.shape, [1, 3]);
    const labels = output(ensemble, 'LABELS').data;
    assert.deepEqual(
      labels,
      ids.data.map((i) => IMAGE_LABELS[Number(i)]),
    );
    const scores = output(ensemble, 'SCORES').data.map(Number);
    assert.ok(scores[0]! >= scores[1]! && scores[1]! >= scores[2]! && scores[0]! <= 1, `softmax scores, descending: ${scores.join(',')}`);

    const pixels = output(await invoke('steps/preprocess.tar.gz', { inputs: [input('IMAGE', 'UINT8', [1, jpeg.length], Array.from(jpeg))] }), 'PIXELS');
    assert.deepEqual(pixels.shape, [1, 3, 299, 299]);
    const logits = output(await invoke('steps/inception.tar.gz', { inputs: [input('input', 'FP32', pixels.shape, pixels.data)] }), 'logits');
    const top = await invoke('steps/postprocess.tar.gz', { inputs: [input('logits', 'FP32', logits.shape, logits.data)] });
    assert.deepEqual(output(top, 'CLASS_IDS').data, ids.data);
    assert.deepEqual(output(top, 'LABELS').data, labels);
    assertClose(output(top, 'SCORES').data, scores, 'scores', 1e-6);
  });

  it('a diamond DAG (ONNX and JS steps): answers equal the maths; 8 concurrent requests are merged at every step', async () => {
    const xs = Array.from({ length: 8 }, (_, i) => Array.from({ length: FEATURES }, (_, k) => (i - 4) * 0.25 + k * 0.01));
    const replies = await Promise.all(xs.map((x) => invoke('diamond.tar.gz', { inputs: [input('IN', 'FP32', [1, FEATURES], x)] })));
    replies.forEach((r, i) => {
      const x = xs[i]!;
      assertClose(
        output(r, 'SUM').data,
        x.map((v) => 2 * v + (Math.fround(v) * Math.fround(v) + 1)),
        `SUM ${i}`,
      );
      assertClose(
        output(r, 'DIFF').data,
        x.map((v) => 2 * v - (Math.fround(v) * Math.fround(v) + 1)),
        `DIFF ${i}`,
      );
    });
    for (const step of ['scale2', 'square', 'add_sub']) {
      const labels = { model: step, version: '1' };
      assert.equal(await metric('nv_inference_count', labels), 8, `${step}: every row ran once`);
      assert.equal(await metric('onnx_mme_batch_size_sum', labels), 8, `${step}: batch sizes add up`);
      const execs = await metric('nv_inference_exec_count', labels);
      assert.ok(execs >= 1 && execs < 8, `${step}: 8 requests merged into ${execs} executions`);
    }
  });

  it('a broken ensemble: one 400 lists the wiring, unknown-model, batch-size, shape and datatype problems; the server keeps serving', async () => {
    const reply = await invoke('broken.tar.gz', { inputs: [input('IN', 'FP32', [1, 8], Array(8).fill(0))] });
    assert.equal(reply.status, 400, reply.text);
    assert.equal(reply.body.code, 'INVALID_MODEL');
    const message = reply.body.error as string;
    for (const p of [
      "ensemble tensor 'LEFTOVER' is unused",
      "step 2 (model 'nosuch'): the package has no model 'nosuch'",
      "step 0 (model 'scale2'): ensemble 'broken' allows max_batch_size 16, but model 'scale2' only allows 8",
      "step 1 (model 'add_sub'): ensemble 'broken' allows max_batch_size 16, but model 'add_sub' only allows 8",
      "ensemble tensor 'IN': inconsistent shape, ensemble input 'IN' gives [-1,8] but step 0 (model 'scale2') input 'INPUT0' expects [-1,16]",
      "ensemble tensor 'IDS': inconsistent data type, ensemble input 'IDS' gives INT32 but step 1 (model 'add_sub') input 'INPUT1' expects FP32",
    ]) {
      assert.ok(message.includes(p), `missing: ${p}\nin: ${message}`);
    }
    const again = await invoke('text_embedding.tar.gz', textRequest(['hello']));
    assert.equal(again.status, 200, again.text);
  });
});

describe('MME_ALLOW_JS_BACKEND=false', () => {
  it('a package with a JS step is refused with 501 naming the setting; built-in steps still load', async () => {
    const root = await tempDir(ctx);
    await writePipelineRepository(path.join(root, 'source', 'diamond'), diamondRepository('diamond'));
    await packTarGz(path.join(built.outDir, 'repositories', 'text_embedding'), path.join(root, 'source', 'text.tar.gz'));
    const strict = await startTestServer({
      modelSource: path.join(root, 'source'),
      cacheDir: path.join(root, 'cache'),
      env: { MME_ALLOW_JS_BACKEND: 'false' },
    });
    try {
      const refused = await request(`${strict.url}/invocations`, {
        method: 'POST',
        headers: { 'X-Amzn-SageMaker-Target-Model': 'diamond' },
        json: { inputs: [input('IN', 'FP32', [1, FEATURES], Array(FEATURES).fill(1))] },
      });
      assert.equal(refused.status, 501, refused.text);
      assert.equal(refused.body.code, 'UNSUPPORTED');
      assert.match(refused.body.error, /the js backend is disabled on this server \(MME_ALLOW_JS_BACKEND=false\)/);
      const text = await request(`${strict.url}/invocations`, {
        method: 'POST',
        headers: { 'X-Amzn-SageMaker-Target-Model': 'text.tar.gz' },
        json: textRequest(['good dog']),
      });
      assert.equal(text.status, 200, text.text);
    } finally {
      await strict.close();
    }
  });
});
