/**
 * @module config/model-config-types
 * The typed, frozen view of a Triton `config.pbtxt` (inference.ModelConfig) that
 * the rest of the server reads. Produced only by `model-config.ts`; every field
 * has its Triton default applied, so no caller re-derives defaults.
 */
import type { DataType } from '../protocol/tensor.js';
import type { FieldFinding } from './field-support.js';

export type TensorFormat = 'FORMAT_NONE' | 'FORMAT_NHWC' | 'FORMAT_NCHW';

export interface TensorConfig {
  readonly name: string;
  readonly dataType: DataType;
  /** Dims without the implicit batch dim; -1 = variable. */
  readonly dims: readonly number[];
  /** `reshape { shape }` when present: the shape the model itself sees (without batch). */
  readonly reshape: readonly number[] | undefined;
  readonly format: TensorFormat;
  /** Inputs only: the request may omit it. */
  readonly optional: boolean;
  /** Inputs only. */
  readonly allowRaggedBatch: boolean;
  /** Outputs only: labels file in the model directory (classification extension). */
  readonly labelFilename: string | undefined;
}

export type VersionPolicy =
  { readonly kind: 'latest'; readonly numVersions: number } | { readonly kind: 'all' } | { readonly kind: 'specific'; readonly versions: readonly number[] };

export interface QueuePolicy {
  readonly timeoutAction: 'REJECT' | 'DELAY';
  readonly defaultTimeoutMicroseconds: number;
  readonly allowTimeoutOverride: boolean;
  /** 0 = unbounded in Triton; the scheduler applies the server-wide cap instead. */
  readonly maxQueueSize: number;
}

export interface DynamicBatchingConfig {
  readonly preferredBatchSize: readonly number[];
  readonly maxQueueDelayMicroseconds: number;
  readonly preserveOrdering: boolean;
  readonly priorityLevels: number;
  readonly defaultPriorityLevel: number;
  readonly defaultQueuePolicy: QueuePolicy;
  readonly priorityQueuePolicy: Readonly<Record<string, QueuePolicy>>;
}

/** The server-generated control tensors (ModelSequenceBatching.Control.Kind). */
export type SequenceControlKind = 'CONTROL_SEQUENCE_START' | 'CONTROL_SEQUENCE_READY' | 'CONTROL_SEQUENCE_END' | 'CONTROL_SEQUENCE_CORRID';

export interface SequenceControlConfig {
  readonly kind: SequenceControlKind;
  /** The model input the server fills (not listed in `input`: the client never sends it). */
  readonly inputName: string;
  /** START/END/READY: FP32, INT32 or BOOL (from which `*_false_true` is given); CORRID: its `data_type` (UINT64, INT64, UINT32, INT32, BYTES). */
  readonly dataType: DataType;
  /** START/END/READY: the [false, true] values (booleans as 0/1); undefined for CORRID. */
  readonly falseTrue: readonly [number, number] | undefined;
}

export type InitialStateSource = { readonly kind: 'zero' } | { readonly kind: 'file'; readonly file: string };

export interface InitialStateConfig {
  readonly name: string;
  readonly dataType: DataType;
  /** Fixed dims (no -1), without the batch dim. */
  readonly dims: readonly number[];
  /** zero_data, or data_file (raw little-endian bytes in the model's `initial_state/` folder). */
  readonly source: InitialStateSource;
}

/** Implicit state: the server keeps `outputName` of one request and feeds it as `inputName` of the next. */
export interface SequenceStateConfig {
  readonly inputName: string;
  readonly outputName: string;
  readonly dataType: DataType;
  /** Without the batch dim; -1 = taken from the initial state or the model's output. */
  readonly dims: readonly number[];
  /** undefined: the first request of a sequence gets zeros of `dims` (which must then be fixed). */
  readonly initialState: InitialStateConfig | undefined;
}

