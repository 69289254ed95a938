/**
 * MME_DEFAULT_MAX_BATCH_SIZE (Triton's default-max-batch-size), from outside:
 * a real `serve` with a model that has no config.pbtxt and can batch. Its
 * effective config, the rows a request may carry, and the answers, with the
 * setting raised, with it at 0 (no batching), and a model whose config sets
 * max_batch_size, which the setting never changes. The message of a bad
 * value is checked in test/unit/config/server-config.test.ts.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { configText, tiny, writeModelDir } from '../../examples/models/zoo.js';
import { startServe, type ServeProcess } from '../support/serve-process.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { request } from '../support/test-server.js';
import { input } from '../support/v2-json.js';

const cleanups = new Cleanups();
let models: string;
const servers: ServeProcess[] = [];

before(async () => {
  models = path.join(await tempDir(cleanups), 'models');
  const model = tiny({ in: 16, out: 4 });
  await writeModelDir(models, 'auto', { onnx: model.onnx });
  await writeModelDir(models, 'configured', {
    onnx: model.onnx,
    config: configText({
      maxBatchSize: 2,
      inputs: [{ name: 'INPUT0', dataType: 'FP32', dims: [16] }],
      outputs: [{ name: 'OUTPUT0', dataType: 'FP32', dims: [4] }],
    }),
  });
});

after(async () => {
  for (const s of servers) await s.kill();
  await cleanups.run();
});

async function serveWith(value: string): Promise<ServeProcess> {
  const server = await startServe({ MME_MODEL_SOURCE: models, MME_CACHE_DIR: path.join(await tempDir(cleanups), 'cache'), MME_DEFAULT_MAX_BATCH_SIZE: value });
  servers.push(server);
  return server;
}

function rows(n: number, shape: number[] = [n, 16]): Record<string, unknown> {
  return {
    inputs: [
      input(
        'INPUT0',
        'FP32',
        shape,
        Array.from({ length: n * 16 }, (_, i) => (i % 7) / 7),
      ),
    ],
  };
}

describe('MME_DEFAULT_MAX_BATCH_SIZE', () => {
  it('16: a model without config.pbtxt batches up to 16 rows, with a dynamic_batching block; a config that sets max_batch_size keeps it', async () => {
    const server = await serveWith('16');
    const ok = await request(`${server.url}/v2/models/auto/infer`, { method: 'POST', json: rows(16) });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.deepEqual((ok.body as { outputs: { shape: number[] }[] }).outputs[0]!.shape, [16, 4]);
    const config = (await request(`${server.url}/v2/models/auto/config`)).body as Record<string, unknown>;
    assert.equal(config['max_batch_size'], 16);
    assert.deepEqual((config['dynamic_batching'] as { preferred_batch_size: number[] }).preferred_batch_size, [16]);
    assert.deepEqual((config['input'] as { dims: number[] }[])[0]!.dims, [16]);
    const tooMany = await request(`${server.url}/v2/models/auto/infer`, { method: 'POST', json: rows(17) });
    assert.equal(tooMany.status, 400);
    assert.match(JSON.stringify(tooMany.body), /batch-size must be between 1 and 16, got 17/);
    const configured = (await request(`${server.url}/v2/models/configured/config`)).body as Record<string, unknown>;
    assert.equal(configured['max_batch_size'], 2);
  });

  it('0: a model without config.pbtxt does not batch; its inputs keep the batch dimension', async () => {
    const server = await serveWith('0');
    const config = (await request(`${server.url}/v2/models/auto/config`)).body as Record<string, unknown>;
    assert.equal(config['max_batch_size'], 0);
    assert.deepEqual((config['input'] as { dims: number[] }[])[0]!.dims, [-1, 16]);
    const ok = await request(`${server.url}/v2/models/auto/infer`, { method: 'POST', json: rows(3) });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.deepEqual((ok.body as { outputs: { shape: number[] }[] }).outputs[0]!.shape, [3, 4]);
  });

  it('a value that is not a whole number ≥ 0 stops start-up', async () => {
    await assert.rejects(serveWith('-1'), /exited early with code [1-9]/);
  });
});
