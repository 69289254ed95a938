/**
 * @module test/unit/scheduler/sequence-batcher
 * The sequence batcher with an injected clock and an executor whose runs end
 * when the test says so: one request per sequence at a time and in order,
 * the state fed back, reset at a start and dropped from answers, control
 * tensors, direct slots and the backlog (with its deadline), oldest batching
 * across sequences, idle ends, cancellation, the live-sequence bound, close.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CancelSource } from '../../../src/cancellation.js';
import type { Logger } from '../../../src/observability/logger.js';
import type { Tensor } from '../../../src/protocol/tensor.js';
import { SequenceBatcher } from '../../../src/scheduler/sequence-batcher.js';
import { initialStateTensor, type SequenceRequest } from '../../../src/scheduler/sequence-tensors.js';
import { SequenceTracker } from '../../../src/scheduler/sequence-tracker.js';
import { isServingError } from '../../support/serving-error.js';
import { config, FakeClock, ManualExecutor, settle } from './fakes.js';

/** OUTPUT = STATE + INPUT, STATE_OUT = OUTPUT, per row (the accumulator), plus every control echoed. */
function accumulate(inputs: ReadonlyMap<string, Tensor>): Map<string, Tensor> {
  const x = inputs.get('INPUT')!;
  const s = inputs.get('STATE')!;
  const data = Float32Array.from(x.data as Float32Array, (v, i) => v + (s.data as Float32Array)[i]!);
  const out = new Map<string, Tensor>([
    ['OUTPUT', { datatype: 'FP32', shape: [...x.shape], data }],
    ['STATE_OUT', { datatype: 'FP32', shape: [...x.shape], data: data.slice() }],
  ]);
  return out;
}

function seqConfig(strategy: string, mbs = 4, extra = ''): ReturnType<typeof config> {
  return config(
    `platform: "onnxruntime_onnx"\nmax_batch_size: ${mbs}\n` +
      `input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]\noutput [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]\n` +
      `sequence_batching { ${strategy} max_sequence_idle_microseconds: 1000\n` +
      `state [ { input_name: "STATE" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 1 ] initial_state: { name: "z" data_type: TYPE_FP32 dims: [ 1 ] zero_data: true } } ]\n${extra} }\n`,
  );
}

function setup(strategy = 'direct { }', options: { mbs?: number; instances?: number; maxSequences?: number; maxQueued?: number; extra?: string } = {}) {
  const warnings: string[] = [];
  const logger = { warn: (_fields: unknown, msg: string) => warnings.push(msg), info: () => {} } as unknown as Logger;
  const cfg = seqConfig(strategy, options.mbs ?? 4, options.extra);
  const clock = new FakeClock();
  const executor = new ManualExecutor(accumulate);
  const tracker = new SequenceTracker(options.maxSequences ?? 100);
  const events: string[] = [];
  let stateBytes = 0;
  const batcher = new SequenceBatcher({
    model: 'm',
    config: cfg.sequenceBatching!,
    maxBatchSize: cfg.maxBatchSize,
    instances: Array.from({ length: options.instances ?? 1 }, () => executor),
    initialStates: new Map(cfg.sequenceBatching!.states.map((s) => [s.inputName, initialStateTensor(s, cfg.maxBatchSize > 0, undefined, 'm')])),
    tracker,
    maxQueued: options.maxQueued ?? 100,
    onStateBytes: (d) => (stateBytes += d),
    metrics: { liveChanged: (d) => events.push(`live${d > 0 ? '+' : ''}${d}`), slotWait: () => events.push('wait'), ended: (r) => events.push(`end:${r}`) },
    clock,
    logger,
  });
  const send = (id: number | string, x: number, flags: Partial<SequenceRequest> = {}, cancel?: CancelSource, timeoutUs?: number) =>
    batcher.schedule(new Map([['INPUT', { datatype: 'FP32', shape: [1, 1], data: Float32Array.of(x) }]]), ['OUTPUT'], cancel, {
      sequence: { id, start: false, end: false, ...flags },
      ...(timeoutUs === undefined ? {} : { timeoutUs }),
    });
  return { batcher, clock, executor, tracker, events, warnings, send, stateBytes: () => stateBytes };
}

