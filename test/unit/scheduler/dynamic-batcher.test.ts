/**
 * @module test/unit/scheduler/dynamic-batcher
 * The dynamic batcher with an injected clock and an executor whose runs end
 * when the test says so: batch composition (rows, preferred sizes, delay from
 * the oldest request), incompatible shapes kept apart, ordering, priorities,
 * queue bound, timeouts, abort, a failing batch, the instance limit, close,
 * and the per-batch metrics. No sleeps, no timing assertions.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CancelSource, cancellationOf, type Cancellation } from '../../../src/cancellation.js';
import type { ModelConfig } from '../../../src/config/model-config-types.js';
import { ServingError } from '../../../src/errors.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import type { Tensor } from '../../../src/protocol/tensor.js';
import { DEFAULT_BATCHING, resolveBatchPolicy, type BatchingDefaults } from '../../../src/scheduler/batch-policy.js';
import { DynamicBatcher } from '../../../src/scheduler/dynamic-batcher.js';
import type { ScheduleOptions } from '../../../src/scheduler/model-scheduler.js';
import { isServingError } from '../../support/serving-error.js';
import { batchingConfig, config, expectedRows, FakeClock, ManualExecutor, rowsRequest, settle } from './fakes.js';

interface Setup {
  readonly batcher: DynamicBatcher;
  readonly clock: FakeClock;
  readonly executor: ManualExecutor;
}

function setup(
  cfg: ModelConfig,
  options: { instances?: number; configured?: boolean; defaults?: Partial<BatchingDefaults>; metrics?: ReturnType<typeof createMetrics> } = {},
): Setup {
  const clock = new FakeClock();
  const executor = new ManualExecutor();
  const policy = resolveBatchPolicy(cfg, options.configured ?? cfg.dynamicBatching !== undefined, { ...DEFAULT_BATCHING, ...options.defaults });
  const batcher = new DynamicBatcher({
    model: 'm',
    policy,
    instances: Array.from({ length: options.instances ?? 1 }, () => executor),
    clock,
    ...(options.metrics ? { metrics: options.metrics.forTarget('t').forModel('m', '1') } : {}),
  });
  return { batcher, clock, executor };
}

interface Tracked {
  readonly promise: Promise<Map<string, Tensor>>;
  state: 'pending' | 'resolved' | 'rejected';
  value?: Map<string, Tensor>;
  error?: unknown;
}

/** Schedule and record how the promise ends, without awaiting it. */
function send(b: DynamicBatcher, inputs: Map<string, Tensor>, options?: ScheduleOptions, cancel?: Cancellation, outputs = ['OUTPUT0']): Tracked {
  const promise = b.schedule(inputs, outputs, cancel, options);
  const t: Tracked = { promise, state: 'pending' };
  promise.then(
    (v) => {
      t.state = 'resolved';
      t.value = v;
    },
    (e: unknown) => {
      t.state = 'rejected';
      t.error = e;
    },
  );
  return t;
}

function outputOf(t: Tracked): { shape: readonly number[]; data: number[] } {
  assert.equal(t.state, 'resolved', `request ${t.state}: ${String(t.error)}`);
  const out = t.value!.get('OUTPUT0')!;
  return { shape: out.shape, data: Array.from(out.data as Float32Array) };
}

function rejectedWith(t: Tracked, code: string, pattern: RegExp): void {
  assert.equal(t.state, 'rejected', `expected a rejection, got ${t.state}`);
  assert.ok(isServingError(code as never, pattern)(t.error), `got ${String(t.error)}`);
}

