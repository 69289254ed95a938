/**
 * @module config/field-support
 * What onnx-mme does with every field of Triton's `inference.ModelConfig`:
 * the one table the server's load, `onnx-mme validate` and the docs' field
 * table (docs/model-packages.md, checked against this by a test) all read.
 *
 * - served: the field has Triton's semantics here.
 * - ignored: accepted, and the load logs a warning naming it; only where
 *   ignoring it cannot change an answer (device, memory and speed knobs).
 * - refused: the load fails with INVALID_MODEL naming the field and why,
 *   because serving the model without it would give different answers or
 *   break a promise the config makes (sequences, decoupled responses, …).
 *
 * Keys are dotted proto field paths from ModelConfig (`input.dims`,
 * `dynamic_batching.priority_queue_policy.timeout_action`; a map's message
 * values are walked under the map's own name). A field without its own entry
 * takes its nearest ancestor's, so a refused or ignored block covers its
 * sub-fields; a served message needs an entry for each of its fields (a unit
 * test walks Triton's proto and fails on any field that has none).
 *
 * `when` narrows an ignored/refused entry to the values it really concerns
 * (`decoupled: true`, `runtime` naming another library); other values are
 * served. A field at its proto3 default is "not set" and never reported, as
 * protobuf itself cannot tell it from an absent one.
 */
import { ModelConfigDescriptor } from './model-config-schema.js';
import { defaultValue, type FieldDescriptor, type MessageDescriptor } from './pbtxt/schema.js';

export type SupportStatus = 'served' | 'ignored' | 'refused';

export interface FieldSupport {
  readonly status: SupportStatus;
  /** What the server does with it (served), or why it is ignored or refused: shown to users verbatim. */
  readonly note: string;
  /** ignored/refused only for values this accepts (described by `whenText` in the docs table); other values are served. */
  readonly when?: (value: unknown) => boolean;
  readonly whenText?: string;
}

const served = (note: string): FieldSupport => ({ status: 'served', note });
const ignored = (note: string, when?: (v: unknown) => boolean, whenText?: string): FieldSupport =>
  when === undefined ? { status: 'ignored', note } : { status: 'ignored', note, when, whenText: whenText ?? '' };
const refused = (note: string, when?: (v: unknown) => boolean, whenText?: string): FieldSupport =>
  when === undefined ? { status: 'refused', note } : { status: 'refused', note, when, whenText: whenText ?? '' };

const isTrue = (v: unknown): boolean => v === true;
const pinnedOff = (v: unknown): boolean => (v as { enable?: unknown }).enable !== true;
const TRT_ONLY = 'TensorRT models only; onnx-mme serves ONNX models with onnxruntime';
/**
 * Fields Triton's onnxruntime backend never reads, so a Triton repository
 * that sets them loads on Triton with the same answers: ignored with a
 * warning here too. Evidence: triton-inference-server/onnxruntime_backend
 * src/onnxruntime.cc (commit 00fd3e8) reads from the model config only
 * optimization.graph.level, optimization.execution_accelerators,
 * parameters, model_operations.op_library_filename, batch_input, input,
 * output, instance_group.kind, default_model_filename, max_batch_size,
 * dynamic_batching/sequence_batching (presence, and sequence state); the
 * optimization.cuda block is read only by the TensorRT backend. Triton's
 * core itself refuses instance_group.profile, is_shape_tensor and
 * non-linear IO formats outside TensorRT (model_config_utils.cc), so those
 * stay refused here.
 */
const ORT_BACKEND_NEVER_READS = "Triton's onnxruntime backend never reads it (TensorRT backend only), so answers are the same";
const GPU_ONLY_SPEED = 'a GPU-transfer tuning knob of Triton; onnxruntime-node manages its own buffers and answers are the same';

/**
 * The `parameters` keys the server acts on for an ONNX model (others are
 * warned about, see `ignoredParameterKeys`): Triton's onnxruntime thread
 * counts, and onnx-mme's own `execution_thread` (runtime/session-placement.ts).
 */
