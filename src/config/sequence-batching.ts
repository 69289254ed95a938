/**
 * @module config/sequence-batching
 * `sequence_batching { … }` (inference.ModelSequenceBatching) checked and
 * turned into the typed SequenceBatchingConfig. Validation follows Triton's
 * core (`GetBooleanSequenceControlProperties`, `GetTypedSequenceControlProperties`,
 * `SequenceBatchScheduler::GenerateInitialStateData`) so a config Triton
 * loads loads here, and one Triton refuses is refused with the same reason.
 * The sub-fields onnx-mme does not serve are refused by name (never ignored).
 */
import { dataTypeFromConfigName, type DataType } from '../protocol/tensor.js';
import type {
  InitialStateConfig,
  SequenceBatchingConfig,
  SequenceControlConfig,
  SequenceControlKind,
  SequenceStateConfig,
  SequenceStrategy,
} from './model-config-types.js';

type Json = Record<string, unknown>;
const arr = <T = Json>(v: unknown): T[] => (Array.isArray(v) ? (v as T[]) : []);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const num = (v: unknown): number => (typeof v === 'number' ? v : Number(v ?? 0));
const opt = (v: unknown): Json | undefined => (typeof v === 'object' && v !== null ? (v as Json) : undefined);

/** core SEQUENCE_IDLE_DEFAULT_MICROSECONDS. */
export const SEQUENCE_IDLE_DEFAULT_MICROSECONDS = 1_000_000;

/** What CORRID may be (Triton: `GetTypedSequenceControlProperties` for CONTROL_SEQUENCE_CORRID). */
const CORRID_TYPES: ReadonlySet<string> = new Set(['TYPE_UINT64', 'TYPE_INT64', 'TYPE_UINT32', 'TYPE_INT32', 'TYPE_STRING']);
const FLAG_KINDS: readonly SequenceControlKind[] = ['CONTROL_SEQUENCE_START', 'CONTROL_SEQUENCE_END', 'CONTROL_SEQUENCE_READY'];

/** Normalisation (core NormalizeModelConfig): the idle default; oldest's preferred size defaults to max_batch_size. */
export function normaliseSequenceBatching(sequence: Json, maxBatchSize: number): void {
  if (num(sequence['max_sequence_idle_microseconds']) === 0) sequence['max_sequence_idle_microseconds'] = SEQUENCE_IDLE_DEFAULT_MICROSECONDS;
  const oldest = opt(sequence['oldest']);
  if (oldest !== undefined && arr(oldest['preferred_batch_size']).length === 0 && maxBatchSize > 0) oldest['preferred_batch_size'] = [maxBatchSize];
}

