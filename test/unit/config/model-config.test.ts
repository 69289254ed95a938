/**
 * @module test/unit/config/model-config
 * config.pbtxt → typed ModelConfig: real configs copied verbatim from Triton's
 * docs, examples and QA suite; Triton's normalisation defaults as they appear
 * in the typed view and in `json` (GET .../config); every validation rule,
 * with Triton's QA cases where one exists; JSON input; and text round trips.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ServingError } from '../../../src/errors.js';
import { modelConfigFromJson, modelConfigToPbtxt, parseModelConfig } from '../../../src/config/model-config.js';
import { ModelConfigDescriptor } from '../../../src/config/model-config-schema.js';
import { parseTextFormat } from '../../../src/config/pbtxt/parser.js';
import type { ModelConfig } from '../../../src/config/model-config-types.js';

const SOURCE = 'config.pbtxt';

function load(text: string, directoryName?: string): ModelConfig {
  return parseModelConfig(text, directoryName === undefined ? { sourceName: SOURCE } : { sourceName: SOURCE, directoryName });
}

/** parse(write(c)).json deep-equals c.json. */
function assertRoundTrip(config: ModelConfig): void {
  const again = parseModelConfig(modelConfigToPbtxt(config), { sourceName: 'written.pbtxt', directoryName: config.name });
  assert.deepEqual(again.json, config.json);
  assert.deepEqual({ ...again, json: undefined }, { ...config, json: undefined });
}

function invalid(text: string, message: string, directoryName = 'm'): void {
  assert.throws(
    () => load(text, directoryName),
    (err: unknown) => {
      assert.ok(err instanceof ServingError, `expected a ServingError, got ${String(err)}`);
      assert.equal(err.code, 'INVALID_MODEL');
      assert.equal(err.message, message);
      return true;
    },
  );
}

/** A valid ONNX config with one FP32 [4] input and output, plus `extra` text. */
function withIo(extra: string, mbs = 8): string {
  return `max_batch_size: ${mbs}
input { name: "x" data_type: TYPE_FP32 dims: [ 4 ] }
output { name: "y" data_type: TYPE_FP32 dims: [ 4 ] }
${extra}`;
}

// ---- real configs, verbatim ---------------------------------------------------

/** triton-inference-server/server docs/examples/model_repository/densenet_onnx/config.pbtxt */
const DENSENET_ONNX = `name: "densenet_onnx"
platform: "onnxruntime_onnx"
max_batch_size : 0
input [
  {
    name: "data_0"
    data_type: TYPE_FP32
    format: FORMAT_NCHW
    dims: [ 3, 224, 224 ]
    reshape { shape: [ 1, 3, 224, 224 ] }
  }
]
output [
  {
    name: "fc6_1"
    data_type: TYPE_FP32
    dims: [ 1000 ]
    reshape { shape: [ 1, 1000, 1, 1 ] }
    label_filename: "densenet_labels.txt"
  }
]
`;

/** docs/examples/model_repository/inception_onnx/config.pbtxt */
const INCEPTION_ONNX = `name: "inception_onnx"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [
  {
    name: "input:0"
    data_type: TYPE_FP32
    format: FORMAT_NHWC
    dims: [ 299, 299, 3 ]
    reshape { shape: [ 1, 299, 299, 3 ] }
  }
]
output [
  {
    name: "InceptionV3/Predictions/Softmax:0"
    data_type: TYPE_FP32
    dims: [ 1001 ]
    reshape { shape: [ 1, 1001 ] }
    label_filename: "inception_labels.txt"
  }
]
`;

/** docs/examples/model_repository/simple/config.pbtxt */
const SIMPLE = `name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  {
    name: "INPUT0"
    data_type: TYPE_INT32
    dims: [ 16 ]
  },
  {
    name: "INPUT1"
    data_type: TYPE_INT32
    dims: [ 16 ]
  }
]
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_INT32
    dims: [ 16 ]
  },
  {
    name: "OUTPUT1"
    data_type: TYPE_INT32
    dims: [ 16 ]
  }
]
`;

/** docs/user_guide/ensemble_models.md, the first example. */
const ENSEMBLE_MODEL = `name: "ensemble_model"
platform: "ensemble"
max_batch_size: 1
input [
  {
    name: "IMAGE"
    data_type: TYPE_STRING
    dims: [ 1 ]
  }
]
output [
  {
    name: "CLASSIFICATION"
    data_type: TYPE_FP32
    dims: [ 1000 ]
  },
  {
    name: "SEGMENTATION"
    data_type: TYPE_FP32
    dims: [ 3, 224, 224 ]
  }
]
ensemble_scheduling {
  step [
    {
      model_name: "image_preprocess_model"
      model_version: -1
      input_map {
        key: "RAW_IMAGE"
        value: "IMAGE"
      }
      output_map {
        key: "PREPROCESSED_OUTPUT"
        value: "preprocessed_image"
      }
    },
    {
      model_name: "classification_model"
      model_version: -1
      input_map {
        key: "FORMATTED_IMAGE"
        value: "preprocessed_image"
      }
      output_map {
        key: "CLASSIFICATION_OUTPUT"
        value: "CLASSIFICATION"
      }
    },
    {
      model_name: "segmentation_model"
      model_version: -1
      input_map {
        key: "FORMATTED_IMAGE"
        value: "preprocessed_image"
      }
      output_map {
        key: "SEGMENTATION_OUTPUT"
        value: "SEGMENTATION"
      }
    }
  ]
}
`;

/** The ensemble_scheduling block is verbatim from ensemble_models.md (`{ key: "A", value: "B" }` commas). */
const ENSEMBLE_INFLIGHT = `name: "dali_onnx"
platform: "ensemble"
max_batch_size: 8
input [ { name: "IMAGE" data_type: TYPE_UINT8 dims: [ -1 ] } ]
output [ { name: "RESULT" data_type: TYPE_FP32 dims: [ 1000 ] } ]
ensemble_scheduling {
  max_inflight_requests: 16

  step [
    {
      model_name: "dali_preprocess"
      model_version: -1
      input_map { key: "RAW_IMAGE", value: "IMAGE" }
      output_map { key: "PREPROCESSED_IMAGE", value: "preprocessed" }
    },
    {
      model_name: "onnx_inference"
      model_version: -1
      input_map { key: "INPUT", value: "preprocessed" }
      output_map { key: "OUTPUT", value: "RESULT" }
    }
  ]
}
`;

