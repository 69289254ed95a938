/**
 * @module config/model-config-schema
 * The descriptor of Triton's `inference.ModelConfig`, transcribed field by
 * field (names, numbers, types, `repeated`, oneofs, enum values) from
 * triton-inference-server/common `protobuf/model_config.proto`. Every field is
 * here, including those onnx-mme never acts on (sequence batching, batch
 * inputs, rate limiter, CUDA graphs, …), because Triton rejects unknown fields
 * and we must accept any config Triton accepts. When the proto gains a field,
 * add it here in declaration order (the printer writes fields in that order).
 */
import { defineEnum, defineMessage, enumOf, field, mapOf, messageOf, repeated, scalar, type MessageDescriptor } from './pbtxt/schema.js';

const string = scalar('string');
const bool = scalar('bool');
const int32 = scalar('int32');
const int64 = scalar('int64');
const uint32 = scalar('uint32');
const uint64 = scalar('uint64');
const float = scalar('float');
const double = scalar('double');

export const DataTypeEnum = defineEnum('DataType', {
  TYPE_INVALID: 0,
  TYPE_BOOL: 1,
  TYPE_UINT8: 2,
  TYPE_UINT16: 3,
  TYPE_UINT32: 4,
  TYPE_UINT64: 5,
  TYPE_INT8: 6,
  TYPE_INT16: 7,
  TYPE_INT32: 8,
  TYPE_INT64: 9,
  TYPE_FP16: 10,
  TYPE_FP32: 11,
  TYPE_FP64: 12,
  TYPE_STRING: 13,
  TYPE_BF16: 14,
});
const dataType = enumOf(DataTypeEnum);

// ---- ModelRateLimiter / ModelInstanceGroup ----------------------------------

const ModelRateLimiterResource = defineMessage('ModelRateLimiter.Resource', [field('name', 1, string), field('global', 2, bool), field('count', 3, uint32)]);

const ModelRateLimiter = defineMessage('ModelRateLimiter', [repeated('resources', 1, messageOf(ModelRateLimiterResource)), field('priority', 2, uint32)]);

const SecondaryDevice = defineMessage('ModelInstanceGroup.SecondaryDevice', [
  field('kind', 1, enumOf(defineEnum('ModelInstanceGroup.SecondaryDevice.SecondaryDeviceKind', { KIND_NVDLA: 0 }))),
  field('device_id', 2, int64),
]);

export const ModelInstanceGroup = defineMessage('ModelInstanceGroup', [
  field('name', 1, string),
  field('kind', 4, enumOf(defineEnum('ModelInstanceGroup.Kind', { KIND_AUTO: 0, KIND_GPU: 1, KIND_CPU: 2, KIND_MODEL: 3 }))),
  field('count', 2, int32),
  field('rate_limiter', 6, messageOf(ModelRateLimiter)),
  repeated('gpus', 3, int32),
  repeated('secondary_devices', 8, messageOf(SecondaryDevice)),
  repeated('profile', 5, string),
  field('passive', 7, bool),
  field('host_policy', 9, string),
]);

// ---- tensors ----------------------------------------------------------------

const ModelTensorReshape = defineMessage('ModelTensorReshape', [repeated('shape', 1, int64)]);

export const ModelInput = defineMessage('ModelInput', [
  field('name', 1, string),
  field('data_type', 2, dataType),
  field('format', 3, enumOf(defineEnum('ModelInput.Format', { FORMAT_NONE: 0, FORMAT_NHWC: 1, FORMAT_NCHW: 2 }))),
  repeated('dims', 4, int64),
  field('reshape', 5, messageOf(ModelTensorReshape)),
  field('is_shape_tensor', 6, bool),
  field('allow_ragged_batch', 7, bool),
  field('optional', 8, bool),
  field('is_non_linear_format_io', 9, bool),
]);

export const ModelOutput = defineMessage('ModelOutput', [
  field('name', 1, string),
  field('data_type', 2, dataType),
  repeated('dims', 3, int64),
  field('reshape', 5, messageOf(ModelTensorReshape)),
  field('label_filename', 4, string),
  field('is_shape_tensor', 6, bool),
  field('is_non_linear_format_io', 7, bool),
]);