describe('the no-tuning default (max_batch_size > 0, no dynamic_batching block)', () => {
  test('the first request runs at once, alone; requests queued meanwhile merge into the next batch; each gets its own rows', async () => {
    const { batcher, executor } = setup(batchingConfig(8));
    const a = send(batcher, rowsRequest(1, 1));
    await settle();
    assert.equal(executor.calls.length, 1, 'no added delay: the first request ran at once');
    assert.equal(executor.call(0).rows, 1);
    const queued = [send(batcher, rowsRequest(2, 1)), send(batcher, rowsRequest(3, 2)), send(batcher, rowsRequest(4, 1))];
    await settle();
    assert.equal(executor.calls.length, 1, 'one instance: the others wait for it');
    assert.equal(batcher.queueLength, 3);
    executor.call(0).finish();
    await settle();
    assert.deepEqual(outputOf(a), { shape: [1, 2], data: expectedRows(1, 1) });
    assert.equal(executor.calls.length, 2);
    assert.equal(executor.call(1).rows, 4, 'three requests, four rows, one execution');
    executor.call(1).finish();
    await settle();
    assert.deepEqual(outputOf(queued[0]!), { shape: [1, 2], data: expectedRows(2, 1) });
    assert.deepEqual(outputOf(queued[1]!), { shape: [2, 2], data: expectedRows(3, 2) });
    assert.deepEqual(outputOf(queued[2]!), { shape: [1, 2], data: expectedRows(4, 1) });
  });

  test('batches count rows: they never pass max_batch_size, and a request that does not fit waits for the next', async () => {
    const { batcher, executor } = setup(batchingConfig(8));
    const first = send(batcher, rowsRequest(0, 1));
    await settle();
    const r = [send(batcher, rowsRequest(1, 3)), send(batcher, rowsRequest(2, 4)), send(batcher, rowsRequest(3, 2)), send(batcher, rowsRequest(4, 7))];
    await settle();
    executor.call(0).finish();
    await settle();
    assert.equal(executor.call(1).rows, 7, '3 + 4 rows; + 2 would pass 8');
    executor.call(1).finish();
    await settle();
    assert.equal(executor.call(2).rows, 2, '2 + 7 would pass 8');
    executor.call(2).finish();
    await settle();
    assert.equal(executor.call(3).rows, 7);
    executor.call(3).finish();
    await settle();
    assert.equal(first.state, 'resolved');
    r.forEach((t, i) => assert.deepEqual(outputOf(t).data, expectedRows(i + 1, [3, 4, 2, 7][i]!)));
  });

  test('MME_BATCH_MAX_SIZE caps merged rows; a larger request (within max_batch_size) still runs, alone', async () => {
    const { batcher, executor } = setup(batchingConfig(8), { defaults: { maxBatchSize: 2 } });
    send(batcher, rowsRequest(0, 1));
    await settle();
    const big = send(batcher, rowsRequest(1, 6));
    const small = [send(batcher, rowsRequest(2, 1)), send(batcher, rowsRequest(3, 1)), send(batcher, rowsRequest(4, 1))];
    await settle();
    executor.call(0).finish();
    await settle();
    assert.equal(executor.call(1).rows, 6);
    executor.call(1).finish();
    await settle();
    assert.equal(executor.call(2).rows, 2);
    executor.call(2).finish();
    await settle();
    assert.equal(executor.call(3).rows, 1);
    executor.call(3).finish();
    await settle();
    assert.deepEqual(outputOf(big).data, expectedRows(1, 6));
    small.forEach((t, i) => assert.deepEqual(outputOf(t).data, expectedRows(i + 2, 1)));
  });

  test('MME_BATCH_MAX_DELAY_US: the default policy waits for rows up to the delay, then sends what it has', async () => {
    const { batcher, clock, executor } = setup(batchingConfig(4), { defaults: { maxQueueDelayUs: 500 } });
    send(batcher, rowsRequest(1, 1));
    await settle();
    assert.equal(executor.calls.length, 0, 'waits for more rows');
    await clock.advance(499);
    assert.equal(executor.calls.length, 0);
    await clock.advance(1);
    assert.equal(executor.calls.length, 1);
    assert.equal(executor.call(0).rows, 1);
    assert.equal(clock.pendingTimers, 0);
  });

  test('MME_DYNAMIC_BATCHING=false: every request runs alone, one instance at a time', async () => {
    const { batcher, executor } = setup(batchingConfig(8, 'dynamic_batching { max_queue_delay_microseconds: 100 }'), { defaults: { enabled: false } });
    const t = [send(batcher, rowsRequest(1, 1)), send(batcher, rowsRequest(2, 2)), send(batcher, rowsRequest(3, 1))];
    await settle();
    for (let i = 0; i < 3; i++) {
      assert.equal(executor.calls.length, i + 1);
      assert.equal(executor.call(i).rows, [1, 2, 1][i]);
      executor.call(i).finish();
      await settle();
    }
    t.forEach((x, i) => assert.deepEqual(outputOf(x).data, expectedRows(i + 1, [1, 2, 1][i]!)));
  });

  test('requests queued in the same turn form one batch even when an instance is free', async () => {
    const { batcher, executor } = setup(batchingConfig(8));
    const t = [send(batcher, rowsRequest(1, 1)), send(batcher, rowsRequest(2, 1))];
    await settle();
    assert.equal(executor.calls.length, 1);
    assert.equal(executor.call(0).rows, 2);
    executor.call(0).finish();
    await settle();
    t.forEach((x, i) => assert.deepEqual(outputOf(x).data, expectedRows(i + 1, 1)));
  });

  test('while a batch runs, requests read in separate callbacks of one I/O turn still form one batch in the free slot', async () => {
    const executor = new ManualExecutor();
    const batcher = new DynamicBatcher({
      model: 'm',
      policy: resolveBatchPolicy(batchingConfig(8), false, DEFAULT_BATCHING),
      instances: [executor],
      batchesPerInstance: 2,
      clock: new FakeClock(),
    });
    const first = send(batcher, rowsRequest(0, 1));
    await settle();
    assert.equal(executor.calls.length, 1, 'a lone request runs at once');
    // Each socket's data arrives in its own callback, with microtasks run between them.
    const later: Tracked[] = [];
    for (let i = 1; i <= 3; i++) {
      later.push(send(batcher, rowsRequest(i, 1)));
      for (let k = 0; k < 5; k++) await Promise.resolve();
    }
    assert.equal(executor.calls.length, 1, 'nothing leaves before the end of the turn');
    await settle();
    assert.equal(executor.calls.length, 2);
    assert.equal(executor.call(1).rows, 3, 'the three requests go together, not the first one alone');
    executor.call(0).finish();
    executor.call(1).finish();
    await settle();
    assert.deepEqual(outputOf(first).data, expectedRows(0, 1));
    later.forEach((x, i) => assert.deepEqual(outputOf(x).data, expectedRows(i + 1, 1)));
  });
});

