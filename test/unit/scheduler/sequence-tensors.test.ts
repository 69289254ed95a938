/**
 * @module test/unit/scheduler/sequence-tensors
 * The tensors the sequence batcher adds: control values and shapes in each
 * form, CORRID in each type (and the ids each refuses), initial state from
 * zeros or a data file, and state copies that own their memory.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { SequenceControlConfig, SequenceStateConfig } from '../../../src/config/model-config-types.js';
import { controlTensors, initialStateTensor, ownedCopy, sequenceKey } from '../../../src/scheduler/sequence-tensors.js';
import { isServingError } from '../../support/serving-error.js';

const flags: SequenceControlConfig[] = [
  { kind: 'CONTROL_SEQUENCE_START', inputName: 'S', dataType: 'FP32', falseTrue: [0, 1] },
  { kind: 'CONTROL_SEQUENCE_END', inputName: 'E', dataType: 'INT32', falseTrue: [-1, 7] },
  { kind: 'CONTROL_SEQUENCE_READY', inputName: 'R', dataType: 'BOOL', falseTrue: [0, 1] },
];

const corrid = (dataType: SequenceControlConfig['dataType']): SequenceControlConfig => ({
  kind: 'CONTROL_SEQUENCE_CORRID',
  inputName: 'C',
  dataType,
  falseTrue: undefined,
});

describe('sequence tensors', () => {
  test('flags carry the configured false/true values, [1, 1] with batching and [1] without', () => {
    const start = new Map(controlTensors(flags, true, 'm').forRequest(1, true, false));
    assert.deepEqual([...(start.get('S')!.data as Float32Array)], [1]);
    assert.deepEqual([...(start.get('E')!.data as Int32Array)], [-1]);
    assert.deepEqual([...(start.get('R')!.data as Uint8Array)], [1], 'READY is true for every request that runs');
    assert.deepEqual(start.get('S')!.shape, [1, 1]);
    const end = new Map(controlTensors(flags, false, 'm').forRequest(1, false, true));
    assert.deepEqual([[...(end.get('S')!.data as Float32Array)], [...(end.get('E')!.data as Int32Array)]], [[0], [7]]);
    assert.deepEqual(end.get('E')!.shape, [1]);
  });

  test('CORRID in each type; a string id needs TYPE_STRING, an id must fit the type', () => {
    assert.deepEqual(
      [...(controlTensors([corrid('UINT64')], true, 'm').forRequest(2 ** 53 - 1, false, false)[0]![1].data as BigUint64Array)],
      [2n ** 53n - 1n],
    );
    assert.deepEqual([...(controlTensors([corrid('INT64')], true, 'm').forRequest(42, false, false)[0]![1].data as BigInt64Array)], [42n]);
    assert.deepEqual([...(controlTensors([corrid('INT32')], true, 'm').forRequest(42, false, false)[0]![1].data as Int32Array)], [42]);
    assert.deepEqual(controlTensors([corrid('BYTES')], true, 'm').forRequest('mic-1', false, false)[0]![1].data, ['mic-1']);
    assert.deepEqual(controlTensors([corrid('BYTES')], true, 'm').forRequest(7, false, false)[0]![1].data, ['7']);
    assert.throws(
      () => controlTensors([corrid('UINT64')], true, 'm').forRequest('mic-1', false, false),
      isServingError('INVALID_REQUEST', /is a string but the model's CONTROL_SEQUENCE_CORRID input 'C' is UINT64/),
    );
    assert.throws(() => controlTensors([corrid('UINT32')], true, 'm').forRequest(2 ** 33, false, false), isServingError('INVALID_REQUEST', /does not fit/));
    assert.notEqual(sequenceKey(7), sequenceKey('7'));
  });

  test('initial state: zeros, or the bytes of a data file (too short is refused)', () => {
    const state: SequenceStateConfig = {
      inputName: 'h',
      outputName: 'hn',
      dataType: 'FP32',
      dims: [2, -1],
      initialState: { name: 'i', dataType: 'FP32', dims: [2, 2], source: { kind: 'file', file: 'h.bin' } },
    };
    const bytes = new Uint8Array(Float32Array.of(1, 2, 3, 4).buffer);
    const t = initialStateTensor(state, true, bytes, 'm');
    assert.deepEqual(
      [t.shape, [...(t.data as Float32Array)]],
      [
        [1, 2, 2],
        [1, 2, 3, 4],
      ],
    );
    const zeros = initialStateTensor({ ...state, initialState: { ...state.initialState!, source: { kind: 'zero' } } }, false, undefined, 'm');
    assert.deepEqual(
      [zeros.shape, [...(zeros.data as Float32Array)]],
      [
        [2, 2],
        [0, 0, 0, 0],
      ],
    );
    assert.throws(
      () => initialStateTensor(state, true, bytes.subarray(0, 8), 'm'),
      isServingError('INVALID_MODEL', /expects 16 bytes, but its data_file has only 8/),
    );
  });

  test('a kept state owns its memory (not a view of the whole batch output)', () => {
    const batch = new Float32Array(8);
    const view = { datatype: 'FP32' as const, shape: [1, 4], data: batch.subarray(4, 8) };
    const copy = ownedCopy(view);
    assert.equal((copy.data as Float32Array).buffer.byteLength, 16);
    batch[4] = 9;
    assert.equal((copy.data as Float32Array)[0], 0);
  });
});
