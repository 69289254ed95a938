/**
 * SageMaker's multi-model container API driven exactly as SageMaker drives
 * it: POST /models with {model_name, url} of an extracted tarball, list with
 * pagination, describe, invoke with the target header, unload; the 409, 404
 * and 400 (header mismatch) paths; unload waiting for in-flight requests; and
 * the SageMaker Runtime SDK against /endpoints/{name}/invocations.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { InvokeEndpointCommand, SageMakerRuntimeClient } from '@aws-sdk/client-sagemaker-runtime';
import { addSub, ensembleRepository, sizedModel, writeModelDir, writeRepository } from '../../examples/models/zoo.js';
import { slowModel } from '../support/slow-model.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();
let server: TestServer;
/** /opt/ml/models/<hash>/model as SageMaker lays it out, under a temp dir. */
let models: string;

const seq16 = Array.from({ length: 16 }, (_, i) => i);
const addSubBody = { inputs: [input('INPUT0', 'FP32', [1, 16], seq16), input('INPUT1', 'FP32', [1, 16], seq16)] };

async function sagemakerDir(hash: string, write: (dir: string) => Promise<unknown>): Promise<string> {
  const dir = path.join(models, hash, 'model');
  await write(dir);
  return dir;
}

function load(name: string, url: string, target?: string) {
  return request(`${server.url}/models`, {
    method: 'POST',
    headers: target ? { 'X-Amzn-SageMaker-Target-Model': target } : {},
    json: { model_name: name, url },
  });
}

before(async () => {
  const root = await tempDir(ctx);
  models = path.join(root, 'opt-ml-models');
  server = await startTestServer({ modelSource: path.join(root, 'empty-source'), cacheDir: path.join(root, 'cache'), env: { SAGEMAKER_MULTI_MODEL: 'true' } });
});

after(async () => {
  await server.close();
  await ctx.run();
});

