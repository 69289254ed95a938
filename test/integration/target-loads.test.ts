/**
 * How targets become loads, through the real server on a local source:
 * - a broken model under repeated requests (sequential and concurrent) is
 *   loaded once in its back-off window, every request answered with the same
 *   400 naming the model; a changed object, and an explicit load, retry at once;
 * - `x` and `x.tar.gz` name one object: one load, one resident entry;
 * - a SageMaker url that is itself one model directory, its config named after
 *   the directory, loads (as Triton's does) whatever the target header says.
 */
import assert from 'node:assert/strict';
import { mkdir, rm, utimes } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { addSub, configText, packTarGz, writeModelDir } from '../../examples/models/zoo.js';
import { FAILED_LOAD_BASE_MS } from '../../src/registry/failed-loads.js';
import { tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer, type TestServer } from '../support/test-server.js';

const ctx = {
  cleanups: [] as (() => Promise<void>)[],
  after(fn: () => Promise<void>) {
    this.cleanups.push(fn);
  },
};
after(async () => {
  for (const fn of ctx.cleanups.reverse()) await fn();
});

/** Config says INT32 where the graph has FP32: a load error (INVALID_MODEL) at every load. */
const BROKEN = configText({
  maxBatchSize: 8,
  inputs: [
    { name: 'INPUT0', dataType: 'FP32', dims: [16] },
    { name: 'INPUT1', dataType: 'FP32', dims: [16] },
  ],
  outputs: [
    { name: 'OUTPUT0', dataType: 'INT32', dims: [16] },
    { name: 'OUTPUT1', dataType: 'FP32', dims: [16] },
  ],
});

let root = '';
let work = '';
let server: TestServer;

