/**
 * @module test/unit/ensemble/execution-plan
 * ensemblePlan validation (every problem, all reported in one error), the
 * topological order of a valid plan, and singleModelPlan's identity maps.
 * Step models are small fake schedulers; configs come from modelConfigFromJson
 * where the config itself is valid, and are derived from a valid one where the
 * broken wiring would already be refused by config validation.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { modelConfigFromJson } from '../../../src/config/model-config.js';
import type { EnsembleStepConfig, ModelConfig, TensorConfig } from '../../../src/config/model-config-types.js';
import { ensemblePlan, singleModelPlan, type StepModel } from '../../../src/ensemble/execution-plan.js';
import { ServingError } from '../../../src/errors.js';
import type { DataType } from '../../../src/protocol/tensor.js';
import type { ModelScheduler } from '../../../src/scheduler/model-scheduler.js';

type Io = [name: string, dataType: DataType, optional?: boolean];

const CONFIG_TYPE: Readonly<Record<string, string>> = { FP32: 'TYPE_FP32', INT32: 'TYPE_INT32', INT64: 'TYPE_INT64' };

function tensorJson([name, dataType, optional]: Io): Record<string, unknown> {
  return { name, data_type: CONFIG_TYPE[dataType], dims: [-1], ...(optional ? { optional: true } : {}) };
}

function onnxConfig(name: string, inputs: Io[], outputs: Io[]): ModelConfig {
  return modelConfigFromJson(
    { name, platform: 'onnxruntime_onnx', max_batch_size: 0, input: inputs.map(tensorJson), output: outputs.map(tensorJson) },
    { sourceName: `${name}/config.pbtxt`, directoryName: name },
  );
}

function scheduler(label: string): ModelScheduler & { label: string } {
  return {
    label,
    schedule: async () => {
      throw new Error(`${label} should not run in plan-building tests`);
    },
    close: async () => {},
  };
}

function stepModel(config: ModelConfig, version = 1): StepModel {
  return { config, version, scheduler: scheduler(config.name) };
}

const MODELS: ReadonlyMap<string, StepModel> = new Map([
  ['scale2', stepModel(onnxConfig('scale2', [['x', 'FP32']], [['y', 'FP32']]))],
  ['scale3', stepModel(onnxConfig('scale3', [['x', 'FP32']], [['y', 'FP32']]), 4)],
  [
    'add',
    stepModel(
      onnxConfig(
        'add',
        [
          ['a', 'FP32'],
          ['b', 'FP32'],
        ],
        [['sum', 'FP32']],
      ),
    ),
  ],
  [
    'split',
    stepModel(
      onnxConfig(
        'split',
        [['x', 'FP32']],
        [
          ['p', 'FP32'],
          ['q', 'FP32'],
        ],
      ),
    ),
  ],
  [
    'masked',
    stepModel(
      onnxConfig(
        'masked',
        [
          ['x', 'FP32'],
          ['mask', 'FP32', true],
        ],
        [['y', 'FP32']],
      ),
    ),
  ],
  ['to_int', stepModel(onnxConfig('to_int', [['x', 'FP32']], [['y', 'INT32']]))],
]);

/** Resolve (name, version): version -1 = whatever is loaded, else it must match. */
function resolve(name: string, version: number): StepModel | undefined {
  const m = MODELS.get(name);
  return m && (version === -1 || version === m.version) ? m : undefined;
}

type Step = [model: string, inputMap: Record<string, string>, outputMap: Record<string, string>, version?: number];

function stepJson([model_name, input_map, output_map, version]: Step): Record<string, unknown> {
  return { model_name, model_version: version ?? -1, input_map, output_map };
}

/** A valid ensemble config, built and validated by modelConfigFromJson. */
function validEnsemble(inputs: Io[], outputs: Io[], steps: Step[]): ModelConfig {
  return modelConfigFromJson(
    {
      name: 'ens',
      platform: 'ensemble',
      max_batch_size: 0,
      input: inputs.map(tensorJson),
      output: outputs.map(tensorJson),
      ensemble_scheduling: { step: steps.map(stepJson) },
    },
    { sourceName: 'ens/config.pbtxt', directoryName: 'ens' },
  );
}