/** docs/examples/model_repository/simple_dyna_sequence/config.pbtxt, license header included. */
const SIMPLE_DYNA_SEQUENCE = `# Copyright (c) 2020-2025, NVIDIA CORPORATION. All rights reserved.
#
# Redistribution and use in source and binary forms, with or without
# modification, are permitted provided that the following conditions
# are met:
#  * Redistributions of source code must retain the above copyright
#    notice, this list of conditions and the following disclaimer.

name: "simple_dyna_sequence"
platform: "onnxruntime_onnx"
max_batch_size: 8
sequence_batching {
    max_sequence_idle_microseconds: 10000000
    oldest {
      max_candidate_sequences: 1024
      max_queue_delay_microseconds: 10000
    }

  control_input [
    {
      name: "START"
      control [
        {
          kind: CONTROL_SEQUENCE_START
          int32_false_true: [ 0, 1 ]
        }
      ]
    },
    {
      name: "END"
      control [
        {
          kind: CONTROL_SEQUENCE_END
          int32_false_true: [ 0, 1 ]
        }
      ]
    },
    {
      name: "READY"
      control [
        {
          kind: CONTROL_SEQUENCE_READY
          int32_false_true: [ 0, 1 ]
        }
      ]
    },
    {
      name: "CORRID"
      control [
        {
          kind: CONTROL_SEQUENCE_CORRID
          data_type: TYPE_UINT64
        }
      ]
    }
  ]
}
input [
  {
    name: "INPUT"
    data_type: TYPE_INT32
    dims: [ 1 ]
  }
]
output [
  {
    name: "OUTPUT"
    data_type: TYPE_INT32
    dims: [ 1 ]
  }
]
parameters [
  {
    key: "execute_delay_ms"
    value: { string_value: "3" }
  }
]
instance_group [
  {
    count: 2
    kind: KIND_CPU
  }
]
`;

/** docs/examples/model_repository/simple_sequence/config.pbtxt */
const SIMPLE_SEQUENCE = `
name: "simple_sequence"
platform: "onnxruntime_onnx"
max_batch_size: 8
sequence_batching {
  control_input [
    {
      name: "START"
      control [
        {
          kind: CONTROL_SEQUENCE_START
          int32_false_true: [ 0, 1 ]
        }
      ]
    },
    {
      name: "READY"
      control [
        {
          kind: CONTROL_SEQUENCE_READY
          int32_false_true: [ 0, 1 ]
        }
      ]
    }
  ]
}
input [
  {
    name: "INPUT"
    data_type: TYPE_INT32
    dims: [ 1 ]
  }
]
output [
  {
    name: "OUTPUT"
    data_type: TYPE_INT32
    dims: [ 1 ]
  }
]
instance_group [
  {
    kind: KIND_CPU
  }
]
`;

/** qa/L0_config_json/max_priority_level.pbtxt: uint64 extremes, `dynamic_batching:` then a newline, tabs. */
const MAX_PRIORITY_LEVEL = `
name: "max_priority_level"
backend: "identity"
max_batch_size: 1
input [
  {
    name: "INPUT0"
    data_type: TYPE_FP32
    dims: [ 1 ]
  }
]
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_FP32
    dims: [ 1 ]
  }
]

dynamic_batching:
{
    # Max uint64
    priority_levels: 18446744073709551615
    # Max uint32
    default_priority_level: 4294967295
    # Max uint32 + 1
    priority_queue_policy: [
       {key: 4294967296
        value: {
          timeout_action: REJECT
\t  default_timeout_microseconds: 18446744073709551615
\t  allow_timeout_override: true
\t  max_queue_size: 10
       }
    }
]
}
`;

/** docs/user_guide/optimization.md, the ONNX TensorRT accelerator block (whitespace verbatim). */
const TRT_ACCELERATOR = `optimization { execution_accelerators {
  gpu_execution_accelerator : [ {
    name : "tensorrt"
    parameters { key: "precision_mode" value: "FP16" }
    parameters { key: "max_workspace_size_bytes" value: "1073741824" }
    }]
}}`;

/** docs/user_guide/optimization.md, the OpenVINO block. */
const OPENVINO_ACCELERATOR = `optimization { execution_accelerators {
  cpu_execution_accelerator : [ {
    name : "openvino"
  }]
}}`;

/** qa/L0_warmup/test.sh, the batch-1 sample it appends to config.pbtxt (`dims: 16`). */
const WARMUP_BLOCK = `model_warmup [{
    name : "regular sample"
    batch_size: 1
    inputs {
        key: "INPUT0"
        value: {
            data_type: TYPE_FP32
            dims: 16
            zero_data: true
        }
    }
    inputs {
        key: "INPUT1"
        value: {
            data_type: TYPE_FP32
            dims: 16
            random_data: true
        }
    }
}]`;

/** docs/user_guide/model_configuration.md, rate limiter example (`global: True`). */
const RATE_LIMITER_GROUP = `  instance_group [
    {
      count: 1
      kind: KIND_GPU
      gpus: [ 0, 1, 2 ]
      rate_limiter {
        resources [
          {
            name: "R1"
            count: 4
          },
          {
            name: "R2"
            global: True
            count: 2
          }
        ]
        priority: 2
      }
    }
  ]`;

// ---- tests ----------------------------------------------------------------------

