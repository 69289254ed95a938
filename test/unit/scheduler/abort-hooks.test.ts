/**
 * scheduler/abort-hooks: one 'abort' listener per signal, however many
 * queues register on it; unregistered callbacks never run; each runs once.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { onAbort } from '../../../src/scheduler/abort-hooks.js';

/** An AbortSignal that counts the 'abort' listeners attached to it. */
function countingSignal(): { controller: AbortController; listeners: () => number } {
  const controller = new AbortController();
  let added = 0;
  const signal = controller.signal;
  const original = signal.addEventListener.bind(signal) as (...args: unknown[]) => void;
  (signal as unknown as { addEventListener: (...args: unknown[]) => void }).addEventListener = (...args: unknown[]) => {
    if (args[0] === 'abort') added++;
    original(...args);
  };
  return { controller, listeners: () => added };
}

describe('onAbort', () => {
  test('many registrations share one listener; abort runs each live callback once', () => {
    const { controller, listeners } = countingSignal();
    const calls: string[] = [];
    onAbort(controller.signal, () => calls.push('step 1'));
    const off = onAbort(controller.signal, () => calls.push('step 2 (left the queue)'));
    onAbort(controller.signal, () => calls.push('step 3'));
    off();
    assert.equal(listeners(), 1);
    controller.abort();
    controller.abort();
    assert.deepEqual(calls, ['step 1', 'step 3']);
  });

  test('a callback that registers another during abort does not run it in the same round', () => {
    const { controller } = countingSignal();
    const calls: string[] = [];
    onAbort(controller.signal, () => {
      calls.push('first');
      onAbort(controller.signal, () => calls.push('late'));
    });
    controller.abort();
    assert.deepEqual(calls, ['first']);
  });

  test('signals do not share callbacks', () => {
    const a = new AbortController();
    const b = new AbortController();
    const calls: string[] = [];
    onAbort(a.signal, () => calls.push('a'));
    onAbort(b.signal, () => calls.push('b'));
    b.abort();
    assert.deepEqual(calls, ['b']);
  });
});