export type SequenceStrategy =
  | { readonly kind: 'direct'; readonly maxQueueDelayMicroseconds: number; readonly minimumSlotUtilization: number }
  | {
      readonly kind: 'oldest';
      /** Sequences batched together per instance; 0 in the config becomes max(1, max_batch_size). */
      readonly maxCandidateSequences: number;
      readonly preferredBatchSize: readonly number[];
      readonly maxQueueDelayMicroseconds: number;
    };

export interface SequenceBatchingConfig {
  /** `direct` unless the config says `oldest` (Triton's default). */
  readonly strategy: SequenceStrategy;
  /** Default 1,000,000 (1 s). */
  readonly maxSequenceIdleMicroseconds: number;
  readonly controls: readonly SequenceControlConfig[];
  readonly states: readonly SequenceStateConfig[];
}

export type InstanceKind = 'KIND_AUTO' | 'KIND_GPU' | 'KIND_CPU' | 'KIND_MODEL';

export interface InstanceGroupConfig {
  readonly name: string;
  readonly kind: InstanceKind;
  readonly count: number;
  readonly gpus: readonly number[];
}

export interface EnsembleStepConfig {
  readonly modelName: string;
  /** -1 = latest. */
  readonly modelVersion: number;
  /** key = the step model's input name, value = the ensemble tensor name. */
  readonly inputMap: Readonly<Record<string, string>>;
  /** key = the step model's output name, value = the ensemble tensor name. */
  readonly outputMap: Readonly<Record<string, string>>;
}

export interface ExecutionAcceleratorConfig {
  readonly name: string;
  readonly parameters: Readonly<Record<string, string>>;
}

export interface OptimizationConfig {
  /** optimization.graph.level as the ORT backend reads it (0 = all, -1 = basic, 1 = extended, 2 = disabled). */
  readonly graphLevel: number;
  readonly gpuExecutionAccelerators: readonly ExecutionAcceleratorConfig[];
  readonly cpuExecutionAccelerators: readonly ExecutionAcceleratorConfig[];
}

export type WarmupInputSource = { readonly kind: 'zero' } | { readonly kind: 'random' } | { readonly kind: 'file'; readonly file: string };

export interface WarmupInputConfig {
  readonly dataType: DataType;
  readonly dims: readonly number[];
  readonly source: WarmupInputSource;
}

export interface WarmupConfig {
  readonly name: string;
  readonly batchSize: number;
  readonly count: number;
  readonly inputs: Readonly<Record<string, WarmupInputConfig>>;
}

export interface ModelConfig {
  readonly name: string;
  /** e.g. "onnxruntime_onnx", "ensemble"; "" when only a backend is given. */
  readonly platform: string;
  /** e.g. "onnxruntime"; "" for ensembles. */
  readonly backend: string;
  readonly maxBatchSize: number;
  readonly versionPolicy: VersionPolicy;
  readonly input: readonly TensorConfig[];
  readonly output: readonly TensorConfig[];
  readonly dynamicBatching: DynamicBatchingConfig | undefined;
  /** `sequence_batching { … }`: a stateful model (scheduler/sequence-batcher.ts); undefined = stateless. */
  readonly sequenceBatching: SequenceBatchingConfig | undefined;
  readonly ensembleSteps: readonly EnsembleStepConfig[] | undefined;
  readonly instanceGroup: readonly InstanceGroupConfig[];
  readonly defaultModelFilename: string;
  /** `parameters { key: "k" value: { string_value: "v" } }` flattened to k → v. */
  readonly parameters: Readonly<Record<string, string>>;
  readonly modelWarmup: readonly WarmupConfig[];
  readonly optimization: OptimizationConfig | undefined;
  readonly responseCacheEnabled: boolean;
  readonly decoupled: boolean;
  /** Fields set in the config that the server accepts and ignores (config/field-support.ts); the load logs each. */
  readonly ignoredFields: readonly FieldFinding[];
  /** The whole config in Triton's JSON form (snake_case proto field names), as GET .../config returns it. */
  readonly json: Readonly<Record<string, unknown>>;
}
