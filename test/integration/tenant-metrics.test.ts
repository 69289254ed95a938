/**
 * Tenants told apart, end to end: two archives of one S3-style prefix whose
 * configs both name their model `model` are two series (target label), each
 * counting its own requests; unloading one removes its series and leaves the
 * other's; with MME_METRICS_MAX_TARGETS the targets past the cap are counted
 * in the `_overflow` series; every `*_us` sample is a whole number.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { packTarGz, scale, writeModelDir } from '../../examples/models/zoo.js';
import { sample } from '../support/metric-value.js';
import { tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer, type TestServer } from '../support/test-server.js';

const ctx = {
  cleanups: [] as (() => Promise<void>)[],
  after(fn: () => Promise<void>) {
    this.cleanups.push(fn);
  },
};
let root: string;
let source: string;

const body = { inputs: [input('INPUT0', 'FP32', [1, 4], [1, 2, 3, 4])] };

function invoke(url: string, target: string) {
  return request(`${url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': target }, json: body });
}

async function metrics(url: string): Promise<string> {
  return (await fetch(`${url}/metrics`)).text();
}

/** The distinct values of `label` among a metric's samples that carry `where`. */
function labelValues(text: string, name: string, label: string, where: Record<string, string>): string[] {
  const out = new Set<string>();
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const have = new Map([...line.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1]!, x[2]!]));
    if (Object.entries(where).every(([k, v]) => have.get(k) === v) && have.has(label)) out.add(have.get(label)!);
  }
  return [...out].sort();
}

before(async () => {
  root = await tempDir(ctx);
  source = path.join(root, 'source');
  // Two teams, one config name: the common case in real MME repositories.
  for (const [team, factor] of [
    ['a', 2],
    ['b', 3],
  ] as const) {
    await writeModelDir(path.join(root, 'work', team), 'model', scale(factor));
    await packTarGz(path.join(root, 'work', team), path.join(source, 'team', `${team}.tar.gz`));
  }
});

after(async () => {
  for (const c of ctx.cleanups.reverse()) await c();
});

describe('tenant metrics', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ modelSource: source, cacheDir: path.join(root, 'cache1') });
  });
  after(async () => server.close());

  it('two targets whose configs share a name are counted apart, and an unloaded one leaves no series', async () => {
    for (let i = 0; i < 2; i++) assert.equal((await invoke(server.url, 'team/a.tar.gz')).status, 200);
    for (let i = 0; i < 3; i++) assert.equal((await invoke(server.url, 'team/b.tar.gz')).status, 200);
    let text = await metrics(server.url);
    const targets = labelValues(text, 'nv_inference_request_success', 'target', { model: 'model', version: '1' });
    assert.equal(targets.length, 2, `two series for model "model": ${targets.join(', ')}`);
    const [a, b] = targets as [string, string];
    assert.match(a, /^team\/a/);
    assert.match(b, /^team\/b/);
    assert.equal(sample(text, 'nv_inference_request_success', { target: a, model: 'model', version: '1' }), 2);
    assert.equal(sample(text, 'nv_inference_request_success', { target: b, model: 'model', version: '1' }), 3);
    assert.equal(sample(text, 'nv_inference_exec_count', { target: b, model: 'model' }), 3);
    assert.equal(sample(text, 'onnx_mme_request_duration_seconds_count', { target: a, model: 'model', version: '1' }), 2);
    for (const line of text.split('\n').filter((l) => /^nv_inference_\w+_us\{/.test(l))) assert.match(line, / \d+$/, `whole µs: ${line}`);
    assert.doesNotMatch(text, /version=""/, 'never an empty version label');

    const unloaded = await request(`${server.url}/v2/repository/models/${encodeURIComponent('team/a.tar.gz')}/unload`, { method: 'POST' });
    assert.equal(unloaded.status, 200, unloaded.text);
    text = await metrics(server.url);
    assert.equal(text.includes(`target="${a}"`), false, 'the unloaded target has no series left');
    assert.equal(sample(text, 'nv_inference_request_success', { target: b, model: 'model' }), 3);
  });

  it('a failure of a loaded model is counted with its target and version', async () => {
    const bad = await request(`${server.url}/invocations`, {
      method: 'POST',
      headers: { 'X-Amzn-SageMaker-Target-Model': 'team/b.tar.gz' },
      json: { inputs: [input('NOPE', 'FP32', [1, 4], [1, 2, 3, 4])] },
    });
    assert.equal(bad.status, 400);
    const text = await metrics(server.url);
    const [b] = labelValues(text, 'nv_inference_request_success', 'target', { model: 'model' });
    assert.equal(sample(text, 'nv_inference_request_failure', { target: b!, model: 'model', version: '1', reason: 'OTHER' }), 1);
  });
});

describe('MME_METRICS_MAX_TARGETS', () => {
  it('targets past the cap are counted in the _overflow series', async () => {
    const server = await startTestServer({ modelSource: source, cacheDir: path.join(root, 'cache2'), env: { MME_METRICS_MAX_TARGETS: '1' } });
    try {
      assert.equal((await invoke(server.url, 'team/a.tar.gz')).status, 200);
      for (let i = 0; i < 3; i++) assert.equal((await invoke(server.url, 'team/b.tar.gz')).status, 200);
      const text = await metrics(server.url);
      const o = { target: '_overflow', model: '_overflow', version: '_overflow' };
      assert.equal(sample(text, 'nv_inference_request_success', o), 3);
      assert.equal(sample(text, 'onnx_mme_metrics_overflow_targets'), 1);
      assert.deepEqual(
        labelValues(text, 'nv_inference_request_success', 'target', {}),
        ['_overflow', labelValues(text, 'nv_inference_request_success', 'target', { model: 'model' })[0]!].sort(),
      );
    } finally {
      await server.close();
    }
  });
});
