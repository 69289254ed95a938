/**
 * @module config/model-config
 * config.pbtxt (or its JSON form) → the frozen, typed ModelConfig the server
 * reads, and back to text.
 *
 * Pipeline: text format or JSON → canonical JSON form (schema-checked) →
 * Triton's normalisation (core `NormalizeModelConfig` / `NormalizeInstanceGroup`
 * and the ONNX part of `AutoCompleteBackendFields`) → validation that collects
 * every problem into one error → typed view. The normalised JSON is kept as
 * `json`, so GET .../config shows the effective values, as Triton's does.
 *
 * Left to the runtime on purpose (they need the host or the model file):
 * KIND_AUTO → GPU/CPU, the KIND_CPU instance count default of 2 for
 * onnxruntime (count 0 = not given), and ONNX auto-complete of inputs/outputs.
 */
import { ServingError } from '../errors.js';
import { dataTypeFromConfigName, type DataType } from '../protocol/tensor.js';
import { fieldFindings, type FieldFinding } from './field-support.js';
import { ModelConfigDescriptor } from './model-config-schema.js';
import type {
  DynamicBatchingConfig,
  EnsembleStepConfig,
  ExecutionAcceleratorConfig,
  InstanceGroupConfig,
  InstanceKind,
  ModelConfig,
  OptimizationConfig,
  QueuePolicy,
  TensorConfig,
  TensorFormat,
  VersionPolicy,
  WarmupConfig,
  WarmupInputConfig,
  WarmupInputSource,
} from './model-config-types.js';
import { parseTextFormat, printTextFormat } from './pbtxt/parser.js';
import { decodeJsonForm, withDefaults } from './pbtxt/schema.js';
import { normaliseSequenceBatching, toSequenceBatching, validateSequenceBatching } from './sequence-batching.js';

export interface ModelConfigOptions {
  /** Names the origin in error messages, e.g. `mymodel/config.pbtxt`. */
  readonly sourceName: string;
  /** The model's directory name: the default `name`, and what a given `name` must equal. */
  readonly directoryName?: string;
}

export const ONNX_PLATFORM = 'onnxruntime_onnx';
export const ONNX_BACKEND = 'onnxruntime';
export const ENSEMBLE_PLATFORM = 'ensemble';
export const DEFAULT_ONNX_FILENAME = 'model.onnx';

/** Parses config.pbtxt text into the typed config (see `modelConfigFromJson`). */
export function parseModelConfig(text: string, options: ModelConfigOptions): ModelConfig {
  return modelConfigFromJson(parseTextFormat(text, ModelConfigDescriptor, options.sourceName), options);
}

/**
 * Checks, normalises and validates a config in JSON form (parsed config.pbtxt,
 * an auto-completed config, a load-API override) and returns it typed and
 * deep-frozen. Throws ServingError('INVALID_MODEL') naming every problem.
 */
export function modelConfigFromJson(json: Readonly<Record<string, unknown>>, options: ModelConfigOptions): ModelConfig {
  const decoded = decodeJsonForm(json, ModelConfigDescriptor, options.sourceName) as Json;
  const problems: string[] = [];
  // Before normalisation, which adds Triton's defaults: what the author wrote. Refusals are the
  // loader's (config/model-config-draft), so a config the server refuses still parses here.
  const findings = fieldFindings(decoded);
  normalise(decoded, options, problems);
  // Normalisation adds bare messages ({}); this prints their fields at their defaults.
  const config = withDefaults(decoded, ModelConfigDescriptor);
  validate(config, problems);
  const name = str(config['name']);
  if (problems.length > 0) {
    throw new ServingError('INVALID_MODEL', `${options.sourceName}: ${problems.join('; ')}`, name === '' ? {} : { model: name });
  }
  return deepFreeze(
    toTyped(
      deepFreeze(config),
      findings.filter((f) => f.status === 'ignored'),
    ),
  );
}

/** The config as config.pbtxt text; parsing it back gives the same `json`. */
export function modelConfigToPbtxt(config: ModelConfig): string {
  return printTextFormat(config.json, ModelConfigDescriptor);
}

