/**
 * model_warmup from config.pbtxt runs at load (Triton's semantics): zero,
 * random and file inputs with batch_size; a failing sample fails the load
 * with a 400 naming the sample and the reason. Without model_warmup an
 * implicit zero run happens, and a model that cannot take zeros still loads.
 */
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { buildModel, node, valueInfo } from '../../examples/models/onnx-builder.js';
import { scale, writeModelDir } from '../../examples/models/zoo.js';
import { tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer, type TestServer } from '../support/test-server.js';

const cleanups: (() => Promise<void>)[] = [];
const ctx = { after: (fn: () => Promise<void>) => cleanups.push(fn) };
after(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

function warmupConfig(name: string): string {
  return `name: "${name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
model_warmup [
  { name: "zeros" batch_size: 2 count: 2 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } },
  { name: "noise" batch_size: 3 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 4 ] random_data: true } } },
  { name: "from_file" batch_size: 1 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "input0.bin" } } }
]
`;
}

async function server(root: string): Promise<TestServer> {
  const s = await startTestServer({ modelSource: root, cacheDir: path.join(await tempDir(ctx), 'cache'), env: { MME_LOG_LEVEL: 'debug' } });
  cleanups.push(() => s.close());
  return s;
}

const invoke = (s: TestServer, target: string) =>
  request(`${s.url}/invocations`, {
    method: 'POST',
    headers: { 'X-Amzn-SageMaker-Target-Model': target },
    json: { inputs: [input('INPUT0', 'FP32', [1, 4], [1, 2, 3, 4])] },
  });

describe('model warm-up', () => {
  it('runs every model_warmup sample (zero, random, file) before the model serves', async () => {
    const root = await tempDir(ctx);
    const dir = await writeModelDir(root, 'warm', { onnx: scale(2).onnx, config: warmupConfig('warm') });
    await mkdir(path.join(dir, 'warmup'));
    await writeFile(path.join(dir, 'warmup', 'input0.bin'), Buffer.from(Float32Array.from([1, 2, 3, 4]).buffer));
    const s = await server(root);
    const r = await invoke(s, 'warm');
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body.outputs[0].data, [2, 4, 6, 8]);
  });

  it('a failing sample fails the load with 400 naming the model, the sample and the reason', async () => {
    const root = await tempDir(ctx);
    const dir = await writeModelDir(root, 'cold', { onnx: scale(2).onnx, config: warmupConfig('cold') });
    await mkdir(path.join(dir, 'warmup'));
    await writeFile(path.join(dir, 'warmup', 'input0.bin'), Buffer.alloc(12)); // 3 floats, 4 needed
    const s = await server(root);
    const r = await invoke(s, 'cold');
    assert.equal(r.status, 400, r.text);
    assert.equal(r.body.code, 'INVALID_MODEL');
    assert.match(r.body.error, /model 'cold': version 1: model_warmup 'from_file' failed: .*input0\.bin is 12 bytes; shape \[1,4\] of FP32 needs 16/);
    assert.equal(s.running.registry.loadedCount(), 0, 'nothing stays loaded');
  });

  it('without model_warmup, a model that cannot take zero inputs still loads (the implicit warm-up is best effort)', async () => {
    const root = await tempDir(ctx);
    // Reshape(X, S): a zero target shape is invalid for onnxruntime, so the implicit zero run fails.
    const onnx = buildModel({
      inputs: [valueInfo('X', 'FP32', [4]), valueInfo('S', 'INT64', [2])],
      outputs: [valueInfo('Y', 'FP32', ['a', 'b'])],
      nodes: [node('Reshape', ['X', 'S'], ['Y'])],
    });
    await writeModelDir(root, 'picky', { onnx });
    const s = await server(root);
    const r = await request(`${s.url}/invocations`, {
      method: 'POST',
      headers: { 'X-Amzn-SageMaker-Target-Model': 'picky' },
      json: { inputs: [input('X', 'FP32', [4], [1, 2, 3, 4]), input('S', 'INT64', [2], [2, 2])] },
    });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body.outputs[0].shape, [2, 2]);
    assert.ok(s.logs.some((l) => l['msg'] === 'implicit warm-up skipped: the model did not take zero inputs' && l['model'] === 'picky'));
  });
});
