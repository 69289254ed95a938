/**
 * cancellation: a CancelSource runs each live callback once, makes its
 * AbortSignal only when asked (already aborted when asked late), and
 * cancellationOf puts one 'abort' listener on a signal however many queues
 * register on it.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CancelSource, cancellationOf } from '../../src/cancellation.js';

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

describe('CancelSource', () => {
  test('cancel runs each registered callback once; unregistered ones never', () => {
    const source = new CancelSource();
    const calls: string[] = [];
    source.onCancel(() => calls.push('step 1'));
    const off = source.onCancel(() => calls.push('step 2 (left the queue)'));
    source.onCancel(() => calls.push('step 3'));
    off();
    assert.equal(source.aborted, false);
    source.cancel();
    source.cancel();
    assert.equal(source.aborted, true);
    assert.deepEqual(calls, ['step 1', 'step 3']);
  });

  test('a callback that registers another during cancel does not run it in the same round', () => {
    const source = new CancelSource();
    const calls: string[] = [];
    source.onCancel(() => {
      calls.push('first');
      source.onCancel(() => calls.push('late'));
    });
    source.cancel();
    assert.deepEqual(calls, ['first']);
  });

  test('the AbortSignal follows the source whether it is asked for before or after the cancel', () => {
    const early = new CancelSource();
    const signal = early.signal;
    assert.equal(early.signal, signal, 'one signal per source');
    let fired = 0;
    signal.addEventListener('abort', () => fired++);
    assert.equal(signal.aborted, false);
    early.cancel();
    assert.equal(signal.aborted, true);
    assert.equal(fired, 1);

    const late = new CancelSource();
    late.cancel();
    assert.equal(late.signal.aborted, true);
  });
});

describe('cancellationOf', () => {
  test('many registrations share one listener; abort runs each live callback once', () => {
    const { controller, listeners } = countingSignal();
    const cancel = cancellationOf(controller.signal);
    assert.equal(cancellationOf(controller.signal), cancel, 'the same signal gives the same cancellation');
    assert.equal(cancel.signal, controller.signal);
    const calls: string[] = [];
    cancel.onCancel(() => calls.push('step 1'));
    const off = cancel.onCancel(() => calls.push('step 2 (left the queue)'));
    cancellationOf(controller.signal).onCancel(() => calls.push('step 3'));
    off();
    assert.equal(listeners(), 1);
    assert.equal(cancel.aborted, false);
    controller.abort();
    controller.abort();
    assert.equal(cancel.aborted, true);
    assert.deepEqual(calls, ['step 1', 'step 3']);
  });

  test('signals do not share callbacks', () => {
    const a = new AbortController();
    const b = new AbortController();
    const calls: string[] = [];
    cancellationOf(a.signal).onCancel(() => calls.push('a'));
    cancellationOf(b.signal).onCancel(() => calls.push('b'));
    b.abort();
    assert.deepEqual(calls, ['b']);
  });
});
