/**
 * @module test/unit/grpc/model-config-proto
 * src/grpc/proto/model_config.proto is exactly what the generator prints
 * from the ModelConfig descriptor config.pbtxt is parsed with (one
 * transcription of Triton's message), every .proto file loads, and a real
 * normalised config encodes into ModelConfig and decodes back unchanged.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, test } from 'node:test';
import { loadSync } from '@grpc/proto-loader';
import { addSub, ensembleRepository } from '../../../examples/models/zoo.js';
import { parseModelConfig } from '../../../src/config/model-config.js';
import { modelConfigProtoText } from '../../../src/grpc/model-config-proto.js';
import { LOADER_OPTIONS, loadProtos, protoDir } from '../../../src/grpc/protos.js';

describe('grpc/model-config-proto', () => {
  test('the committed model_config.proto is the generator output (regenerate: node dist/src/grpc/model-config-proto.js > src/grpc/proto/model_config.proto)', async () => {
    const committed = await readFile(path.join(protoDir(), 'model_config.proto'), 'utf8');
    assert.equal(committed, modelConfigProtoText());
  });

  test('the service and health protos load, with every RPC of the KServe v2 service', () => {
    const { inference, health } = loadProtos();
    for (const rpc of [
      'ServerLive',
      'ServerReady',
      'ModelReady',
      'ServerMetadata',
      'ModelMetadata',
      'ModelInfer',
      'ModelStreamInfer',
      'ModelConfig',
      'ModelStatistics',
      'RepositoryIndex',
      'RepositoryModelLoad',
      'RepositoryModelUnload',
    ]) {
      assert.ok(inference[rpc], rpc);
      assert.equal(inference[rpc]!.path, `/inference.GRPCInferenceService/${rpc}`);
    }
    assert.equal(health['Check']!.path, '/grpc.health.v1.Health/Check');
  });

  test('normalised configs (a model, an ensemble) survive encoding as ModelConfig', () => {
    const definition = loadSync(path.join(protoDir(), 'grpc_service.proto'), { ...LOADER_OPTIONS, includeDirs: [protoDir()] });
    const response = definition['inference.ModelConfigResponse'] as unknown as { format: string; type: unknown };
    assert.ok(response);
    const { inference } = loadProtos();
    const method = inference['ModelConfig']!;
    const ens = ensembleRepository();
    for (const text of [addSub().config!, ens.models['pipeline']!.config!]) {
      const config = parseModelConfig(text, { sourceName: 'test', directoryName: text === addSub().config ? 'add_sub' : 'pipeline' });
      const bytes = method.responseSerialize({ config: config.json });
      const back = method.responseDeserialize(bytes) as { config: Record<string, unknown> };
      assert.equal(back.config['name'], config.json['name']);
      assert.equal(back.config['max_batch_size'], config.json['max_batch_size']);
      assert.deepEqual(
        (back.config['input'] as { name: string }[]).map((t) => t.name),
        (config.json['input'] as { name: string }[]).map((t) => t.name),
      );
      assert.equal((back.config['input'] as { data_type: string }[])[0]!.data_type, (config.json['input'] as { data_type: string }[])[0]!.data_type);
    }
  });
});