describe('dynamic_batching { preferred_batch_size, max_queue_delay_microseconds }', () => {
  const cfg = batchingConfig(8, 'dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 1000 }');

  test('a batch waits for a preferred size and goes as soon as it is reached', async () => {
    const { batcher, clock, executor } = setup(cfg);
    send(batcher, rowsRequest(1, 1));
    send(batcher, rowsRequest(2, 1));
    await clock.advance(300);
    assert.equal(executor.calls.length, 0);
    send(batcher, rowsRequest(3, 2));
    await settle();
    assert.equal(executor.calls.length, 1, 'four rows: preferred, sent before the delay');
    assert.equal(executor.call(0).rows, 4);
  });

  test('the delay is measured from the oldest queued request', async () => {
    const { batcher, clock, executor } = setup(cfg);
    send(batcher, rowsRequest(1, 1));
    await clock.advance(800);
    send(batcher, rowsRequest(2, 1));
    await clock.advance(199);
    assert.equal(executor.calls.length, 0);
    await clock.advance(1);
    assert.equal(executor.calls.length, 1, 'sent 1000 µs after the first request, not after the second');
    assert.equal(executor.call(0).rows, 2);
  });

  test('the largest preferred size that can be formed wins; the rest waits for the next batch', async () => {
    const { batcher, clock, executor } = setup(batchingConfig(8, 'dynamic_batching { preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 1000 }'));
    send(batcher, rowsRequest(0, 1));
    await settle();
    assert.equal(executor.calls.length, 0, 'one row is no preferred size: it waits');
    await clock.advance(1000);
    assert.equal(executor.calls.length, 1);
    for (let i = 1; i <= 5; i++) send(batcher, rowsRequest(i, 1));
    executor.call(0).finish();
    await settle();
    assert.equal(executor.call(1).rows, 4, 'five rows queued: preferred 4 goes now');
    executor.call(1).finish();
    await settle();
    assert.equal(executor.calls.length, 2, 'the fifth row waits for more');
    await clock.advance(1000);
    assert.equal(executor.call(2).rows, 1);
  });

  test('past the delay, everything pending goes (beyond the preferred size), but never more than max_batch_size', async () => {
    const { batcher, clock, executor } = setup(batchingConfig(4, 'dynamic_batching { preferred_batch_size: [ 2 ] max_queue_delay_microseconds: 1000 }'));
    send(batcher, rowsRequest(0, 1));
    send(batcher, rowsRequest(1, 1));
    await settle();
    assert.equal(executor.call(0).rows, 2, 'preferred size: sent at once');
    const t = [send(batcher, rowsRequest(2, 1)), send(batcher, rowsRequest(3, 3)), send(batcher, rowsRequest(4, 2))];
    await clock.advance(1000);
    assert.equal(executor.calls.length, 1, 'the instance is busy');
    executor.call(0).finish();
    await settle();
    assert.equal(executor.call(1).rows, 4, '1 + 3 rows: past the preferred 2 since the delay is over; + 2 would pass 4');
    executor.call(1).finish();
    await settle();
    await clock.advance(1000);
    assert.equal(executor.call(2).rows, 2);
    executor.call(2).finish();
    await settle();
    t.forEach((x, i) => assert.deepEqual(outputOf(x).data, expectedRows(i + 2, [1, 3, 2][i]!)));
  });

  test('rows that cannot land on a preferred size go without waiting', async () => {
    const { batcher, executor } = setup(cfg);
    send(batcher, rowsRequest(1, 3));
    send(batcher, rowsRequest(2, 3));
    await settle();
    assert.equal(executor.calls.length, 1);
    assert.equal(executor.call(0).rows, 3, '3 + 3 passes the preferred 4: the 3 rows go alone, now');
  });

  test('max_queue_delay_microseconds 0 never waits', async () => {
    const { batcher, executor } = setup(batchingConfig(8, 'dynamic_batching { preferred_batch_size: [ 4 ] }'));
    send(batcher, rowsRequest(1, 1));
    await settle();
    assert.equal(executor.calls.length, 1);
  });
});

