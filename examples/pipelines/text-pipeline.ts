/**
 * @module examples/pipelines/text-pipeline
 * The text pipeline, in the shape of Triton's preprocess + BERT + postprocess
 * ensemble, with no Python: sentences (BYTES) → `tokenizer` (built-in step, a
 * WordPiece tokenizer.json written here) → `encoder` (a small generated ONNX
 * encoder: word + type embeddings, a dense layer, tanh, masked) → `pooling`
 * (built-in mean pooling with the attention mask) → `normalize` (built-in L2
 * normalization) → a unit-length sentence embedding.
 *
 * Everything is generated: the vocabulary, the tokenizer.json (BERT-style:
 * lowercasing BertNormalizer, BertPreTokenizer, WordPiece, [CLS]/[SEP]
 * template), the encoder's weights (seeded). `textEmbeddingReference` computes
 * the expected embedding in plain TypeScript from token ids, for tests.
 */
import { buildModel, node, tensor, valueInfo, attr } from '../models/onnx-builder.js';
import { seededRandom } from '../models/zoo.js';
import type { PipelineModel } from './write-repository.js';

export const TEXT_ENSEMBLE = 'text_embedding';
/** Tokens per sentence, [CLS] and [SEP] included: the tokenizer pads and truncates to it. */
export const TEXT_MAX_LENGTH = 16;
/** Width of the token and sentence embeddings. */
export const TEXT_HIDDEN = 8;
export const TEXT_MAX_BATCH = 8;

const SPECIAL = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] as const;
const WORDS = (
  'the a an is are was were be of to and in on at for with by from this that it its as not no ' +
  'cat dog bird fish sat ran jumped flew swam mat tree river sky fast slow quick lazy brown red green ' +
  'hello world model server image text search query good bad small large embedding sentence vector ' +
  "run walk play talk ##s ##ed ##ing ##ly ##er . , ! ? '"
).split(' ');

/** The vocabulary: id = position. */
export const TEXT_VOCAB: readonly string[] = Object.freeze([...SPECIAL, ...WORDS]);

/** A Hugging Face tokenizer.json for a lowercasing BERT WordPiece tokenizer over TEXT_VOCAB. */
export function bertTokenizerJson(vocab: readonly string[] = TEXT_VOCAB): Record<string, unknown> {
  const id = (t: string): number => vocab.indexOf(t);
  const special = (t: string): Record<string, unknown> => ({
    id: id(t),
    content: t,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: SPECIAL.map(special),
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } }],
      pair: [
        { SpecialToken: { id: '[CLS]', type_id: 0 } },
        { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: '[SEP]', type_id: 0 } },
        { Sequence: { id: 'B', type_id: 1 } },
        { SpecialToken: { id: '[SEP]', type_id: 1 } },
      ],
      special_tokens: {
        '[CLS]': { id: '[CLS]', ids: [id('[CLS]')], tokens: ['[CLS]'] },
        '[SEP]': { id: '[SEP]', ids: [id('[SEP]')], tokens: ['[SEP]'] },
      },
    },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: {
      type: 'WordPiece',
      unk_token: '[UNK]',
      continuing_subword_prefix: '##',
      max_input_chars_per_word: 100,
      vocab: Object.fromEntries(vocab.map((t, i) => [t, i])),
    },
  };
}

export interface TextEncoderWeights {
  /** [vocab, hidden] */
  readonly word: Float32Array;
  /** [2, hidden] */
  readonly type: Float32Array;
  /** [hidden, hidden] */
  readonly dense: Float32Array;
  /** [hidden] */
  readonly bias: Float32Array;
}

export function textEncoderWeights(seed = 5, vocabSize = TEXT_VOCAB.length, hidden = TEXT_HIDDEN): TextEncoderWeights {
  const rand = seededRandom(seed);
  const fill = (n: number, scale: number): Float32Array => Float32Array.from({ length: n }, () => (rand() * 2 - 1) * scale);
  return { word: fill(vocabSize * hidden, 1), type: fill(2 * hidden, 0.5), dense: fill(hidden * hidden, 1 / Math.sqrt(hidden)), bias: fill(hidden, 0.1) };
}

/**
 * The encoder graph: last_hidden_state = tanh((word[ids] + type[type_ids]) · dense + bias) · mask,
 * inputs INT64 `[batch, seq]`, output FP32 `[batch, seq, hidden]`.
 */
export function textEncoderOnnx(w: TextEncoderWeights, vocabSize = TEXT_VOCAB.length, hidden = TEXT_HIDDEN): Uint8Array {
  return buildModel({
    inputs: [
      valueInfo('input_ids', 'INT64', ['batch', 'seq']),
      valueInfo('attention_mask', 'INT64', ['batch', 'seq']),
      valueInfo('token_type_ids', 'INT64', ['batch', 'seq']),
    ],
    outputs: [valueInfo('last_hidden_state', 'FP32', ['batch', 'seq', hidden])],
    nodes: [
      node('Gather', ['word_embeddings', 'input_ids'], ['words'], { attributes: { axis: attr.int(0) } }),
      node('Gather', ['type_embeddings', 'token_type_ids'], ['types'], { attributes: { axis: attr.int(0) } }),
      node('Add', ['words', 'types'], ['embedded']),
      node('MatMul', ['embedded', 'dense'], ['projected']),
      node('Add', ['projected', 'bias'], ['biased']),
      node('Tanh', ['biased'], ['activated']),
      node('Cast', ['attention_mask'], ['mask_f'], { attributes: { to: attr.int(1) } }),
      node('Unsqueeze', ['mask_f', 'last_axis'], ['mask_3d']),
      node('Mul', ['activated', 'mask_3d'], ['last_hidden_state']),
    ],
    initializers: [
      tensor('word_embeddings', 'FP32', [vocabSize, hidden], w.word),
      tensor('type_embeddings', 'FP32', [2, hidden], w.type),
      tensor('dense', 'FP32', [hidden, hidden], w.dense),
      tensor('bias', 'FP32', [hidden], w.bias),
      tensor('last_axis', 'INT64', [1], [-1n]),
    ],
    docString: 'text encoder (example)',
  });
}

