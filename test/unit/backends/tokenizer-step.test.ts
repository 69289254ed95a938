/**
 * @module test/unit/backends/tokenizer-step
 * The tokenizer step on fixed sentences with the example's WordPiece
 * tokenizer.json (examples/pipelines/text-pipeline.ts): the expected ids are
 * spelled out as tokens and looked up in the vocabulary here, so the test
 * does not trust the library to say what the ids should be. Covers special
 * tokens, lowercasing, sub-words, unknown words, padding to max_length and to
 * the longest row, truncation that keeps [SEP] (and refusing when it is off),
 * sentence pairs with token_type_ids, INT32 outputs, and load errors.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { bertTokenizerJson, TEXT_VOCAB } from '../../../examples/pipelines/text-pipeline.js';
import type { Tensor } from '../../../src/protocol/tensor.js';
import { loadError, loadStepFromText, numbers } from './step-harness.js';

const FILES = { model: { 'tokenizer.json': JSON.stringify(bertTokenizerJson()) } };
const PAD = TEXT_VOCAB.indexOf('[PAD]');

function ids(...tokens: string[]): number[] {
  return tokens.map((t) => {
    const i = TEXT_VOCAB.indexOf(t);
    if (i < 0) throw new Error(`'${t}' is not in the vocabulary`);
    return i;
  });
}

function padded(values: number[], length: number, pad = PAD): number[] {
  return [...values, ...Array(length - values.length).fill(pad)];
}

function texts(...s: string[]): Tensor {
  return { datatype: 'BYTES', shape: [s.length, 1], data: s };
}

function config(length: number | -1, extra = '', type = 'TYPE_INT64', inputs = '{ name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] }'): string {
  return `backend: "tokenizer" max_batch_size: 8
    input [ ${inputs} ]
    output [
      { name: "input_ids" data_type: ${type} dims: [ ${length} ] },
      { name: "attention_mask" data_type: ${type} dims: [ ${length} ] },
      { name: "token_type_ids" data_type: ${type} dims: [ ${length} ] }
    ]
    ${extra}`;
}

describe('tokenizer step: fixed sentences', () => {
  test('special tokens, lowercasing, punctuation, sub-words and unknown words; padded to max_length', async () => {
    const f = await loadStepFromText('tok', config(12), FILES);
    try {
      const out = await f.run({ TEXT: texts('Hello, World!', 'The cats jumped quickly', 'zebras sat') });
      const want = [
        ids('[CLS]', 'hello', ',', 'world', '!', '[SEP]'),
        ids('[CLS]', 'the', 'cat', '##s', 'jumped', 'quick', '##ly', '[SEP]'),
        ids('[CLS]', '[UNK]', 'sat', '[SEP]'),
      ];
      const inputIds = out.get('input_ids')!;
      assert.equal(inputIds.datatype, 'INT64');
      assert.deepEqual(inputIds.shape, [3, 12]);
      assert.deepEqual(
        numbers(inputIds),
        want.flatMap((w) => padded(w, 12)),
      );
      assert.deepEqual(
        numbers(out.get('attention_mask')),
        want.flatMap((w) =>
          padded(
            w.map(() => 1),
            12,
            0,
          ),
        ),
      );
      assert.deepEqual(numbers(out.get('token_type_ids')), Array(36).fill(0));
    } finally {
      await f.close();
    }
  });

  test('truncation cuts the text and keeps [CLS] … [SEP]; with truncation off it is a 400', async () => {
    const f = await loadStepFromText('tok', config(5), FILES);
    try {
      const out = await f.run({ TEXT: texts('the cat sat on the mat') });
      assert.deepEqual(numbers(out.get('input_ids')), ids('[CLS]', 'the', 'cat', 'sat', '[SEP]'));
      assert.deepEqual(numbers(out.get('attention_mask')), [1, 1, 1, 1, 1]);
    } finally {
      await f.close();
    }
    const strict = await loadStepFromText('tok', config(5, 'parameters { key: "truncation" value: { string_value: "false" } }'), FILES);
    try {
      await assert.rejects(strict.run({ TEXT: texts('short', 'the cat sat on the mat') }), (err: Error & { code?: string }) => {
        assert.equal(err.code, 'INVALID_INPUT');
        assert.equal(err.message, "model 'tok': row 1 has 8 tokens, more than max_length 5 (truncation is off)");
        return true;
      });
    } finally {
      await strict.close();
    }
  });

  test('padding longest pads to the longest row of the batch; INT32 outputs', async () => {
    const f = await loadStepFromText('tok', config(-1, 'parameters { key: "max_length" value: { string_value: "32" } }', 'TYPE_INT32'), FILES);
    try {
      const out = await f.run({ TEXT: texts('hello', 'good dog') });
      const inputIds = out.get('input_ids')!;
      assert.equal(inputIds.datatype, 'INT32');
      assert.deepEqual(inputIds.shape, [2, 4]);
      assert.deepEqual(numbers(inputIds), [...padded(ids('[CLS]', 'hello', '[SEP]'), 4), ...ids('[CLS]', 'good', 'dog', '[SEP]')]);
    } finally {
      await f.close();
    }
  });

  test('a second BYTES input is the pair text: pair template, token_type_ids 1 on it, longest-first truncation', async () => {
    const pairInputs = '{ name: "A" data_type: TYPE_STRING dims: [ 1 ] }, { name: "B" data_type: TYPE_STRING dims: [ 1 ] }';
    const f = await loadStepFromText('tok', config(9, '', 'TYPE_INT64', pairInputs), FILES);
    try {
      const out = await f.run({ A: texts('the red bird flew'), B: texts('a fish') });
      // 4 + 2 tokens + 3 specials = 9: fits exactly.
      assert.deepEqual(numbers(out.get('input_ids')), ids('[CLS]', 'the', 'red', 'bird', 'flew', '[SEP]', 'a', 'fish', '[SEP]'));
      assert.deepEqual(numbers(out.get('token_type_ids')), [0, 0, 0, 0, 0, 0, 1, 1, 1]);
      const cut = await f.run({ A: texts('the red bird flew over the tree'), B: texts('a fish swam') });
      // 7 + 3 tokens for a budget of 6: the longer text loses tokens until both are 3.
      assert.deepEqual(numbers(cut.get('input_ids')), ids('[CLS]', 'the', 'red', 'bird', '[SEP]', 'a', 'fish', 'swam', '[SEP]'));
    } finally {
      await f.close();
    }
  });
});

describe('tokenizer step: load errors', () => {
  test('no tokenizer.json, wrong output names and datatypes, a max_length that contradicts the dims: all in one error', async () => {
    const err = await loadError(
      'tok',
      `backend: "tokenizer" max_batch_size: 8
       input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
       output [ { name: "ids" data_type: TYPE_INT64 dims: [ 8 ] }, { name: "attention_mask" data_type: TYPE_FP32 dims: [ 8 ] } ]
       parameters { key: "max_length" value: { string_value: "16" } }`,
    );
    assert.equal(err.code, 'INVALID_MODEL');
    for (const p of [
      "output 'ids' is not one of input_ids, attention_mask, token_type_ids",
      "output 'attention_mask' must be INT64 or INT32, got FP32",
      'tokenizer.json not found in the version directory or the model directory',
      "max_length 16 does not match the outputs' sequence dim 8",
    ]) {
      assert.ok(err.message.includes(p), `missing: ${p}\nin: ${err.message}`);
    }
  });

  test('a tokenizer.json the library cannot build is a load error naming the file', async () => {
    const err = await loadError('tok', config(8), { model: { 'tokenizer.json': JSON.stringify({ model: { type: 'Nope' } }) } });
    assert.match(err.message, /tokenizer\.json is not a tokenizer @huggingface\/tokenizers can load/);
  });
});
