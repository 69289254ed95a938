/**
 * `onnx-mme validate` on packages with processing steps (the built command,
 * a child process): both example pipelines validate, with each step's
 * backend shown; a package with a tokenizer without tokenizer.json, a JS step
 * without execute(), and an ensemble that wires a shape and a datatype
 * wrongly lists every one of those problems, and exits 1.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildPipelines, type BuiltPipelines } from '../../examples/pipelines/build-pipelines.js';
import { textPipelineRepository } from '../../examples/pipelines/text-pipeline.js';
import { writePipelineRepository } from '../../examples/pipelines/write-repository.js';
import { runCli } from '../support/cli.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';

const ctx = new Cleanups();
let built: BuiltPipelines;
let root: string;

before(async () => {
  root = await tempDir(ctx);
  built = await buildPipelines(path.join(root, 'out'));
  const models = textPipelineRepository();
  const broken = {
    ...models,
    // The encoder gives FP32 [-1, 16, 8] and the tokenizer a mask of [-1, 16]: pooling asks for FP64 and a mask of 12.
    pooling: {
      ...models['pooling']!,
      config: models['pooling']!.config!.replace('data_type: TYPE_FP32 dims: [ -1, 8 ]', 'data_type: TYPE_FP64 dims: [ -1, 8 ]').replace(
        'data_type: TYPE_INT64 dims: [ -1 ]',
        'data_type: TYPE_INT64 dims: [ 12 ]',
      ),
    },
    // A second tokenizer, unused by the entry, shipped without its tokenizer.json.
    tokenizer2: { ...models['tokenizer']!, config: models['tokenizer']!.config!.replace('name: "tokenizer"', 'name: "tokenizer2"'), files: {} },
    helper: {
      config:
        'name: "helper"\nbackend: "js"\nmax_batch_size: 0\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] } ]\noutput [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n',
      versionFiles: { 'model.mjs': 'export const nothing = 0;\n' },
    },
  };
  await writePipelineRepository(path.join(root, 'broken'), broken);
});

after(() => ctx.run());

describe('onnx-mme validate with processing steps', () => {
  it('both example pipelines are valid; each step shows its backend', async () => {
    for (const [file, steps] of [
      [built.imageTarball, ['preprocess: image', 'inception: onnxruntime_onnx', 'postprocess: topk']],
      [built.textTarball, ['tokenizer: tokenizer', 'encoder: onnxruntime_onnx', 'pooling: mean_pooling', 'normalize: l2_normalize']],
    ] as const) {
      const r = await runCli(['validate', file]);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      for (const s of steps) assert.ok(r.stdout.includes(`  ${s}, version 1`), `${s} in\n${r.stdout}`);
      assert.match(r.stdout, /processing step: backend '\w+', runs in the server process/);
      assert.match(r.stdout, /OK: the server will load this package/);
    }
  });

  it('a broken package: every step problem and every wiring problem listed, exit 1', async () => {
    const r = await runCli(['validate', path.join(root, 'broken'), '--json']);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    const report = JSON.parse(r.stdout) as { problems: { model?: string; message: string }[] };
    const text = report.problems.map((p) => `${p.model}: ${p.message}`).join('\n');
    for (const want of [
      /helper: model 'broken\/helper': model\.mjs does not export an execute\(batch\) function/,
      /tokenizer2: model 'broken\/tokenizer2': backend 'tokenizer': tokenizer\.json not found/,
      /text_embedding: .*ensemble tensor 'token_embeddings': inconsistent data type, step 1 \(model 'encoder'\) gives FP32 but step 2 \(model 'pooling'\) input 'token_embeddings' expects FP64/,
      /text_embedding: .*ensemble tensor 'attention_mask': inconsistent shape, step 0 \(model 'tokenizer'\) gives \[-1,16\] but step 2 \(model 'pooling'\) input 'attention_mask' expects \[-1,12\]/,
    ]) {
      assert.match(text, want);
    }
  });
});