export const ONNX_PARAMETER_KEYS: readonly string[] = Object.freeze(['intra_op_thread_count', 'inter_op_thread_count', 'execution_thread']);

export const FIELD_SUPPORT: ReadonlyMap<string, FieldSupport> = new Map<string, FieldSupport>([
  ['name', served('the model name; must equal its directory name (defaults to it)')],
  ['platform', served('onnxruntime_onnx and ensemble; any other platform is refused at load naming it')],
  [
    'backend',
    served(
      'onnxruntime and the processing-step backends (image, tokenizer, mean_pooling, l2_normalize, softmax, topk, argmax, js); any other backend is refused at load',
    ),
  ],
  [
    'runtime',
    refused(
      'a custom backend shared library cannot be loaded: onnx-mme runs onnxruntime-node in process',
      (v) => v !== 'libtriton_onnxruntime.so',
      'naming any library but libtriton_onnxruntime.so',
    ),
  ],
  ['version_policy', served('latest (default latest 1), all, specific: which version directories load')],
  ['version_policy.latest', served('the highest num_versions versions')],
  ['version_policy.latest.num_versions', served('how many of the highest versions load (0 = 1)')],
  ['version_policy.all', served('every version directory loads')],
  ['version_policy.specific', served('exactly the versions listed; a missing one fails the load')],
  ['version_policy.specific.versions', served('the versions to load')],
  ['max_batch_size', served('> 0: a leading batch dimension and dynamic batching up to this many rows; 0: the model does not batch')],

  ['input', served('the model inputs, checked against the ONNX graph at load')],
  ['input.name', served('the graph input name')],
  ['input.data_type', served('checked against the graph; requests must match')],
  ['input.format', served('FORMAT_NHWC/NCHW require 3 dims, as Triton checks')],
  ['input.dims', served('without the batch dim; -1 = any size; [1] (or []) for a rank-0 graph tensor of a non-batching model')],
  ['input.reshape', served('the shape the model sees; reshape { shape: [] } feeds a scalar')],
  ['input.reshape.shape', served('the model-side shape (without the batch dim)')],
  ['input.is_shape_tensor', refused(TRT_ONLY, isTrue, 'true')],
  [
    'input.allow_ragged_batch',
    ignored(
      'requests whose shapes differ are not merged into one batch (they run in separate batches, so answers are unchanged); ragged batching needs batch_input, which is refused',
      isTrue,
      'true',
    ),
  ],
  ['input.optional', served('the request may omit the input')],
  ['input.is_non_linear_format_io', refused(TRT_ONLY, isTrue, 'true')],

  ['output', served('the outputs a request may ask for, checked against the graph at load')],
  ['output.name', served('the graph output name')],
  ['output.data_type', served('checked against the graph')],
  ['output.dims', served('without the batch dim; [1] (or []) for a rank-0 graph output of a non-batching model')],
  ['output.reshape', served('the shape the answer is given in')],
  ['output.reshape.shape', served('the answer-side shape (without the batch dim)')],
  ['output.label_filename', served('labels for the classification extension, read from the model directory')],
  ['output.is_shape_tensor', refused(TRT_ONLY, isTrue, 'true')],
  ['output.is_non_linear_format_io', refused(TRT_ONLY, isTrue, 'true')],

  ['batch_input', refused('server-synthesised batch tensors (ragged batching) are not implemented; the model would get inputs it does not expect')],
  ['batch_output', refused('scattering outputs by batch_output is not implemented; answers would be split wrongly')],

  ['optimization', served('the onnxruntime session options below')],
  ['optimization.graph', served('onnxruntime graph optimisation')],
  ['optimization.graph.level', served("as Triton's onnxruntime backend: 0 all, -1 basic, 1 extended, 2 disabled")],
  ['optimization.priority', ignored(TRT_ONLY)],
  ['optimization.cuda', served('only the fields below')],
  [
    'optimization.cuda.graphs',
    ignored(`CUDA graph capture: ${ORT_BACKEND_NEVER_READS} (the TensorRT execution accelerator has its own trt_cuda_graph_enable parameter)`),
  ],
  ['optimization.cuda.busy_wait_events', ignored(GPU_ONLY_SPEED)],
  ['optimization.cuda.graph_spec', ignored(`the shapes of cuda.graphs captures: ${ORT_BACKEND_NEVER_READS}`)],
  ['optimization.cuda.output_copy_stream', ignored(GPU_ONLY_SPEED)],
  ['optimization.execution_accelerators', served('chooses execution providers')],
  [
    'optimization.execution_accelerators.gpu_execution_accelerator',
    served('"tensorrt" or "cuda": the provider to try first where the host has it, else CPU with a logged warning'),
  ],
  ['optimization.execution_accelerators.gpu_execution_accelerator.name', served('the provider name')],
  [
    'optimization.execution_accelerators.gpu_execution_accelerator.parameters',
    ignored('provider options are not passed on; the provider runs with its defaults (full FP32 precision)'),
  ],
  [
    'optimization.execution_accelerators.cpu_execution_accelerator',
    ignored('OpenVINO is not shipped with onnxruntime-node; the default CPU provider runs the model'),
  ],
  // Triton enables pinned memory when the block is absent; a block without `enable: true` turns it off.
  ['optimization.input_pinned_memory', ignored(GPU_ONLY_SPEED, pinnedOff, 'without enable: true (pinned memory off)')],
  ['optimization.input_pinned_memory.enable', served('true: what onnx-mme does anyway')],
  ['optimization.output_pinned_memory', ignored(GPU_ONLY_SPEED, pinnedOff, 'without enable: true (pinned memory off)')],
  ['optimization.output_pinned_memory.enable', served('true: what onnx-mme does anyway')],
  ['optimization.gather_kernel_buffer_threshold', ignored(GPU_ONLY_SPEED)],
  ['optimization.eager_batching', ignored(TRT_ONLY)],

  ['dynamic_batching', served("Triton's dynamic batcher")],
  ['dynamic_batching.preferred_batch_size', served('batch sizes sent at once when reached')],
  ['dynamic_batching.max_queue_delay_microseconds', served('how long the oldest request waits for more rows')],
  ['dynamic_batching.preserve_ordering', served('answers in arrival order')],
  ['dynamic_batching.priority_levels', served('priority queues; the request parameter priority picks one')],
  ['dynamic_batching.default_priority_level', served('level of requests that name none')],
  ['dynamic_batching.default_queue_policy', served('the queue policy of every level without its own')],
  ['dynamic_batching.default_queue_policy.timeout_action', served('REJECT or DELAY a request past its timeout')],
  ['dynamic_batching.default_queue_policy.default_timeout_microseconds', served('queue timeout (0 = none)')],
  ['dynamic_batching.default_queue_policy.allow_timeout_override', served('the request parameter timeout may shorten it')],
  ['dynamic_batching.default_queue_policy.max_queue_size', served('waiting requests before 503 (0 = MME_MAX_QUEUE_SIZE)')],
  ['dynamic_batching.priority_queue_policy', served('queue policy per priority level')],
  ['dynamic_batching.priority_queue_policy.timeout_action', served('as default_queue_policy')],
  ['dynamic_batching.priority_queue_policy.default_timeout_microseconds', served('as default_queue_policy')],
  ['dynamic_batching.priority_queue_policy.allow_timeout_override', served('as default_queue_policy')],
  ['dynamic_batching.priority_queue_policy.max_queue_size', served('as default_queue_policy')],

  // Stateful models (docs/stateful-models.md): scheduler/sequence-batcher.ts.
  ['sequence_batching', served('the sequence batcher: requests of one sequence (sequence_id) in order on one slot, with implicit state')],
  ['sequence_batching.direct', served('each sequence owns a slot (max(1, max_batch_size) per instance) until it ends; the default strategy')],
  ['sequence_batching.direct.max_queue_delay_microseconds', served('how long a batch waits for more slots to have a request ready')],
  ['sequence_batching.direct.minimum_slot_utilization', served('fraction of slots with a request ready before the batch is sent')],
  ['sequence_batching.oldest', served('batches the oldest ready requests of the candidate sequences, one per sequence')],
  ['sequence_batching.oldest.max_candidate_sequences', served('slots per instance (0 = max(1, max_batch_size))')],
  ['sequence_batching.oldest.preferred_batch_size', served('batch sizes sent at once when reached (default max_batch_size)')],
  ['sequence_batching.oldest.max_queue_delay_microseconds', served('how long the oldest ready request waits for more')],
  [
    'sequence_batching.oldest.preserve_ordering',
    refused('not implemented; requests of one sequence are always answered in order, across sequences answers go out as batches end', isTrue, 'true'),
  ],
  ['sequence_batching.max_sequence_idle_microseconds', served('a sequence without a request this long ends (default 1 s); its next request is told why')],
  ['sequence_batching.control_input', served('inputs the server fills: the client never sends them')],
  ['sequence_batching.control_input.name', served('the model input to fill')],
  ['sequence_batching.control_input.control', served('exactly one control per control input')],
  ['sequence_batching.control_input.control.kind', served('CONTROL_SEQUENCE_START, _END, _READY (always true: no padding slots), _CORRID')],
  ['sequence_batching.control_input.control.int32_false_true', served('INT32 false/true values')],
  ['sequence_batching.control_input.control.fp32_false_true', served('FP32 false/true values')],
  ['sequence_batching.control_input.control.bool_false_true', served('BOOL false/true values')],
  ['sequence_batching.control_input.control.data_type', served('CORRID as UINT64, INT64, UINT32, INT32 or STRING')],
  ['sequence_batching.state', served('implicit state: the output of one request fed back as the input of the next, kept in the server')],
  ['sequence_batching.state.input_name', served('the model input fed with the state')],
  ['sequence_batching.state.output_name', served('the model output kept as the next state (removed from answers)')],
  ['sequence_batching.state.data_type', served('numeric types (STRING and BF16 state are refused)')],
  ['sequence_batching.state.dims', served('without the batch dim; -1 needs an initial_state with fixed dims')],
  ['sequence_batching.state.initial_state', served('the state at a sequence start (none: zeros)')],
  ['sequence_batching.state.initial_state.data_type', served('must equal the state data type')],
  ['sequence_batching.state.initial_state.dims', served('fixed dims matching the state')],
  ['sequence_batching.state.initial_state.zero_data', served('the state starts as zeros')],
  ['sequence_batching.state.initial_state.data_file', served("raw little-endian data read from the model's initial_state/ folder")],
  ['sequence_batching.state.initial_state.name', served('required, as in Triton')],
  ['sequence_batching.state.use_same_buffer_for_input_output', ignored(GPU_ONLY_SPEED, isTrue, 'true')],
  ['sequence_batching.state.use_growable_memory', ignored(GPU_ONLY_SPEED, isTrue, 'true')],
  ['sequence_batching.iterative_sequence', refused('not implemented: it re-schedules the requests of a decoupled, generating backend', isTrue, 'true')],

  ['ensemble_scheduling', served("ensembles: steps run as their data is ready, through each step model's own batcher")],
  ['ensemble_scheduling.step', served('one composing model call')],
  ['ensemble_scheduling.step.model_name', served('the composing model, in the same package')],
  ['ensemble_scheduling.step.model_version', served('-1 (or 0) = latest')],
  ['ensemble_scheduling.step.input_map', served('step model input → ensemble tensor')],
  ['ensemble_scheduling.step.output_map', served('step model output → ensemble tensor')],
  ['ensemble_scheduling.step.model_namespace', refused('model namespaces are not implemented; the step could resolve to a different model')],
  [
    'ensemble_scheduling.max_inflight_requests',
    ignored("in-flight step requests are bounded by the server-wide limits instead (each step model's queue and MME_MAX_INFLIGHT_REQUESTS)"),
  ],

  ['instance_group', served('sessions per version (one per runtime worker at most) and the device they run on')],
  ['instance_group.name', served('the group name (defaults as Triton)')],
  ['instance_group.kind', served('KIND_AUTO/KIND_GPU/KIND_CPU choose the provider; KIND_MODEL as KIND_AUTO')],
  ['instance_group.count', served('sessions in the group (0 = 2 on CPU, 1 on GPU, as Triton)')],
  ['instance_group.rate_limiter', ignored('there is no rate limiter; instances run whenever a batch is ready')],
  ['instance_group.gpus', served('the GPU device ids')],
  ['instance_group.secondary_devices', ignored('NVDLA secondary devices are TensorRT only')],
  ['instance_group.profile', refused(TRT_ONLY)],
  ['instance_group.passive', ignored('passive instances serve like the others (answers are the same)', isTrue, 'true')],
  ['instance_group.host_policy', ignored('host policies (NUMA binding) are not implemented')],

  ['default_model_filename', served('the ONNX file in each version directory (default model.onnx)')],
  ['cc_model_filenames', ignored('per-compute-capability files are a TensorRT feature; default_model_filename is loaded')],
  ['metric_tags', ignored('not added as metric labels (label cardinality is fixed, docs/metrics-and-logs.md)')],
  [
    'parameters',
    served(
      'intra_op_thread_count, inter_op_thread_count and execution_thread for ONNX models; the processing-step backends read their own keys; other keys of an ONNX model are logged as ignored',
    ),
  ],
  ['parameters.string_value', served('the value')],

  ['model_warmup', served('each sample runs on every instance before the model serves; a failing sample fails the load')],
  ['model_warmup.name', served('names the sample in errors')],
  ['model_warmup.batch_size', served('rows per warm-up run (must be 1 for a model that does not batch)')],
  ['model_warmup.inputs', served('one entry per input')],
  ['model_warmup.inputs.data_type', served('the input datatype')],
  ['model_warmup.inputs.dims', served('without the batch dim; must be fixed')],
  ['model_warmup.inputs.zero_data', served('zeros of the input datatype')],
  ['model_warmup.inputs.random_data', served('random values')],
  ['model_warmup.inputs.input_data_file', served("raw little-endian data read from the model's warmup/ directory")],
  ['model_warmup.count', served('runs of the sample (0 = 1)')],

  ['model_operations', refused('custom operator libraries cannot be loaded into onnxruntime-node; the model would not run')],
  ['model_transaction_policy', served('holds the fields below')],
  [
    'model_transaction_policy.decoupled',
    refused('decoupled (streaming, 0..n responses) models are not implemented; every request gets exactly one answer', isTrue, 'true'),
  ],
  ['model_repository_agents', refused('repository agents (checksum, decryption, ...) are not run; the files would be loaded as they are')],
  ['response_cache', served('the response cache (MME_RESPONSE_CACHE_BYTES)')],
  ['response_cache.enable', served('cache successful answers of this model')],
  ['model_metrics', ignored("custom histogram buckets are not applied; latencies are exported with the server's buckets")],
]);