describe('SageMaker MME container API', () => {
  it('GET /models answers {"models":[]} before anything is loaded', async () => {
    const r = await request(`${server.url}/models`);
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, { models: [] });
    const ping = await request(`${server.url}/ping`);
    assert.equal(ping.status, 200);
    assert.equal(ping.text, '');
  });

  it('load → describe → invoke → unload, with 409 and 404', async () => {
    // Tarball with the model directory inside: url/add_sub/config.pbtxt
    const url = await sagemakerDir('abc123', (d) => writeModelDir(d, 'add_sub', addSub()));
    const loaded = await load('abc123', url, 'add_sub.tar.gz');
    assert.equal(loaded.status, 200, loaded.text);

    const again = await load('abc123', url, 'add_sub.tar.gz');
    assert.equal(again.status, 409);
    assert.equal(again.body.code, 'MODEL_ALREADY_LOADED');
    assert.match(again.body.error, /abc123/);

    const described = await request(`${server.url}/models/abc123`);
    assert.equal(described.status, 200);
    assert.equal(described.body.modelName, 'abc123');
    assert.equal(described.body.modelUrl, url);
    assert.equal(described.body.targetModel, 'add_sub.tar.gz');

    const inv = await request(`${server.url}/models/abc123/invoke`, {
      method: 'POST',
      headers: { 'X-Amzn-SageMaker-Target-Model': 'add_sub.tar.gz' },
      json: addSubBody,
    });
    assert.equal(inv.status, 200, inv.text);
    assert.deepEqual(
      inv.body.outputs[0].data,
      seq16.map((x) => 2 * x),
    );

    const wrongHeader = await request(`${server.url}/models/abc123/invoke`, {
      method: 'POST',
      headers: { 'X-Amzn-SageMaker-Target-Model': 'other.tar.gz' },
      json: addSubBody,
    });
    assert.equal(wrongHeader.status, 400);
    assert.equal(wrongHeader.body.code, 'TARGET_MISMATCH');

    const del = await request(`${server.url}/models/abc123`, { method: 'DELETE' });
    assert.equal(del.status, 200, del.text);
    assert.equal((await request(`${server.url}/models/abc123`)).status, 404);
    const gone = await request(`${server.url}/models/abc123/invoke`, { method: 'POST', json: addSubBody });
    assert.equal(gone.status, 404);
    assert.equal(gone.body.code, 'MODEL_NOT_FOUND');
    assert.equal((await request(`${server.url}/models/abc123`, { method: 'DELETE' })).status, 404);
    // Unloaded means the name can be loaded again.
    assert.equal((await load('abc123', url, 'add_sub.tar.gz')).status, 200);
    assert.equal((await request(`${server.url}/models/abc123`, { method: 'DELETE' })).status, 200);
  });

  it('loads a tarball whose config.pbtxt sits at the url root, and an ensemble repository', async () => {
    const single = await sagemakerDir('single1', async (d) => {
      await writeModelDir(path.dirname(d), path.basename(d), addSub());
    });
    assert.equal((await load('single1', single)).status, 200);
    const ens = ensembleRepository();
    const repo = await sagemakerDir('ens1', (d) => writeRepository(d, ens.models));
    assert.equal((await load('ens1', repo, 'pipeline.tar.gz')).status, 200);
    const r = await request(`${server.url}/models/ens1/invoke`, { method: 'POST', json: { inputs: [input('INPUT', 'FP32', [1, 4], [1, 2, 3, 4])] } });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.model_name, 'pipeline');
    const s = await request(`${server.url}/models/single1/invoke`, { method: 'POST', json: addSubBody });
    assert.equal(s.status, 200, s.text);
    for (const name of ['single1', 'ens1']) assert.equal((await request(`${server.url}/models/${name}`, { method: 'DELETE' })).status, 200);
  });

  it('lists with pagination: limit + next_page_token → nextPageToken', async () => {
    const names = ['m-e', 'm-a', 'm-d', 'm-c', 'm-b'];
    for (const n of names) {
      const url = await sagemakerDir(n, (d) => writeModelDir(d, 'add_sub', addSub()));
      assert.equal((await load(n, url)).status, 200);
    }
    const seen: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const q = new URLSearchParams({ limit: '2', ...(token ? { next_page_token: token } : {}) });
      const r = await request(`${server.url}/models?${q}`);
      assert.equal(r.status, 200);
      assert.ok(r.body.models.length <= 2);
      for (const m of r.body.models) {
        seen.push(m.modelName);
        assert.equal(typeof m.modelUrl, 'string');
      }
      token = r.body.nextPageToken;
      pages++;
    } while (token !== undefined);
    assert.deepEqual(seen, [...names].sort());
    assert.equal(pages, 3);
    const all = await request(`${server.url}/models`);
    assert.deepEqual(
      all.body.models.map((m: { modelName: string }) => m.modelName),
      [...names].sort(),
    );
    assert.equal(all.body.nextPageToken, undefined);
    assert.equal((await request(`${server.url}/models?limit=0`)).status, 400);
    assert.equal((await request(`${server.url}/models?next_page_token=%%%`)).status, 400);
    for (const n of names) assert.equal((await request(`${server.url}/models/${n}`, { method: 'DELETE' })).status, 200);
  });

  it('rejects bad load requests without registering anything', async () => {
    const badBody = await request(`${server.url}/models`, { method: 'POST', json: { name: 'x' } });
    assert.equal(badBody.status, 400);
    const relative = await load('rel', 'relative/path');
    assert.equal(relative.status, 400);
    assert.equal(relative.body.code, 'INVALID_REQUEST');
    const proc = await load('proc', '/proc/self');
    assert.equal(proc.status, 400);
    const missing = await load('missing', path.join(models, 'does-not-exist', 'model'));
    assert.equal(missing.status, 404);
    const broken = await sagemakerDir('broken', (d) => writeModelDir(d, 'add_sub', { onnx: addSub().onnx, config: 'max_batch_size: "eight"' }));
    const r = await load('broken', broken, 'broken.tar.gz');
    assert.equal(r.status, 400);
    assert.equal(r.body.code, 'INVALID_MODEL');
    assert.match(r.body.error, /config\.pbtxt:1:\d+/);
    const list = await request(`${server.url}/models`);
    assert.deepEqual(list.body.models, []);
    // The failed name is free: a fixed package loads under it.
    await writeModelDir(broken, 'add_sub', addSub());
    assert.equal((await load('broken', broken)).status, 200);
    assert.equal((await request(`${server.url}/models/broken`, { method: 'DELETE' })).status, 200);
  });

  it('DELETE waits for in-flight requests, which finish normally', async () => {
    const url = await sagemakerDir('slow1', (d) => writeModelDir(d, 'slow', slowModel()));
    assert.equal((await load('slow1', url)).status, 200);
    const inflight = request(`${server.url}/models/slow1/invoke`, {
      method: 'POST',
      json: { inputs: [input('INPUT0', 'FP32', [1, 512], new Array(512).fill(1))] },
    });
    // Let the request reach the model before unloading.
    await waitFor(() => server.running.registry.loadedCount() > 0 && inflightOf(server) > 0);
    // What the server held when the DELETE was answered: the two answers are written in the same few
    // microtasks, so which one the client reads first says nothing; the server's own count does.
    let inflightAtDelete = -1;
    const del = request(`${server.url}/models/slow1`, { method: 'DELETE' }).then((r) => {
      inflightAtDelete = inflightOf(server);
      return r;
    });
    const [inv, d] = await Promise.all([inflight, del]);
    assert.equal(inv.status, 200, inv.text);
    assert.ok(Array.isArray((JSON.parse(inv.text) as { outputs?: unknown[] }).outputs), inv.text);
    assert.equal(d.status, 200);
    assert.equal(inflightAtDelete, 0, 'DELETE answered while the request still held the model');
    assert.equal((await request(`${server.url}/models/slow1`)).status, 404);
  });

  it('/ping answers while a model is loading', async () => {
    const url = await sagemakerDir('big1', (d) => writeModelDir(d, 'big', sizedModel(48 * 1024 * 1024)));
    const order: string[] = [];
    const loading = load('big1', url).then((r) => {
      order.push('load');
      return r;
    });
    await waitFor(() => server.logs.some((l) => l['msg'] === 'load requested' && l['model'] === 'big1'));
    const ping = await request(`${server.url}/ping`);
    order.push('ping');
    assert.equal(ping.status, 200);
    assert.equal((await loading).status, 200);
    assert.deepEqual(order, ['ping', 'load']);
    assert.equal((await request(`${server.url}/models/big1`, { method: 'DELETE' })).status, 200);
  });
});