describe('model config: real Triton configs', () => {
  test('densenet_onnx', () => {
    const c = load(DENSENET_ONNX, 'densenet_onnx');
    assert.deepEqual(
      { ...c, json: undefined },
      {
        name: 'densenet_onnx',
        platform: 'onnxruntime_onnx',
        backend: 'onnxruntime',
        maxBatchSize: 0,
        versionPolicy: { kind: 'latest', numVersions: 1 },
        input: [
          {
            name: 'data_0',
            dataType: 'FP32',
            dims: [3, 224, 224],
            reshape: [1, 3, 224, 224],
            format: 'FORMAT_NCHW',
            optional: false,
            allowRaggedBatch: false,
            labelFilename: undefined,
          },
        ],
        output: [
          {
            name: 'fc6_1',
            dataType: 'FP32',
            dims: [1000],
            reshape: [1, 1000, 1, 1],
            format: 'FORMAT_NONE',
            optional: false,
            allowRaggedBatch: false,
            labelFilename: 'densenet_labels.txt',
          },
        ],
        dynamicBatching: undefined,
        sequenceBatching: undefined,
        ensembleSteps: undefined,
        instanceGroup: [{ name: 'densenet_onnx', kind: 'KIND_AUTO', count: 1, gpus: [] }],
        defaultModelFilename: 'model.onnx',
        parameters: {},
        modelWarmup: [],
        optimization: { graphLevel: 0, gpuExecutionAccelerators: [], cpuExecutionAccelerators: [] },
        responseCacheEnabled: false,
        decoupled: false,
        ignoredFields: [],
        json: undefined,
      },
    );
    assertRoundTrip(c);
  });

  test('inception_onnx: tensor names with ":" and "/"', () => {
    const c = load(INCEPTION_ONNX, 'inception_onnx');
    assert.deepEqual(
      c.input.map((t) => [t.name, t.format, t.dims, t.reshape]),
      [['input:0', 'FORMAT_NHWC', [299, 299, 3], [1, 299, 299, 3]]],
    );
    assert.deepEqual(
      c.output.map((t) => [t.name, t.labelFilename]),
      [['InceptionV3/Predictions/Softmax:0', 'inception_labels.txt']],
    );
    assertRoundTrip(c);
  });

  test('simple: the whole normalised JSON form, as GET .../config shows it', () => {
    const c = load(SIMPLE, 'simple');
    const tensor = (name: string): Record<string, unknown> => ({
      name,
      data_type: 'TYPE_INT32',
      format: 'FORMAT_NONE',
      dims: [16],
      is_shape_tensor: false,
      allow_ragged_batch: false,
      optional: false,
      is_non_linear_format_io: false,
    });
    const output = (name: string): Record<string, unknown> => ({
      name,
      data_type: 'TYPE_INT32',
      dims: [16],
      label_filename: '',
      is_shape_tensor: false,
      is_non_linear_format_io: false,
    });
    assert.deepEqual(c.json, {
      name: 'simple',
      platform: 'onnxruntime_onnx',
      backend: 'onnxruntime',
      runtime: '',
      version_policy: { latest: { num_versions: 1 } },
      max_batch_size: 8,
      input: [tensor('INPUT0'), tensor('INPUT1')],
      output: [output('OUTPUT0'), output('OUTPUT1')],
      batch_input: [],
      batch_output: [],
      optimization: {
        priority: 'PRIORITY_DEFAULT',
        input_pinned_memory: { enable: true },
        output_pinned_memory: { enable: true },
        gather_kernel_buffer_threshold: 0,
        eager_batching: false,
      },
      instance_group: [{ name: 'simple', kind: 'KIND_AUTO', count: 1, gpus: [], secondary_devices: [], profile: [], passive: false, host_policy: '' }],
      default_model_filename: 'model.onnx',
      cc_model_filenames: {},
      metric_tags: {},
      parameters: {},
      model_warmup: [],
    });
    assert.equal(c.dynamicBatching, undefined);
    assertRoundTrip(c);
  });

  test('simple: written back as text', () => {
    assert.equal(
      modelConfigToPbtxt(load(SIMPLE, 'simple')),
      `name: "simple"
platform: "onnxruntime_onnx"
backend: "onnxruntime"
version_policy {
  latest {
    num_versions: 1
  }
}
max_batch_size: 8
input [
  {
    name: "INPUT0"
    data_type: TYPE_INT32
    dims: [ 16 ]
  },
  {
    name: "INPUT1"
    data_type: TYPE_INT32
    dims: [ 16 ]
  }
]
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_INT32
    dims: [ 16 ]
  },
  {
    name: "OUTPUT1"
    data_type: TYPE_INT32
    dims: [ 16 ]
  }
]
optimization {
  input_pinned_memory {
    enable: true
  }
  output_pinned_memory {
    enable: true
  }
}
instance_group [
  {
    name: "simple"
    count: 1
  }
]
default_model_filename: "model.onnx"
`,
    );
  });

  test('ensemble from ensemble_models.md', () => {
    const c = load(ENSEMBLE_MODEL, 'ensemble_model');
    assert.equal(c.platform, 'ensemble');
    assert.equal(c.backend, '');
    assert.equal(c.defaultModelFilename, '');
    assert.deepEqual(c.ensembleSteps, [
      {
        modelName: 'image_preprocess_model',
        modelVersion: -1,
        inputMap: { RAW_IMAGE: 'IMAGE' },
        outputMap: { PREPROCESSED_OUTPUT: 'preprocessed_image' },
      },
      {
        modelName: 'classification_model',
        modelVersion: -1,
        inputMap: { FORMATTED_IMAGE: 'preprocessed_image' },
        outputMap: { CLASSIFICATION_OUTPUT: 'CLASSIFICATION' },
      },
      {
        modelName: 'segmentation_model',
        modelVersion: -1,
        inputMap: { FORMATTED_IMAGE: 'preprocessed_image' },
        outputMap: { SEGMENTATION_OUTPUT: 'SEGMENTATION' },
      },
    ]);
    // No instances and no optimization for ensembles, in the typed view and in JSON.
    assert.deepEqual(c.instanceGroup, []);
    assert.equal(c.optimization, undefined);
    assert.deepEqual(c.json['instance_group'], []);
    assert.equal('optimization' in c.json, false);
    assert.deepEqual(
      c.input.map((t) => t.dataType),
      ['BYTES'],
    );
    assertRoundTrip(c);
  });

  test('ensemble with comma-separated map entries and max_inflight_requests', () => {
    const c = load(ENSEMBLE_INFLIGHT, 'dali_onnx');
    assert.deepEqual(
      c.ensembleSteps?.map((s) => [s.modelName, s.inputMap, s.outputMap]),
      [
        ['dali_preprocess', { RAW_IMAGE: 'IMAGE' }, { PREPROCESSED_IMAGE: 'preprocessed' }],
        ['onnx_inference', { INPUT: 'preprocessed' }, { OUTPUT: 'RESULT' }],
      ],
    );
    assert.equal((c.json['ensemble_scheduling'] as Record<string, unknown>)['max_inflight_requests'], 16);
    assertRoundTrip(c);
  });

  test('dynamic_batching with a queue policy (triton-compat §2.2 / batcher.md)', () => {
    const c = load(
      withIo(`dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 100
  default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 50000 max_queue_size: 64 }
}`),
      'm',
    );
    assert.deepEqual(c.dynamicBatching, {
      preferredBatchSize: [4, 8],
      maxQueueDelayMicroseconds: 100,
      preserveOrdering: false,
      priorityLevels: 0,
      defaultPriorityLevel: 0,
      defaultQueuePolicy: { timeoutAction: 'REJECT', defaultTimeoutMicroseconds: 50000, allowTimeoutOverride: false, maxQueueSize: 64 },
      priorityQueuePolicy: {},
    });
    assertRoundTrip(c);
  });

  test('dynamic_batching with priority levels and per-level policies', () => {
    const c = load(
      withIo(`dynamic_batching {
  priority_levels: 2
  default_priority_level: 2
  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 10 allow_timeout_override: true }
  priority_queue_policy { key: 1 value: { max_queue_size: 3 } }
}`),
      'm',
    );
    assert.deepEqual(c.dynamicBatching?.priorityQueuePolicy, {
      '1': { timeoutAction: 'REJECT', defaultTimeoutMicroseconds: 0, allowTimeoutOverride: false, maxQueueSize: 3 },
    });
    assert.deepEqual(c.dynamicBatching?.defaultQueuePolicy, {
      timeoutAction: 'DELAY',
      defaultTimeoutMicroseconds: 10,
      allowTimeoutOverride: true,
      maxQueueSize: 0,
    });
    assert.deepEqual(c.dynamicBatching?.preferredBatchSize, [8]);
    assertRoundTrip(c);
  });

  test('qa max_priority_level: uint64 extremes and exact uint64 map keys', () => {
    const c = load(MAX_PRIORITY_LEVEL, 'max_priority_level');
    assert.equal(c.backend, 'identity');
    assert.equal(c.platform, '');
    assert.equal(c.dynamicBatching?.priorityLevels, 18446744073709551615);
    assert.equal(c.dynamicBatching?.defaultPriorityLevel, 4294967295);
    assert.deepEqual(Object.keys(c.dynamicBatching?.priorityQueuePolicy ?? {}), ['4294967296']);
    assert.equal(c.dynamicBatching?.priorityQueuePolicy['4294967296']?.defaultTimeoutMicroseconds, 18446744073709551615);
    assert.match(modelConfigToPbtxt(c), /priority_levels: 18446744073709551615\n/);
    assertRoundTrip(c);
  });

  test('TensorRT and OpenVINO execution_accelerators blocks from optimization.md', () => {
    const trt = load(withIo(TRT_ACCELERATOR), 'm');
    assert.deepEqual(trt.optimization, {
      graphLevel: 0,
      gpuExecutionAccelerators: [{ name: 'tensorrt', parameters: { precision_mode: 'FP16', max_workspace_size_bytes: '1073741824' } }],
      cpuExecutionAccelerators: [],
    });
    assertRoundTrip(trt);
    const ov = load(withIo(OPENVINO_ACCELERATOR), 'm');
    assert.deepEqual(ov.optimization?.cpuExecutionAccelerators, [{ name: 'openvino', parameters: {} }]);
  });

  test('optimization graph level', () => {
    assert.equal(load(withIo('optimization { graph { level: -1 } }'), 'm').optimization?.graphLevel, -1);
    assert.equal(load(withIo('optimization { graph: { level: 2 } }'), 'm').optimization?.graphLevel, 2);
  });

  test('model_warmup block from qa/L0_warmup (dims: 16)', () => {
    const c = load(
      `max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
${WARMUP_BLOCK}`,
      'm',
    );
    assert.deepEqual(c.modelWarmup, [
      {
        name: 'regular sample',
        batchSize: 1,
        count: 0,
        inputs: {
          INPUT0: { dataType: 'FP32', dims: [16], source: { kind: 'zero' } },
          INPUT1: { dataType: 'FP32', dims: [16], source: { kind: 'random' } },
        },
      },
    ]);
    assertRoundTrip(c);
  });

  test('model_warmup from a file, with count', () => {
    const c = load(
      withIo(
        `model_warmup { name: "f" batch_size: 2 count: 3 inputs { key: "x" value { data_type: TYPE_STRING dims: [ 4 ] input_data_file: "raw_string_data" } } }`,
      ),
      'm',
    );
    assert.deepEqual(c.modelWarmup[0], {
      name: 'f',
      batchSize: 2,
      count: 3,
      inputs: { x: { dataType: 'BYTES', dims: [4], source: { kind: 'file', file: 'raw_string_data' } } },
    });
  });

  test('sequence_batching: simple_dyna_sequence (license header, oldest strategy, controls)', () => {
    const c = load(SIMPLE_DYNA_SEQUENCE, 'simple_dyna_sequence');
    const seq = c.json['sequence_batching'] as Record<string, unknown>;
    assert.equal(seq['max_sequence_idle_microseconds'], 10000000);
    // Triton fills oldest.preferred_batch_size with max_batch_size.
    assert.deepEqual(seq['oldest'], {
      max_candidate_sequences: 1024,
      preferred_batch_size: [8],
      max_queue_delay_microseconds: 10000,
      preserve_ordering: false,
    });
    assert.deepEqual(
      (seq['control_input'] as { name: string; control: { kind: string; data_type: string }[] }[]).map((ci) => [
        ci.name,
        ci.control[0]?.kind,
        ci.control[0]?.data_type,
      ]),
      [
        ['START', 'CONTROL_SEQUENCE_START', 'TYPE_INVALID'],
        ['END', 'CONTROL_SEQUENCE_END', 'TYPE_INVALID'],
        ['READY', 'CONTROL_SEQUENCE_READY', 'TYPE_INVALID'],
        ['CORRID', 'CONTROL_SEQUENCE_CORRID', 'TYPE_UINT64'],
      ],
    );
    assert.deepEqual(c.parameters, { execute_delay_ms: '3' });
    assert.deepEqual(c.instanceGroup, [{ name: 'simple_dyna_sequence_0', kind: 'KIND_CPU', count: 2, gpus: [] }]);
    assert.equal(c.dynamicBatching, undefined);
    assertRoundTrip(c);
  });

  test('sequence_batching: simple_sequence gets the default idle time; a group without count keeps 0', () => {
    const c = load(SIMPLE_SEQUENCE, 'simple_sequence');
    assert.equal((c.json['sequence_batching'] as Record<string, unknown>)['max_sequence_idle_microseconds'], 1000000);
    // count 0 = not given: the runtime applies Triton's default (2 for KIND_CPU onnxruntime).
    assert.deepEqual(c.instanceGroup, [{ name: 'simple_sequence_0', kind: 'KIND_CPU', count: 0, gpus: [] }]);
    assertRoundTrip(c);
  });

  test('instance_group with a rate limiter (global: True)', () => {
    const c = load(withIo(RATE_LIMITER_GROUP), 'm');
    assert.deepEqual(c.instanceGroup, [{ name: 'm_0', kind: 'KIND_GPU', count: 1, gpus: [0, 1, 2] }]);
    const group = (c.json['instance_group'] as Record<string, unknown>[])[0];
    assert.deepEqual(group?.['rate_limiter'], {
      resources: [
        { name: 'R1', global: false, count: 4 },
        { name: 'R2', global: true, count: 2 },
      ],
      priority: 2,
    });
    assertRoundTrip(c);
  });

  test('cc_model_filenames in list form (model_configuration.md)', () => {
    const c = load(
      withIo(`cc_model_filenames [
  {
    key: "7.5"
    value: "resnet50_T4.plan"
  },
  {
    key: "8.0"
    value: "resnet50_A100.plan"
  }
]`),
      'm',
    );
    assert.deepEqual(c.json['cc_model_filenames'], { '7.5': 'resnet50_T4.plan', '8.0': 'resnet50_A100.plan' });
  });

  test('version policies as written in model_configuration.md', () => {
    assert.deepEqual(load(withIo('version_policy: { all { }}'), 'm').versionPolicy, { kind: 'all' });
    assert.deepEqual(load(withIo('version_policy: { latest: { num_versions: 2}}'), 'm').versionPolicy, { kind: 'latest', numVersions: 2 });
    assert.deepEqual(load(withIo('version_policy: { specific: { versions: [1,3]}}'), 'm').versionPolicy, { kind: 'specific', versions: [1, 3] });
    // An empty policy is "all" in Triton's VersionsToLoad; the JSON stays as written.
    const empty = load(withIo('version_policy { }'), 'm');
    assert.deepEqual(empty.versionPolicy, { kind: 'all' });
    assert.deepEqual(empty.json['version_policy'], {});
  });

  test('response cache, decoupled, optional and ragged inputs', () => {
    const c = load(
      `max_batch_size: 4
input { name: "a" data_type: TYPE_FP32 dims: [ -1 ] optional: true allow_ragged_batch: true }
output { name: "b" data_type: TYPE_FP32 dims: [ -1 ] }
response_cache { enable: true }`,
      'm',
    );
    assert.equal(c.responseCacheEnabled, true);
    assert.equal(c.decoupled, false);
    assert.deepEqual([c.input[0]?.optional, c.input[0]?.allowRaggedBatch], [true, true]);
    assert.equal(load(withIo('model_transaction_policy { decoupled: True }'), 'm').decoupled, true);
  });
});