export interface FieldFinding {
  /** Dotted field path, e.g. `optimization.cuda.graphs`. */
  readonly path: string;
  readonly status: 'ignored' | 'refused';
  readonly note: string;
}

/** The entry that decides `path`: its own, or its nearest ancestor's. */
export function supportOf(path: string): { readonly path: string; readonly support: FieldSupport } | undefined {
  for (let p = path; p !== ''; p = p.includes('.') ? p.slice(0, p.lastIndexOf('.')) : '') {
    const support = FIELD_SUPPORT.get(p);
    if (support !== undefined) return { path: p, support };
  }
  return undefined;
}

function isSet(value: unknown, f: FieldDescriptor): boolean {
  if (value === undefined || value === null) return false;
  if (f.kind.type === 'map') return Object.keys(value as object).length > 0;
  if (f.repeated) return (value as unknown[]).length > 0;
  if (f.kind.type === 'message') return true;
  // A message inside a oneof is set when present; a scalar only when it differs from its proto3 default.
  return f.oneof !== undefined || value !== defaultValue(f.kind);
}

/**
 * Every ignored or refused field set in `json` (the canonical JSON form, as
 * decodeJsonForm gives it), in proto order. Fields inside an ignored or
 * refused block are not listed separately.
 */
export function fieldFindings(json: Readonly<Record<string, unknown>>): FieldFinding[] {
  const out: FieldFinding[] = [];
  walk(json, ModelConfigDescriptor, '', out);
  return out;
}