const BatchInput = defineMessage('BatchInput', [
  field(
    'kind',
    1,
    enumOf(
      defineEnum('BatchInput.Kind', {
        BATCH_ELEMENT_COUNT: 0,
        BATCH_ACCUMULATED_ELEMENT_COUNT: 1,
        BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO: 2,
        BATCH_MAX_ELEMENT_COUNT_AS_SHAPE: 3,
        BATCH_ITEM_SHAPE: 4,
        BATCH_ITEM_SHAPE_FLATTEN: 5,
      }),
    ),
  ),
  repeated('target_name', 2, string),
  field('data_type', 3, dataType),
  repeated('source_input', 4, string),
]);

const BatchOutput = defineMessage('BatchOutput', [
  repeated('target_name', 1, string),
  field('kind', 2, enumOf(defineEnum('BatchOutput.Kind', { BATCH_SCATTER_WITH_INPUT_SHAPE: 0 }))),
  repeated('source_input', 3, string),
]);

// ---- version policy ---------------------------------------------------------

const ModelVersionPolicy = defineMessage('ModelVersionPolicy', [
  field('latest', 1, messageOf(defineMessage('ModelVersionPolicy.Latest', [field('num_versions', 1, uint32)])), { oneof: 'policy_choice' }),
  field('all', 2, messageOf(defineMessage('ModelVersionPolicy.All', [])), { oneof: 'policy_choice' }),
  field('specific', 3, messageOf(defineMessage('ModelVersionPolicy.Specific', [repeated('versions', 1, int64)])), {
    oneof: 'policy_choice',
  }),
]);

// ---- optimization -----------------------------------------------------------

const GraphSpecShape = defineMessage('ModelOptimizationPolicy.Cuda.GraphSpec.Shape', [repeated('dim', 1, int64)]);

const GraphSpec = defineMessage('ModelOptimizationPolicy.Cuda.GraphSpec', [
  field('batch_size', 1, int32),
  field('input', 2, mapOf('string', messageOf(GraphSpecShape))),
  field(
    'graph_lower_bound',
    3,
    messageOf(
      defineMessage('ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound', [
        field('batch_size', 1, int32),
        field('input', 2, mapOf('string', messageOf(GraphSpecShape))),
      ]),
    ),
  ),
]);

const Cuda = defineMessage('ModelOptimizationPolicy.Cuda', [
  field('graphs', 1, bool),
  field('busy_wait_events', 2, bool),
  repeated('graph_spec', 3, messageOf(GraphSpec)),
  field('output_copy_stream', 4, bool),
]);

const Accelerator = defineMessage('ModelOptimizationPolicy.ExecutionAccelerators.Accelerator', [
  field('name', 1, string),
  field('parameters', 2, mapOf('string', string)),
]);

const ExecutionAccelerators = defineMessage('ModelOptimizationPolicy.ExecutionAccelerators', [
  repeated('gpu_execution_accelerator', 1, messageOf(Accelerator)),
  repeated('cpu_execution_accelerator', 2, messageOf(Accelerator)),
]);

const PinnedMemoryBuffer = defineMessage('ModelOptimizationPolicy.PinnedMemoryBuffer', [field('enable', 1, bool)]);

const ModelOptimizationPolicy = defineMessage('ModelOptimizationPolicy', [
  field('graph', 1, messageOf(defineMessage('ModelOptimizationPolicy.Graph', [field('level', 1, int32)]))),
  field('priority', 2, enumOf(defineEnum('ModelOptimizationPolicy.ModelPriority', { PRIORITY_DEFAULT: 0, PRIORITY_MAX: 1, PRIORITY_MIN: 2 }))),
  field('cuda', 3, messageOf(Cuda)),
  field('execution_accelerators', 4, messageOf(ExecutionAccelerators)),
  field('input_pinned_memory', 5, messageOf(PinnedMemoryBuffer)),
  field('output_pinned_memory', 6, messageOf(PinnedMemoryBuffer)),
  field('gather_kernel_buffer_threshold', 7, uint32),
  field('eager_batching', 8, bool),
]);

