/**
 * The field-support table (config/field-support.ts) against Triton's own
 * proto: every field of inference.ModelConfig has a verdict, every verdict
 * names a real field, and each ignored/refused entry is really reported by
 * the reader the loader and `onnx-mme validate` use.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FIELD_SUPPORT, fieldFindings, supportOf } from '../../../src/config/field-support.js';
import { readModelConfigDraft, modelConfigDraftFromJson } from '../../../src/config/model-config-draft.js';
import { ModelConfigDescriptor } from '../../../src/config/model-config-schema.js';
import { decodeJsonForm, type FieldDescriptor, type MessageDescriptor, type ValueKind } from '../../../src/config/pbtxt/schema.js';
import { ServingError } from '../../../src/errors.js';

/**
 * Every field path of ModelConfig, in declaration order, written out from
 * triton-inference-server/common protobuf/model_config.proto (commit 83adf7c):
 * nested messages walked, map values (messages) walked under the map's name.
 * When Triton adds a field, add it here; the test then says where the table needs it.
 */
const TRITON_MODEL_CONFIG_FIELDS: readonly string[] = [
  'name',
  'platform',
  'backend',
  'runtime',
  'version_policy',
  'version_policy.latest',
  'version_policy.latest.num_versions',
  'version_policy.all',
  'version_policy.specific',
  'version_policy.specific.versions',
  'max_batch_size',
  'input',
  'input.name',
  'input.data_type',
  'input.format',
  'input.dims',
  'input.reshape',
  'input.reshape.shape',
  'input.is_shape_tensor',
  'input.allow_ragged_batch',
  'input.optional',
  'input.is_non_linear_format_io',
  'output',
  'output.name',
  'output.data_type',
  'output.dims',
  'output.reshape',
  'output.reshape.shape',
  'output.label_filename',
  'output.is_shape_tensor',
  'output.is_non_linear_format_io',
  'batch_input',
  'batch_input.kind',
  'batch_input.target_name',
  'batch_input.data_type',
  'batch_input.source_input',
  'batch_output',
  'batch_output.target_name',
  'batch_output.kind',
  'batch_output.source_input',
  'optimization',
  'optimization.graph',
  'optimization.graph.level',
  'optimization.priority',
  'optimization.cuda',
  'optimization.cuda.graphs',
  'optimization.cuda.busy_wait_events',
  'optimization.cuda.graph_spec',
  'optimization.cuda.graph_spec.batch_size',
  'optimization.cuda.graph_spec.input',
  'optimization.cuda.graph_spec.input.dim',
  'optimization.cuda.graph_spec.graph_lower_bound',
  'optimization.cuda.graph_spec.graph_lower_bound.batch_size',
  'optimization.cuda.graph_spec.graph_lower_bound.input',
  'optimization.cuda.graph_spec.graph_lower_bound.input.dim',
  'optimization.cuda.output_copy_stream',
  'optimization.execution_accelerators',
  'optimization.execution_accelerators.gpu_execution_accelerator',
  'optimization.execution_accelerators.gpu_execution_accelerator.name',
  'optimization.execution_accelerators.gpu_execution_accelerator.parameters',
  'optimization.execution_accelerators.cpu_execution_accelerator',
  'optimization.execution_accelerators.cpu_execution_accelerator.name',
  'optimization.execution_accelerators.cpu_execution_accelerator.parameters',
  'optimization.input_pinned_memory',
  'optimization.input_pinned_memory.enable',
  'optimization.output_pinned_memory',
  'optimization.output_pinned_memory.enable',
  'optimization.gather_kernel_buffer_threshold',
  'optimization.eager_batching',
  'dynamic_batching',
  'dynamic_batching.preferred_batch_size',
  'dynamic_batching.max_queue_delay_microseconds',
  'dynamic_batching.preserve_ordering',
  'dynamic_batching.priority_levels',
  'dynamic_batching.default_priority_level',
  'dynamic_batching.default_queue_policy',
  'dynamic_batching.default_queue_policy.timeout_action',
  'dynamic_batching.default_queue_policy.default_timeout_microseconds',
  'dynamic_batching.default_queue_policy.allow_timeout_override',
  'dynamic_batching.default_queue_policy.max_queue_size',
  'dynamic_batching.priority_queue_policy',
  'dynamic_batching.priority_queue_policy.timeout_action',
  'dynamic_batching.priority_queue_policy.default_timeout_microseconds',
  'dynamic_batching.priority_queue_policy.allow_timeout_override',
  'dynamic_batching.priority_queue_policy.max_queue_size',
  'sequence_batching',
  'sequence_batching.direct',
  'sequence_batching.direct.max_queue_delay_microseconds',
  'sequence_batching.direct.minimum_slot_utilization',
  'sequence_batching.oldest',
  'sequence_batching.oldest.max_candidate_sequences',
  'sequence_batching.oldest.preferred_batch_size',
  'sequence_batching.oldest.max_queue_delay_microseconds',
  'sequence_batching.oldest.preserve_ordering',
  'sequence_batching.max_sequence_idle_microseconds',
  'sequence_batching.control_input',
  'sequence_batching.control_input.name',
  'sequence_batching.control_input.control',
  'sequence_batching.control_input.control.kind',
  'sequence_batching.control_input.control.int32_false_true',
  'sequence_batching.control_input.control.fp32_false_true',
  'sequence_batching.control_input.control.bool_false_true',
  'sequence_batching.control_input.control.data_type',
  'sequence_batching.state',
  'sequence_batching.state.input_name',
  'sequence_batching.state.output_name',
  'sequence_batching.state.data_type',
  'sequence_batching.state.dims',
  'sequence_batching.state.initial_state',
  'sequence_batching.state.initial_state.data_type',
  'sequence_batching.state.initial_state.dims',
  'sequence_batching.state.initial_state.zero_data',
  'sequence_batching.state.initial_state.data_file',
  'sequence_batching.state.initial_state.name',
  'sequence_batching.state.use_same_buffer_for_input_output',
  'sequence_batching.state.use_growable_memory',
  'sequence_batching.iterative_sequence',
  'ensemble_scheduling',
  'ensemble_scheduling.step',
  'ensemble_scheduling.step.model_name',
  'ensemble_scheduling.step.model_version',
  'ensemble_scheduling.step.input_map',
  'ensemble_scheduling.step.output_map',
  'ensemble_scheduling.step.model_namespace',
  'ensemble_scheduling.max_inflight_requests',
  'instance_group',
  'instance_group.name',
  'instance_group.kind',
  'instance_group.count',
  'instance_group.rate_limiter',
  'instance_group.rate_limiter.resources',
  'instance_group.rate_limiter.resources.name',
  'instance_group.rate_limiter.resources.global',
  'instance_group.rate_limiter.resources.count',
  'instance_group.rate_limiter.priority',
  'instance_group.gpus',
  'instance_group.secondary_devices',
  'instance_group.secondary_devices.kind',
  'instance_group.secondary_devices.device_id',
  'instance_group.profile',
  'instance_group.passive',
  'instance_group.host_policy',
  'default_model_filename',
  'cc_model_filenames',
  'metric_tags',
  'parameters',
  'parameters.string_value',
  'model_warmup',
  'model_warmup.name',
  'model_warmup.batch_size',
  'model_warmup.inputs',
  'model_warmup.inputs.data_type',
  'model_warmup.inputs.dims',
  'model_warmup.inputs.zero_data',
  'model_warmup.inputs.random_data',
  'model_warmup.inputs.input_data_file',
  'model_warmup.count',
  'model_operations',
  'model_operations.op_library_filename',
  'model_transaction_policy',
  'model_transaction_policy.decoupled',
  'model_repository_agents',
  'model_repository_agents.agents',
  'model_repository_agents.agents.name',
  'model_repository_agents.agents.parameters',
  'response_cache',
  'response_cache.enable',
  'model_metrics',
  'model_metrics.metric_control',
  'model_metrics.metric_control.metric_identifier',
  'model_metrics.metric_control.metric_identifier.family',
  'model_metrics.metric_control.histogram_options',
  'model_metrics.metric_control.histogram_options.buckets',
];

