/**
 * When a hot model grows and gives back instances (registry/hot-instances.ts),
 * driven by a fake clock and a fake scheduler: half a window saturated grows
 * one instance, a model that cannot grow is not asked again, no room is
 * tried again at the next hot window, calm for COOL_AFTER_US retires the
 * last added one, an idle model holds no timer, and release frees them all.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { COOL_AFTER_US, HOT_WINDOW_US, HotInstances, type ElasticScheduler, type Growth } from '../../../src/registry/hot-instances.js';
import type { ModelExecutor } from '../../../src/scheduler/model-scheduler.js';
import { FakeClock, ManualExecutor } from '../scheduler/fakes.js';

class FakeScheduler implements ElasticScheduler {
  inFlight = 0;
  readonly instances: ModelExecutor[] = [];
  addInstance(executor: ModelExecutor): void {
    this.instances.push(executor);
  }
  retireInstance(executor: ModelExecutor): Promise<void> {
    this.instances.splice(this.instances.indexOf(executor), 1);
    return Promise.resolve();
  }
}

function setup(maxInstances = 3) {
  const clock = new FakeClock();
  const scheduler = new FakeScheduler();
  const released: number[] = [];
  let worker = 0;
  const gauge = { value: 0 };
  const hot = new HotInstances({
    model: 'm',
    version: 1,
    maxInstances,
    batchesPerInstance: 2,
    clock,
    logger: pino({ level: 'silent' }),
    onChange: (delta) => (gauge.value += delta),
  });
  /** A grow that always finds room: an instance on the next worker, whose release is recorded. */
  const grow = (): Promise<Growth> => {
    const w = ++worker;
    return Promise.resolve({ executor: new ManualExecutor(), worker: w, release: () => Promise.resolve(void released.push(w)) });
  };
  return { clock, scheduler, hot, released, grow, gauge };
}

/** Saturated for `share` of each window, for `windows` windows. */
async function saturate(clock: FakeClock, hot: HotInstances, share: number, windows = 1): Promise<void> {
  for (let i = 0; i < windows; i++) {
    hot.saturation(true);
    await clock.advance(HOT_WINDOW_US * share);
    hot.saturation(false);
    await clock.advance(HOT_WINDOW_US * (1 - share));
  }
}

test('half a window saturated grows one instance a window, up to the maximum', async () => {
  const s = setup(3);
  s.hot.enable(s.scheduler, s.grow);
  await saturate(s.clock, s.hot, 0.3, 2);
  assert.equal(s.scheduler.instances.length, 0, 'a third of a window is a burst, not heat');
  await saturate(s.clock, s.hot, 0.7);
  assert.equal(s.hot.instances, 2);
  assert.deepEqual(s.hot.addedWorkers, [1]);
  s.scheduler.inFlight = 6;
  await saturate(s.clock, s.hot, 0.9, 3);
  assert.equal(s.hot.instances, 3, 'never above maxInstances');
  assert.equal(s.scheduler.instances.length, 2);
});

test('before placement enables it, and with maxInstances 1, saturation grows nothing', async () => {
  const s = setup(3);
  await saturate(s.clock, s.hot, 1, 2);
  assert.equal(s.hot.instances, 1);
  assert.equal(s.clock.pendingTimers, 0);
  const one = setup(1);
  let asked = 0;
  one.hot.enable(one.scheduler, () => (asked++, one.grow()));
  await saturate(one.clock, one.hot, 1, 2);
  assert.equal(asked, 0);
});

test('a model that can never grow is not asked again; one with no room is asked at each hot window', async () => {
  const never = setup(3);
  let asked = 0;
  never.hot.enable(never.scheduler, () => Promise.resolve((asked++, 'never' as const)));
  await saturate(never.clock, never.hot, 1, 3);
  assert.equal(asked, 1);
  assert.equal(never.hot.instances, 1);
  const full = setup(3);
  let tries = 0;
  full.hot.enable(full.scheduler, () => Promise.resolve((tries++, 'no room' as const)));
  await saturate(full.clock, full.hot, 1, 3);
  assert.equal(tries, 3, 'asked once per hot window');
  assert.equal(full.hot.instances, 1);
});

test('calm for COOL_AFTER_US retires the last added instance and releases it; an idle model keeps no timer', async () => {
  const s = setup(3);
  s.hot.enable(s.scheduler, s.grow);
  s.scheduler.inFlight = 2;
  await saturate(s.clock, s.hot, 1, 2);
  assert.equal(s.hot.instances, 3);
  // Busy beyond what one instance less could run (2 instances × 2 batches): not calm, whatever the saturation.
  s.scheduler.inFlight = 4;
  await s.clock.advance(COOL_AFTER_US * 2);
  assert.equal(s.hot.instances, 3);
  s.scheduler.inFlight = 1;
  await s.clock.advance(COOL_AFTER_US + HOT_WINDOW_US);
  assert.equal(s.hot.instances, 2);
  assert.deepEqual(s.released, [2], 'the last added first');
  assert.equal(s.gauge.value, 1);
  await s.clock.advance(COOL_AFTER_US + HOT_WINDOW_US);
  assert.equal(s.hot.instances, 1);
  assert.deepEqual(s.released, [2, 1]);
  await s.clock.advance(HOT_WINDOW_US * 2);
  assert.equal(s.clock.pendingTimers, 0, 'no instance added and no saturation: no timer');
});

test('release frees every added instance and stops the windows', async () => {
  const s = setup(3);
  s.hot.enable(s.scheduler, s.grow);
  s.scheduler.inFlight = 4;
  await saturate(s.clock, s.hot, 1, 2);
  assert.equal(s.hot.instances, 3);
  await s.hot.release();
  assert.deepEqual(s.released.sort(), [1, 2]);
  assert.equal(s.gauge.value, 0);
  assert.equal(s.scheduler.instances.length, 0);
  assert.equal(s.clock.pendingTimers, 0);
  s.hot.saturation(true);
  assert.equal(s.clock.pendingTimers, 0, 'a released model starts no window');
});