// ---- dynamic batching -------------------------------------------------------

const ModelQueuePolicy = defineMessage('ModelQueuePolicy', [
  field('timeout_action', 1, enumOf(defineEnum('ModelQueuePolicy.TimeoutAction', { REJECT: 0, DELAY: 1 }))),
  field('default_timeout_microseconds', 2, uint64),
  field('allow_timeout_override', 3, bool),
  field('max_queue_size', 4, uint32),
]);

const ModelDynamicBatching = defineMessage('ModelDynamicBatching', [
  repeated('preferred_batch_size', 1, int32),
  field('max_queue_delay_microseconds', 2, uint64),
  field('preserve_ordering', 3, bool),
  field('priority_levels', 4, uint64),
  field('default_priority_level', 5, uint64),
  field('default_queue_policy', 6, messageOf(ModelQueuePolicy)),
  field('priority_queue_policy', 7, mapOf('uint64', messageOf(ModelQueuePolicy))),
]);

// ---- sequence batching ------------------------------------------------------

const SequenceControl = defineMessage('ModelSequenceBatching.Control', [
  field(
    'kind',
    1,
    enumOf(
      defineEnum('ModelSequenceBatching.Control.Kind', {
        CONTROL_SEQUENCE_START: 0,
        CONTROL_SEQUENCE_READY: 1,
        CONTROL_SEQUENCE_END: 2,
        CONTROL_SEQUENCE_CORRID: 3,
      }),
    ),
  ),
  repeated('int32_false_true', 2, int32),
  repeated('fp32_false_true', 3, float),
  repeated('bool_false_true', 5, bool),
  field('data_type', 4, dataType),
]);

const ControlInput = defineMessage('ModelSequenceBatching.ControlInput', [field('name', 1, string), repeated('control', 2, messageOf(SequenceControl))]);

const InitialState = defineMessage('ModelSequenceBatching.InitialState', [
  field('data_type', 1, dataType),
  repeated('dims', 2, int64),
  field('zero_data', 3, bool, { oneof: 'state_data' }),
  field('data_file', 4, string, { oneof: 'state_data' }),
  field('name', 5, string),
]);

const SequenceState = defineMessage('ModelSequenceBatching.State', [
  field('input_name', 1, string),
  field('output_name', 2, string),
  field('data_type', 3, dataType),
  repeated('dims', 4, int64),
  repeated('initial_state', 5, messageOf(InitialState)),
  field('use_same_buffer_for_input_output', 6, bool),
  field('use_growable_memory', 7, bool),
]);

const StrategyDirect = defineMessage('ModelSequenceBatching.StrategyDirect', [
  field('max_queue_delay_microseconds', 1, uint64),
  field('minimum_slot_utilization', 2, float),
]);

const StrategyOldest = defineMessage('ModelSequenceBatching.StrategyOldest', [
  field('max_candidate_sequences', 1, int32),
  repeated('preferred_batch_size', 2, int32),
  field('max_queue_delay_microseconds', 3, uint64),
  field('preserve_ordering', 4, bool),
]);

const ModelSequenceBatching = defineMessage('ModelSequenceBatching', [
  field('direct', 3, messageOf(StrategyDirect), { oneof: 'strategy_choice' }),
  field('oldest', 4, messageOf(StrategyOldest), { oneof: 'strategy_choice' }),
  field('max_sequence_idle_microseconds', 1, uint64),
  repeated('control_input', 2, messageOf(ControlInput)),
  repeated('state', 5, messageOf(SequenceState)),
  field('iterative_sequence', 6, bool),
]);

// ---- ensembles --------------------------------------------------------------

const EnsembleStep = defineMessage('ModelEnsembling.Step', [
  field('model_name', 1, string),
  field('model_version', 2, int64),
  field('input_map', 3, mapOf('string', string)),
  field('output_map', 4, mapOf('string', string)),
  field('model_namespace', 5, string),
]);