/** Every problem of the block, prefixed `sequence_batching:`. */
export function validateSequenceBatching(config: Json, sequence: Json, problems: string[]): void {
  const push = (m: string): void => {
    problems.push(`sequence_batching: ${m}`);
  };
  const mbs = num(config['max_batch_size']);
  if (opt(config['response_cache'])?.['enable'] === true) problems.push(`response_cache cannot be enabled with sequence_batching`);
  if (sequence['iterative_sequence'] === true) {
    push(`iterative_sequence is not served by onnx-mme (it re-schedules decoupled requests of a backend that generates; remove it)`);
  }
  const oldest = opt(sequence['oldest']);
  if (oldest !== undefined) {
    for (const size of arr<number>(oldest['preferred_batch_size'])) {
      if (size <= 0) push(`preferred_batch_size must be positive, got ${size}`);
      else if (size > Math.max(1, mbs)) push(`preferred_batch_size ${size} is larger than max_batch_size ${mbs}`);
    }
    if (num(oldest['max_candidate_sequences']) < 0) push(`oldest.max_candidate_sequences must be >= 0, got ${num(oldest['max_candidate_sequences'])}`);
    if (oldest['preserve_ordering'] === true) {
      push(`oldest.preserve_ordering is not served by onnx-mme (requests of one sequence are always answered in order; remove it)`);
    }
  }
  const direct = opt(sequence['direct']);
  const utilization = direct?.['minimum_slot_utilization'];
  if (direct !== undefined && !(typeof utilization === 'number' && utilization >= 0 && utilization <= 1)) {
    push(`minimum_slot_utilization must be in [0, 1], got ${String(utilization)}`);
  }

  const inputNames = new Set(arr(config['input']).map((t) => str(t['name'])));
  const outputNames = new Set(arr(config['output']).map((t) => str(t['name'])));
  const controlNames = new Set<string>();
  const kinds = new Map<string, number>();
  arr(sequence['control_input']).forEach((ci, i) => {
    const name = str(ci['name']);
    const label = name === '' ? `control_input #${i}` : `control_input '${name}'`;
    if (name === '') push(`${label}: must specify 'name'`);
    else if (controlNames.has(name)) push(`${label}: the name is used by more than one control_input`);
    else if (inputNames.has(name)) push(`${label}: is also listed in 'input'; the server fills control inputs, so remove it from 'input'`);
    controlNames.add(name);
    const controls = arr(ci['control']);
    if (controls.length !== 1) push(`${label}: must specify exactly one 'control', got ${controls.length}`);
    for (const c of controls) {
      const kind = str(c['kind']) || 'CONTROL_SEQUENCE_START';
      kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
      validateControl(label, kind, c, push);
    }
  });
  for (const [kind, count] of kinds) if (count > 1) push(`more than one control_input has kind ${kind} (${count})`);

  const stateInputs = new Set<string>();
  const stateOutputs = new Set<string>();
  arr(sequence['state']).forEach((st, i) => {
    const input = str(st['input_name']);
    const output = str(st['output_name']);
    const label = input === '' ? `state #${i}` : `state '${input}'`;
    if (input === '') push(`${label}: must specify 'input_name'`);
    if (output === '') push(`${label}: must specify 'output_name'`);
    if (input !== '' && stateInputs.has(input)) push(`${label}: state input name '${input}' is specified more than once`);
    if (output !== '' && stateOutputs.has(output)) push(`${label}: state output name '${output}' is specified more than once`);
    if (inputNames.has(input)) push(`${label}: '${input}' is also listed in 'input'; the server feeds implicit state, so remove it from 'input'`);
    if (controlNames.has(input)) push(`${label}: '${input}' is also a control_input`);
    if (outputNames.has(output)) push(`${label}: '${output}' is also listed in 'output'; the server keeps implicit state, so remove it from 'output'`);
    stateInputs.add(input);
    stateOutputs.add(output);
    const dtype = str(st['data_type']);
    if (dtype === 'TYPE_INVALID' || dtype === '') push(`${label}: must specify 'data_type'`);
    else if (dtype === 'TYPE_STRING' || dtype === 'TYPE_BF16') push(`${label}: data_type ${dtype} is not served for implicit state (use a numeric type)`);
    const dims = arr<number>(st['dims']);
    if (dims.length === 0) push(`${label}: dims must not be empty`);
    if (dims.some((d) => d < -1)) push(`${label}: dims must be >= 0 or -1 (variable), got [${dims.join(', ')}]`);
    const initial = arr(st['initial_state']);
    if (initial.length > 1) push(`${label}: initial_state must contain exactly one or zero element, found ${initial.length}`);
    const first = initial[0];
    if (first !== undefined) validateInitialState(label, dtype, dims, first, push);
    else if (dims.includes(-1)) push(`${label}: dims [${dims.join(', ')}] have a variable dimension, so the state needs an initial_state with fixed dims`);
  });
}

function validateControl(where: string, kind: string, c: Json, push: (m: string) => void): void {
  const dtype = str(c['data_type']);
  const lists = { int32: arr<number>(c['int32_false_true']), fp32: arr<number>(c['fp32_false_true']), bool: arr<boolean>(c['bool_false_true']) };
  const given = Object.entries(lists).filter(([, v]) => v.length > 0);
  if (kind === 'CONTROL_SEQUENCE_CORRID') {
    if (given.length > 0) push(`${where}: ${kind} must not specify ${given.map(([k]) => `${k}_false_true`).join(', ')}`);
    if (!CORRID_TYPES.has(dtype)) push(`${where}: ${kind} data_type must be one of ${[...CORRID_TYPES].join(', ')}, got ${dtype || 'none'}`);
    return;
  }
  if (!FLAG_KINDS.includes(kind as SequenceControlKind)) {
    push(`${where}: unknown control kind ${kind}`);
    return;
  }
  if (given.length !== 1) {
    push(
      `${where}: ${kind} must specify exactly one of int32_false_true, fp32_false_true, bool_false_true${given.length > 1 ? `, got ${given.map(([k]) => `${k}_false_true`).join(', ')}` : ''}`,
    );
    return;
  }
  const [which, values] = given[0]!;
  if (values.length !== 2) push(`${where}: ${which}_false_true must have exactly 2 entries (false, true), got ${values.length}`);
  const implied = which === 'int32' ? 'TYPE_INT32' : which === 'fp32' ? 'TYPE_FP32' : 'TYPE_BOOL';
  if (dtype !== 'TYPE_INVALID' && dtype !== '' && dtype !== implied) push(`${where}: data_type ${dtype} does not match ${which}_false_true (${implied})`);
}