describe('what may share a batch', () => {
  test('different non-batch dims or datatypes are kept apart, in FIFO order', async () => {
    const { batcher, executor } = setup(batchingConfig(8));
    send(batcher, rowsRequest(0, 1));
    await settle();
    const a = send(batcher, rowsRequest(1, 1, 3));
    const b = send(batcher, rowsRequest(2, 1, 3));
    const c = send(batcher, rowsRequest(3, 1, 5));
    const d = send(batcher, rowsRequest(4, 1, 3));
    const int32 = new Map<string, Tensor>([['INPUT0', { datatype: 'INT32', shape: [1, 3], data: new Int32Array([1, 2, 3]) }]]);
    const e = send(batcher, int32);
    await settle();
    executor.call(0).finish();
    await settle();
    const widths: number[][] = [];
    for (let i = 1; i <= 4; i++) {
      const call = executor.call(i);
      widths.push([call.rows, call.inputs.get('INPUT0')!.shape[1]!]);
      call.finish(i === 4 ? new Map([['OUTPUT0', call.inputs.get('INPUT0')!]]) : undefined);
      await settle();
    }
    assert.deepEqual(widths, [
      [2, 3],
      [1, 5],
      [1, 3],
      [1, 3],
    ]);
    assert.deepEqual(outputOf(a).data, expectedRows(1, 1, 3));
    assert.deepEqual(outputOf(b).data, expectedRows(2, 1, 3));
    assert.deepEqual(outputOf(c).data, expectedRows(3, 1, 5));
    assert.deepEqual(outputOf(d).data, expectedRows(4, 1, 3));
    assert.equal(e.state, 'resolved');
  });

  test('different requested outputs share a batch; each request gets only what it asked for', async () => {
    const two = (inputs: ReadonlyMap<string, Tensor>): Map<string, Tensor> => {
      const x = inputs.get('INPUT0')!;
      return new Map([
        ['OUTPUT0', { datatype: 'FP32', shape: [...x.shape], data: Float32Array.from(x.data as Float32Array, (v) => v * 2) }],
        ['OUTPUT1', { datatype: 'FP32', shape: [...x.shape], data: Float32Array.from(x.data as Float32Array, (v) => -v) }],
      ]);
    };
    const clock = new FakeClock();
    const executor = new ManualExecutor(two);
    const batcher = new DynamicBatcher({ model: 'm', policy: resolveBatchPolicy(batchingConfig(8), false, DEFAULT_BATCHING), instances: [executor], clock });
    send(batcher, rowsRequest(0, 1));
    await settle();
    const a = send(batcher, rowsRequest(1, 1), {}, undefined, ['OUTPUT0']);
    const b = send(batcher, rowsRequest(2, 1), {}, undefined, ['OUTPUT1']);
    await settle();
    executor.call(0).finish();
    await settle();
    assert.deepEqual([...executor.call(1).outputNames].sort(), ['OUTPUT0', 'OUTPUT1']);
    executor.call(1).finish();
    await settle();
    assert.deepEqual([...a.value!.keys()], ['OUTPUT0']);
    assert.deepEqual([...b.value!.keys()], ['OUTPUT1']);
    assert.deepEqual(Array.from(b.value!.get('OUTPUT1')!.data as Float32Array), [-200, -200]);
  });

  test('a model with max_batch_size 0 never merges requests', async () => {
    const cfg = config(
      'max_batch_size: 0\nplatform: "onnxruntime_onnx"\ninput [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1, 2 ] } ]\noutput [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1, 2 ] } ]\n',
    );
    const { batcher, executor } = setup(cfg);
    send(batcher, rowsRequest(1, 1));
    send(batcher, rowsRequest(2, 1));
    await settle();
    assert.equal(executor.calls.length, 1);
    executor.call(0).finish();
    await settle();
    assert.equal(executor.calls.length, 2);
    assert.equal(executor.call(1).rows, 1);
  });

  test('a request with more rows than max_batch_size, or inputs that disagree on rows, is refused clearly', async () => {
    const { batcher, executor } = setup(batchingConfig(4));
    await assert.rejects(
      batcher.schedule(rowsRequest(1, 5), ['OUTPUT0']),
      isServingError('INVALID_INPUT', /model 'm'.*batch-size must be between 1 and 4.*got 5/),
    );
    const mixed = new Map<string, Tensor>([
      ['INPUT0', { datatype: 'FP32', shape: [2, 1], data: new Float32Array(2) }],
      ['INPUT1', { datatype: 'FP32', shape: [3, 1], data: new Float32Array(3) }],
    ]);
    await assert.rejects(
      batcher.schedule(mixed, ['OUTPUT0']),
      isServingError('INVALID_INPUT', /input 'INPUT1' batch size 3 does not match input 'INPUT0' batch size 2/),
    );
    assert.equal(executor.calls.length, 0);
    assert.equal(batcher.queueLength, 0);
  });
});