// ---- JSON-form access (values are schema-checked, so these casts hold) -----

type Json = Record<string, unknown>;
const obj = (v: unknown): Json => v as Json;
const opt = (v: unknown): Json | undefined => v as Json | undefined;
const arr = <T = Json>(v: unknown): T[] => v as T[];
const str = (v: unknown): string => v as string;
const num = (v: unknown): number => v as number;
const nums = (v: unknown): number[] => v as number[];
const shape = (dims: readonly number[]): string => `[${dims.join(', ')}]`;

// ---- normalisation ------------------------------------------------------------

function normalise(config: Json, options: ModelConfigOptions, problems: string[]): void {
  const dir = options.directoryName;
  if (config['name'] === '' && dir !== undefined) config['name'] = dir;
  const name = str(config['name']);
  if (name === '') problems.push(`model configuration must specify 'name'`);
  else if (dir !== undefined && name !== dir) problems.push(`name '${name}' does not match the model directory name '${dir}'`);

  // AutoCompleteBackendFields, ONNX part: either of platform/backend implies the other.
  const onnxFile = config['platform'] === '' && config['default_model_filename'] === DEFAULT_ONNX_FILENAME;
  if (config['backend'] === '' && (config['platform'] === ONNX_PLATFORM || onnxFile)) config['backend'] = ONNX_BACKEND;
  if (config['backend'] === ONNX_BACKEND) {
    if (config['platform'] === '') config['platform'] = ONNX_PLATFORM;
    if (config['default_model_filename'] === '') config['default_model_filename'] = DEFAULT_ONNX_FILENAME;
  }

  config['version_policy'] ??= { latest: { num_versions: 1 } };
  const mbs = num(config['max_batch_size']);

  const dynamic = opt(config['dynamic_batching']);
  if (dynamic !== undefined) {
    if (arr(dynamic['preferred_batch_size']).length === 0 && mbs > 0) dynamic['preferred_batch_size'] = [mbs];
    // An absent policy means REJECT, no timeout, no override, unbounded: spelled out for GET .../config.
    dynamic['default_queue_policy'] ??= {};
  }

  const sequence = opt(config['sequence_batching']);
  if (sequence !== undefined) normaliseSequenceBatching(sequence, mbs);

  // Ensembles have no instances and no optimization; Triton leaves both alone for them.
  if (isEnsemble(config)) return;
  const optimization = (config['optimization'] ??= {}) as Json;
  optimization['input_pinned_memory'] ??= { enable: true };
  optimization['output_pinned_memory'] ??= { enable: true };

  const groups = arr(config['instance_group']);
  if (groups.length === 0) {
    // Triton names the default group after the model; count 1, kind resolved by the runtime.
    groups.push({ name, kind: 'KIND_AUTO', count: 1 });
  }
  groups.forEach((group, i) => {
    if (group['name'] === '') group['name'] = `${name}_${i}`;
  });
}

function isEnsemble(config: Json): boolean {
  return config['platform'] === ENSEMBLE_PLATFORM || config['ensemble_scheduling'] !== undefined;
}

// ---- validation -----------------------------------------------------------------

function validate(config: Json, problems: string[]): void {
  const mbs = num(config['max_batch_size']);
  const platform = str(config['platform']);
  if (mbs < 0) problems.push(`max_batch_size must be >= 0, got ${mbs}`);
  if (platform === ENSEMBLE_PLATFORM && config['backend'] !== '') {
    problems.push(`an ensemble must have an empty backend, got backend '${str(config['backend'])}'`);
  }
  if (platform === ONNX_PLATFORM && config['backend'] !== ONNX_BACKEND) {
    problems.push(`platform '${ONNX_PLATFORM}' requires backend '${ONNX_BACKEND}', got '${str(config['backend'])}'`);
  }
  validateTensors('input', arr(config['input']), mbs, platform, problems);
  validateTensors('output', arr(config['output']), mbs, platform, problems);
  validateBatchIo(config, problems);
  validateDynamicBatching(opt(config['dynamic_batching']), mbs, problems);
  const sequence = opt(config['sequence_batching']);
  if (sequence !== undefined) validateSequenceBatching(config, sequence, problems);
  validateEnsemble(config, problems);
  if (!isEnsemble(config)) validateInstanceGroups(arr(config['instance_group']), platform, problems);
  validateWarmup(arr(config['model_warmup']), mbs, problems);
  const cache = opt(config['response_cache'])?.['enable'] === true;
  if (cache && opt(config['model_transaction_policy'])?.['decoupled'] === true) {
    problems.push(`response_cache cannot be enabled for a decoupled model`);
  }
  validateMetrics(opt(config['model_metrics']), problems);
}