describe('model config: normalisation', () => {
  test('name comes from the directory; a different name is an error', () => {
    assert.equal(load(withIo(''), 'from_dir').name, 'from_dir');
    assert.equal(load(withIo('name: "x"')).name, 'x');
    invalid(withIo('name: "other"'), "config.pbtxt: name 'other' does not match the model directory name 'm'");
    assert.throws(() => load(withIo('')), { message: "config.pbtxt: model configuration must specify 'name'" });
  });

  test('platform and backend fill each other for ONNX', () => {
    const byPlatform = load(withIo('platform: "onnxruntime_onnx"'), 'm');
    assert.deepEqual([byPlatform.platform, byPlatform.backend, byPlatform.defaultModelFilename], ['onnxruntime_onnx', 'onnxruntime', 'model.onnx']);
    const byBackend = load(withIo('backend: "onnxruntime"'), 'm');
    assert.deepEqual([byBackend.platform, byBackend.backend, byBackend.defaultModelFilename], ['onnxruntime_onnx', 'onnxruntime', 'model.onnx']);
    const byFile = load(withIo('default_model_filename: "model.onnx"'), 'm');
    assert.deepEqual([byFile.platform, byFile.backend], ['onnxruntime_onnx', 'onnxruntime']);
    const custom = load(withIo('backend: "onnxruntime" default_model_filename: "net.onnx"'), 'm');
    assert.equal(custom.defaultModelFilename, 'net.onnx');
    // Nothing to go on: left empty for the runtime (which can look at the version directory).
    const none = load(withIo(''), 'm');
    assert.deepEqual([none.platform, none.backend, none.defaultModelFilename], ['', '', '']);
  });

  test('dynamic_batching {} gets preferred_batch_size [max_batch_size] and the default queue policy', () => {
    const c = load(withIo('dynamic_batching { }', 4), 'm');
    assert.deepEqual(c.dynamicBatching, {
      preferredBatchSize: [4],
      maxQueueDelayMicroseconds: 0,
      preserveOrdering: false,
      priorityLevels: 0,
      defaultPriorityLevel: 0,
      defaultQueuePolicy: { timeoutAction: 'REJECT', defaultTimeoutMicroseconds: 0, allowTimeoutOverride: false, maxQueueSize: 0 },
      priorityQueuePolicy: {},
    });
    assert.deepEqual((c.json['dynamic_batching'] as Record<string, unknown>)['default_queue_policy'], {
      timeout_action: 'REJECT',
      default_timeout_microseconds: 0,
      allow_timeout_override: false,
      max_queue_size: 0,
    });
    assert.deepEqual(load(withIo('dynamic_batching { }', 0), 'm').dynamicBatching?.preferredBatchSize, []);
  });

  test('instance groups: default group named after the model; empty names become <model>_<idx>', () => {
    const c = load(withIo('instance_group [ { count: 2 kind: KIND_CPU }, { name: "mine" kind: KIND_GPU gpus: [ 1 ] }, { } ]'), 'net');
    assert.deepEqual(c.instanceGroup, [
      { name: 'net_0', kind: 'KIND_CPU', count: 2, gpus: [] },
      { name: 'mine', kind: 'KIND_GPU', count: 0, gpus: [1] },
      { name: 'net_2', kind: 'KIND_AUTO', count: 0, gpus: [] },
    ]);
    assert.deepEqual(load(withIo(''), 'net').instanceGroup, [{ name: 'net', kind: 'KIND_AUTO', count: 1, gpus: [] }]);
  });

  test('pinned memory defaults are added for non-ensembles, kept when given', () => {
    const c = load(withIo('optimization { input_pinned_memory { enable: false } }'), 'm');
    const optimization = c.json['optimization'] as Record<string, unknown>;
    assert.deepEqual([optimization['input_pinned_memory'], optimization['output_pinned_memory']], [{ enable: false }, { enable: true }]);
  });

  test('normalising twice changes nothing', () => {
    for (const [text, dir] of [
      [SIMPLE, 'simple'],
      [ENSEMBLE_MODEL, 'ensemble_model'],
      [SIMPLE_DYNA_SEQUENCE, 'simple_dyna_sequence'],
      [withIo('dynamic_batching { }'), 'm'],
    ] as const) {
      const c = load(text, dir);
      assert.deepEqual(modelConfigFromJson(c.json, { sourceName: 'again', directoryName: dir }).json, c.json);
    }
  });

  test('the result is deep-frozen, json included', () => {
    const c = load(SIMPLE, 'simple');
    assert.ok(Object.isFrozen(c));
    assert.ok(Object.isFrozen(c.input[0]?.dims));
    assert.ok(Object.isFrozen(c.json));
    const inputs = c.json['input'] as Record<string, unknown>[];
    assert.ok(Object.isFrozen(inputs[0]));
    assert.throws(() => {
      (inputs[0] as Record<string, unknown>)['name'] = 'changed';
    }, TypeError);
    assert.throws(() => {
      (c.instanceGroup as unknown[]).push({ name: 'x' });
    }, TypeError);
  });
});