describe('SageMaker Runtime SDK against /endpoints/{name}/invocations', () => {
  it('InvokeEndpointCommand with TargetModel reaches the model', async () => {
    const root = await tempDir(ctx);
    const source = path.join(root, 'source');
    await writeModelDir(source, 'add_sub', addSub());
    const s = await startTestServer({ modelSource: source, cacheDir: path.join(root, 'cache') });
    try {
      const client = new SageMakerRuntimeClient({
        endpoint: s.url,
        region: 'us-east-1',
        credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      });
      const out = await client.send(
        new InvokeEndpointCommand({
          EndpointName: 'local-endpoint',
          TargetModel: 'add_sub',
          ContentType: 'application/json',
          Accept: 'application/json',
          CustomAttributes: 'c=1',
          Body: new TextEncoder().encode(JSON.stringify(addSubBody)),
        }),
      );
      assert.equal(out.ContentType, 'application/json; charset=utf-8');
      assert.equal(out.CustomAttributes, 'c=1');
      const body = JSON.parse(new TextDecoder().decode(out.Body));
      assert.deepEqual(
        body.outputs[0].data,
        seq16.map((x) => 2 * x),
      );
      await assert.rejects(
        client.send(
          new InvokeEndpointCommand({
            EndpointName: 'local-endpoint',
            TargetModel: 'missing.tar.gz',
            Body: new TextEncoder().encode(JSON.stringify(addSubBody)),
          }),
        ),
        (err: { $metadata?: { httpStatusCode?: number } }) => err.$metadata?.httpStatusCode === 404,
      );
      client.destroy();
    } finally {
      await s.close();
    }
  });
});

function inflightOf(s: TestServer): number {
  return s.running.service.inflightCount;
}

async function waitFor(cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 5));
  }
}