const ones = Array.from({ length: 16 }, () => 1);
const body = { inputs: [input('INPUT0', 'FP32', [1, 16], ones), input('INPUT1', 'FP32', [1, 16], ones)] };
const invoke = (target: string) => request(`${server.url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': target }, json: body });
const loadsOf = (target: string, msg: string) => server.logs.filter((l) => l['msg'] === msg && l['model'] === target).length;

async function writeArchive(name: string, config: string | undefined, mtimeSeconds: number): Promise<void> {
  const dir = path.join(work, name);
  await rm(dir, { recursive: true, force: true });
  await writeModelDir(work, name, { onnx: addSub().onnx, ...(config === undefined ? {} : { config }) });
  const file = path.join(root, `${name}.tar.gz`);
  await packTarGz(dir, file);
  await utimes(file, mtimeSeconds, mtimeSeconds);
}

before(async () => {
  const base = await tempDir(ctx);
  root = path.join(base, 'models');
  work = path.join(base, 'work');
  await mkdir(root, { recursive: true });
  await writeArchive('broken', BROKEN, 1_700_000_000);
  await writeArchive('flaky', BROKEN, 1_700_000_000);
  await writeArchive('spelled', undefined, 1_700_000_000);
  server = await startTestServer({ modelSource: root, cacheDir: path.join(base, 'cache'), env: { SAGEMAKER_MULTI_MODEL: 'true' } });
  ctx.cleanups.push(() => server.close());
});

describe('failed loads are remembered', () => {
  it('a broken model under 30 requests (10 at once, then 20 in a row) is loaded once per back-off window; each answer is the same 400 naming it', async () => {
    const started = performance.now();
    const first = await Promise.all(Array.from({ length: 10 }, () => invoke('broken.tar.gz')));
    const rest = [];
    for (let i = 0; i < 20; i++) rest.push(await invoke('broken.tar.gz'));
    const elapsed = performance.now() - started;
    for (const r of [...first, ...rest]) {
      assert.equal(r.status, 400, r.text);
      assert.equal(r.body.code, 'INVALID_MODEL');
      assert.match(r.body.error, /^model 'broken\.tar\.gz[^']*'.*config\.pbtxt does not match the ONNX model: output 'OUTPUT0': config\.pbtxt says INT32/);
      // The package's fault: waiting will not fix it (a new object loads at once), so no Retry-After.
      assert.equal(r.headers.get('retry-after'), null);
    }
    assert.match(
      rest[19]!.body.error,
      /\(the load failed (once|\d+ times); not retried for \d+ s unless the model's object changes or it is loaded explicitly\)$/,
    );
    // Windows of 2 s, 4 s, 8 s…: n loads cover 2 s × (2^n - 1). On a fast machine this is 1 load for 30 requests.
    const allowed = Math.floor(Math.log2(elapsed / FAILED_LOAD_BASE_MS + 1)) + 1;
    const loads = loadsOf('broken.tar.gz', 'model load failed');
    assert.ok(loads >= 1 && loads <= allowed, `${loads} loads in ${Math.round(elapsed)} ms (at most ${allowed})`);
    assert.ok(loads <= 3, `${loads} loads for 30 requests`);
  });

  it('a changed object (new version) loads at once', async () => {
    assert.equal((await invoke('flaky.tar.gz')).status, 400);
    assert.equal((await invoke('flaky.tar.gz')).status, 400);
    assert.equal(loadsOf('flaky.tar.gz', 'model load failed'), 1);
    await writeArchive('flaky', undefined, 1_700_000_100); // fixed: auto-complete, new mtime
    const r = await invoke('flaky.tar.gz');
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(
      r.body.outputs[0].data,
      Array.from({ length: 16 }, () => 2),
    );
  });

  it('an explicit load retries at once (and fails again, counted)', async () => {
    const before = loadsOf('broken.tar.gz', 'model load failed');
    const r = await request(`${server.url}/v2/repository/models/broken.tar.gz/load`, { method: 'POST', json: {} });
    assert.equal(r.status, 400, r.text);
    assert.equal(loadsOf('broken.tar.gz', 'model load failed'), before + 1);
    assert.equal((await invoke('broken.tar.gz')).status, 400);
    assert.equal(loadsOf('broken.tar.gz', 'model load failed'), before + 1, 'back in its (now longer) window');
  });
});

describe('one object, one entry', () => {
  it('`spelled` and `spelled.tar.gz` share one load and one resident entry', async () => {
    const a = await invoke('spelled');
    const b = await invoke('spelled.tar.gz');
    const c = await invoke('./spelled');
    for (const r of [a, b, c]) assert.equal(r.status, 200, r.text);
    assert.equal(loadsOf('spelled.tar.gz', 'model loaded'), 1);
    assert.equal(loadsOf('spelled', 'model loaded'), 0);
    const ready = await request(`${server.url}/v2/models/spelled/ready`);
    assert.equal(ready.status, 200);
  });
});

describe('SageMaker url that is one model directory', () => {
  it('loads when its config.pbtxt is named after the directory, whatever the target header', async () => {
    const dir = await writeModelDir(path.join(work, 'opt-ml', 'abc123'), 'mymodel', {
      onnx: addSub().onnx,
      config: `name: "mymodel"\n${addSub().config!}`,
    });
    const load = await request(`${server.url}/models`, {
      method: 'POST',
      headers: { 'X-Amzn-SageMaker-Target-Model': 'customer/model-v3.tar.gz' },
      json: { model_name: 'abc123', url: dir },
    });
    assert.equal(load.status, 200, load.text);
    const r = await request(`${server.url}/models/abc123/invoke`, {
      method: 'POST',
      headers: { 'X-Amzn-SageMaker-Target-Model': 'customer/model-v3.tar.gz' },
      json: body,
    });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(
      r.body.outputs[0].data,
      Array.from({ length: 16 }, () => 2),
    );
  });

  it('a config named otherwise is refused naming both names', async () => {
    const dir = await writeModelDir(path.join(work, 'opt-ml', 'def456'), 'model', {
      onnx: addSub().onnx,
      config: `name: "resnet"\n${addSub().config!}`,
    });
    const load = await request(`${server.url}/models`, { method: 'POST', json: { model_name: 'def456', url: dir } });
    assert.equal(load.status, 400, load.text);
    assert.match(load.body.error, /name 'resnet' does not match the model directory name 'def456'/);
  });
});
