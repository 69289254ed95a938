/**
 * ModelMesh's runtime SPI (mmesh.ModelRuntime, MME_MODEL_MESH=true) against
 * the real server, called the way model-mesh calls it: runtimeStatus at
 * startup (purging what was loaded, announcing the inference methods and
 * where the model id goes), loadModel from a local path under an id with its
 * size, inference by that id through inference.GRPCInferenceService,
 * modelSize, idempotent reload, unload (also of a model not loaded), and an
 * unload right after a cancelled load leaving nothing loaded.
 */
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { status } from '@grpc/grpc-js';
import { addSub, mlp, writeModelDir } from '../../examples/models/zoo.js';
import { asValues, call, connect, inferRequest, type GrpcClients } from '../support/grpc-client.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();
let server: TestServer;
let clients: GrpcClients;
let pulled: string;
/** A model of about 5 MB: its session is created on a runtime worker, so its load spans turns of the event loop (a tiny one's may not). */
let pulledLarge: string;

const seq = Array.from({ length: 16 }, (_, i) => i);
const addSubRequest = (id: string) =>
  inferRequest(id, [
    { name: 'INPUT0', datatype: 'FP32', shape: [1, 16], values: seq },
    { name: 'INPUT1', datatype: 'FP32', shape: [1, 16], values: seq },
  ]);

before(async () => {
  const dir = await tempDir(ctx, 'onnx-mme-mmesh-');
  // Where model-mesh's puller would have put the model: a directory of its own, outside the model source.
  pulled = path.join(dir, 'models', 'pulled-add-sub');
  await writeModelDir(path.dirname(pulled), 'pulled-add-sub', addSub());
  pulledLarge = path.join(dir, 'models', 'pulled-mlp');
  const large = mlp();
  await writeModelDir(path.dirname(pulledLarge), 'pulled-mlp', { onnx: large.onnx, config: large.config });
  await mkdir(path.join(dir, 'source'), { recursive: true });
  server = await startTestServer({
    modelSource: path.join(dir, 'source'),
    cacheDir: path.join(dir, 'cache'),
    env: { MME_GRPC_PORT: '0', MME_MODEL_MESH: 'true' },
  });
  ctx.after(() => server.close());
  clients = connect(`127.0.0.1:${server.running.grpcPort}`);
});

after(async () => {
  clients?.close();
  await ctx.run();
});