describe('ordering and priorities', () => {
  const ordered = batchingConfig(1, 'dynamic_batching { preserve_ordering: true }');

  test('preserve_ordering: a later batch that finishes first waits for the earlier one', async () => {
    const { batcher, executor } = setup(ordered, { instances: 2 });
    const a = send(batcher, rowsRequest(1, 1));
    const b = send(batcher, rowsRequest(2, 1));
    await settle();
    assert.equal(executor.calls.length, 2, 'two instances, two batches');
    executor.call(1).finish();
    await settle();
    assert.equal(b.state, 'pending', 'b is done but a is not answered yet');
    executor.call(0).finish();
    await settle();
    assert.deepEqual(outputOf(a).data, expectedRows(1, 1));
    assert.deepEqual(outputOf(b).data, expectedRows(2, 1));
  });

  test('without preserve_ordering, each batch is answered when it finishes', async () => {
    const { batcher, executor } = setup(batchingConfig(1, 'dynamic_batching { }'), { instances: 2 });
    const a = send(batcher, rowsRequest(1, 1));
    const b = send(batcher, rowsRequest(2, 1));
    await settle();
    executor.call(1).finish();
    await settle();
    assert.equal(b.state, 'resolved');
    assert.equal(a.state, 'pending');
    executor.call(0).finish();
    await settle();
  });

  test('priority levels: level 1 runs before level 2; no priority (or an unknown one) means default_priority_level', async () => {
    const { batcher, executor } = setup(batchingConfig(1, 'dynamic_batching { priority_levels: 2 default_priority_level: 2 }'));
    send(batcher, rowsRequest(0, 1));
    await settle();
    const order: number[] = [];
    const track = (id: number, options?: ScheduleOptions): void =>
      void batcher.schedule(rowsRequest(id, 1), ['OUTPUT0'], undefined, options).then(() => order.push(id));
    track(1);
    track(2, { priority: 9 });
    track(3, { priority: 1 });
    track(4, { priority: 2 });
    track(5, { priority: 1 });
    await settle();
    for (let i = 0; i <= 5; i++) {
      executor.call(i).finish();
      await settle();
    }
    assert.deepEqual(order, [3, 5, 1, 2, 4]);
  });
});

