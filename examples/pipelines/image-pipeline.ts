/**
 * @module examples/pipelines/image-pipeline
 * The image pipeline, in the shape of Triton's DALI + Inception ensemble, with
 * no DALI and no Python: encoded image bytes (UINT8, as the DALI example
 * takes them) → `preprocess` (built-in image step: decode, resize to
 * 299×299, scale to [-1, 1] as Inception expects, NCHW) → `inception` (a
 * small generated classifier: conv 3×3 stride 2 → ReLU → global average pool
 * → dense) → `postprocess` (built-in top-k: softmax, the 3 best classes with
 * their scores, ids and labels from labels.txt).
 */
import { attr, buildModel, node, tensor, valueInfo } from '../models/onnx-builder.js';
import { seededRandom } from '../models/zoo.js';
import type { PipelineModel } from './write-repository.js';

export const IMAGE_ENSEMBLE = 'image_classifier';
export const IMAGE_SIZE = 299;
export const IMAGE_CLASSES = 10;
export const IMAGE_TOP_K = 3;
export const IMAGE_MAX_BATCH = 8;
const CONV_CHANNELS = 4;

/** ImageNet's first ten classes, one per line: line i = class i (Triton's label file format). */
export const IMAGE_LABELS: readonly string[] = Object.freeze([
  'tench',
  'goldfish',
  'great white shark',
  'tiger shark',
  'hammerhead',
  'electric ray',
  'stingray',
  'cock',
  'hen',
  'ostrich',
]);

export interface ClassifierWeights {
  /** [CONV_CHANNELS, 3, 3, 3] */
  readonly conv: Float32Array;
  readonly convBias: Float32Array;
  /** [CONV_CHANNELS, classes] */
  readonly dense: Float32Array;
  readonly denseBias: Float32Array;
}

export function classifierWeights(seed = 3): ClassifierWeights {
  const rand = seededRandom(seed);
  const fill = (n: number, scale: number): Float32Array => Float32Array.from({ length: n }, () => (rand() * 2 - 1) * scale);
  return {
    conv: fill(CONV_CHANNELS * 27, 0.5),
    convBias: fill(CONV_CHANNELS, 0.1),
    dense: fill(CONV_CHANNELS * IMAGE_CLASSES, 2),
    denseBias: fill(IMAGE_CLASSES, 0.1),
  };
}

/** The classifier graph: FP32 `[batch, 3, 299, 299]` → logits `[batch, classes]`. */
export function classifierOnnx(w: ClassifierWeights): Uint8Array {
  return buildModel({
    inputs: [valueInfo('input', 'FP32', ['batch', 3, IMAGE_SIZE, IMAGE_SIZE])],
    outputs: [valueInfo('logits', 'FP32', ['batch', IMAGE_CLASSES])],
    nodes: [
      node('Conv', ['input', 'conv.weight', 'conv.bias'], ['conv'], { attributes: { kernel_shape: attr.ints([3, 3]), strides: attr.ints([2, 2]) } }),
      node('Relu', ['conv'], ['relu']),
      node('GlobalAveragePool', ['relu'], ['pooled']),
      node('Flatten', ['pooled'], ['features'], { attributes: { axis: attr.int(1) } }),
      node('Gemm', ['features', 'dense.weight', 'dense.bias'], ['logits']),
    ],
    initializers: [
      tensor('conv.weight', 'FP32', [CONV_CHANNELS, 3, 3, 3], w.conv),
      tensor('conv.bias', 'FP32', [CONV_CHANNELS], w.convBias),
      tensor('dense.weight', 'FP32', [CONV_CHANNELS, IMAGE_CLASSES], w.dense),
      tensor('dense.bias', 'FP32', [IMAGE_CLASSES], w.denseBias),
    ],
    docString: 'small inception-shaped classifier (example)',
  });
}