describe('ModelMesh runtime SPI', () => {
  it('runtimeStatus: READY, the memory budget as capacity, the inference methods with the model id in field 1', async () => {
    const { error, response } = await call(clients.modelMesh, 'runtimeStatus', {});
    assert.equal(error, null, error?.details);
    assert.equal(response.status, 'READY');
    assert.ok(Number(response.capacityInBytes) > 0);
    assert.ok(response.maxLoadingConcurrency >= 1);
    assert.ok(response.modelLoadingTimeoutMs > 0);
    assert.match(response.runtimeVersion, /^\d+\.\d+\.\d+/);
    assert.equal(response.allowAnyMethod, false);
    assert.deepEqual(response.methodInfos['inference.GRPCInferenceService/ModelInfer'].idInjectionPath, [1]);
  });

  it('loadModel under an id with its size, inference by that id, modelSize, reload is a no-op, unload', async () => {
    const predicted = await call(clients.modelMesh, 'predictModelSize', { modelId: 'mm-1', modelType: 'onnx', modelPath: pulled, modelKey: '' });
    assert.ok(Number(predicted.response?.sizeInBytes) > 0, predicted.error?.details);
    const load = await call(clients.modelMesh, 'loadModel', { modelId: 'mm-1', modelType: 'onnx', modelPath: pulled, modelKey: '{}' });
    assert.equal(load.error, null, load.error?.details);
    assert.ok(Number(load.response.sizeInBytes) > 0);
    const r = await call(clients.inference, 'ModelInfer', addSubRequest('mm-1'));
    assert.equal(r.error, null, r.error?.details);
    assert.deepEqual(
      asValues(r.response, 'OUTPUT0')!.values,
      seq.map((v) => 2 * v),
    );
    assert.equal((await call(clients.inference, 'ModelReady', { name: 'mm-1', version: '' })).response.ready, true);
    assert.equal((await call(clients.modelMesh, 'modelSize', { modelId: 'mm-1' })).response.sizeInBytes, load.response.sizeInBytes);
    // model-mesh retries loads: the same id from the same path is what it already has.
    assert.equal((await call(clients.modelMesh, 'loadModel', { modelId: 'mm-1', modelType: 'onnx', modelPath: pulled, modelKey: '' })).error, null);
    assert.equal((await call(clients.modelMesh, 'unloadModel', { modelId: 'mm-1' })).error, null);
    assert.equal((await call(clients.inference, 'ModelInfer', addSubRequest('mm-1'))).error?.code, status.NOT_FOUND);
    // Unloading what is not loaded succeeds (model-mesh's contract); sizing it does not.
    assert.equal((await call(clients.modelMesh, 'unloadModel', { modelId: 'mm-1' })).error, null);
    assert.equal((await call(clients.modelMesh, 'modelSize', { modelId: 'mm-1' })).error?.code, status.NOT_FOUND);
  });

  it('a bad path or package is refused with the reason; nothing stays loaded', async () => {
    const missing = await call(clients.modelMesh, 'loadModel', {
      modelId: 'mm-bad',
      modelType: 'onnx',
      modelPath: path.join(path.dirname(pulled), 'nothing-here'),
      modelKey: '',
    });
    assert.equal(missing.error?.code, status.NOT_FOUND);
    const relative = await call(clients.modelMesh, 'loadModel', { modelId: 'mm-bad', modelType: 'onnx', modelPath: 'relative/path', modelKey: '' });
    assert.equal(relative.error?.code, status.INVALID_ARGUMENT);
    assert.equal((await call(clients.inference, 'ModelReady', { name: 'mm-bad', version: '' })).response.ready, false);
  });

  it('an unload right after a cancelled load waits for it: the model is not left loaded', async () => {
    const pending = call(clients.modelMesh, 'loadModel', { modelId: 'mm-2', modelType: 'onnx', modelPath: pulledLarge, modelKey: '' });
    // Cancel while the load is in progress (a fixed 30 ms delay raced a load that finished sooner on a quiet machine).
    const deadline = Date.now() + 10_000;
    while (server.running.registry.managed.resident('mm-2')?.state !== 'LOADING' && Date.now() < deadline) await new Promise((r) => setImmediate(r));
    pending.cancel();
    assert.equal((await pending).error?.code, status.CANCELLED);
    assert.equal((await call(clients.modelMesh, 'unloadModel', { modelId: 'mm-2' })).error, null);
    assert.equal((await call(clients.inference, 'ModelReady', { name: 'mm-2', version: '' })).response.ready, false);
    assert.equal((await call(clients.inference, 'ModelInfer', addSubRequest('mm-2'))).error?.code, status.NOT_FOUND);
  });

  it('runtimeStatus after a model-mesh restart purges what was loaded before', async () => {
    assert.equal((await call(clients.modelMesh, 'loadModel', { modelId: 'mm-3', modelType: 'onnx', modelPath: pulled, modelKey: '' })).error, null);
    assert.equal((await call(clients.inference, 'ModelReady', { name: 'mm-3', version: '' })).response.ready, true);
    assert.equal((await call(clients.modelMesh, 'runtimeStatus', {})).response.status, 'READY');
    assert.equal((await call(clients.inference, 'ModelReady', { name: 'mm-3', version: '' })).response.ready, false);
  });

  it('without MME_MODEL_MESH the SPI is not served (UNIMPLEMENTED)', async () => {
    const dir = await tempDir(ctx, 'onnx-mme-mmesh-off-');
    const s = await startTestServer({ modelSource: dir, cacheDir: path.join(dir, 'cache'), env: { MME_GRPC_PORT: '0' } });
    const c = connect(`127.0.0.1:${s.running.grpcPort}`);
    try {
      assert.equal((await call(c.modelMesh, 'runtimeStatus', {})).error?.code, status.UNIMPLEMENTED);
    } finally {
      c.close();
      await s.close();
    }
  });
});