describe('model config: validation', () => {
  test('tensor data_type must be set', () => {
    // qa/L0_model_config/noautofill_platform/missing_datatype
    invalid(
      `name: "missing_datatype"
max_batch_size: 4
input [ { name: "input" dims: [ 2, -1 ] } ]
output [ { name: "output" data_type: TYPE_FP32 dims: [ 1 ] } ]`,
      "config.pbtxt: input 'input': must specify 'data_type' (missing or TYPE_INVALID)",
      'missing_datatype',
    );
    invalid(withIo('output { name: "z" data_type: TYPE_INVALID dims: [ 1 ] }'), "config.pbtxt: output 'z': must specify 'data_type' (missing or TYPE_INVALID)");
  });

  test('dims: >= 0 or -1; 0 is allowed; empty dims are a scalar per item', () => {
    // proto3 cannot tell `dims: [ ]` from no dims: both are a rank-0 tensor (per batch row when batching).
    assert.deepEqual(load(withIo('input { name: "e" data_type: TYPE_FP32 }'), 'm').input[1]?.dims, []);
    assert.deepEqual(load(withIo('input { name: "e" data_type: TYPE_FP32 dims: [ ] }', 0), 'm').input[1]?.dims, []);
    invalid(withIo('output { name: "n" data_type: TYPE_FP32 dims: [ 2, -2 ] }'), "config.pbtxt: output 'n': dims must be >= 0 or -1 (variable), got [2, -2]");
    assert.deepEqual(load(withIo('input { name: "z" data_type: TYPE_FP32 dims: [ 0, 3 ] }'), 'm').input[1]?.dims, [0, 3]);
  });

  test('tensor names: required and unique', () => {
    invalid(withIo('input { data_type: TYPE_FP32 dims: [ 1 ] }'), "config.pbtxt: input #1: must specify 'name'");
    invalid(withIo('input { name: "x" data_type: TYPE_FP32 dims: [ 1 ] }'), "config.pbtxt: duplicate input name 'x'");
    invalid(withIo('output { name: "y" data_type: TYPE_FP32 dims: [ 1 ] }'), "config.pbtxt: duplicate output name 'y'");
  });

  test('reshape must keep the element count (qa reshape_elementcount0-3)', () => {
    invalid(
      withIo('input { name: "i" data_type: TYPE_FP32 dims: [ 1, 3, 2 ] reshape { shape: [ 5 ] } }', 4),
      "config.pbtxt: input 'i': reshape [5] does not have the same element count as dims [1, 3, 2]",
    );
    invalid(
      withIo('output { name: "o" data_type: TYPE_FP32 dims: [ 15 ] reshape { shape: [ 3, 2, 5 ] } }', 4),
      "config.pbtxt: output 'o': reshape [3, 2, 5] does not have the same element count as dims [15]",
    );
  });

  test('reshape with variable dims (qa reshape_variable0-5)', () => {
    invalid(
      withIo('input { name: "i" data_type: TYPE_FP32 dims: [ 2, -1 ] reshape { shape: [ 2, 2 ] } }', 4),
      "config.pbtxt: input 'i': reshape [2, 2] does not have the same element count as dims [2, -1]",
    );
    invalid(
      withIo('input { name: "i" data_type: TYPE_FP32 dims: [ 2, -1 ] reshape { shape: [ 2, -1, 2 ] } }', 4),
      "config.pbtxt: input 'i': reshape [2, -1, 2] does not have the same element count as dims [2, -1]",
    );
    invalid(
      withIo('input { name: "i" data_type: TYPE_FP32 dims: [ 2, -1 ] reshape { shape: [ 2, -1, -1 ] } }', 4),
      "config.pbtxt: input 'i': dims [2, -1] and reshape [2, -1, -1] have a different number of variable (-1) dimensions",
    );
    // Chunks between -1s match: 2*4 = 8 and 6 = 1*6.
    const ok = load(withIo('input { name: "i" data_type: TYPE_FP32 dims: [ 2, 4, -1, 6 ] reshape { shape: [ 8, -1, 1, 6 ] } }', 4), 'm');
    assert.deepEqual(ok.input[1]?.reshape, [8, -1, 1, 6]);
  });

  test('reshape: empty means scalar (with or without batching), zeros are not allowed', () => {
    const scalar = load(withIo('input { name: "s" data_type: TYPE_FP32 dims: [ 1 ] reshape: { shape: [ ] } }', 4), 'm');
    assert.deepEqual(scalar.input[1]?.reshape, []);
    // Triton's onnxruntime backend feeds a rank-0 model input from dims [1] without batching too.
    assert.deepEqual(load(withIo('input { name: "s" data_type: TYPE_FP32 dims: [ 1 ] reshape: { shape: [ ] } }', 0), 'm').input[1]?.reshape, []);
    invalid(
      withIo('input { name: "s" data_type: TYPE_FP32 dims: [ 2 ] reshape: { shape: [ ] } }', 4),
      "config.pbtxt: input 's': reshape [] does not have the same element count as dims [2]",
    );
    invalid(
      withIo('input { name: "z" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape { shape: [ 0 ] } }', 4),
      "config.pbtxt: input 'z': reshape dimensions must be >= 1 or -1 (variable), got [0]",
    );
  });

  test('image formats need 3 dims; TensorRT-only tensor flags', () => {
    invalid(
      withIo('input { name: "img" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 3, 224 ] }'),
      "config.pbtxt: input 'img': format FORMAT_NCHW requires 3 dims, got [3, 224]",
    );
    invalid(
      withIo('input { name: "s" data_type: TYPE_INT32 dims: [ 2 ] is_shape_tensor: true }'),
      "config.pbtxt: input 's': shape tensors are only supported for TensorRT models",
    );
  });

  test('max_batch_size must not be negative (qa negative_max_batch_size)', () => {
    invalid(withIo('', -2), 'config.pbtxt: max_batch_size must be >= 0, got -2');
  });

  test('preferred_batch_size must be in [1, max_batch_size]', () => {
    invalid(
      withIo('dynamic_batching { preferred_batch_size: [ 4, 16 ] }', 8),
      'config.pbtxt: dynamic_batching: preferred_batch_size 16 is larger than max_batch_size 8',
    );
    invalid(withIo('dynamic_batching { preferred_batch_size: [ 0 ] }', 8), 'config.pbtxt: dynamic_batching: preferred_batch_size must be positive, got 0');
    invalid(
      withIo('dynamic_batching { preferred_batch_size: 2 }', 0),
      'config.pbtxt: dynamic_batching: preferred_batch_size 2 is larger than max_batch_size 0',
    );
  });

  test('priority levels (qa default_priority_level0/1, priority_level0/1, preserve_ordering0)', () => {
    invalid(withIo('dynamic_batching { priority_levels: 3 }'), 'config.pbtxt: dynamic_batching: default_priority_level must be in [1, 3], got 0');
    invalid(
      withIo('dynamic_batching { priority_levels: 3 default_priority_level: 5 }'),
      'config.pbtxt: dynamic_batching: default_priority_level must be in [1, 3], got 5',
    );
    invalid(
      withIo('dynamic_batching { priority_levels: 3 default_priority_level: 2 priority_queue_policy { key: 0 value: { } } }'),
      'config.pbtxt: dynamic_batching: priority_queue_policy level 0 is outside [1, 3]',
    );
    invalid(
      withIo('dynamic_batching { priority_levels: 3 default_priority_level: 2 priority_queue_policy { key: 4 value: { } } }'),
      'config.pbtxt: dynamic_batching: priority_queue_policy level 4 is outside [1, 3]',
    );
    invalid(
      withIo('dynamic_batching { preserve_ordering: true priority_levels: 3 default_priority_level: 2 priority_queue_policy { key: 1 value: { } } }'),
      'config.pbtxt: dynamic_batching: only one priority level is allowed when preserve_ordering is true, got 3',
    );
    invalid(
      withIo('dynamic_batching { preserve_ordering: true default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 5 } }'),
      'config.pbtxt: dynamic_batching: a queue policy cannot use timeout_action DELAY when preserve_ordering is true',
    );
  });

  test('ensembles: platform and ensemble_scheduling go together (qa ensemble_scheduling_set)', () => {
    invalid(withIo('platform: "ensemble"'), "config.pbtxt: platform 'ensemble' requires ensemble_scheduling");
    invalid(
      withIo('ensemble_scheduling { step [ { model_name: "a" input_map { key: "i" value: "x" } output_map { key: "o" value: "y" } } ] }'),
      "config.pbtxt: ensemble_scheduling can only be set for platform 'ensemble', got platform ''",
    );
    invalid(
      withIo(
        'platform: "ensemble" backend: "onnxruntime" ensemble_scheduling { step [ { model_name: "a" input_map { key: "i" value: "x" } output_map { key: "o" value: "y" } } ] }',
      ),
      "config.pbtxt: an ensemble must have an empty backend, got backend 'onnxruntime'",
    );
  });

  const STEP = 'step [ { model_name: "a" input_map { key: "i" value: "x" } output_map { key: "o" value: "y" } } ]';

  test('ensembles: no instance_group, optimization or model_warmup', () => {
    invalid(
      withIo(`platform: "ensemble" ensemble_scheduling { ${STEP} } instance_group { kind: KIND_CPU } optimization { graph { level: 1 } }
model_warmup { name: "w" batch_size: 1 inputs { key: "x" value { data_type: TYPE_FP32 dims: 4 zero_data: true } } }`),
      'config.pbtxt: an ensemble must not specify instance_group; an ensemble must not specify optimization; an ensemble must not specify model_warmup',
    );
  });

  test('ensembles: steps must be complete', () => {
    invalid(withIo('platform: "ensemble" ensemble_scheduling { }'), 'config.pbtxt: ensemble_scheduling must have at least one step');
    invalid(
      withIo('platform: "ensemble" ensemble_scheduling { step { model_version: -1 } }'),
      "config.pbtxt: ensemble_scheduling step 0: must specify 'model_name'; ensemble_scheduling step 0: must specify 'input_map'; ensemble_scheduling step 0: must specify 'output_map'",
    );
  });

  test('ensembles: data flow (unused input, unwritten output, unused tensor, double producer)', () => {
    invalid(
      withIo(
        'platform: "ensemble" ensemble_scheduling { step { model_name: "a" input_map { key: "i" value: "other" } output_map { key: "o" value: "y" } output_map { key: "p" value: "extra" } } }',
      ),
      "config.pbtxt: ensemble input 'x' is not used by any step; ensemble output 'y' is not written: a tensor it depends on is never produced; ensemble tensor 'extra' is unused; ensemble_scheduling step 0: input tensor(s) 'other' are never produced",
    );
    invalid(
      withIo('platform: "ensemble" ensemble_scheduling { step { model_name: "a" input_map { key: "i" value: "x" } output_map { key: "o" value: "t" } } }'),
      "config.pbtxt: ensemble output 'y' is not produced by any step; ensemble tensor 't' is unused",
    );
    invalid(
      withIo(
        'platform: "ensemble" ensemble_scheduling { step [ { model_name: "a" input_map { key: "i" value: "x" } output_map { key: "o" value: "y" } }, { model_name: "b" input_map { key: "i" value: "x" } output_map { key: "o" value: "y" } } ] }',
      ),
      "config.pbtxt: ensemble tensor 'y' appears in more than one output_map (step 1)",
    );
  });

  test('instance groups: no gpus for KIND_CPU (qa invalid_cpu), no negative ids or counts', () => {
    invalid(withIo('instance_group [ { kind: KIND_CPU gpus: [ 0 ] } ]'), "config.pbtxt: instance_group 'm_0': kind KIND_CPU must not list gpus");
    invalid(
      withIo('instance_group [ { kind: KIND_GPU gpus: [ -1 ] count: -1 } ]'),
      "config.pbtxt: instance_group 'm_0': gpu ids must be >= 0, got [-1]; instance_group 'm_0': count must be >= 0, got -1",
    );
  });

  test('model_warmup: batch_size >= 1, == 1 without batching, a data source, a data type', () => {
    const warmup = (batch: number, value: string): string => `model_warmup { name: "w" batch_size: ${batch} inputs { key: "x" value { ${value} } } }`;
    invalid(withIo(warmup(0, 'data_type: TYPE_FP32 dims: 4 zero_data: true')), "config.pbtxt: model_warmup 'w': batch_size must be >= 1, got 0");
    invalid(
      withIo(warmup(2, 'data_type: TYPE_FP32 dims: 4 zero_data: true'), 0),
      "config.pbtxt: model_warmup 'w': batch_size must be 1 for a model with max_batch_size 0, got 2",
    );
    invalid(
      withIo(warmup(9, 'data_type: TYPE_FP32 dims: 4 zero_data: true'), 8),
      "config.pbtxt: model_warmup 'w': batch_size 9 is larger than max_batch_size 8",
    );
    invalid(
      withIo(warmup(1, 'dims: [ -1 ]')),
      "config.pbtxt: model_warmup 'w': input 'x': must specify 'data_type' (missing or TYPE_INVALID); model_warmup 'w': input 'x': dims must be fixed (>= 0), got [-1]; model_warmup 'w': input 'x': must set one of zero_data, random_data or input_data_file",
    );
  });

  test('response cache conflicts', () => {
    invalid(
      withIo('response_cache { enable: true } model_transaction_policy { decoupled: true }'),
      'config.pbtxt: response_cache cannot be enabled for a decoupled model',
    );
    invalid(withIo('response_cache { enable: true } sequence_batching { }'), 'config.pbtxt: response_cache cannot be enabled with sequence_batching');
  });

  test('platform/backend pair', () => {
    invalid(
      withIo('platform: "onnxruntime_onnx" backend: "tensorflow"'),
      "config.pbtxt: platform 'onnxruntime_onnx' requires backend 'onnxruntime', got 'tensorflow'",
    );
  });

  test('all problems are reported together, and the error names the model', () => {
    assert.throws(
      () =>
        load(
          `name: "bad"
max_batch_size: 2
input { name: "a" dims: [ ] }
input { name: "a" data_type: TYPE_FP32 dims: [ 1 ] }
dynamic_batching { preferred_batch_size: [ 4 ] }`,
          'bad',
        ),
      (err: unknown) => {
        assert.ok(err instanceof ServingError);
        assert.equal(err.model, 'bad');
        assert.equal(
          err.message,
          "config.pbtxt: input 'a': must specify 'data_type' (missing or TYPE_INVALID); duplicate input name 'a'; dynamic_batching: preferred_batch_size 4 is larger than max_batch_size 2",
        );
        return true;
      },
    );
  });

  test('syntax errors carry line and column', () => {
    invalid(
      'name: "m"\ninput {\n  name: "x"\n  datatype: TYPE_FP32\n}',
      "config.pbtxt:4:3: unknown field 'datatype' in message ModelInput; did you mean 'data_type'?",
    );
    invalid(
      'version_policy { latest { num_versions: 1 } all { } }',
      "config.pbtxt:1:45: field 'all' is specified along with field 'latest', another member of oneof 'policy_choice'",
    );
    invalid(
      'dynamic_batching { } sequence_batching { }',
      "config.pbtxt:1:22: field 'sequence_batching' is specified along with field 'dynamic_batching', another member of oneof 'scheduling_choice'",
    );
    invalid(
      withIo('model_warmup { name: "w" batch_size: 1 inputs { key: "x" value { data_type: TYPE_FP32 dims: 4 zero_data: true random_data: true } } }'),
      "config.pbtxt:4:111: field 'random_data' is specified along with field 'zero_data', another member of oneof 'input_data_type'",
    );
    invalid('max_batch_size: 8\nmax_batch_size: 4', "config.pbtxt:2:1: non-repeated field 'max_batch_size' is specified more than once (first at 1:1)");
    invalid(
      'input { name: "x" data_type: TYPE_FLOAT32 }',
      "config.pbtxt:1:30: unknown value 'TYPE_FLOAT32' for enum DataType of field 'data_type' (expected one of TYPE_INVALID, TYPE_BOOL, TYPE_UINT8, TYPE_UINT16, TYPE_UINT32, TYPE_UINT64, TYPE_INT8, TYPE_INT16, TYPE_INT32, TYPE_INT64, TYPE_FP16, TYPE_FP32, TYPE_FP64, TYPE_STRING, TYPE_BF16)",
    );
  });
});