describe('queue policy', () => {
  test('a full queue answers OVERLOADED at once, and takes requests again once it drains', async () => {
    const { batcher, executor } = setup(batchingConfig(1, 'dynamic_batching { default_queue_policy { max_queue_size: 2 } }'));
    send(batcher, rowsRequest(0, 1));
    await settle();
    send(batcher, rowsRequest(1, 1));
    send(batcher, rowsRequest(2, 1));
    const third = send(batcher, rowsRequest(3, 1));
    await settle();
    rejectedWith(third, 'OVERLOADED', /model 'm': the queue is full \(2 requests waiting, max_queue_size 2\); retry later/);
    assert.deepEqual((third.error as ServingError).details, { retryAfterSeconds: 1 }, 'it says when to come back (Retry-After)');
    executor.call(0).finish();
    await settle();
    const again = send(batcher, rowsRequest(4, 1));
    await settle();
    assert.equal(again.state, 'pending', 'queued, not refused');
    assert.equal(batcher.queueLength, 2);
  });

  test('MME_MAX_QUEUE_SIZE bounds a queue whose config sets none', async () => {
    const { batcher } = setup(batchingConfig(1), { defaults: { maxQueueSize: 1 } });
    send(batcher, rowsRequest(0, 1));
    await settle();
    send(batcher, rowsRequest(1, 1));
    await assert.rejects(batcher.schedule(rowsRequest(2, 1), ['OUTPUT0']), isServingError('OVERLOADED', /max_queue_size 1/));
  });

  test('timeout REJECT: a request waiting past default_timeout_microseconds gets TIMEOUT, even while the instance is busy', async () => {
    const { batcher, clock, executor } = setup(batchingConfig(1, 'dynamic_batching { default_queue_policy { default_timeout_microseconds: 1000 } }'));
    const running = send(batcher, rowsRequest(0, 1));
    await settle();
    const waiting = send(batcher, rowsRequest(1, 1));
    await clock.advance(999);
    assert.equal(waiting.state, 'pending');
    await clock.advance(1);
    rejectedWith(waiting, 'TIMEOUT', /model 'm': request timed out after waiting 1000 µs in the queue/);
    assert.deepEqual((waiting.error as ServingError).details, { retryAfterSeconds: 1 }, 'an overload refusal: it says when to come back');
    assert.equal(batcher.queueLength, 0);
    assert.equal(running.state, 'pending', 'the running batch is not affected');
    executor.call(0).finish();
    await settle();
    assert.equal(executor.calls.length, 1, 'the timed-out request never ran');
    assert.equal(clock.pendingTimers, 0, 'no timer is left armed once nothing waits');
  });

  test('timeout DELAY: a timed-out request moves behind the ones that have not timed out', async () => {
    const { batcher, clock, executor } = setup(
      batchingConfig(1, 'dynamic_batching { default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 1000 } }'),
    );
    send(batcher, rowsRequest(0, 1));
    await settle();
    const order: number[] = [];
    void batcher.schedule(rowsRequest(1, 1), ['OUTPUT0']).then(() => order.push(1));
    await clock.advance(1500);
    void batcher.schedule(rowsRequest(2, 1), ['OUTPUT0']).then(() => order.push(2));
    await settle();
    for (let i = 0; i <= 2; i++) {
      executor.call(i).finish();
      await settle();
    }
    assert.deepEqual(order, [2, 1], 'still served, after the on-time request');
  });

  test('allow_timeout_override: a request may shorten the timeout, not lengthen it; without it the request timeout is ignored', async () => {
    const overridable = setup(
      batchingConfig(1, 'dynamic_batching { default_queue_policy { default_timeout_microseconds: 1000 allow_timeout_override: true } }'),
    );
    send(overridable.batcher, rowsRequest(0, 1));
    await settle();
    const short = send(overridable.batcher, rowsRequest(1, 1), { timeoutUs: 200 });
    const long = send(overridable.batcher, rowsRequest(2, 1), { timeoutUs: 5000 });
    await overridable.clock.advance(200);
    rejectedWith(short, 'TIMEOUT', /200 µs/);
    assert.equal(long.state, 'pending');
    await overridable.clock.advance(800);
    rejectedWith(long, 'TIMEOUT', /1000 µs/);

    const fixed = setup(batchingConfig(1, 'dynamic_batching { default_queue_policy { default_timeout_microseconds: 1000 } }'));
    send(fixed.batcher, rowsRequest(0, 1));
    await settle();
    const ignored = send(fixed.batcher, rowsRequest(1, 1), { timeoutUs: 200 });
    await fixed.clock.advance(500);
    assert.equal(ignored.state, 'pending');
  });

  test('an aborted request leaves the queue (CANCELLED) and is not part of the next batch', async () => {
    const { batcher, executor } = setup(batchingConfig(8));
    send(batcher, rowsRequest(0, 1));
    await settle();
    const controller = new CancelSource();
    const a = send(batcher, rowsRequest(1, 1));
    const gone = send(batcher, rowsRequest(2, 3), {}, controller);
    const c = send(batcher, rowsRequest(3, 1));
    await settle();
    assert.equal(batcher.queueLength, 3);
    controller.cancel();
    await settle();
    rejectedWith(gone, 'CANCELLED', /model 'm': request cancelled while waiting in the queue/);
    assert.equal(batcher.queueLength, 2);
    executor.call(0).finish();
    await settle();
    assert.equal(executor.call(1).rows, 2, "the cancelled request's 3 rows are not in the batch");
    executor.call(1).finish();
    await settle();
    assert.deepEqual(outputOf(a).data, expectedRows(1, 1));
    assert.deepEqual(outputOf(c).data, expectedRows(3, 1));
  });

  test("one AbortSignal (through cancellationOf) queued in two models (an ensemble's steps) leaves both queues when it aborts", async () => {
    const first = setup(batchingConfig(8));
    const second = setup(batchingConfig(8));
    for (const s of [first, second]) send(s.batcher, rowsRequest(0, 1)); // occupy each instance
    await settle();
    const controller = new AbortController();
    const inFirst = send(first.batcher, rowsRequest(1, 1), {}, cancellationOf(controller.signal));
    const inSecond = send(second.batcher, rowsRequest(2, 1), {}, cancellationOf(controller.signal));
    const stays = send(second.batcher, rowsRequest(3, 1), {}, cancellationOf(controller.signal));
    await settle();
    // `stays` ran already in an earlier turn of a real ensemble; here it is queued too, so all three go.
    controller.abort();
    await settle();
    rejectedWith(inFirst, 'CANCELLED', /request cancelled while waiting in the queue/);
    rejectedWith(inSecond, 'CANCELLED', /request cancelled while waiting in the queue/);
    rejectedWith(stays, 'CANCELLED', /request cancelled while waiting in the queue/);
    assert.equal(first.batcher.queueLength, 0);
    assert.equal(second.batcher.queueLength, 0);
  });

  test('a request that left the queue to run is not cancelled by a later abort', async () => {
    const { batcher, executor } = setup(batchingConfig(8));
    const controller = new CancelSource();
    const running = send(batcher, rowsRequest(1, 1), {}, controller);
    await settle();
    assert.equal(executor.calls.length, 1);
    controller.cancel();
    executor.call(0).finish();
    await settle();
    assert.deepEqual(outputOf(running).data, expectedRows(1, 1), 'a running batch finishes; the transport drops the answer');
  });

  test('a request cancelled before scheduling is refused at once', async () => {
    const { batcher, executor } = setup(batchingConfig(8));
    await assert.rejects(
      batcher.schedule(rowsRequest(1, 1), ['OUTPUT0'], cancellationOf(AbortSignal.abort())),
      isServingError('CANCELLED', /before it was queued/),
    );
    assert.equal(executor.calls.length, 0);
  });
});

