/**
 * @module test/unit/config/sequence-batching
 * `sequence_batching` through the real parser into the typed config:
 * strategies with their defaults, every control form, state with its
 * initial state, and the problems Triton refuses (each named), plus the
 * sub-fields onnx-mme does not serve, refused by name.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseModelConfig } from '../../../src/config/model-config.js';
import { ServingError } from '../../../src/errors.js';

const HEAD = `platform: "onnxruntime_onnx"\nmax_batch_size: 8\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]\noutput [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]\n`;

const parse = (body: string, head = HEAD) => parseModelConfig(`${head}sequence_batching { ${body} }`, { sourceName: 'm/config.pbtxt', directoryName: 'm' });

function problems(body: string, head = HEAD): string {
  try {
    parse(body, head);
  } catch (err) {
    assert.ok(err instanceof ServingError);
    assert.equal(err.code, 'INVALID_MODEL');
    return err.message;
  }
  assert.fail('expected the config to be refused');
}

describe('sequence_batching config', () => {
  test('an empty block: direct, 1 s idle, no controls, no state', () => {
    const s = parse('').sequenceBatching!;
    assert.deepEqual(s.strategy, { kind: 'direct', maxQueueDelayMicroseconds: 0, minimumSlotUtilization: 0 });
    assert.equal(s.maxSequenceIdleMicroseconds, 1_000_000);
    assert.deepEqual([s.controls, s.states], [[], []]);
    assert.equal(parseModelConfig(HEAD, { sourceName: 'm', directoryName: 'm' }).sequenceBatching, undefined);
  });

  test('oldest: candidates default to max_batch_size, preferred sizes to [max_batch_size]', () => {
    const s = parse('oldest { max_queue_delay_microseconds: 100 }').sequenceBatching!;
    assert.deepEqual(s.strategy, { kind: 'oldest', maxCandidateSequences: 8, preferredBatchSize: [8], maxQueueDelayMicroseconds: 100 });
    const t = parse('oldest { max_candidate_sequences: 32 preferred_batch_size: [ 4, 2 ] }').sequenceBatching!;
    assert.deepEqual(t.strategy, { kind: 'oldest', maxCandidateSequences: 32, preferredBatchSize: [2, 4], maxQueueDelayMicroseconds: 0 });
  });

  test('every control form: fp32, int32 and bool flags, CORRID typed', () => {
    const s = parse(`control_input [
      { name: "S" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ] },
      { name: "E" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 5 ] } ] },
      { name: "R" control [ { kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] } ] },
      { name: "C" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_INT64 } ] } ]`).sequenceBatching!;
    assert.deepEqual(
      s.controls.map((c) => [c.kind, c.inputName, c.dataType, c.falseTrue]),
      [
        ['CONTROL_SEQUENCE_START', 'S', 'FP32', [0, 1]],
        ['CONTROL_SEQUENCE_END', 'E', 'INT32', [0, 5]],
        ['CONTROL_SEQUENCE_READY', 'R', 'BOOL', [0, 1]],
        ['CONTROL_SEQUENCE_CORRID', 'C', 'INT64', undefined],
      ],
    );
  });

  test('state with its initial state (zero_data or a data_file)', () => {
    const s = parse(`state [ { input_name: "h" output_name: "hn" data_type: TYPE_FP32 dims: [ 2, -1 ]
      initial_state: { name: "init" data_type: TYPE_FP32 dims: [ 2, 3 ] data_file: "h.bin" } } ]`).sequenceBatching!;
    assert.deepEqual(s.states, [
      {
        inputName: 'h',
        outputName: 'hn',
        dataType: 'FP32',
        dims: [2, -1],
        initialState: { name: 'init', dataType: 'FP32', dims: [2, 3], source: { kind: 'file', file: 'h.bin' } },
      },
    ]);
  });

  test('bad controls are refused, each named', () => {
    assert.match(
      problems(`control_input [ { name: "S" control [ { kind: CONTROL_SEQUENCE_START } ] } ]`),
      /control_input 'S': CONTROL_SEQUENCE_START must specify exactly one of int32_false_true/,
    );
    assert.match(problems(`control_input [ { name: "S" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 1 ] } ] } ]`), /exactly 2 entries/);
    assert.match(
      problems(`control_input [ { name: "C" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_FP32 } ] } ]`),
      /CORRID data_type must be one of/,
    );
    assert.match(
      problems(
        `control_input [ { name: "A" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] }, { name: "B" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] } ]`,
      ),
      /more than one control_input has kind CONTROL_SEQUENCE_END/,
    );
    assert.match(
      problems(`control_input [ { name: "x" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]`),
      /control_input 'x': is also listed in 'input'/,
    );
  });

  test('bad state is refused, each named', () => {
    assert.match(
      problems(`state [ { input_name: "h" output_name: "hn" data_type: TYPE_FP32 dims: [ -1 ] } ]`),
      /variable dimension, so the state needs an initial_state/,
    );
    assert.match(
      problems(
        `state [ { input_name: "h" output_name: "hn" data_type: TYPE_FP32 dims: [ 2 ] initial_state: { name: "i" data_type: TYPE_INT32 dims: [ 2 ] zero_data: true } } ]`,
      ),
      /data type of initial_state \(TYPE_INT32\) does not match/,
    );
    assert.match(
      problems(
        `state [ { input_name: "h" output_name: "hn" data_type: TYPE_FP32 dims: [ 2 ] initial_state: { data_type: TYPE_FP32 dims: [ 2 ] zero_data: true } } ]`,
      ),
      /initial_state must specify 'name'/,
    );
    assert.match(
      problems(
        `state [ { input_name: "h" output_name: "hn" data_type: TYPE_FP32 dims: [ 2 ] initial_state: { name: "i" data_type: TYPE_FP32 dims: [ 3 ] zero_data: true } } ]`,
      ),
      /initial_state dim 0 is 3 but the state says 2/,
    );
    assert.match(
      problems(
        `state [ { input_name: "h" output_name: "hn" data_type: TYPE_FP32 dims: [ 2 ] initial_state: { name: "i" data_type: TYPE_FP32 dims: [ 2 ] data_file: "../../etc/passwd" } } ]`,
      ),
      /relative path inside the model's initial_state\/ folder/,
    );
    assert.match(problems(`state [ { input_name: "x" output_name: "hn" data_type: TYPE_FP32 dims: [ 4 ] } ]`), /'x' is also listed in 'input'/);
    assert.match(problems(`state [ { input_name: "h" output_name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]`), /'y' is also listed in 'output'/);
  });

  test('what onnx-mme does not serve is refused by name', () => {
    assert.match(problems(`iterative_sequence: true`), /iterative_sequence is not served/);
    assert.match(problems(`oldest { preserve_ordering: true }`), /oldest.preserve_ordering is not served/);
    assert.match(
      problems(`state [ { input_name: "h" output_name: "hn" data_type: TYPE_STRING dims: [ 1 ] } ]`),
      /TYPE_STRING is not served for implicit state/,
    );
    assert.match(problems('', `${HEAD}response_cache { enable: true }\n`), /response_cache cannot be enabled with sequence_batching/);
  });
});