/** The three step models and the ensemble of the image pipeline. */
export function imagePipelineRepository(weights: ClassifierWeights = classifierWeights()): Record<string, PipelineModel> {
  const S = IMAGE_SIZE;
  const mbs = `max_batch_size: ${IMAGE_MAX_BATCH}`;
  const k = IMAGE_TOP_K;
  const models: Record<string, PipelineModel> = {
    preprocess: {
      config: [
        'name: "preprocess"',
        'backend: "image"',
        mbs,
        'input [ { name: "IMAGE" data_type: TYPE_UINT8 dims: [ -1 ] } ]',
        `output [ { name: "PIXELS" data_type: TYPE_FP32 dims: [ 3, ${S}, ${S} ] } ]`,
        'parameters { key: "layout" value: { string_value: "NCHW" } }',
        // Inception's preprocessing: x / 127.5 - 1, i.e. (x/255 - 0.5) / 0.5.
        'parameters { key: "resize" value: { string_value: "stretch" } }',
        'parameters { key: "interpolation" value: { string_value: "linear" } }',
        'parameters { key: "color_format" value: { string_value: "RGB" } }',
        'parameters { key: "mean" value: { string_value: "0.5" } }',
        'parameters { key: "std" value: { string_value: "0.5" } }',
        '',
      ].join('\n'),
    },
    inception: {
      onnx: classifierOnnx(weights),
      config: [
        'name: "inception"',
        'platform: "onnxruntime_onnx"',
        mbs,
        `input [ { name: "input" data_type: TYPE_FP32 dims: [ 3, ${S}, ${S} ] } ]`,
        `output [ { name: "logits" data_type: TYPE_FP32 dims: [ ${IMAGE_CLASSES} ] } ]`,
        '',
      ].join('\n'),
    },
    postprocess: {
      config: [
        'name: "postprocess"',
        'backend: "topk"',
        mbs,
        `input [ { name: "logits" data_type: TYPE_FP32 dims: [ ${IMAGE_CLASSES} ] } ]`,
        'output [',
        `  { name: "SCORES" data_type: TYPE_FP32 dims: [ ${k} ] },`,
        `  { name: "CLASS_IDS" data_type: TYPE_INT64 dims: [ ${k} ] },`,
        `  { name: "LABELS" data_type: TYPE_STRING dims: [ ${k} ] label_filename: "labels.txt" }`,
        ']',
        `parameters { key: "k" value: { string_value: "${k}" } }`,
        'parameters { key: "softmax" value: { string_value: "true" } }',
        '',
      ].join('\n'),
      files: { 'labels.txt': `${IMAGE_LABELS.join('\n')}\n` },
    },
    [IMAGE_ENSEMBLE]: {
      config: [
        `name: "${IMAGE_ENSEMBLE}"`,
        'platform: "ensemble"',
        mbs,
        'input [ { name: "IMAGE" data_type: TYPE_UINT8 dims: [ -1 ] } ]',
        'output [',
        `  { name: "SCORES" data_type: TYPE_FP32 dims: [ ${k} ] },`,
        `  { name: "CLASS_IDS" data_type: TYPE_INT64 dims: [ ${k} ] },`,
        `  { name: "LABELS" data_type: TYPE_STRING dims: [ ${k} ] }`,
        ']',
        'ensemble_scheduling {',
        '  step [',
        '    {',
        '      model_name: "preprocess"',
        '      model_version: -1',
        '      input_map { key: "IMAGE" value: "IMAGE" }',
        '      output_map { key: "PIXELS" value: "preprocessed_image" }',
        '    },',
        '    {',
        '      model_name: "inception"',
        '      model_version: -1',
        '      input_map { key: "input" value: "preprocessed_image" }',
        '      output_map { key: "logits" value: "logits" }',
        '    },',
        '    {',
        '      model_name: "postprocess"',
        '      model_version: -1',
        '      input_map { key: "logits" value: "logits" }',
        '      output_map { key: "SCORES" value: "SCORES" }',
        '      output_map { key: "CLASS_IDS" value: "CLASS_IDS" }',
        '      output_map { key: "LABELS" value: "LABELS" }',
        '    }',
        '  ]',
        '}',
        '',
      ].join('\n'),
      versions: [1],
    },
  };
  return models;
}