function validateInitialState(where: string, dtype: string, dims: readonly number[], init: Json, push: (m: string) => void): void {
  const initType = str(init['data_type']);
  if (initType !== dtype) push(`${where}: the data type of initial_state (${initType || 'none'}) does not match the state data type (${dtype})`);
  if (str(init['name']) === '') push(`${where}: initial_state must specify 'name'`);
  const initDims = arr<number>(init['dims']);
  if (initDims.length !== dims.length) {
    push(`${where}: initial_state has ${initDims.length} dims but the state has ${dims.length}`);
    return;
  }
  initDims.forEach((d, i) => {
    if (d < 0) push(`${where}: initial_state dims must be fixed, got [${initDims.join(', ')}]`);
    else if (dims[i] !== -1 && dims[i] !== d) push(`${where}: initial_state dim ${i} is ${d} but the state says ${dims[i]}`);
  });
  const file = init['data_file'];
  if (init['zero_data'] === undefined && file === undefined) push(`${where}: initial_state must set zero_data or data_file`);
  if (typeof file === 'string') {
    const parts = file.split(/[\\/]/);
    if (file === '' || file.startsWith('/') || /^[A-Za-z]:/.test(file) || parts.includes('..')) {
      push(`${where}: initial_state data_file must be a relative path inside the model's initial_state/ folder, got '${file}'`);
    }
  }
}

function dataType(name: unknown): DataType {
  return dataTypeFromConfigName(str(name)) as DataType;
}

function toControl(ci: Json): SequenceControlConfig {
  const c = arr(ci['control'])[0]!;
  const kind = (str(c['kind']) || 'CONTROL_SEQUENCE_START') as SequenceControlKind;
  const inputName = str(ci['name']);
  if (kind === 'CONTROL_SEQUENCE_CORRID') return { kind, inputName, dataType: dataType(c['data_type']), falseTrue: undefined };
  const int32 = arr<number>(c['int32_false_true']);
  const fp32 = arr<number>(c['fp32_false_true']);
  const bool = arr<boolean>(c['bool_false_true']);
  if (int32.length === 2) return { kind, inputName, dataType: 'INT32', falseTrue: [int32[0]!, int32[1]!] };
  if (fp32.length === 2) return { kind, inputName, dataType: 'FP32', falseTrue: [fp32[0]!, fp32[1]!] };
  return { kind, inputName, dataType: 'BOOL', falseTrue: [bool[0] ? 1 : 0, bool[1] ? 1 : 0] };
}

function toInitialState(init: Json | undefined): InitialStateConfig | undefined {
  if (init === undefined) return undefined;
  const file = init['data_file'];
  return {
    name: str(init['name']),
    dataType: dataType(init['data_type']),
    dims: arr<number>(init['dims']).map(num),
    source: typeof file === 'string' ? { kind: 'file', file } : { kind: 'zero' },
  };
}

function toState(st: Json): SequenceStateConfig {
  return {
    inputName: str(st['input_name']),
    outputName: str(st['output_name']),
    dataType: dataType(st['data_type']),
    dims: arr<number>(st['dims']).map(num),
    initialState: toInitialState(arr(st['initial_state'])[0]),
  };
}

function toStrategy(sequence: Json, maxBatchSize: number): SequenceStrategy {
  const oldest = opt(sequence['oldest']);
  if (oldest !== undefined) {
    const candidates = num(oldest['max_candidate_sequences']);
    return {
      kind: 'oldest',
      maxCandidateSequences: candidates > 0 ? candidates : Math.max(1, maxBatchSize),
      preferredBatchSize: arr<number>(oldest['preferred_batch_size'])
        .map(num)
        .sort((a, b) => a - b),
      maxQueueDelayMicroseconds: num(oldest['max_queue_delay_microseconds']),
    };
  }
  const direct = opt(sequence['direct']);
  return {
    kind: 'direct',
    maxQueueDelayMicroseconds: num(direct?.['max_queue_delay_microseconds']),
    minimumSlotUtilization: num(direct?.['minimum_slot_utilization']),
  };
}

export function toSequenceBatching(sequence: Json | undefined, maxBatchSize: number): SequenceBatchingConfig | undefined {
  if (sequence === undefined) return undefined;
  return {
    strategy: toStrategy(sequence, maxBatchSize),
    maxSequenceIdleMicroseconds: num(sequence['max_sequence_idle_microseconds']),
    controls: arr(sequence['control_input'])
      .filter((ci) => arr(ci['control']).length === 1)
      .map(toControl),
    states: arr(sequence['state']).map(toState),
  };
}
