/**
 * @module examples/models/stateful-zoo
 * Generated stateful models (Triton `sequence_batching`), with the plain-JS
 * maths of each so tests can run a sequence by hand:
 *
 * - `accumulator`: OUTPUT = STATE + INPUT, STATE_OUT = the same (implicit
 *   state; the server feeds STATE_OUT back as STATE).
 * - `decay`: STATE_OUT = 0.5·STATE + INPUT, OUTPUT = STATE_OUT: the answer
 *   depends on the order of the steps, so a reordered or merged sequence is
 *   visible.
 * - `controls`: no state; OUTPUT = INPUT + 1000·READY + 100·START + 10·END
 *   and CORRID_OUT = CORRID, with START as fp32, END as int32, READY as bool
 *   and CORRID as int64: every control form the server generates.
 */
import { attr, buildModel, node, tensor, valueInfo } from './onnx-builder.js';
import type { ZooModel } from './zoo.js';

export type SequenceStrategyText = 'direct' | 'oldest';

export interface StatefulOptions {
  readonly features?: number;
  /** max_batch_size; default 8 (0: no batching, one slot per instance). */
  readonly maxBatchSize?: number;
  /** `direct { }` (default) or `oldest { … }`, or the whole strategy block verbatim. */
  readonly strategy?: string;
  readonly idleUs?: number;
  /** Extra text inside sequence_batching { }. */
  readonly extra?: string;
  /** Extra top-level text (e.g. instance_group). */
  readonly topLevel?: string;
}

function strategyText(strategy: string | undefined): string {
  if (strategy === undefined || strategy === 'direct') return 'direct { }';
  if (strategy === 'oldest') return 'oldest { max_candidate_sequences: 64 }';
  return strategy;
}

function stateConfig(features: number, batching: boolean, options: StatefulOptions): string {
  const dims = `[ ${features} ]`;
  return (
    [
      `platform: "onnxruntime_onnx"`,
      `max_batch_size: ${batching ? (options.maxBatchSize ?? 8) : 0}`,
      `input [ { name: "INPUT" data_type: TYPE_FP32 dims: ${dims} } ]`,
      `output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: ${dims} } ]`,
      `sequence_batching {`,
      `  ${strategyText(options.strategy)}`,
      ...(options.idleUs !== undefined ? [`  max_sequence_idle_microseconds: ${options.idleUs}`] : []),
      `  state [ {`,
      `    input_name: "STATE" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: ${dims}`,
      `    initial_state: { name: "zeros" data_type: TYPE_FP32 dims: ${dims} zero_data: true }`,
      `  } ]`,
      ...(options.extra ? [options.extra] : []),
      `}`,
      ...(options.topLevel ? [options.topLevel] : []),
    ].join('\n') + '\n'
  );
}

function stateIo(features: number, batching: boolean): { shape: (string | number)[] } {
  return { shape: batching ? ['batch', features] : [features] };
}

/** OUTPUT = STATE + INPUT; STATE_OUT = OUTPUT. */
export function accumulator(options: StatefulOptions = {}): ZooModel {
  const features = options.features ?? 4;
  const batching = (options.maxBatchSize ?? 8) > 0;
  const { shape } = stateIo(features, batching);
  const onnx = buildModel({
    inputs: [valueInfo('INPUT', 'FP32', shape), valueInfo('STATE', 'FP32', shape)],
    outputs: [valueInfo('OUTPUT', 'FP32', shape), valueInfo('STATE_OUT', 'FP32', shape)],
    nodes: [node('Add', ['STATE', 'INPUT'], ['OUTPUT']), node('Identity', ['OUTPUT'], ['STATE_OUT'])],
    docString: 'accumulator: OUTPUT = STATE + INPUT, STATE_OUT = OUTPUT',
  });
  return { onnx, config: stateConfig(features, batching, options) };
}