function tensorConfig([name, dataType, optional]: Io): TensorConfig {
  return {
    name,
    dataType,
    dims: [-1],
    reshape: undefined,
    format: 'FORMAT_NONE',
    optional: optional ?? false,
    allowRaggedBatch: false,
    labelFilename: undefined,
  };
}

const BASE = validEnsemble([['IN', 'FP32']], [['OUT', 'FP32']], [['scale2', { x: 'IN' }, { y: 'OUT' }]]);

/** An ensemble config with arbitrary wiring, bypassing config validation (which would refuse some of these). */
function ensemble(inputs: Io[], outputs: Io[], steps: Step[]): ModelConfig {
  const ensembleSteps: EnsembleStepConfig[] = steps.map(([modelName, inputMap, outputMap, version]) => ({
    modelName,
    modelVersion: version ?? -1,
    inputMap,
    outputMap,
  }));
  return { ...BASE, input: inputs.map(tensorConfig), output: outputs.map(tensorConfig), ensembleSteps };
}

function invalid(config: ModelConfig, problems: string[]): void {
  assert.throws(
    () => ensemblePlan(config, resolve),
    (err: unknown) => {
      assert.ok(err instanceof ServingError);
      assert.equal(err.code, 'INVALID_MODEL');
      assert.equal(err.model, undefined);
      assert.equal(err.message, `ensemble 'ens' is invalid: ${problems.join('; ')}`);
      return true;
    },
  );
}

const DIAMOND_STEPS: Step[] = [
  ['add', { a: 'T3', b: 'T4' }, { sum: 'OUT' }],
  ['scale3', { x: 'T2' }, { y: 'T4' }],
  ['scale2', { x: 'T1' }, { y: 'T3' }],
  ['split', { x: 'IN' }, { p: 'T1', q: 'T2' }],
];

describe('ensemblePlan: valid plans', () => {
  test('a diamond listed out of order is sorted so every step follows its producers', () => {
    const plan = ensemblePlan(validEnsemble([['IN', 'FP32']], [['OUT', 'FP32']], DIAMOND_STEPS), resolve);
    assert.equal(plan.entry, 'ens');
    assert.deepEqual(
      plan.steps.map((s) => [s.index, s.modelName]),
      [
        [3, 'split'],
        [1, 'scale3'],
        [2, 'scale2'],
        [0, 'add'],
      ],
    );
    const seen = new Set(['IN']);
    for (const s of plan.steps) {
      for (const t of s.inputMap.values()) assert.ok(seen.has(t), `step ${s.index} reads ${t} before it exists`);
      for (const t of s.outputMap.values()) seen.add(t);
    }
    assert.ok(Object.isFrozen(plan));
    assert.ok(Object.isFrozen(plan.steps));
  });

  test('steps carry the resolved version, the model scheduler and the maps', () => {
    const plan = ensemblePlan(validEnsemble([['IN', 'FP32']], [['OUT', 'FP32']], [['scale3', { x: 'IN' }, { y: 'OUT' }]]), resolve);
    const step = plan.steps[0]!;
    assert.equal(step.version, 4);
    assert.equal(step.scheduler, MODELS.get('scale3')!.scheduler);
    assert.deepEqual([...step.inputMap], [['x', 'IN']]);
    assert.deepEqual([...step.outputMap], [['y', 'OUT']]);
  });

  test('an explicit step version that exists is accepted', () => {
    const plan = ensemblePlan(validEnsemble([['IN', 'FP32']], [['OUT', 'FP32']], [['scale3', { x: 'IN' }, { y: 'OUT' }, 4]]), resolve);
    assert.equal(plan.steps[0]!.version, 4);
  });

  test('an optional step input may stay unmapped', () => {
    assert.doesNotThrow(() => ensemblePlan(validEnsemble([['IN', 'FP32']], [['OUT', 'FP32']], [['masked', { x: 'IN' }, { y: 'OUT' }]]), resolve));
  });

  test('an ensemble tensor may feed several steps and also be an ensemble output', () => {
    const config = validEnsemble(
      [['IN', 'FP32']],
      [
        ['MID', 'FP32'],
        ['OUT', 'FP32'],
      ],
      [
        ['scale2', { x: 'IN' }, { y: 'MID' }],
        ['add', { a: 'MID', b: 'MID' }, { sum: 'OUT' }],
      ],
    );
    assert.deepEqual(
      ensemblePlan(config, resolve).steps.map((s) => s.modelName),
      ['scale2', 'add'],
    );
  });
});