describe('failures and instances', () => {
  test('a failed batch is re-run request by request: only the bad request fails; other batches are untouched', async () => {
    const { batcher, executor } = setup(batchingConfig(8));
    send(batcher, rowsRequest(0, 1));
    await settle();
    const good1 = send(batcher, rowsRequest(1, 1));
    const bad = send(batcher, rowsRequest(2, 2));
    const good2 = send(batcher, rowsRequest(3, 1));
    await settle();
    executor.call(0).finish();
    await settle();
    assert.equal(executor.call(1).rows, 4);
    executor.call(1).fail(new ServingError('INTERNAL', "model 'm': onnxruntime failed: index out of range"));
    await settle();
    // Now one at a time, in order, on the same instance.
    assert.equal(executor.call(2).rows, 1);
    executor.call(2).finish();
    await settle();
    assert.equal(executor.call(3).rows, 2);
    executor.call(3).fail(new ServingError('INTERNAL', "model 'm': onnxruntime failed: index out of range"));
    await settle();
    assert.equal(executor.call(4).rows, 1);
    executor.call(4).finish();
    await settle();
    assert.deepEqual(outputOf(good1).data, expectedRows(1, 1));
    assert.deepEqual(outputOf(good2).data, expectedRows(3, 1));
    rejectedWith(bad, 'INTERNAL', /index out of range/);
    const later = send(batcher, rowsRequest(4, 1));
    await settle();
    executor.call(5).finish();
    await settle();
    assert.deepEqual(outputOf(later).data, expectedRows(4, 1), 'the model keeps serving');
  });

  test('an output without one row per input row fails the batch, and each request then runs alone', async () => {
    const { batcher, executor } = setup(batchingConfig(8));
    send(batcher, rowsRequest(0, 1));
    await settle();
    const a = send(batcher, rowsRequest(1, 1));
    const b = send(batcher, rowsRequest(2, 1));
    await settle();
    executor.call(0).finish();
    await settle();
    executor.call(1).finish(new Map([['OUTPUT0', { datatype: 'FP32', shape: [1, 2], data: new Float32Array(2) }]]));
    await settle();
    executor.call(2).finish();
    await settle();
    executor.call(3).finish();
    await settle();
    assert.deepEqual(outputOf(a).data, expectedRows(1, 1));
    assert.deepEqual(outputOf(b).data, expectedRows(2, 1));
  });

  test('instance_group count N: at most N batches at once, the next starts when one ends', async () => {
    const { batcher, executor } = setup(batchingConfig(1), { instances: 2 });
    const all = Array.from({ length: 5 }, (_, i) => send(batcher, rowsRequest(i, 1)));
    await settle();
    assert.equal(executor.calls.length, 2);
    assert.equal(batcher.inFlight, 2);
    executor.call(0).finish();
    await settle();
    assert.equal(executor.calls.length, 3);
    executor.call(2).finish();
    executor.call(1).finish();
    await settle();
    assert.equal(executor.calls.length, 5);
    executor.call(3).finish();
    executor.call(4).finish();
    await settle();
    assert.equal(executor.maxRunning, 2);
    all.forEach((t, i) => assert.deepEqual(outputOf(t).data, expectedRows(i, 1)));
  });

  test('batchesPerInstance 2: every instance gets a batch before any gets a second; the next waits for a slot', async () => {
    const clock = new FakeClock();
    const a = new ManualExecutor();
    const b = new ManualExecutor();
    const batcher = new DynamicBatcher({
      model: 'm',
      policy: resolveBatchPolicy(batchingConfig(1), false, DEFAULT_BATCHING),
      instances: [a, b],
      batchesPerInstance: 2,
      clock,
    });
    const all = Array.from({ length: 5 }, (_, i) => send(batcher, rowsRequest(i, 1)));
    await settle();
    assert.equal(batcher.inFlight, 4);
    assert.equal(batcher.queueLength, 1);
    assert.deepEqual([a.calls.length, b.calls.length], [2, 2]);
    const firstValue = (inputs: ReadonlyMap<string, Tensor>): unknown => (inputs.get('INPUT0')!.data as Float32Array)[0];
    assert.deepEqual(
      a.calls.map((c) => firstValue(c.inputs)),
      [firstValue(rowsRequest(0, 1)), firstValue(rowsRequest(2, 1))],
      'requests 0 and 2 on instance A',
    );
    assert.deepEqual(
      b.calls.map((c) => firstValue(c.inputs)),
      [firstValue(rowsRequest(1, 1)), firstValue(rowsRequest(3, 1))],
      'requests 1 and 3 on instance B',
    );
    assert.equal(a.maxRunning, 2, 'two batches handed to one instance at once');
    b.call(0).finish();
    await settle();
    assert.equal(b.calls.length, 3, 'the freed slot of instance B takes the next batch');
    a.call(0).finish();
    a.call(1).finish();
    b.call(1).finish();
    b.call(2).finish();
    await settle();
    all.forEach((t, i) => assert.deepEqual(outputOf(t).data, expectedRows(i, 1)));
  });

  test('load facts: each run is told how many requests wait behind it and how many batches of the model are in flight', async () => {
    const { batcher, executor } = setup(batchingConfig(1));
    send(batcher, rowsRequest(1, 1));
    await settle();
    assert.deepEqual(executor.call(0).load, { queued: 0, inFlight: 1 }, 'a lone request');
    send(batcher, rowsRequest(2, 1));
    send(batcher, rowsRequest(3, 1));
    executor.call(0).finish();
    await settle();
    assert.deepEqual(executor.call(1).load, { queued: 1, inFlight: 1 }, 'request 3 is queued behind it');
    executor.call(1).finish();
    await settle();
    assert.deepEqual(executor.call(2).load, { queued: 0, inFlight: 1 }, 'the last one, nothing behind it');
  });

  test('close: refuses new requests, runs what is queued without waiting for the delay, resolves when idle', async () => {
    const { batcher, executor } = setup(batchingConfig(8, 'dynamic_batching { preferred_batch_size: [ 8 ] max_queue_delay_microseconds: 1000000 }'));
    const queued = send(batcher, rowsRequest(1, 1));
    await settle();
    assert.equal(executor.calls.length, 0);
    let closed = false;
    void batcher.close().then(() => (closed = true));
    await settle();
    assert.equal(executor.calls.length, 1, 'queued work runs now');
    await assert.rejects(batcher.schedule(rowsRequest(2, 1), ['OUTPUT0']), isServingError('MODEL_NOT_FOUND', /model 'm' is being unloaded/));
    assert.equal(closed, false);
    executor.call(0).finish();
    await settle();
    assert.equal(closed, true);
    assert.deepEqual(outputOf(queued).data, expectedRows(1, 1));
  });
});