function validateTensors(kind: 'input' | 'output', tensors: Json[], mbs: number, platform: string, problems: string[]): void {
  const seen = new Set<string>();
  tensors.forEach((t, i) => {
    const name = str(t['name']);
    if (name === '') {
      problems.push(`${kind} #${i}: must specify 'name'`);
    } else if (seen.has(name)) {
      problems.push(`duplicate ${kind} name '${name}'`);
    }
    seen.add(name);
    const label = name === '' ? `${kind} #${i}` : `${kind} '${name}'`;
    if (t['data_type'] === 'TYPE_INVALID') problems.push(`${label}: must specify 'data_type' (missing or TYPE_INVALID)`);
    // `dims: [ ]` is a scalar per item (rank 0, or [-1] with the batch dim), as is `dims: [1]` for a rank-0 graph tensor (registry/config-check).
    const dims = nums(t['dims']);
    // 0 is a legal (empty) extent; -1 is the wildcard.
    if (dims.some((d) => d < -1)) problems.push(`${label}: dims must be >= 0 or -1 (variable), got ${shape(dims)}`);
    const reshape = opt(t['reshape']);
    if (reshape !== undefined) validateReshape(label, dims, nums(reshape['shape']), mbs, problems);
    const format = t['format'];
    if ((format === 'FORMAT_NHWC' || format === 'FORMAT_NCHW') && dims.length !== 3) {
      problems.push(`${label}: format ${String(format)} requires 3 dims, got ${shape(dims)}`);
    }
    if (platform !== 'tensorrt_plan' && t['is_shape_tensor'] === true) problems.push(`${label}: shape tensors are only supported for TensorRT models`);
    if (platform !== 'tensorrt_plan' && t['is_non_linear_format_io'] === true) {
      problems.push(`${label}: non-linear IO formats are only supported for TensorRT models`);
    }
  });
}

/** core ValidateIOShape: reshape keeps the element count, chunk by chunk around -1 dims. */
function validateReshape(where: string, dims: number[], reshape: number[], mbs: number, problems: string[]): void {
  if (reshape.some((d) => d < 1 && d !== -1)) {
    problems.push(`${where}: reshape dimensions must be >= 1 or -1 (variable), got ${shape(reshape)}`);
    return;
  }
  if (dims.some((d) => d < -1)) return; // already reported
  const dimChunks = chunkCounts(dims);
  const reshapeChunks = chunkCounts(reshape);
  const mismatch = `${where}: reshape ${shape(reshape)} does not have the same element count as dims ${shape(dims)}`;
  if (dimChunks.length === 1 && reshapeChunks.length === 1) {
    // An empty reshape stands for a scalar: dims must hold exactly one element.
    if (dimChunks[0] !== reshapeChunks[0]) problems.push(mismatch);
  } else if (dimChunks.length === 1 || reshapeChunks.length === 1) {
    problems.push(mismatch);
  } else if (dimChunks.length !== reshapeChunks.length) {
    problems.push(`${where}: dims ${shape(dims)} and reshape ${shape(reshape)} have a different number of variable (-1) dimensions`);
  } else if (dimChunks.some((c, i) => c !== reshapeChunks[i])) {
    problems.push(mismatch);
  }
}