/** Reference maths in float64: the unit-length embedding of one tokenized sentence. */
export function textEmbeddingReference(
  w: TextEncoderWeights,
  ids: readonly number[],
  mask: readonly number[],
  typeIds: readonly number[],
  hidden = TEXT_HIDDEN,
): number[] {
  const sum = new Float64Array(hidden);
  let count = 0;
  ids.forEach((id, t) => {
    if (mask[t] === 0) return;
    count++;
    for (let o = 0; o < hidden; o++) {
      let z = w.bias[o]!;
      for (let i = 0; i < hidden; i++) z += (w.word[id * hidden + i]! + w.type[typeIds[t]! * hidden + i]!) * w.dense[i * hidden + o]!;
      sum[o]! += Math.tanh(z);
    }
  });
  const mean = Array.from(sum, (v) => v / Math.max(count, 1e-9));
  const norm = Math.max(Math.hypot(...mean), 1e-12);
  return mean.map((v) => v / norm);
}

/** The four model directories and the ensemble of the text pipeline. */
export function textPipelineRepository(weights: TextEncoderWeights = textEncoderWeights()): Record<string, PipelineModel> {
  const L = TEXT_MAX_LENGTH;
  const H = TEXT_HIDDEN;
  const mbs = `max_batch_size: ${TEXT_MAX_BATCH}`;
  return {
    tokenizer: {
      config: [
        'name: "tokenizer"',
        'backend: "tokenizer"',
        mbs,
        'input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]',
        'output [',
        `  { name: "input_ids" data_type: TYPE_INT64 dims: [ ${L} ] },`,
        `  { name: "attention_mask" data_type: TYPE_INT64 dims: [ ${L} ] },`,
        `  { name: "token_type_ids" data_type: TYPE_INT64 dims: [ ${L} ] }`,
        ']',
        `parameters { key: "max_length" value: { string_value: "${L}" } }`,
        'parameters { key: "truncation" value: { string_value: "true" } }',
        '',
      ].join('\n'),
      files: { 'tokenizer.json': `${JSON.stringify(bertTokenizerJson(), null, 1)}\n` },
    },
    encoder: {
      onnx: textEncoderOnnx(weights),
      config: [
        'name: "encoder"',
        'platform: "onnxruntime_onnx"',
        mbs,
        'input [',
        `  { name: "input_ids" data_type: TYPE_INT64 dims: [ ${L} ] },`,
        `  { name: "attention_mask" data_type: TYPE_INT64 dims: [ ${L} ] },`,
        `  { name: "token_type_ids" data_type: TYPE_INT64 dims: [ ${L} ] }`,
        ']',
        `output [ { name: "last_hidden_state" data_type: TYPE_FP32 dims: [ ${L}, ${H} ] } ]`,
        '',
      ].join('\n'),
    },
    pooling: {
      config: [
        'name: "pooling"',
        'backend: "mean_pooling"',
        mbs,
        'input [',
        `  { name: "token_embeddings" data_type: TYPE_FP32 dims: [ -1, ${H} ] },`,
        '  { name: "attention_mask" data_type: TYPE_INT64 dims: [ -1 ] }',
        ']',
        `output [ { name: "sentence_embedding" data_type: TYPE_FP32 dims: [ ${H} ] } ]`,
        '',
      ].join('\n'),
    },
    normalize: {
      config: [
        'name: "normalize"',
        'backend: "l2_normalize"',
        mbs,
        `input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ ${H} ] } ]`,
        `output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ ${H} ] } ]`,
        '',
      ].join('\n'),
    },
    [TEXT_ENSEMBLE]: {
      config: [
        `name: "${TEXT_ENSEMBLE}"`,
        'platform: "ensemble"',
        mbs,
        'input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]',
        `output [ { name: "EMBEDDING" data_type: TYPE_FP32 dims: [ ${H} ] } ]`,
        'ensemble_scheduling {',
        '  step [',
        '    {',
        '      model_name: "tokenizer"',
        '      model_version: -1',
        '      input_map { key: "TEXT" value: "TEXT" }',
        '      output_map { key: "input_ids" value: "input_ids" }',
        '      output_map { key: "attention_mask" value: "attention_mask" }',
        '      output_map { key: "token_type_ids" value: "token_type_ids" }',
        '    },',
        '    {',
        '      model_name: "encoder"',
        '      model_version: -1',
        '      input_map { key: "input_ids" value: "input_ids" }',
        '      input_map { key: "attention_mask" value: "attention_mask" }',
        '      input_map { key: "token_type_ids" value: "token_type_ids" }',
        '      output_map { key: "last_hidden_state" value: "token_embeddings" }',
        '    },',
        '    {',
        '      model_name: "pooling"',
        '      model_version: -1',
        '      input_map { key: "token_embeddings" value: "token_embeddings" }',
        '      input_map { key: "attention_mask" value: "attention_mask" }',
        '      output_map { key: "sentence_embedding" value: "pooled" }',
        '    },',
        '    {',
        '      model_name: "normalize"',
        '      model_version: -1',
        '      input_map { key: "INPUT" value: "pooled" }',
        '      output_map { key: "OUTPUT" value: "EMBEDDING" }',
        '    }',
        '  ]',
        '}',
        '',
      ].join('\n'),
      versions: [1],
    },
  };
}