describe('model config: JSON input', () => {
  test('a JSON-form config (load-API override): camelCase, int64 strings, lower-case enums', () => {
    const c = modelConfigFromJson(
      {
        name: 'j',
        backend: 'onnxruntime',
        maxBatchSize: 4,
        input: [{ name: 'x', data_type: 'type_fp32', dims: ['-1', 3] }],
        output: [{ name: 'y', dataType: 11, dims: [3] }],
        dynamic_batching: { max_queue_delay_microseconds: '100' },
      },
      { sourceName: 'load request', directoryName: 'j' },
    );
    assert.deepEqual(
      c.input.map((t) => [t.name, t.dataType, t.dims]),
      [['x', 'FP32', [-1, 3]]],
    );
    assert.deepEqual(
      c.output.map((t) => t.dataType),
      ['FP32'],
    );
    assert.equal(c.dynamicBatching?.maxQueueDelayMicroseconds, 100);
    assert.deepEqual(c.dynamicBatching?.preferredBatchSize, [4]);
    assert.equal(c.platform, 'onnxruntime_onnx');
  });

  test('the KServe doc example with inputs/datatype/shape is rejected, naming the fields', () => {
    assert.throws(() => modelConfigFromJson({ name: 'j', inputs: [{ name: 'x', datatype: 'FP32', shape: [1] }] }, { sourceName: 'load request' }), {
      message: "load request: inputs: unknown field 'inputs' in message ModelConfig; did you mean 'input'?",
    });
    assert.throws(() => modelConfigFromJson({ input: [{ name: 'x', datatype: 'FP32', dims: 'x' }] }, { sourceName: 'load request', directoryName: 'j' }), {
      message:
        "load request: input[0].datatype: unknown field 'datatype' in message ModelInput; did you mean 'data_type'?; input[0].dims: expected an array (repeated int64), found string \"x\"",
    });
  });

  test('the text parsed against the schema is the config as written, before normalisation (auto-complete input)', () => {
    const raw = parseTextFormat('platform: "onnxruntime_onnx" max_batch_size: 4 dynamic_batching { }', ModelConfigDescriptor, SOURCE);
    assert.equal(raw['backend'], '');
    assert.equal(raw['version_policy'], undefined);
    assert.deepEqual(raw['instance_group'], []);
    assert.deepEqual((raw['dynamic_batching'] as Record<string, unknown>)['preferred_batch_size'], []);
    assert.equal(Object.isFrozen(raw), false);
    // …and modelConfigFromJson of it is what parseModelConfig gives.
    assert.deepEqual(
      modelConfigFromJson(raw, { sourceName: SOURCE, directoryName: 'm' }),
      load('platform: "onnxruntime_onnx" max_batch_size: 4 dynamic_batching { }', 'm'),
    );
  });

  test('an empty config.pbtxt is all defaults', () => {
    const c = load('', 'empty');
    assert.equal(c.name, 'empty');
    assert.deepEqual([c.input, c.output, c.maxBatchSize], [[], [], 0]);
  });
});