describe('metrics', () => {
  test('exec_count counts batches, inference_count rows; batch sizes and queue time are recorded', async () => {
    const metrics = createMetrics();
    const { batcher, clock, executor } = setup(batchingConfig(8), { metrics });
    send(batcher, rowsRequest(0, 1));
    await settle();
    send(batcher, rowsRequest(1, 2));
    send(batcher, rowsRequest(2, 3));
    await clock.advance(250);
    executor.call(0).finish();
    await settle();
    executor.call(1).finish();
    await settle();
    const value = async (name: string): Promise<number> =>
      (await metrics.registry.getSingleMetric(name)!.get()).values.find((v) => v.labels['model'] === 'm')?.value ?? Number.NaN;
    const named = (v: object): string | undefined => (v as { metricName?: string }).metricName;
    assert.equal(await value('nv_inference_exec_count'), 2);
    assert.equal(await value('nv_inference_count'), 6);
    assert.equal(await value('nv_inference_queue_duration_us'), 500, 'two requests waited 250 µs each');
    const hist = await metrics.registry.getSingleMetric('onnx_mme_batch_size')!.get();
    const count = hist.values.find((v) => named(v) === 'onnx_mme_batch_size_count')?.value;
    const sum = hist.values.find((v) => named(v) === 'onnx_mme_batch_size_sum')?.value;
    assert.equal(count, 2);
    assert.equal(sum, 6);
  });
});
