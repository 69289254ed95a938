/**
 * A model whose graph has a value that is not a tensor (a sequence, an
 * optional) cannot be served; the refusal names the value and its kind, as
 * the graph declares it (onnxruntime-node only says "not a tensor"), both
 * when auto-complete writes the config and when a config.pbtxt lists it.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildModel, node, valueInfo, onnxElementType, type OnnxValueInfoProto } from '../../examples/models/onnx-builder.js';
import { writeModelDir } from '../../examples/models/zoo.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { request, startTestServer, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();

const floatTensor = { tensorType: { elemType: onnxElementType('FP32'), shape: { dim: [{ dimValue: 2 }] } } };
const seqOf = (name: string): OnnxValueInfoProto => ({ name, type: { sequenceType: { elemType: floatTensor } } });
const optionalOf = (name: string): OnnxValueInfoProto => ({ name, type: { optionalType: { elemType: floatTensor } } });

/** seq = SequenceConstruct(x), y = Identity(x). */
const SEQ_OUT = buildModel({
  inputs: [valueInfo('x', 'FP32', [2])],
  outputs: [seqOf('seq'), valueInfo('y', 'FP32', [2])],
  nodes: [node('SequenceConstruct', ['x'], ['seq']), node('Identity', ['x'], ['y'])],
});

/** An optional input the graph does not use; y = Identity(x). */
const OPTIONAL_IN = buildModel({
  inputs: [valueInfo('x', 'FP32', [2]), optionalOf('maybe')],
  outputs: [valueInfo('y', 'FP32', [2])],
  nodes: [node('Identity', ['x'], ['y'])],
});

let server: TestServer;

before(async () => {
  const root = await tempDir(ctx);
  const models = path.join(root, 'models');
  await writeModelDir(models, 'seq_auto', { onnx: SEQ_OUT });
  await writeModelDir(models, 'optional_auto', { onnx: OPTIONAL_IN });
  await writeModelDir(models, 'seq_config', {
    onnx: SEQ_OUT,
    config: `name: "seq_config"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "seq" data_type: TYPE_FP32 dims: [ 2 ] }, { name: "y" data_type: TYPE_FP32 dims: [ 2 ] } ]
`,
  });
  server = await startTestServer({ modelSource: models, cacheDir: path.join(root, 'cache') });
  ctx.after(() => server.close());
});

after(() => ctx.run());

const infer = (model: string) =>
  request(`${server.url}/v2/models/${model}/infer`, { method: 'POST', json: { inputs: [{ name: 'x', datatype: 'FP32', shape: [2], data: [1, 2] }] } });

describe('models with non-tensor values are refused naming the value and its kind', () => {
  for (const [model, match] of [
    ['seq_auto', /model 'seq_auto': output 'seq' is a sequence \(seq\(tensor\(float\)\)\), not a tensor; onnx-mme serves tensors only/],
    ['optional_auto', /model 'optional_auto': input 'maybe' is an optional \(optional\(tensor\(float\)\)\), not a tensor; onnx-mme serves tensors only/],
    ['seq_config', /output 'seq': config\.pbtxt says FP32 but the ONNX model has a sequence \(seq\(tensor\(float\)\)\), not a tensor/],
  ] as const) {
    it(model, async () => {
      const r = await infer(model);
      assert.equal(r.status, 400, r.text);
      assert.equal(r.body.code, 'INVALID_MODEL');
      assert.match(r.body.error, match);
    });
  }
});