/** The same walk over our schema descriptor (config/model-config-schema.ts). */
function schemaPaths(message: MessageDescriptor, prefix = ''): string[] {
  const out: string[] = [];
  for (const f of message.fields) {
    const path = prefix + f.name;
    out.push(path);
    const inner = f.kind.type === 'message' ? f.kind.message : f.kind.type === 'map' && f.kind.value.type === 'message' ? f.kind.value.message : undefined;
    if (inner) out.push(...schemaPaths(inner, `${path}.`));
  }
  return out;
}

function fieldAt(path: string): FieldDescriptor {
  let message: MessageDescriptor | undefined = ModelConfigDescriptor;
  let found: FieldDescriptor | undefined;
  for (const part of path.split('.')) {
    found = message?.fields.find((f) => f.name === part);
    assert.ok(found, `no field ${path}`);
    message =
      found.kind.type === 'message'
        ? found.kind.message
        : found.kind.type === 'map' && found.kind.value.type === 'message'
          ? found.kind.value.message
          : undefined;
  }
  return found!;
}

/** A value that counts as "set" for a field (not its proto3 default). */
function setValue(kind: ValueKind): unknown {
  if (kind.type === 'scalar') return kind.scalar === 'bool' ? true : kind.scalar === 'string' ? 'x' : 1;
  if (kind.type === 'enum') return kind.enum.values[1]?.name ?? kind.enum.values[0]!.name;
  return {};
}

/** A JSON-form config whose only set field is `path` (parents as needed: repeated → one element, map → one key). */
function configSetting(path: string): Record<string, unknown> {
  const parts = path.split('.');
  let value: unknown;
  const leaf = fieldAt(path);
  const kind = leaf.kind.type === 'map' ? leaf.kind.value : leaf.kind;
  value = setValue(kind);
  if (leaf.kind.type === 'map') value = { k: value };
  else if (leaf.repeated) value = [value];
  for (let i = parts.length - 1; i >= 0; i--) {
    const obj: Record<string, unknown> = { [parts[i]!]: value };
    if (i === 0) return obj;
    const parent = fieldAt(parts.slice(0, i).join('.'));
    value = parent.kind.type === 'map' ? { k: obj } : parent.repeated ? [obj] : obj;
  }
  throw new Error('unreachable');
}