describe('ensemblePlan: problems', () => {
  test('a step model the package lacks (any version, or a given version)', () => {
    invalid(ensemble([['IN', 'FP32']], [['OUT', 'FP32']], [['nope', { x: 'IN' }, { y: 'OUT' }]]), [
      "step 0 (model 'nope'): the package has no model 'nope'",
      "output 'OUT' for ensemble 'ens' is not written by any step",
      "ensemble input 'IN' is not used by any step",
    ]);
    invalid(ensemble([['IN', 'FP32']], [['OUT', 'FP32']], [['scale3', { x: 'IN' }, { y: 'OUT' }, 5]]), [
      "step 0 (model 'scale3'): the package has no model 'scale3' version 5",
      "output 'OUT' for ensemble 'ens' is not written by any step",
      "ensemble input 'IN' is not used by any step",
    ]);
  });

  test('a required step input that is not mapped', () => {
    invalid(ensemble([['IN', 'FP32']], [['OUT', 'FP32']], [['add', { a: 'IN' }, { sum: 'OUT' }]]), [
      "step 0 (model 'add'): input 'b' is not mapped to any ensemble tensor",
    ]);
  });

  test('map keys that are not inputs / outputs of the step model', () => {
    invalid(ensemble([['IN', 'FP32']], [['OUT', 'FP32']], [['scale2', { x: 'IN', z: 'IN' }, { y: 'OUT', w: 'OTHER' }]]), [
      "step 0 (model 'scale2'): input_map names 'z', which is not an input of 'scale2'",
      "step 0 (model 'scale2'): output_map names 'w', which is not an output of 'scale2'",
    ]);
  });

  test('a tensor produced twice (by two steps, or by a step and the ensemble input)', () => {
    invalid(
      ensemble(
        [['IN', 'FP32']],
        [['OUT', 'FP32']],
        [
          ['scale2', { x: 'IN' }, { y: 'OUT' }],
          ['scale3', { x: 'IN' }, { y: 'OUT' }],
        ],
      ),
      ["ensemble tensor 'OUT' is produced twice: by step 0 (model 'scale2') and by step 1 (model 'scale3')"],
    );
    invalid(
      ensemble(
        [['IN', 'FP32']],
        [['OUT', 'FP32']],
        [
          ['scale2', { x: 'IN' }, { y: 'IN' }],
          ['scale3', { x: 'IN' }, { y: 'OUT' }],
        ],
      ),
      ["ensemble tensor 'IN' is produced twice: by ensemble input 'IN' and by step 0 (model 'scale2')"],
    );
  });

  test('a consumed tensor that no one produces', () => {
    invalid(ensemble([['IN', 'FP32']], [['OUT', 'FP32']], [['add', { a: 'IN', b: 'GHOST' }, { sum: 'OUT' }]]), [
      "step 0 (model 'add'): ensemble tensor 'GHOST' has no producer",
    ]);
  });

  test('datatype mismatch between producer and consumer, and at an ensemble output', () => {
    invalid(ensemble([['IN', 'INT32']], [['OUT', 'FP32']], [['scale2', { x: 'IN' }, { y: 'OUT' }]]), [
      "ensemble tensor 'IN': inconsistent data type, ensemble input 'IN' gives INT32 but step 0 (model 'scale2') input 'x' expects FP32",
    ]);
    invalid(
      ensemble(
        [['IN', 'FP32']],
        [['OUT', 'FP32']],
        [
          ['to_int', { x: 'IN' }, { y: 'MID' }],
          ['scale2', { x: 'MID' }, { y: 'OUT' }],
        ],
      ),
      ["ensemble tensor 'MID': inconsistent data type, step 0 (model 'to_int') gives INT32 but step 1 (model 'scale2') input 'x' expects FP32"],
    );
    invalid(ensemble([['IN', 'FP32']], [['OUT', 'INT64']], [['scale2', { x: 'IN' }, { y: 'OUT' }]]), [
      "output 'OUT': step 0 (model 'scale2') gives FP32 but the ensemble declares INT64",
    ]);
  });

  test('an ensemble input no step uses', () => {
    invalid(
      ensemble(
        [
          ['IN', 'FP32'],
          ['EXTRA', 'FP32'],
        ],
        [['OUT', 'FP32']],
        [['scale2', { x: 'IN' }, { y: 'OUT' }]],
      ),
      ["ensemble input 'EXTRA' is not used by any step"],
    );
  });

  test('an ensemble output no step writes', () => {
    invalid(
      ensemble(
        [['IN', 'FP32']],
        [
          ['OUT', 'FP32'],
          ['MISSING', 'FP32'],
        ],
        [['scale2', { x: 'IN' }, { y: 'OUT' }]],
      ),
      ["output 'MISSING' for ensemble 'ens' is not written by any step"],
    );
  });

  test('a cycle between steps', () => {
    invalid(
      ensemble(
        [['IN', 'FP32']],
        [['OUT', 'FP32']],
        [
          ['add', { a: 'IN', b: 'T2' }, { sum: 'T1' }],
          ['split', { x: 'T1' }, { p: 'T2', q: 'OUT' }],
        ],
      ),
      ["steps 0 ('add'), 1 ('split') form a cycle"],
    );
  });

  test('a step that feeds itself is a cycle', () => {
    invalid(
      ensemble(
        [['IN', 'FP32']],
        [['OUT', 'FP32']],
        [
          ['add', { a: 'IN', b: 'LOOP' }, { sum: 'LOOP' }],
          ['scale2', { x: 'LOOP' }, { y: 'OUT' }],
        ],
      ),
      ["steps 0 ('add'), 1 ('scale2') form a cycle"],
    );
  });

  test('every problem is reported in one error', () => {
    invalid(
      ensemble(
        [
          ['IN', 'FP32'],
          ['IDS', 'INT32'],
          ['EXTRA', 'FP32'],
        ],
        [
          ['OUT', 'FP32'],
          ['MISSING', 'FP32'],
        ],
        [
          ['nope', { x: 'IN' }, { y: 'T0' }],
          ['add', { a: 'IN' }, { sum: 'T1' }],
          ['scale2', { x: 'IDS' }, { y: 'OUT' }],
          ['scale3', { x: 'GHOST' }, { y: 'T1' }],
        ],
      ),
      [
        "step 0 (model 'nope'): the package has no model 'nope'",
        "step 1 (model 'add'): input 'b' is not mapped to any ensemble tensor",
        "ensemble tensor 'T1' is produced twice: by step 1 (model 'add') and by step 3 (model 'scale3')",
        "ensemble tensor 'IDS': inconsistent data type, ensemble input 'IDS' gives INT32 but step 2 (model 'scale2') input 'x' expects FP32",
        "step 3 (model 'scale3'): ensemble tensor 'GHOST' has no producer",
        "output 'MISSING' for ensemble 'ens' is not written by any step",
        "ensemble input 'EXTRA' is not used by any step",
      ],
    );
  });
});

describe('singleModelPlan', () => {
  test('one step with identity maps over the config inputs and outputs', () => {
    const model = MODELS.get('split')!;
    const plan = singleModelPlan('split', { ...model, version: 7 });
    assert.equal(plan.entry, 'split');
    assert.equal(plan.steps.length, 1);
    const step = plan.steps[0]!;
    assert.equal(step.index, 0);
    assert.equal(step.modelName, 'split');
    assert.equal(step.version, 7);
    assert.equal(step.scheduler, model.scheduler);
    assert.deepEqual([...step.inputMap], [['x', 'x']]);
    assert.deepEqual(
      [...step.outputMap],
      [
        ['p', 'p'],
        ['q', 'q'],
      ],
    );
    assert.ok(Object.isFrozen(plan) && Object.isFrozen(plan.steps) && Object.isFrozen(step));
  });
});
