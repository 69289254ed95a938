/**
 * The config field table (config/field-support.ts) from outside: the real
 * server refuses a package whose config.pbtxt sets a refused field with 400
 * INVALID_MODEL naming the model, the field and why, before any session is
 * created; it serves a package with ignored fields and logs a warning naming
 * each; `onnx-mme validate` (the built command) says the same, field by field.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { addSub, writeModelDir } from '../../examples/models/zoo.js';
import { runCli } from '../support/cli.js';
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

const IO = `max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
`;

const REFUSED: Record<string, { extra: string; field: string }> = {
  seq: { extra: 'sequence_batching { iterative_sequence: true }', field: 'sequence_batching.iterative_sequence' },
  decoupled: { extra: 'model_transaction_policy { decoupled: true }', field: 'model_transaction_policy.decoupled' },
  agents: { extra: 'model_repository_agents { agents [ { name: "checksum" } ] }', field: 'model_repository_agents' },
};

const IGNORED_EXTRA = `metric_tags { key: "team" value: "search" }
instance_group [ { count: 1 kind: KIND_CPU rate_limiter { priority: 1 } } ]
parameters { key: "enable_mem_arena" value: { string_value: "0" } }
`;

/** A Triton repository written for GPUs: Triton's onnxruntime backend never reads these (TensorRT backend only). */
const CUDA_GRAPHS = `optimization { cuda { graphs: true graph_spec [ { batch_size: 8 } ] } }
`;

let root = '';
let server: TestServer;

before(async () => {
  root = await tempDir(ctx);
  for (const [name, r] of Object.entries(REFUSED)) await writeModelDir(root, name, { onnx: addSub().onnx, config: `name: "${name}"\n${IO}${r.extra}\n` });
  await writeModelDir(root, 'tagged', { onnx: addSub().onnx, config: `name: "tagged"\n${IO}${IGNORED_EXTRA}` });
  await writeModelDir(root, 'cudagraphs', { onnx: addSub().onnx, config: `name: "cudagraphs"\n${IO}${CUDA_GRAPHS}` });
  server = await startTestServer({ modelSource: root, cacheDir: path.join(await tempDir(ctx), 'cache') });
  ctx.cleanups.push(() => server.close());
});

const ones = Array.from({ length: 16 }, () => 1);
const invoke = (target: string) =>
  request(`${server.url}/invocations`, {
    method: 'POST',
    headers: { 'X-Amzn-SageMaker-Target-Model': target },
    json: { inputs: [input('INPUT0', 'FP32', [1, 16], ones), input('INPUT1', 'FP32', [1, 16], ones)] },
  });

describe('config fields the server does not serve', () => {
  for (const [name, r] of Object.entries(REFUSED)) {
    it(`${r.field} is refused at load: 400 INVALID_MODEL naming the model and the field`, async () => {
      const res = await invoke(name);
      assert.equal(res.status, 400, res.text);
      assert.equal(res.body.code, 'INVALID_MODEL');
      assert.ok(res.body.error.includes(`${name}/config.pbtxt: field '${r.field}' is not supported by onnx-mme: `), res.body.error);
      assert.doesNotMatch(res.body.error, new RegExp(root.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')), 'no host path');
      assert.equal(server.running.registry.loadedCount(), 0);
    });
  }

  it('ignored fields: the model serves, and the load logs one warning per field, naming it', async () => {
    const res = await invoke('tagged');
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      res.body.outputs[0].data,
      Array.from({ length: 16 }, () => 2),
    );
    const warned = server.logs
      .filter((l) => l['level'] === 'warn' && typeof l['field'] === 'string' && l['model'] === 'tagged')
      .map((l) => [l['field'], l['model']]);
    assert.deepEqual(warned, [
      ['instance_group.rate_limiter', 'tagged'],
      ['metric_tags', 'tagged'],
      ['parameters.enable_mem_arena', 'tagged'],
    ]);
  });

  it("optimization.cuda.graphs (and graph_spec), which Triton's onnxruntime backend never reads: the model serves, with a warning per field", async () => {
    const res = await invoke('cudagraphs');
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      res.body.outputs[0].data,
      Array.from({ length: 16 }, () => 2),
    );
    const warned = server.logs.filter((l) => l['level'] === 'warn' && l['model'] === 'cudagraphs' && typeof l['field'] === 'string');
    assert.deepEqual(warned.map((l) => l['field']).sort(), ['optimization.cuda.graph_spec', 'optimization.cuda.graphs']);
    for (const l of warned) assert.match(String(l['msg']), /is ignored: .*onnxruntime backend never reads it/);
  });

  it('validate agrees: refused fields are problems, ignored ones are listed under the model', async () => {
    const bad = await runCli(['validate', path.join(root, 'seq')]);
    assert.equal(bad.code, 1, bad.stdout);
    assert.match(bad.stdout, /error \[INVALID_MODEL\] seq: seq\/config\.pbtxt: field 'sequence_batching\.iterative_sequence' is not supported by onnx-mme: /);
    const ok = await runCli(['validate', path.join(root, 'tagged')]);
    assert.equal(ok.code, 0, ok.stdout);
    assert.match(ok.stdout, /\n {4}ignored: instance_group\.rate_limiter \(there is no rate limiter/);
    assert.match(ok.stdout, /\n {4}ignored: metric_tags \(/);
    assert.match(ok.stdout, /\n {4}ignored: parameters\.enable_mem_arena \(/);
    assert.match(ok.stdout, /OK: the server will load this package/);
    const json = JSON.parse((await runCli(['validate', path.join(root, 'tagged'), '--json'])).stdout) as { models: { ignoredFields: { path: string }[] }[] };
    assert.deepEqual(
      json.models[0]?.ignoredFields.map((f) => f.path),
      ['instance_group.rate_limiter', 'metric_tags', 'parameters.enable_mem_arena'],
    );
  });
});