function walk(json: Readonly<Record<string, unknown>>, message: MessageDescriptor, prefix: string, out: FieldFinding[]): void {
  for (const f of message.fields) {
    const value = json[f.name];
    if (!isSet(value, f)) continue;
    const path = prefix === '' ? f.name : `${prefix}.${f.name}`;
    const entry = FIELD_SUPPORT.get(path) ?? supportOf(path)?.support;
    // The proto-walk unit test makes this unreachable; a new schema field without an entry fails loudly.
    if (entry === undefined) throw new Error(`config field '${path}' has no entry in config/field-support.ts`);
    if (entry.status !== 'served' && (entry.when === undefined || entry.when(value))) {
      if (!out.some((o) => o.path === path)) out.push({ path, status: entry.status, note: entry.note });
      continue;
    }
    if (!FIELD_SUPPORT.has(path)) continue; // covered by a served ancestor of a leaf: nothing below
    const kind = f.kind;
    if (kind.type === 'message') {
      for (const v of f.repeated ? (value as Record<string, unknown>[]) : [value as Record<string, unknown>]) walk(v, kind.message, path, out);
    } else if (kind.type === 'map' && kind.value.type === 'message') {
      for (const v of Object.values(value as Record<string, Record<string, unknown>>)) walk(v, kind.value.message, path, out);
    }
  }
}