/** Element counts of the runs of fixed dims between -1s: [2, 4, -1, 6] → [8, 6]. */
function chunkCounts(dims: readonly number[]): number[] {
  const chunks: number[] = [];
  let count = 1;
  for (const d of dims) {
    if (d === -1) {
      chunks.push(count);
      count = 1;
    } else {
      count *= d;
    }
  }
  chunks.push(count);
  return chunks;
}

/** core ValidateBatchIO. */
function validateBatchIo(config: Json, problems: string[]): void {
  const inputs = new Set(arr(config['input']).map((t) => str(t['name'])));
  const outputs = new Set(arr(config['output']).map((t) => str(t['name'])));
  for (const b of arr(config['batch_input'])) {
    const sources = arr<string>(b['source_input']);
    if (sources.length !== 1) problems.push(`batch_input kind ${str(b['kind'])} expects 1 source input, got ${sources.length}`);
    if (b['data_type'] !== 'TYPE_INT32' && b['data_type'] !== 'TYPE_FP32') {
      problems.push(`batch_input data_type must be TYPE_INT32 or TYPE_FP32, got ${str(b['data_type'])}`);
    }
    for (const s of sources) if (!inputs.has(s)) problems.push(`batch_input: unknown source input name '${s}'`);
  }
  for (const b of arr(config['batch_output'])) {
    const sources = arr<string>(b['source_input']);
    if (sources.length !== 1) problems.push(`batch_output kind ${str(b['kind'])} expects 1 source input, got ${sources.length}`);
    for (const s of sources) if (!inputs.has(s)) problems.push(`batch_output: unknown source input name '${s}'`);
    const targets = new Set<string>();
    for (const t of arr<string>(b['target_name'])) {
      if (!outputs.has(t)) problems.push(`batch_output: unknown target output name '${t}'`);
      if (targets.has(t)) problems.push(`batch_output: target output name '${t}' can only be specified once`);
      targets.add(t);
    }
  }
}

function validateDynamicBatching(dynamic: Json | undefined, mbs: number, problems: string[]): void {
  if (dynamic === undefined) return;
  for (const size of nums(dynamic['preferred_batch_size'])) {
    if (size <= 0) problems.push(`dynamic_batching: preferred_batch_size must be positive, got ${size}`);
    else if (size > mbs) problems.push(`dynamic_batching: preferred_batch_size ${size} is larger than max_batch_size ${mbs}`);
  }
  const levels = num(dynamic['priority_levels']);
  const policies = obj(dynamic['priority_queue_policy']);
  if (levels !== 0) {
    const level = num(dynamic['default_priority_level']);
    if (level < 1 || level > levels) problems.push(`dynamic_batching: default_priority_level must be in [1, ${levels}], got ${level}`);
    for (const key of Object.keys(policies)) {
      if (Number(key) < 1 || Number(key) > levels) {
        problems.push(`dynamic_batching: priority_queue_policy level ${key} is outside [1, ${levels}]`);
      }
    }
  }
  if (dynamic['preserve_ordering'] === true) {
    if (levels > 1) problems.push(`dynamic_batching: only one priority level is allowed when preserve_ordering is true, got ${levels}`);
    const all = [opt(dynamic['default_queue_policy']), ...Object.values(policies).map(opt)];
    if (all.some((p) => p !== undefined && p['timeout_action'] === 'DELAY' && p['default_timeout_microseconds'] !== 0)) {
      problems.push(`dynamic_batching: a queue policy cannot use timeout_action DELAY when preserve_ordering is true`);
    }
  }
}