describe('config field support table', () => {
  test("our schema has exactly the fields of Triton's model_config.proto", () => {
    assert.deepEqual(schemaPaths(ModelConfigDescriptor), TRITON_MODEL_CONFIG_FIELDS);
  });

  test('every field of model_config.proto has a verdict: its own entry, or an ignored/refused block around it', () => {
    const missing = TRITON_MODEL_CONFIG_FIELDS.filter((p) => {
      if (FIELD_SUPPORT.has(p)) return false;
      const decided = supportOf(p);
      return decided === undefined || decided.support.status === 'served';
    });
    assert.deepEqual(missing, [], `fields without a verdict in config/field-support.ts: ${missing.join(', ')}`);
  });

  test('every table entry names a real field and has a note', () => {
    for (const [path, support] of FIELD_SUPPORT) {
      assert.ok(TRITON_MODEL_CONFIG_FIELDS.includes(path), `table entry '${path}' is not a ModelConfig field`);
      assert.ok(support.note.length > 5, path);
      assert.equal(support.when === undefined, support.whenText === undefined, path);
    }
  });

  test('the fields the issue names are refused: decoupled, repository agents; sequence_batching is served (issue 20)', () => {
    for (const p of ['model_transaction_policy.decoupled', 'model_repository_agents', 'sequence_batching.iterative_sequence']) {
      assert.equal(FIELD_SUPPORT.get(p)?.status, 'refused', p);
    }
    assert.equal(FIELD_SUPPORT.get('sequence_batching')?.status, 'served');
  });

  test("fields Triton's onnxruntime backend never reads are ignored, not refused: cuda graphs and their shapes (issue 29)", () => {
    for (const p of ['optimization.cuda.graphs', 'optimization.cuda.graph_spec']) {
      assert.equal(FIELD_SUPPORT.get(p)?.status, 'ignored', p);
      assert.match(FIELD_SUPPORT.get(p)!.note, /onnxruntime backend never reads it/, p);
    }
  });

  for (const [path, support] of FIELD_SUPPORT) {
    if (support.status === 'served') continue;
    test(`${support.status}: ${path}`, () => {
      const json = configSetting(path);
      const findings = fieldFindings(decodeJsonForm(json, ModelConfigDescriptor, 't'));
      assert.deepEqual(findings, [{ path, status: support.status, note: support.note }]);
      if (support.status === 'refused') {
        assert.throws(
          () => modelConfigDraftFromJson(json, { sourceName: 'm/config.pbtxt', directoryName: 'm' }),
          (err: unknown) =>
            err instanceof ServingError &&
            err.code === 'INVALID_MODEL' &&
            err.message.includes(`field '${path}' is not supported by onnx-mme: ${support.note}`),
        );
      } else {
        const draft = modelConfigDraftFromJson(json, { sourceName: 'm/config.pbtxt', directoryName: 'm' });
        assert.deepEqual(
          draft.ignoredFields.map((f) => f.path),
          [path],
        );
      }
    });
  }

  test('values outside `when` are served: decoupled false, runtime libtriton_onnxruntime.so, pinned memory on', () => {
    const draft = readModelConfigDraft(
      `runtime: "libtriton_onnxruntime.so"
model_transaction_policy { decoupled: false }
optimization { input_pinned_memory { enable: true } cuda { graphs: false } }
input [ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] allow_ragged_batch: false } ]`,
      { sourceName: 'm/config.pbtxt', directoryName: 'm' },
    );
    assert.deepEqual(draft.ignoredFields, []);
  });

  test('a refused config lists every refused field in one error, naming the model', () => {
    assert.throws(
      () =>
        readModelConfigDraft(
          `name: "vad"
sequence_batching { iterative_sequence: true state [ { input_name: "state" output_name: "stateN" data_type: TYPE_FP32 dims: [ 2, 1, 128 ] } ] }
model_transaction_policy { decoupled: true }`,
          { sourceName: 'vad/config.pbtxt', directoryName: 'vad' },
        ),
      (err: unknown) =>
        err instanceof ServingError &&
        err.code === 'INVALID_MODEL' &&
        err.model === 'vad' &&
        /^vad\/config\.pbtxt: field 'sequence_batching\.iterative_sequence' is not supported .*; field 'model_transaction_policy\.decoupled' is not supported/.test(
          err.message,
        ),
    );
  });

  test('fields inside a served block are judged one by one; inside an ignored block, once', () => {
    const draft = readModelConfigDraft(
      `instance_group [ { count: 1 rate_limiter { resources [ { name: "R" count: 1 } ] } }, { count: 1 rate_limiter { priority: 2 } host_policy: "numa0" } ]
metric_tags { key: "team" value: "a" }`,
      { sourceName: 'm/config.pbtxt', directoryName: 'm' },
    );
    assert.deepEqual(
      draft.ignoredFields.map((f) => f.path),
      ['instance_group.rate_limiter', 'instance_group.host_policy', 'metric_tags'],
    );
  });
});