const ModelEnsembling = defineMessage('ModelEnsembling', [repeated('step', 1, messageOf(EnsembleStep)), field('max_inflight_requests', 2, uint32)]);

// ---- the rest ---------------------------------------------------------------

const ModelParameter = defineMessage('ModelParameter', [field('string_value', 1, string)]);

const WarmupInput = defineMessage('ModelWarmup.Input', [
  field('data_type', 1, dataType),
  repeated('dims', 2, int64),
  field('zero_data', 3, bool, { oneof: 'input_data_type' }),
  field('random_data', 4, bool, { oneof: 'input_data_type' }),
  field('input_data_file', 5, string, { oneof: 'input_data_type' }),
]);

const ModelWarmup = defineMessage('ModelWarmup', [
  field('name', 1, string),
  field('batch_size', 2, uint32),
  field('inputs', 3, mapOf('string', messageOf(WarmupInput))),
  field('count', 4, uint32),
]);

const ModelOperations = defineMessage('ModelOperations', [repeated('op_library_filename', 1, string)]);

const ModelTransactionPolicy = defineMessage('ModelTransactionPolicy', [field('decoupled', 1, bool)]);

const ModelRepositoryAgents = defineMessage('ModelRepositoryAgents', [
  repeated('agents', 1, messageOf(defineMessage('ModelRepositoryAgents.Agent', [field('name', 1, string), field('parameters', 2, mapOf('string', string))]))),
]);

const ModelResponseCache = defineMessage('ModelResponseCache', [field('enable', 1, bool)]);

const MetricControl = defineMessage('ModelMetrics.MetricControl', [
  field('metric_identifier', 1, messageOf(defineMessage('ModelMetrics.MetricControl.MetricIdentifier', [field('family', 1, string)]))),
  field('histogram_options', 2, messageOf(defineMessage('ModelMetrics.MetricControl.HistogramOptions', [repeated('buckets', 1, double)])), {
    oneof: 'metric_options',
  }),
]);

const ModelMetrics = defineMessage('ModelMetrics', [repeated('metric_control', 1, messageOf(MetricControl))]);

export const ModelConfigDescriptor: MessageDescriptor = defineMessage('ModelConfig', [
  field('name', 1, string),
  field('platform', 2, string),
  field('backend', 17, string),
  field('runtime', 25, string),
  field('version_policy', 3, messageOf(ModelVersionPolicy)),
  field('max_batch_size', 4, int32),
  repeated('input', 5, messageOf(ModelInput)),
  repeated('output', 6, messageOf(ModelOutput)),
  repeated('batch_input', 20, messageOf(BatchInput)),
  repeated('batch_output', 21, messageOf(BatchOutput)),
  field('optimization', 12, messageOf(ModelOptimizationPolicy)),
  field('dynamic_batching', 11, messageOf(ModelDynamicBatching), { oneof: 'scheduling_choice' }),
  field('sequence_batching', 13, messageOf(ModelSequenceBatching), { oneof: 'scheduling_choice' }),
  field('ensemble_scheduling', 15, messageOf(ModelEnsembling), { oneof: 'scheduling_choice' }),
  repeated('instance_group', 7, messageOf(ModelInstanceGroup)),
  field('default_model_filename', 8, string),
  field('cc_model_filenames', 9, mapOf('string', string)),
  field('metric_tags', 10, mapOf('string', string)),
  field('parameters', 14, mapOf('string', messageOf(ModelParameter))),
  repeated('model_warmup', 16, messageOf(ModelWarmup)),
  field('model_operations', 18, messageOf(ModelOperations)),
  field('model_transaction_policy', 19, messageOf(ModelTransactionPolicy)),
  field('model_repository_agents', 23, messageOf(ModelRepositoryAgents)),
  field('response_cache', 24, messageOf(ModelResponseCache)),
  field('model_metrics', 26, messageOf(ModelMetrics)),
]);