/** What core ValidateEnsembleSchedulingConfig checks without looking at the composing models. */
function validateEnsemble(config: Json, problems: string[]): void {
  const scheduling = opt(config['ensemble_scheduling']);
  const platform = str(config['platform']);
  if (scheduling === undefined) {
    if (platform === ENSEMBLE_PLATFORM) problems.push(`platform 'ensemble' requires ensemble_scheduling`);
    return;
  }
  if (platform !== ENSEMBLE_PLATFORM) {
    problems.push(`ensemble_scheduling can only be set for platform 'ensemble', got platform '${platform}'`);
    return;
  }
  if (arr(config['instance_group']).length > 0) problems.push(`an ensemble must not specify instance_group`);
  if (config['optimization'] !== undefined) problems.push(`an ensemble must not specify optimization`);
  if (arr(config['model_warmup']).length > 0) problems.push(`an ensemble must not specify model_warmup`);
  const steps = arr(scheduling['step']);
  if (steps.length === 0) {
    problems.push(`ensemble_scheduling must have at least one step`);
    return;
  }
  let complete = true;
  steps.forEach((step, i) => {
    const label = `ensemble_scheduling step ${i}`;
    if (step['model_name'] === '') problems.push(`${label}: must specify 'model_name'`);
    for (const map of ['input_map', 'output_map']) {
      if (Object.keys(obj(step[map])).length === 0) {
        problems.push(`${label}: must specify '${map}'`);
        complete = false;
      }
    }
  });
  if (complete) validateEnsembleDataflow(config, steps, problems);
}

/** core BuildEnsembleGraph + the data-flow walk: every tensor produced once, reachable, and used. */
function validateEnsembleDataflow(config: Json, steps: Json[], problems: string[]): void {
  const producedBy = new Map<string, number>();
  steps.forEach((step, i) => {
    for (const tensor of Object.values(obj(step['output_map'])) as string[]) {
      if (producedBy.has(tensor)) problems.push(`ensemble tensor '${tensor}' appears in more than one output_map (step ${i})`);
      else producedBy.set(tensor, i);
    }
  });
  const inputs = arr(config['input']).map((t) => str(t['name']));
  const outputs = arr(config['output']).map((t) => str(t['name']));
  const consumed = new Set(steps.flatMap((s) => Object.values(obj(s['input_map'])) as string[]));
  const ready = new Set(inputs);
  const done = new Set<number>();
  // Fixed point: a step runs once all its inputs are ready, making its outputs ready.
  for (let progress = true; progress;) {
    progress = false;
    steps.forEach((step, i) => {
      if (done.has(i) || !(Object.values(obj(step['input_map'])) as string[]).every((t) => ready.has(t))) return;
      done.add(i);
      progress = true;
      for (const t of Object.values(obj(step['output_map'])) as string[]) ready.add(t);
    });
  }
  for (const input of inputs) if (!consumed.has(input)) problems.push(`ensemble input '${input}' is not used by any step`);
  for (const output of outputs) {
    if (!producedBy.has(output)) problems.push(`ensemble output '${output}' is not produced by any step`);
    else if (!ready.has(output)) problems.push(`ensemble output '${output}' is not written: a tensor it depends on is never produced`);
  }
  for (const tensor of producedBy.keys()) {
    if (!outputs.includes(tensor) && !consumed.has(tensor)) problems.push(`ensemble tensor '${tensor}' is unused`);
  }
  steps.forEach((step, i) => {
    if (done.has(i)) return;
    const missing = (Object.values(obj(step['input_map'])) as string[]).filter((t) => !ready.has(t));
    problems.push(`ensemble_scheduling step ${i}: input tensor(s) ${missing.map((t) => `'${t}'`).join(', ')} are never produced`);
  });
}

function validateInstanceGroups(groups: Json[], platform: string, problems: string[]): void {
  for (const g of groups) {
    const label = `instance_group '${str(g['name'])}'`;
    const gpus = nums(g['gpus']);
    if ((g['kind'] === 'KIND_CPU' || g['kind'] === 'KIND_MODEL') && gpus.length > 0) {
      problems.push(`${label}: kind ${str(g['kind'])} must not list gpus`);
    }
    if (gpus.some((d) => d < 0)) problems.push(`${label}: gpu ids must be >= 0, got ${shape(gpus)}`);
    if (num(g['count']) < 0) problems.push(`${label}: count must be >= 0, got ${num(g['count'])}`);
    if (platform !== 'tensorrt_plan' && arr<string>(g['profile']).length > 0) problems.push(`${label}: profile is only supported for TensorRT models`);
  }
}

