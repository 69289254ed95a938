/**
 * The dynamic batcher's instances while it serves (registry/hot-instances.ts
 * grows and retires them): an added instance takes batches at once, a
 * retired one gets none and is released only after its batches ended, and
 * saturation is told on every change and only then.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULT_BATCHING, resolveBatchPolicy } from '../../../src/scheduler/batch-policy.js';
import { DynamicBatcher } from '../../../src/scheduler/dynamic-batcher.js';
import { batchingConfig, expectedRows, FakeClock, ManualExecutor, rowsRequest, settle } from './fakes.js';

function batcherOn(first: ManualExecutor, saturation: boolean[] = []): DynamicBatcher {
  // max_batch_size 1: every request is a batch of its own, so batches are easy to count.
  return new DynamicBatcher({
    model: 'm',
    policy: resolveBatchPolicy(batchingConfig(1), false, DEFAULT_BATCHING),
    instances: [first],
    clock: new FakeClock(),
    onSaturation: (s) => saturation.push(s),
  });
}

test('an added instance runs the waiting batches at once; saturation is told on each change only', async () => {
  const first = new ManualExecutor();
  const saturation: boolean[] = [];
  const batcher = batcherOn(first, saturation);
  const answers = [1, 2, 3].map((id) => batcher.schedule(rowsRequest(id, 1), ['OUTPUT0']));
  await settle();
  assert.equal(first.calls.length, 1, 'one instance, one batch at a time');
  assert.deepEqual(saturation, [true]);
  const second = new ManualExecutor();
  batcher.addInstance(second);
  await settle();
  assert.equal(second.calls.length, 1, 'the added instance took the next batch');
  assert.equal(batcher.instanceCount, 2);
  assert.deepEqual(saturation, [true], 'still saturated: both busy, one request waits');
  second.call(0).finish();
  await settle();
  assert.equal(second.calls.length, 2);
  assert.deepEqual(saturation, [true, false], 'nothing waits any more');
  first.call(0).finish();
  second.call(1).finish();
  const out = await Promise.all(answers);
  assert.deepEqual([...(out[2]!.get('OUTPUT0')!.data as Float32Array)], expectedRows(3, 1));
});

test('a retired instance gets no more batches, and its retirement ends with its last batch', async () => {
  const first = new ManualExecutor();
  const second = new ManualExecutor();
  const batcher = batcherOn(first);
  batcher.addInstance(second);
  const answers = [1, 2].map((id) => batcher.schedule(rowsRequest(id, 1), ['OUTPUT0']));
  await settle();
  assert.equal(first.calls.length + second.calls.length, 2);
  let retired = false;
  const retiring = batcher.retireInstance(second).then(() => (retired = true));
  assert.equal(batcher.instanceCount, 1);
  const later = batcher.schedule(rowsRequest(3, 1), ['OUTPUT0']);
  first.call(0).finish();
  await settle();
  assert.equal(second.calls.length, 1, 'the retiring instance took nothing new');
  assert.equal(first.calls.length, 2, 'the request waiting went to the instance that stays');
  assert.equal(retired, false, 'its batch still runs');
  second.call(0).finish();
  await retiring;
  first.call(1).finish();
  await Promise.all([...answers, later]);
  assert.throws(() => batcher.retireInstance(first), /last instance/);
  // Its place is reused by the next instance added.
  const third = new ManualExecutor();
  batcher.addInstance(third);
  assert.equal(batcher.instanceCount, 2);
  const more = [4, 5].map((id) => batcher.schedule(rowsRequest(id, 1), ['OUTPUT0']));
  await settle();
  assert.equal(third.calls.length, 1);
  first.call(2).finish();
  third.call(0).finish();
  await Promise.all(more);
});

test("with two batches per instance, an added instance gets one batch before any instance's second; every slot busy is saturation", async () => {
  const first = new ManualExecutor();
  const saturation: boolean[] = [];
  const batcher = new DynamicBatcher({
    model: 'm',
    policy: resolveBatchPolicy(batchingConfig(1), false, DEFAULT_BATCHING),
    instances: [first],
    batchesPerInstance: 2,
    clock: new FakeClock(),
    onSaturation: (s) => saturation.push(s),
  });
  const answers = [batcher.schedule(rowsRequest(1, 1), ['OUTPUT0'])];
  await settle();
  const second = new ManualExecutor();
  batcher.addInstance(second);
  answers.push(batcher.schedule(rowsRequest(2, 1), ['OUTPUT0']));
  await settle();
  assert.deepEqual([first.calls.length, second.calls.length], [1, 1], 'the new instance first');
  answers.push(batcher.schedule(rowsRequest(3, 1), ['OUTPUT0']));
  await settle();
  assert.deepEqual([first.calls.length, second.calls.length], [2, 1], 'then the first instance takes its second batch');
  assert.deepEqual(saturation, [], 'a slot is free');
  answers.push(batcher.schedule(rowsRequest(4, 1), ['OUTPUT0']));
  await settle();
  assert.deepEqual([first.calls.length, second.calls.length], [2, 2]);
  // Nothing queued, but each instance holds a batch behind the one it runs: that waits as a queued request would.
  assert.deepEqual(saturation, [true]);
  for (const c of [...first.calls, ...second.calls]) c.finish();
  await Promise.all(answers);
  await settle();
  assert.deepEqual(saturation, [true, false]);
});
