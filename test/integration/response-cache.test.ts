/**
 * The response cache on the real server: a model with
 * `response_cache { enable: true }` answers a repeated request from memory
 * (same answer, counted as a hit, not as an inference), while other inputs,
 * another input order, other requested outputs and models without the
 * setting run; the byte budget evicts least recently used answers; a model
 * reloaded under the same name with new weights is never answered from the
 * old model's entries; an ensemble caches at its own level (a hit runs no
 * step); classification is applied to cached outputs as to fresh ones; a
 * server without a cache warns once and serves.
 */
import assert from 'node:assert/strict';
import { appendFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { addSub, denseForward, ensembleRepository, packTarGz, scale, tiny, writeModelDir, writeRepository } from '../../examples/models/zoo.js';
import { sample } from '../support/metric-value.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();
const CACHE = 'response_cache { enable: true }\n';

let server: TestServer;
let root: string;

async function metrics(url: string): Promise<string> {
  return (await fetch(`${url}/metrics`)).text();
}

function invoke(url: string, target: string, body: unknown) {
  return request(`${url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': target }, json: body });
}

const seq16 = Array.from({ length: 16 }, (_, i) => i);
const addSubBody = (a: number[], b: number[] = seq16, outputs?: string[]) => ({
  inputs: [input('INPUT0', 'FP32', [1, 16], a), input('INPUT1', 'FP32', [1, 16], b)],
  ...(outputs ? { outputs: outputs.map((name) => ({ name })) } : {}),
});

before(async () => {
  root = await tempDir(ctx);
  const models = path.join(root, 'models');
  await writeModelDir(models, 'cached', addSub());
  await appendFile(path.join(models, 'cached', 'config.pbtxt'), CACHE);
  await writeModelDir(models, 'plain', addSub());
  await writeModelDir(models, 'small', scale(2, 64));
  await appendFile(path.join(models, 'small', 'config.pbtxt'), CACHE);
  await writeModelDir(models, 'cls', tiny({ in: 4, out: 3 }));
  await appendFile(path.join(models, 'cls', 'config.pbtxt'), CACHE);
  const repo = ensembleRepository();
  const ensembleModels = { ...repo.models, [repo.name]: { ...repo.models[repo.name]!, config: `${repo.models[repo.name]!.config}${CACHE}` } };
  await writeRepository(path.join(root, 'work', 'pipeline'), ensembleModels);
  await packTarGz(path.join(root, 'work', 'pipeline'), path.join(models, 'pipeline.tar.gz'));
  // Room for a handful of 'small' answers (64 floats each) and not for 30.
  server = await startTestServer({ modelSource: models, cacheDir: path.join(root, 'cache'), env: { MME_RESPONSE_CACHE_BYTES: '4000' } });
});

after(async () => {
  await server.close();
  await ctx.run();
});

describe('response cache', () => {
  it('a repeated request is a hit: the same answer, not counted as an inference', async () => {
    const body = addSubBody(seq16.map((x) => x * 3));
    const first = await invoke(server.url, 'cached', body);
    assert.equal(first.status, 200, first.text);
    const second = await invoke(server.url, 'cached', body);
    assert.equal(second.status, 200, second.text);
    assert.deepEqual(second.body, first.body);
    assert.deepEqual(
      first.body.outputs[0].data,
      seq16.map((x) => x * 4),
    );

    const m = await metrics(server.url);
    const labels = { model: 'cached', version: '1' };
    assert.equal(sample(m, 'nv_cache_num_hits_per_model', labels), 1);
    assert.equal(sample(m, 'nv_cache_num_misses_per_model', labels), 1);
    assert.equal(sample(m, 'nv_inference_request_success', labels), 2);
    // Triton: hits are not inferences; the one run counted one row.
    assert.equal(sample(m, 'nv_inference_count', labels), 1);
    assert.ok((sample(m, 'nv_cache_hit_duration_per_model', labels) ?? 0) > 0);
    assert.ok((sample(m, 'onnx_mme_response_cache_entries') ?? 0) >= 1);
  });

  it('input order does not matter; other data, shapes or requested outputs are misses', async () => {
    const a = seq16.map((x) => x + 100);
    const base = addSubBody(a);
    assert.equal((await invoke(server.url, 'cached', base)).status, 200);
    const before = await metrics(server.url);
    const labels = { model: 'cached', version: '1' };
    const hits0 = sample(before, 'nv_cache_num_hits_per_model', labels)!;
    const misses0 = sample(before, 'nv_cache_num_misses_per_model', labels)!;

    // Same inputs listed the other way round: the model sees the same tensors.
    const swapped = await invoke(server.url, 'cached', { inputs: [...base.inputs].reverse() });
    assert.equal(swapped.status, 200);
    // One element different.
    const other = await invoke(server.url, 'cached', addSubBody(a.map((x, i) => (i === 15 ? x + 1 : x))));
    assert.equal(other.status, 200);
    assert.equal(other.body.outputs[0].data[15], a[15]! + 1 + 15);
    // Only one of the two outputs asked for: a different answer, so a different entry.
    const one = await invoke(server.url, 'cached', addSubBody(a, seq16, ['OUTPUT1']));
    assert.equal(one.status, 200);
    assert.deepEqual(
      one.body.outputs.map((o: { name: string }) => o.name),
      ['OUTPUT1'],
    );
    // Two rows of the same numbers: another shape.
    const twoRows = await invoke(server.url, 'cached', {
      inputs: [input('INPUT0', 'FP32', [2, 16], [...a, ...a]), input('INPUT1', 'FP32', [2, 16], [...seq16, ...seq16])],
    });
    assert.equal(twoRows.status, 200);

    const m = await metrics(server.url);
    assert.equal(sample(m, 'nv_cache_num_hits_per_model', labels), hits0 + 1);
    assert.equal(sample(m, 'nv_cache_num_misses_per_model', labels), misses0 + 3);
  });

  it('an ensemble caches at its own level: a hit runs none of its steps', async () => {
    const body = { inputs: [input('INPUT', 'FP32', [1, 4], [1, 2, 3, 4])] };
    const first = await invoke(server.url, 'pipeline.tar.gz', body);
    assert.equal(first.status, 200, first.text);
    const second = await invoke(server.url, 'pipeline.tar.gz', body);
    assert.deepEqual(second.body, first.body);
    const m = await metrics(server.url);
    assert.equal(sample(m, 'nv_cache_num_hits_per_model', { model: 'pipeline' }), 1);
    assert.equal(sample(m, 'nv_cache_num_misses_per_model', { model: 'pipeline' }), 1);
    // The steps ran once, for the miss.
    assert.equal(sample(m, 'nv_inference_count', { model: 'classifier' }), 1);
    assert.equal(sample(m, 'nv_inference_count', { model: 'preprocess' }), 1);
  });

  it('classification applies to a cached answer exactly as to a fresh one', async () => {
    const x = [0.5, -1, 2, 0.25];
    const plain = await invoke(server.url, 'cls', { inputs: [input('INPUT0', 'FP32', [1, 4], x)] });
    assert.equal(plain.status, 200, plain.text);
    const scores = Array.from(denseForward(tiny({ in: 4, out: 3 }).layers, Float32Array.from(x), 1));
    plain.body.outputs[0].data.forEach((v: number, i: number) => assert.ok(Math.abs(v - scores[i]!) < 1e-5));
    // Same inputs and output name: the raw outputs come from the cache, then top-1 is taken from them.
    const top = await invoke(server.url, 'cls', {
      inputs: [input('INPUT0', 'FP32', [1, 4], x)],
      outputs: [{ name: 'OUTPUT0', parameters: { classification: 1 } }],
    });
    assert.equal(top.status, 200, top.text);
    const best = scores.indexOf(Math.max(...scores));
    assert.deepEqual(top.body.outputs[0].data, [`${scores[best]!.toFixed(6)}:${best}`]);
    const m = await metrics(server.url);
    assert.equal(sample(m, 'nv_cache_num_hits_per_model', { model: 'cls' }), 1);
  });

  it('a model without response_cache runs every request and has no cache series', async () => {
    const body = addSubBody(seq16);
    for (let i = 0; i < 3; i++) assert.equal((await invoke(server.url, 'plain', body)).status, 200);
    const m = await metrics(server.url);
    assert.equal(sample(m, 'nv_inference_count', { model: 'plain', version: '1' }), 3);
    assert.equal(sample(m, 'nv_cache_num_hits_per_model', { model: 'plain' }), undefined);
    assert.equal(sample(m, 'nv_cache_num_misses_per_model', { model: 'plain' }), undefined);
  });

  it('the byte budget holds: least recently used answers are evicted, recent ones still hit', async () => {
    const values = (k: number) => Array.from({ length: 64 }, (_, i) => i + k * 1000);
    const row = (k: number) => ({ inputs: [input('INPUT0', 'FP32', [1, 64], values(k))] });
    for (let k = 0; k < 30; k++) assert.equal((await invoke(server.url, 'small', row(k))).status, 200);
    const m = await metrics(server.url);
    assert.ok((sample(m, 'onnx_mme_response_cache_evictions_total') ?? 0) > 0, 'evictions counted');
    assert.ok(sample(m, 'onnx_mme_response_cache_bytes')! <= 4000, 'within MME_RESPONSE_CACHE_BYTES');
    const labels = { model: 'small', version: '1' };
    const hits0 = sample(m, 'nv_cache_num_hits_per_model', labels) ?? 0;
    const recent = await invoke(server.url, 'small', row(29));
    assert.deepEqual(
      recent.body.outputs[0].data,
      values(29).map((x) => x * 2),
    );
    const oldest = await invoke(server.url, 'small', row(0));
    assert.equal(oldest.status, 200);
    const m2 = await metrics(server.url);
    assert.equal(sample(m2, 'nv_cache_num_hits_per_model', labels), hits0 + 1, 'the newest answer hit, the oldest was gone');
  });
});

describe('response cache across reloads and without a budget', () => {
  it('a model reloaded under the same name with new weights is not answered from the old entries', async () => {
    const dir = await tempDir(ctx);
    const s = await startTestServer({
      modelSource: path.join(dir, 'empty'),
      cacheDir: path.join(dir, 'cache'),
      env: { SAGEMAKER_MULTI_MODEL: 'true', MME_RESPONSE_CACHE_BYTES: '100000' },
    });
    try {
      const body = { inputs: [input('INPUT0', 'FP32', [1, 4], [1, 2, 3, 4])] };
      const load = async (factor: number) => {
        const url = path.join(dir, `v${factor}`, 'model');
        await writeModelDir(url, 'scaled', scale(factor));
        await appendFile(path.join(url, 'scaled', 'config.pbtxt'), CACHE);
        const r = await request(`${s.url}/models`, { method: 'POST', json: { model_name: 'scaled', url } });
        assert.equal(r.status, 200, r.text);
      };
      const invokeScaled = () => request(`${s.url}/models/scaled/invoke`, { method: 'POST', json: body });
      await load(2);
      assert.deepEqual((await invokeScaled()).body.outputs[0].data, [2, 4, 6, 8]);
      assert.deepEqual((await invokeScaled()).body.outputs[0].data, [2, 4, 6, 8]);
      assert.equal((await request(`${s.url}/models/scaled`, { method: 'DELETE' })).status, 200);
      await load(3);
      assert.deepEqual((await invokeScaled()).body.outputs[0].data, [3, 6, 9, 12]);
      const m = await metrics(s.url);
      // The unload removed the first load's series (its one hit); the reload's request was a miss.
      assert.equal(sample(m, 'nv_cache_num_hits_per_model', { target: 'scaled', model: 'scaled' }), undefined);
      assert.equal(sample(m, 'nv_cache_num_misses_per_model', { target: 'scaled', model: 'scaled' }), 1);
    } finally {
      await s.close();
    }
  });

  it('MME_RESPONSE_CACHE_BYTES=0: a model that enables the cache runs every request, with one warning', async () => {
    const dir = await tempDir(ctx);
    await writeModelDir(path.join(dir, 'models'), 'cached', addSub());
    await appendFile(path.join(dir, 'models', 'cached', 'config.pbtxt'), CACHE);
    const s = await startTestServer({ modelSource: path.join(dir, 'models'), cacheDir: path.join(dir, 'cache') });
    try {
      const body = addSubBody(seq16);
      for (let i = 0; i < 3; i++) assert.equal((await invoke(s.url, 'cached', body)).status, 200);
      const m = await metrics(s.url);
      assert.equal(sample(m, 'nv_inference_count', { model: 'cached', version: '1' }), 3);
      assert.equal(sample(m, 'nv_cache_num_hits_per_model', { model: 'cached' }), undefined);
      const warnings = s.logs.filter((l) => typeof l['msg'] === 'string' && (l['msg'] as string).includes('response_cache'));
      assert.equal(warnings.length, 1);
      assert.equal(warnings[0]!['model'], 'cached');
    } finally {
      await s.close();
    }
  });
});