function validateWarmup(warmups: Json[], mbs: number, problems: string[]): void {
  warmups.forEach((w, i) => {
    const label = w['name'] === '' ? `model_warmup #${i}` : `model_warmup '${str(w['name'])}'`;
    const batch = num(w['batch_size']);
    if (batch < 1) problems.push(`${label}: batch_size must be >= 1, got ${batch}`);
    else if (mbs === 0 && batch !== 1) problems.push(`${label}: batch_size must be 1 for a model with max_batch_size 0, got ${batch}`);
    else if (mbs > 0 && batch > mbs) problems.push(`${label}: batch_size ${batch} is larger than max_batch_size ${mbs}`);
    for (const [name, input] of Object.entries(obj(w['inputs'])).map(([k, v]) => [k, obj(v)] as const)) {
      const inputLabel = `${label}: input '${name}'`;
      if (input['data_type'] === 'TYPE_INVALID') problems.push(`${inputLabel}: must specify 'data_type' (missing or TYPE_INVALID)`);
      const dims = nums(input['dims']);
      if (dims.some((d) => d < 0)) problems.push(`${inputLabel}: dims must be fixed (>= 0), got ${shape(dims)}`);
      if (input['zero_data'] === undefined && input['random_data'] === undefined && input['input_data_file'] === undefined) {
        problems.push(`${inputLabel}: must set one of zero_data, random_data or input_data_file`);
      }
    }
  });
}

/** core ValidateModelMetrics. */
function validateMetrics(metrics: Json | undefined, problems: string[]): void {
  for (const control of metrics === undefined ? [] : arr(metrics['metric_control'])) {
    const identifier = opt(control['metric_identifier']);
    if (identifier === undefined || identifier['family'] === '') {
      problems.push(`model_metrics: metric_control must specify a non-empty metric_identifier.family`);
    }
    const histogram = opt(control['histogram_options']);
    if (histogram === undefined || arr(histogram['buckets']).length === 0) {
      problems.push(`model_metrics: metric_control must specify non-empty histogram_options.buckets`);
    }
  }
}

// ---- typed view -----------------------------------------------------------------

function toTyped(json: Json, ignoredFields: readonly FieldFinding[]): ModelConfig {
  const mbs = num(json['max_batch_size']);
  const scheduling = opt(json['ensemble_scheduling']);
  return {
    name: str(json['name']),
    platform: str(json['platform']),
    backend: str(json['backend']),
    maxBatchSize: mbs,
    versionPolicy: toVersionPolicy(obj(json['version_policy'])),
    input: arr(json['input']).map((t) => toTensor(t, true)),
    output: arr(json['output']).map((t) => toTensor(t, false)),
    dynamicBatching: toDynamicBatching(opt(json['dynamic_batching'])),
    sequenceBatching: toSequenceBatching(opt(json['sequence_batching']), mbs),
    ensembleSteps: scheduling === undefined ? undefined : arr(scheduling['step']).map(toEnsembleStep),
    instanceGroup: arr(json['instance_group']).map(toInstanceGroup),
    defaultModelFilename: str(json['default_model_filename']),
    parameters: Object.fromEntries(Object.entries(obj(json['parameters'])).map(([k, v]) => [k, str(obj(v)['string_value'])])),
    modelWarmup: arr(json['model_warmup']).map(toWarmup),
    optimization: toOptimization(opt(json['optimization'])),
    responseCacheEnabled: opt(json['response_cache'])?.['enable'] === true,
    decoupled: opt(json['model_transaction_policy'])?.['decoupled'] === true,
    ignoredFields,
    json,
  };
}

/** Validation has rejected TYPE_INVALID, so every name maps. */
function dataType(name: unknown): DataType {
  return dataTypeFromConfigName(str(name)) as DataType;
}