/** STATE_OUT = 0.5 · STATE + INPUT; OUTPUT = STATE_OUT. */
export function decay(options: StatefulOptions = {}): ZooModel {
  const features = options.features ?? 4;
  const batching = (options.maxBatchSize ?? 8) > 0;
  const { shape } = stateIo(features, batching);
  const onnx = buildModel({
    inputs: [valueInfo('INPUT', 'FP32', shape), valueInfo('STATE', 'FP32', shape)],
    outputs: [valueInfo('OUTPUT', 'FP32', shape), valueInfo('STATE_OUT', 'FP32', shape)],
    initializers: [tensor('HALF', 'FP32', [], [0.5])],
    nodes: [node('Mul', ['STATE', 'HALF'], ['HALVED']), node('Add', ['HALVED', 'INPUT'], ['STATE_OUT']), node('Identity', ['STATE_OUT'], ['OUTPUT'])],
    docString: 'decay: STATE_OUT = 0.5 * STATE + INPUT, OUTPUT = STATE_OUT',
  });
  return { onnx, config: stateConfig(features, batching, options) };
}

/** The accumulator's and decay's maths: the outputs of a sequence of steps run by hand. */
export function runByHand(kind: 'accumulator' | 'decay', steps: readonly Float32Array[]): Float32Array[] {
  let state = new Float32Array(steps[0]?.length ?? 0);
  return steps.map((x) => {
    const next = new Float32Array(x.length);
    for (let i = 0; i < x.length; i++) next[i] = Math.fround((kind === 'decay' ? Math.fround(state[i]! * 0.5) : state[i]!) + x[i]!);
    state = next;
    return next;
  });
}

/** Every control form: START fp32, END int32, READY bool, CORRID int64; max_batch_size 8, INPUT/OUTPUT [1]. */
export function controls(options: { strategy?: string; corridType?: 'TYPE_INT64' | 'TYPE_UINT64' } = {}): ZooModel {
  const one = ['batch', 1];
  const corrid = options.corridType === 'TYPE_UINT64' ? 'UINT64' : 'INT64';
  const onnx = buildModel({
    inputs: [
      valueInfo('INPUT', 'FP32', one),
      valueInfo('START', 'FP32', one),
      valueInfo('END', 'INT32', one),
      valueInfo('READY', 'BOOL', one),
      valueInfo('CORRID', corrid, one),
    ],
    outputs: [valueInfo('OUTPUT', 'FP32', one), valueInfo('CORRID_OUT', 'FP32', one)],
    initializers: [tensor('K1000', 'FP32', [], [1000]), tensor('K100', 'FP32', [], [100]), tensor('K10', 'FP32', [], [10])],
    nodes: [
      node('Cast', ['READY'], ['READY_F'], { attributes: { to: attr.int(1) } }),
      node('Cast', ['END'], ['END_F'], { attributes: { to: attr.int(1) } }),
      node('Cast', ['CORRID'], ['CORRID_OUT'], { attributes: { to: attr.int(1) } }),
      node('Mul', ['READY_F', 'K1000'], ['R']),
      node('Mul', ['START', 'K100'], ['S']),
      node('Mul', ['END_F', 'K10'], ['E']),
      node('Add', ['INPUT', 'R'], ['A1']),
      node('Add', ['A1', 'S'], ['A2']),
      node('Add', ['A2', 'E'], ['OUTPUT']),
    ],
    docString: 'controls: OUTPUT = INPUT + 1000 READY + 100 START + 10 END, CORRID_OUT = CORRID',
  });
  const config =
    [
      `platform: "onnxruntime_onnx"`,
      `max_batch_size: 8`,
      `input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]`,
      `output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1 ] }, { name: "CORRID_OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]`,
      `sequence_batching {`,
      `  ${strategyText(options.strategy)}`,
      `  control_input [`,
      `    { name: "START" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ] },`,
      `    { name: "END" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] },`,
      `    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] } ] },`,
      `    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: ${options.corridType ?? 'TYPE_INT64'} } ] }`,
      `  ]`,
      `}`,
    ].join('\n') + '\n';
  return { onnx, config };
}
