/**
 * @module test/unit/backends/tensor-steps
 * The built-in tensor steps on hand-computed values: mean pooling with and
 * without an attention mask, L2 normalization (and its epsilon), softmax,
 * top-k and argmax (ties, labels from the label file, an index without a
 * label line, only the requested outputs), and their load errors (every
 * problem of a config in one message, unknown parameters included).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertClose, f32, i64, loadError, loadStepFromText, numbers } from './step-harness.js';

const POOLING = `
backend: "mean_pooling"
max_batch_size: 4
input [ { name: "emb" data_type: TYPE_FP32 dims: [ -1, 2 ] }, { name: "mask" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "pooled" data_type: TYPE_FP32 dims: [ 2 ] } ]
`;

describe('mean_pooling', () => {
  test('averages the embeddings whose mask is 1, per row', async () => {
    const f = await loadStepFromText('pool', POOLING);
    try {
      // Row 0: tokens (1,2) (3,4) [masked (100,100)] → (2,3). Row 1: only (5,6) → (5,6).
      const out = await f.run({ emb: f32([2, 3, 2], [1, 2, 3, 4, 100, 100, 5, 6, 7, 8, 9, 9]), mask: i64([2, 3], [1, 1, 0, 1, 0, 0]) });
      const pooled = out.get('pooled')!;
      assert.deepEqual(pooled.shape, [2, 2]);
      assertClose(numbers(pooled), [2, 3, 5, 6]);
    } finally {
      await f.close();
    }
  });

  test('the inputs are told apart by rank whatever their order; without a mask it is the plain mean', async () => {
    const swapped = POOLING.replace(
      'input [ { name: "emb" data_type: TYPE_FP32 dims: [ -1, 2 ] }, { name: "mask" data_type: TYPE_INT64 dims: [ -1 ] } ]',
      'input [ { name: "mask" data_type: TYPE_INT64 dims: [ -1 ] }, { name: "emb" data_type: TYPE_FP32 dims: [ -1, 2 ] } ]',
    );
    const f = await loadStepFromText('pool', swapped);
    try {
      assertClose(numbers((await f.run({ emb: f32([1, 2, 2], [1, 2, 3, 4]), mask: i64([1, 2], [0, 1]) })).get('pooled')), [3, 4]);
    } finally {
      await f.close();
    }
    const plain = await loadStepFromText(
      'pool',
      'backend: "mean_pooling" max_batch_size: 4 input [ { name: "emb" data_type: TYPE_FP32 dims: [ 2, 2 ] } ] output [ { name: "pooled" data_type: TYPE_FP32 dims: [ 2 ] } ]',
    );
    try {
      assertClose(numbers((await plain.run({ emb: f32([1, 2, 2], [1, 2, 3, 4]) })).get('pooled')), [2, 3]);
    } finally {
      await plain.close();
    }
  });

  test('a mask that does not match the embeddings is a 400 naming both', async () => {
    const f = await loadStepFromText('pool', POOLING);
    try {
      await assert.rejects(f.run({ emb: f32([1, 2, 2], [1, 2, 3, 4]), mask: i64([1, 3], [1, 1, 1]) }), (err: Error & { code?: string }) => {
        assert.equal(err.code, 'INVALID_INPUT');
        assert.match(err.message, /model 'pool': mask 'mask' has shape \[1,3\] but the embeddings 'emb' have \[1,2,2\]/);
        return true;
      });
    } finally {
      await f.close();
    }
  });
});

describe('l2_normalize and softmax', () => {
  const cfg = (backend: string, extra = ''): string =>
    `backend: "${backend}" max_batch_size: 4 input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ] output [ { name: "y" data_type: TYPE_FP32 dims: [ 2 ] } ] ${extra}`;

  test('l2_normalize: unit length per row; a zero row stays zero (epsilon)', async () => {
    const f = await loadStepFromText('l2', cfg('l2_normalize'));
    try {
      const y = (await f.run({ x: f32([2, 2], [3, 4, 0, 0]) })).get('y')!;
      assert.deepEqual(y.shape, [2, 2]);
      assertClose(numbers(y), [0.6, 0.8, 0, 0]);
    } finally {
      await f.close();
    }
  });

  test('l2_normalize with a large epsilon divides by epsilon instead', async () => {
    const f = await loadStepFromText('l2', cfg('l2_normalize', 'parameters { key: "epsilon" value: { string_value: "10" } }'));
    try {
      assertClose(numbers((await f.run({ x: f32([1, 2], [3, 4]) })).get('y')), [0.3, 0.4]);
    } finally {
      await f.close();
    }
  });

  test('softmax along the last axis, stable for large logits', async () => {
    const f = await loadStepFromText('sm', cfg('softmax'));
    try {
      assertClose(numbers((await f.run({ x: f32([2, 2], [0, Math.log(2), 1000, 1000]) })).get('y')), [1 / 3, 2 / 3, 0.5, 0.5]);
    } finally {
      await f.close();
    }
  });
});

describe('topk and argmax', () => {
  const TOPK = `
backend: "topk"
max_batch_size: 4
input [ { name: "logits" data_type: TYPE_FP32 dims: [ 5 ] } ]
output [
  { name: "scores" data_type: TYPE_FP32 dims: [ 2 ] },
  { name: "ids" data_type: TYPE_INT64 dims: [ 2 ] },
  { name: "labels" data_type: TYPE_STRING dims: [ 2 ] label_filename: "labels.txt" }
]
parameters { key: "k" value: { string_value: "2" } }
`;
  const LABELS = { model: { 'labels.txt': 'zero\none\ntwo\nthree\n' } };

  test('the k best per row, ties by lower index, labels from the file (an index without a line is its number)', async () => {
    const f = await loadStepFromText('top', TOPK, LABELS);
    try {
      const out = await f.run({ logits: f32([2, 5], [1, 3, 2, 3, 0, 0, 0, 0, 0, 9]) });
      assert.deepEqual(numbers(out.get('ids')), [1, 3, 4, 0]);
      assertClose(numbers(out.get('scores')), [3, 3, 9, 0]);
      assert.deepEqual(out.get('labels')!.data, ['one', 'three', '4', 'zero']);
      assert.deepEqual(out.get('labels')!.shape, [2, 2]);
    } finally {
      await f.close();
    }
  });

  test('with softmax the scores are probabilities; only requested outputs are computed', async () => {
    const f = await loadStepFromText('top', TOPK.replace('parameters', 'parameters { key: "softmax" value: { string_value: "true" } }\nparameters'), LABELS);
    try {
      const out = await f.run({ logits: f32([1, 5], [0, Math.log(3), 0, 0, 0]) }, ['scores']);
      assert.deepEqual([...out.keys()], ['scores']);
      assertClose(numbers(out.get('scores')), [3 / 7, 1 / 7]);
    } finally {
      await f.close();
    }
  });

  test('argmax: one index per row', async () => {
    const f = await loadStepFromText(
      'am',
      'backend: "argmax" max_batch_size: 4 input [ { name: "x" data_type: TYPE_FP32 dims: [ 3 ] } ] output [ { name: "i" data_type: TYPE_INT32 dims: [ 1 ] } ]',
    );
    try {
      const i = (await f.run({ x: f32([2, 3], [0.1, 0.7, 0.2, 5, -1, 4]) })).get('i')!;
      assert.equal(i.datatype, 'INT32');
      assert.deepEqual(numbers(i), [1, 0]);
    } finally {
      await f.close();
    }
  });
});

describe('load errors', () => {
  test('every problem of a tensor step config in one INVALID_MODEL error', async () => {
    const err = await loadError(
      'bad',
      `backend: "topk" max_batch_size: 4
       input [ { name: "x" data_type: TYPE_INT32 dims: [ 3 ] } ]
       output [ { name: "labels" data_type: TYPE_STRING dims: [ 5 ] } ]
       parameters { key: "k" value: { string_value: "5" } }
       parameters { key: "sofmax" value: { string_value: "true" } }`,
    );
    assert.equal(err.code, 'INVALID_MODEL');
    assert.equal(
      err.message,
      "model 'bad': backend 'topk': unknown parameter 'sofmax' for backend 'topk'; did you mean 'softmax'? (known: k, labels, softmax); input 'x' must be FP32 or FP64, got INT32; " +
        "k 5 is larger than the 3 classes of input 'x'; output 'labels' (labels) needs label_filename on the output, or parameter labels, naming a file in the model directory",
    );
  });

  test('a label file that is missing, and shapes that do not follow the input', async () => {
    const err = await loadError(
      'bad',
      `backend: "argmax" max_batch_size: 4
       input [ { name: "x" data_type: TYPE_FP32 dims: [ 3 ] } ]
       output [ { name: "l" data_type: TYPE_STRING dims: [ 2 ] label_filename: "nope.txt" } ]`,
    );
    assert.match(err.message, /output 'l' \[-1,2\] must be the input's shape with k=1 in the last dim, \[-1,1\]/);
    assert.match(err.message, /label file 'nope.txt' cannot be read in the model directory/);
  });

  test('mean_pooling whose output drops the wrong dim', async () => {
    const err = await loadError('pool', POOLING.replace('dims: [ 2 ] }', 'dims: [ 3 ] }'));
    assert.match(err.message, /output 'pooled' \[-1,3\] must be the embeddings' shape \[-1,-1,2\] without the token dim, \[-1,2\]/);
  });
});