function toTensor(t: Json, isInput: boolean): TensorConfig {
  const reshape = opt(t['reshape']);
  const label = isInput ? '' : str(t['label_filename']);
  return {
    name: str(t['name']),
    dataType: dataType(t['data_type']),
    dims: nums(t['dims']),
    reshape: reshape === undefined ? undefined : nums(reshape['shape']),
    format: isInput ? (t['format'] as TensorFormat) : 'FORMAT_NONE',
    optional: isInput && t['optional'] === true,
    allowRaggedBatch: isInput && t['allow_ragged_batch'] === true,
    labelFilename: label === '' ? undefined : label,
  };
}

/** Exported for config/model-config-draft (the same reading before auto-complete). */
export function toVersionPolicy(policy: Json): VersionPolicy {
  const latest = opt(policy['latest']);
  if (latest !== undefined) return { kind: 'latest', numVersions: num(latest['num_versions']) };
  const specific = opt(policy['specific']);
  if (specific !== undefined) return { kind: 'specific', versions: nums(specific['versions']) };
  // `all {}`, and also an empty `version_policy {}`, which Triton's VersionsToLoad treats as all.
  return { kind: 'all' };
}

function toQueuePolicy(p: Json): QueuePolicy {
  return {
    timeoutAction: p['timeout_action'] as QueuePolicy['timeoutAction'],
    defaultTimeoutMicroseconds: num(p['default_timeout_microseconds']),
    allowTimeoutOverride: p['allow_timeout_override'] === true,
    maxQueueSize: num(p['max_queue_size']),
  };
}

function toDynamicBatching(d: Json | undefined): DynamicBatchingConfig | undefined {
  if (d === undefined) return undefined;
  return {
    preferredBatchSize: nums(d['preferred_batch_size']),
    maxQueueDelayMicroseconds: num(d['max_queue_delay_microseconds']),
    preserveOrdering: d['preserve_ordering'] === true,
    priorityLevels: num(d['priority_levels']),
    defaultPriorityLevel: num(d['default_priority_level']),
    defaultQueuePolicy: toQueuePolicy(obj(d['default_queue_policy'])),
    priorityQueuePolicy: Object.fromEntries(Object.entries(obj(d['priority_queue_policy'])).map(([k, v]) => [k, toQueuePolicy(obj(v))])),
  };
}

function toEnsembleStep(s: Json): EnsembleStepConfig {
  return {
    modelName: str(s['model_name']),
    modelVersion: num(s['model_version']),
    inputMap: obj(s['input_map']) as Record<string, string>,
    outputMap: obj(s['output_map']) as Record<string, string>,
  };
}

function toInstanceGroup(g: Json): InstanceGroupConfig {
  return { name: str(g['name']), kind: g['kind'] as InstanceKind, count: num(g['count']), gpus: nums(g['gpus']) };
}

function toWarmup(w: Json): WarmupConfig {
  const inputs: Record<string, WarmupInputConfig> = {};
  for (const [name, value] of Object.entries(obj(w['inputs']))) {
    const input = obj(value);
    const source: WarmupInputSource =
      input['input_data_file'] !== undefined
        ? { kind: 'file', file: str(input['input_data_file']) }
        : input['random_data'] !== undefined
          ? { kind: 'random' }
          : { kind: 'zero' };
    inputs[name] = { dataType: dataType(input['data_type']), dims: nums(input['dims']), source };
  }
  return { name: str(w['name']), batchSize: num(w['batch_size']), count: num(w['count']), inputs };
}

function toOptimization(o: Json | undefined): OptimizationConfig | undefined {
  if (o === undefined) return undefined;
  const accelerators = opt(o['execution_accelerators']);
  const list = (key: string): ExecutionAcceleratorConfig[] =>
    accelerators === undefined ? [] : arr(accelerators[key]).map((a) => ({ name: str(a['name']), parameters: obj(a['parameters']) as Record<string, string> }));
  return {
    graphLevel: num(opt(o['graph'])?.['level'] ?? 0),
    gpuExecutionAccelerators: list('gpu_execution_accelerator'),
    cpuExecutionAccelerators: list('cpu_execution_accelerator'),
  };
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