/** ONNX Runtime `parameters` keys the server does not act on (processing steps read their own keys). */
export function ignoredParameterKeys(parameters: Readonly<Record<string, string>>): string[] {
  return Object.keys(parameters).filter((k) => !ONNX_PARAMETER_KEYS.includes(k));
}

/** The refusal of a config with refused fields: one INVALID_MODEL naming each and why. */
export function refusalProblems(findings: readonly FieldFinding[]): string[] {
  return findings.filter((f) => f.status === 'refused').map((f) => `field '${f.path}' is not supported by onnx-mme: ${f.note}`);
}

/** One line per ignored field, for the load's warning and `validate`'s notes. */
export function ignoredFieldMessage(finding: FieldFinding): string {
  return `config.pbtxt field '${finding.path}' is ignored: ${finding.note}`;
}

/**
 * The table as Markdown rows, for docs/model-packages.md (a docs test keeps
 * the page equal to this, so the page and the server cannot disagree).
 */
export function fieldSupportMarkdown(): string {
  const rows = ['| field | onnx-mme | what it does, or why not |', '|---|---|---|'];
  for (const [path, s] of FIELD_SUPPORT) {
    const verdict = s.status === 'served' ? 'served' : s.when === undefined ? s.status : `${s.status} when ${s.whenText ?? ''}`;
    rows.push(`| \`${path}\` | ${verdict} | ${s.note} |`);
  }
  return rows.join('\n');
}