const value = async (p: Promise<Map<string, Tensor>>): Promise<number> => ((await p).get('OUTPUT')!.data as Float32Array)[0]!;

describe('sequence batcher', () => {
  test('a sequence runs one request at a time, in order, with its state fed back and kept out of the answer', async () => {
    const { send, executor, stateBytes } = setup();
    const a = send(1, 1, { start: true });
    const b = send(1, 2);
    const c = send(1, 3, { end: true });
    await settle();
    assert.equal(executor.calls.length, 1, 'the second request waits for the first');
    executor.call(0).finish();
    assert.equal(await value(a), 1);
    await settle();
    assert.equal(executor.calls.length, 2);
    assert.deepEqual([...(executor.call(1).inputs.get('STATE')!.data as Float32Array)], [1], 'the state of the first request');
    executor.call(1).finish();
    await settle();
    executor.call(2).finish();
    assert.equal(await value(b), 3);
    assert.equal(await value(c), 6);
    assert.deepEqual([...(await c).keys()], ['OUTPUT'], 'STATE_OUT never reaches the client');
    assert.ok(
      executor.calls.every((call) => call.outputNames.includes('STATE_OUT')),
      'the state output is always asked for',
    );
    assert.equal(stateBytes(), 0, 'the state is freed at the end');
  });

  test('a start resets the state; a continuation without a live sequence and a missing id are refused', async () => {
    const { send, executor } = setup();
    const a = send(5, 10, { start: true });
    await settle();
    executor.call(0).finish();
    await a;
    await assert.rejects(send(6, 1), isServingError('INVALID_REQUEST', /sequence 6 must specify the START flag/));
    await assert.rejects(send(0, 1, { start: true }), isServingError('INVALID_REQUEST', /non-zero or non-empty correlation ID/));
    const end = send(5, 1, { end: true });
    await settle();
    executor.call(1).finish();
    assert.equal(await value(end), 11);
    const again = send(5, 7, { start: true, end: true });
    await settle();
    executor.call(2).finish();
    assert.equal(await value(again), 7, 'a new sequence with the same id starts from the initial state');
  });

  for (const strategy of ['direct { }', 'oldest { max_candidate_sequences: 4 }']) {
    test(`${strategy.split(' ')[0]}: a start on a live id restarts it (Triton): the old sequence's queued requests run first on its state, the new one starts from the initial state in the same slot`, async () => {
      const { send, executor, events, warnings, stateBytes, batcher, tracker } = setup(strategy);
      const a = send(5, 10, { start: true });
      await settle();
      executor.call(0).finish();
      assert.equal(await value(a), 10);
      // The old sequence has a request queued behind a running one when the new start arrives.
      const b = send(5, 1);
      await settle();
      const c = send(5, 2);
      const restart = send(5, 100, { start: true });
      const d = send(5, 1);
      await settle();
      assert.equal(executor.calls.length, 2, 'one request of the sequence at a time');
      assert.equal(warnings.length, 1, warnings.join('\n'));
      assert.match(
        warnings[0]!,
        /sequence 5 for model 'm' has a conflict\. The previous sequence did not end before this sequence start\. Previous sequence will be terminated early\./,
      );
      assert.ok(events.includes('end:restart'), events.join(','));
      assert.equal(batcher.liveSequences, 1, 'one sequence ended, one started');
      assert.equal(tracker.liveSequences, 1);
      executor.call(1).finish();
      assert.equal(await value(b), 11);
      await settle();
      executor.call(2).finish();
      assert.equal(await value(c), 13, "the old sequence's queued request ran on its state");
      await settle();
      assert.deepEqual([...(executor.call(3).inputs.get('STATE')!.data as Float32Array)], [0], 'the restart runs on the initial state');
      executor.call(3).finish();
      assert.equal(await value(restart), 100);
      await settle();
      executor.call(4).finish();
      assert.equal(await value(d), 101, 'the new sequence goes on from its own state');
      assert.equal(stateBytes(), 4, "one state held: the new sequence's");
      const end = send(5, 1, { end: true });
      await settle();
      executor.call(5).finish();
      assert.equal(await value(end), 102);
      assert.equal(stateBytes(), 0);
      assert.equal(batcher.liveSequences, 0);
      assert.equal(events.filter((e) => e === 'end:restart').length, 1);
      assert.equal(events.filter((e) => e === 'end:end').length, 1);
    });
  }

  test('a restart with nothing of the old sequence waiting frees its state at once; a cancelled request of the old sequence does not end the new one', async () => {
    const { send, executor, stateBytes, batcher } = setup();
    const a = send(8, 3, { start: true });
    await settle();
    executor.call(0).finish();
    await a;
    assert.equal(stateBytes(), 4);
    const r = send(8, 1, { start: true });
    assert.equal(stateBytes(), 0, 'freed at the restart');
    await settle();
    executor.call(1).finish();
    assert.equal(await value(r), 1);
    // Old generation queued behind a running request, then cancelled after a restart: only that request fails.
    const running = send(8, 1);
    await settle();
    const cancel = new CancelSource();
    const old = send(8, 1, {}, cancel);
    const fresh = send(8, 50, { start: true });
    cancel.cancel();
    await assert.rejects(old, isServingError('CANCELLED', /cancelled while waiting/));
    executor.call(2).finish();
    assert.equal(await value(running), 2);
    await settle();
    executor.call(3).finish();
    assert.equal(await value(fresh), 50, 'the new sequence runs');
    assert.equal(batcher.liveSequences, 1);
  });

  test('string and integer ids are different sequences; a batch of several rows is refused', async () => {
    const { send, executor, batcher } = setup();
    const a = send('7', 1, { start: true });
    const b = send(7, 100, { start: true });
    await settle();
    for (const c of executor.calls) c.finish();
    assert.equal(await value(a), 1);
    assert.equal(await value(b), 100);
    const two = batcher.schedule(new Map([['INPUT', { datatype: 'FP32', shape: [2, 1], data: Float32Array.of(1, 2) }]]), ['OUTPUT'], undefined, {
      sequence: { id: 9, start: true, end: false },
    });
    await assert.rejects(two, isServingError('INVALID_INPUT', /batch-size 1/));
  });

  test('direct: slots per instance = max_batch_size; a sequence without a slot waits in the backlog until one ends', async () => {
    const { send, executor, events } = setup('direct { }', { mbs: 2 });
    const s1 = send(1, 1, { start: true });
    const s2 = send(2, 2, { start: true });
    const s3 = send(3, 3, { start: true });
    await settle();
    assert.equal(executor.calls.length, 1);
    assert.equal(executor.call(0).rows, 2, 'the two slotted sequences run as one batch');
    assert.ok(events.includes('wait'), 'the third waited for a slot');
    executor.call(0).finish();
    await Promise.all([s1, s2]);
    await settle();
    assert.equal(executor.calls.length, 1, 'sequence 3 still has no slot');
    const e1 = send(1, 1, { end: true });
    await settle();
    executor.call(1).finish();
    assert.equal(await value(e1), 2);
    await settle();
    assert.equal(executor.calls.length, 3, 'the freed slot went to sequence 3');
    executor.call(2).finish();
    assert.equal(await value(s3), 3);
  });

  test('a backlogged sequence that waits past its deadline ends with TIMEOUT, and its next request is told why', async () => {
    const { send, executor, clock, events } = setup('direct { }', { mbs: 1 });
    const s1 = send(1, 1, { start: true });
    const s2 = send(2, 2, { start: true }, undefined, 500);
    await settle();
    executor.call(0).finish();
    await s1;
    // Sequence 1 keeps its slot (it is live); 2 waits, and its deadline (timeout 500 µs) passes.
    const late = send(1, 1);
    const timedOut = assert.rejects(s2, isServingError('TIMEOUT', /waited \d+ µs for a free sequence slot/));
    await clock.advance(600);
    await timedOut;
    assert.ok(events.includes('end:slot_timeout'));
    await assert.rejects(send(2, 5), isServingError('INVALID_REQUEST', /sequence 2 ended because it waited/));
    executor.call(1).finish();
    assert.equal(await value(late), 2);
  });

  test('oldest: one batch across sequences, oldest first, one request per sequence', async () => {
    const { send, executor, clock } = setup('oldest { max_candidate_sequences: 8 preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 100 }', { mbs: 4 });
    const first = [send(1, 1, { start: true }), send(2, 2, { start: true }), send(1, 10)];
    await settle();
    assert.equal(executor.calls.length, 0, 'waits for a preferred batch or the delay');
    const more = [send(3, 3, { start: true }), send(4, 4, { start: true })];
    await settle();
    assert.equal(executor.calls.length, 1);
    assert.equal(executor.call(0).rows, 4, 'sequences 1-4: four rows, the second request of 1 not among them');
    assert.deepEqual([...(executor.call(0).inputs.get('INPUT')!.data as Float32Array)], [1, 2, 3, 4], 'oldest first');
    executor.call(0).finish();
    await settle();
    assert.deepEqual(await Promise.all([first[0]!, first[1]!, ...more].map(value)), [1, 2, 3, 4]);
    assert.equal(executor.calls.length, 1, 'the next batch (1 row) waits for the delay');
    await clock.advance(100);
    assert.equal(executor.calls.length, 2);
    executor.call(1).finish();
    assert.equal(await value(first[2]!), 11, 'the second step of sequence 1 saw the state of its first');
  });

  test('an idle sequence ends after max_sequence_idle_microseconds, frees its slot, and its next request is told why', async () => {
    const { send, executor, clock, events, tracker } = setup('direct { }', { mbs: 1 });
    const a = send(1, 1, { start: true });
    await settle();
    executor.call(0).finish();
    await a;
    assert.equal(tracker.liveSequences, 1);
    await clock.advance(1500);
    assert.ok(events.includes('end:idle'));
    assert.equal(tracker.liveSequences, 0);
    await assert.rejects(send(1, 1), isServingError('INVALID_REQUEST', /ended after 1000 µs without a request/));
    const b = send(2, 2, { start: true });
    await settle();
    executor.call(1).finish();
    assert.equal(await value(b), 2, 'the slot is free again');
  });

  test('a cancelled queued request ends its sequence (a skipped step would corrupt the state)', async () => {
    const { send, executor } = setup();
    const a = send(1, 1, { start: true });
    const source = new CancelSource();
    const b = send(1, 2, {}, source);
    await settle();
    source.cancel();
    await assert.rejects(b, isServingError('CANCELLED', /cancelled while waiting/));
    executor.call(0).finish();
    assert.equal(await value(a), 1);
    await assert.rejects(send(1, 3), isServingError('INVALID_REQUEST', /cancelled/));
  });

  test('the live-sequence bound refuses a start with OVERLOADED; an end makes room', async () => {
    const { send, executor } = setup('direct { }', { maxSequences: 2 });
    const a = send(1, 1, { start: true });
    const b = send(2, 1, { start: true });
    await assert.rejects(send(3, 1, { start: true }), isServingError('OVERLOADED', /MME_MAX_SEQUENCES/));
    await settle();
    executor.call(0).finish();
    await Promise.all([a, b]);
    const end = send(1, 1, { end: true });
    await settle();
    executor.call(1).finish();
    await end;
    const c = send(3, 1, { start: true });
    await settle();
    executor.call(2).finish();
    assert.equal(await value(c), 1);
  });

  test('a failed run leaves the state as it was; the sequence goes on', async () => {
    const { send, executor } = setup();
    const a = send(1, 1, { start: true });
    await settle();
    executor.call(0).finish();
    await a;
    const bad = send(1, 2);
    await settle();
    executor.call(1).fail(new Error('boom'));
    await assert.rejects(bad, /boom/);
    const next = send(1, 5);
    await settle();
    executor.call(2).finish();
    assert.equal(await value(next), 6);
  });

  test('close runs what is queued, then ends every live sequence; new requests are refused', async () => {
    const { send, executor, batcher, events } = setup();
    const a = send(1, 1, { start: true });
    await settle();
    const closed = batcher.close();
    await assert.rejects(send(2, 1, { start: true }), isServingError('MODEL_NOT_FOUND', /being unloaded/));
    executor.call(0).finish();
    assert.equal(await value(a), 1);
    await closed;
    assert.ok(events.includes('end:unload'));
  });
});
