/**
 * store/remote-fetch.ts on a fake Clock, so every delay, deadline and window
 * is exact and nothing sleeps: retries of retryable failures only, backoff
 * within base·2^(n-1)·[0.5, 1), the budget of attempts and of time spent
 * failing (renewed by an attempt that received data), cancellation during a
 * wait, a call abandoned at its deadline, and the stream guard failing a
 * transfer that is cut short, goes idle, or is slower than the floor.
 */
import assert from 'node:assert/strict';
import { PassThrough, Readable } from 'node:stream';
import { describe, it } from 'node:test';
import { ServingError } from '../../../src/errors.js';
import {
  backoffDelay,
  callWithDeadline,
  guardedTransfer,
  isRetryable,
  markRetryable,
  resolveRetryPolicy,
  TransferGuard,
  withRetry,
  type FetchAttempt,
  type RetryPolicy,
  type TransferGuardOptions,
} from '../../../src/store/remote-fetch.js';
import { ActiveTransfers } from '../../../src/store/transfer-progress.js';
import { FakeClock, settle } from '../scheduler/fakes.js';

const MS = 1000;

function outage(message = 'connection refused'): ServingError {
  return markRetryable(new ServingError('UPSTREAM_UNAVAILABLE', message));
}

/** A step that fails with `failures` in turn, then answers 'ok'; records the clock time (ms) of each attempt. */
function scripted(clock: FakeClock, failures: readonly Error[]) {
  const startedAtMs: number[] = [];
  const attempts: FetchAttempt[] = [];
  const step = async (attempt: FetchAttempt): Promise<string> => {
    startedAtMs.push(clock.nowUs() / MS);
    attempts.push(attempt);
    const failure = failures[startedAtMs.length - 1];
    if (failure) throw failure;
    return 'ok';
  };
  return { step, startedAtMs, attempts };
}

function policy(overrides: Partial<RetryPolicy>): RetryPolicy {
  return resolveRetryPolicy({ attempts: 5, baseDelayMs: 100, maxTotalMs: 10_000, ...overrides });
}

describe('withRetry', () => {
  it('retries retryable failures after base·2^(n-1) scaled by the jitter, and returns the first success', async () => {
    const clock = new FakeClock();
    const { step, startedAtMs } = scripted(clock, [outage(), outage()]);
    const retries: number[] = [];
    const result = withRetry({ clock, policy: policy({}), what: 'test', random: () => 0, onRetry: ({ delayMs }) => retries.push(delayMs) }, step);
    await settle();
    assert.deepEqual(startedAtMs, [0]);
    await clock.advance(49 * MS);
    assert.deepEqual(startedAtMs, [0], 'no attempt before the backoff delay (100 × 0.5 = 50 ms) has passed');
    await clock.advance(1 * MS);
    assert.deepEqual(startedAtMs, [0, 50]);
    await clock.advance(100 * MS);
    assert.deepEqual(startedAtMs, [0, 50, 150], 'the second delay doubles (200 × 0.5)');
    assert.equal(await result, 'ok');
    assert.deepEqual(retries, [50, 100]);
    assert.equal(clock.pendingTimers, 0);
  });

  it('keeps each backoff within [0.5, 1) of base·2^(n-1)', () => {
    for (let attempt = 1; attempt <= 6; attempt++) {
      const full = 100 * 2 ** (attempt - 1);
      assert.equal(
        backoffDelay(100, attempt, () => 0),
        full / 2,
      );
      assert.ok(backoffDelay(100, attempt, () => 0.999_999) < full);
      for (let i = 0; i < 50; i++) {
        const delay = backoffDelay(100, attempt);
        assert.ok(delay >= full / 2 && delay < full, `attempt ${attempt}: ${delay} ms outside [${full / 2}, ${full})`);
      }
    }
  });

  it('throws a failure that is not retryable at once, and wraps a foreign error as INTERNAL', async () => {
    const clock = new FakeClock();
    const denied = new ServingError('ACCESS_DENIED', 'access denied');
    const first = scripted(clock, [denied]);
    await assert.rejects(withRetry({ clock, policy: policy({}), what: 'test', model: 'm' }, first.step), (err) => err === denied);
    assert.equal(first.startedAtMs.length, 1);
    const second = scripted(clock, [new TypeError('boom')]);
    await assert.rejects(withRetry({ clock, policy: policy({}), what: "model 'm'", model: 'm' }, second.step), (err: unknown) => {
      assert.ok(err instanceof ServingError);
      assert.equal(err.code, 'INTERNAL');
      assert.equal(err.message, "model 'm': boom");
      assert.equal(err.model, 'm');
      return true;
    });
    assert.equal(second.startedAtMs.length, 1);
  });

  it('gives up after the attempts allowed, naming them and the time spent', async () => {
    const clock = new FakeClock();
    const { step, startedAtMs } = scripted(clock, [outage(), outage(), outage('still refused'), outage()]);
    const result = withRetry({ clock, policy: policy({ attempts: 3 }), what: 'test', model: 'm', random: () => 0 }, step);
    const settled = assert.rejects(result, (err: unknown) => {
      assert.ok(err instanceof ServingError);
      assert.equal(err.code, 'UPSTREAM_UNAVAILABLE');
      assert.equal(err.message, 'still refused (gave up after 3 attempts in 150 ms)');
      // Retry-After: the back-off a 4th attempt would have waited at most (100 ms · 2³ = 800 ms), in whole seconds.
      assert.deepEqual(err.details, { attempts: 3, elapsedMs: 150, retryAfterSeconds: 1 });
      assert.equal(isRetryable(err), false, 'the final error is not retried again by an outer loop');
      return true;
    });
    await settle();
    await clock.advance(1_000 * MS);
    await settled;
    assert.deepEqual(startedAtMs, [0, 50, 150]);
  });

  it("says when to retry: the next attempt's back-off, at most the retry budget", async () => {
    for (const [baseDelayMs, maxTotalMs, expected] of [
      [1_000, 60_000, 8],
      [1_000, 5_000, 5],
    ] as const) {
      const clock = new FakeClock();
      const { step } = scripted(clock, [outage(), outage(), outage()]);
      const result = withRetry({ clock, policy: policy({ attempts: 3, baseDelayMs, maxTotalMs }), what: 'test', model: 'm', random: () => 0 }, step);
      const settled = assert.rejects(result, (err: unknown) => err instanceof ServingError && err.details?.['retryAfterSeconds'] === expected);
      await settle();
      await clock.advance(10_000 * MS);
      await settled;
    }
  });

  it('starts no retry that would end past maxTotalMs, and gives each attempt that deadline', async () => {
    const clock = new FakeClock();
    const { step, startedAtMs, attempts } = scripted(
      clock,
      Array.from({ length: 10 }, () => outage()),
    );
    // Delays 100, 200, 400 (random 0 → half of 200·2^(n-1)); budget 250: the second retry (at 100 + 200 = 300) would pass it.
    const result = withRetry({ clock, policy: policy({ attempts: 10, baseDelayMs: 200, maxTotalMs: 250 }), what: 'test', random: () => 0 }, step);
    const settled = assert.rejects(result, /gave up after 2 attempts in 100 ms/);
    await settle();
    await clock.advance(10_000 * MS);
    await settled;
    assert.deepEqual(startedAtMs, [0, 100]);
    assert.deepEqual(
      attempts.map((a) => a.deadlineMs),
      [250, 250],
    );
  });

  it('gives a fresh time budget after an attempt that received data', async () => {
    const clock = new FakeClock();
    let calls = 0;
    const deadlines: number[] = [];
    const step = async (attempt: FetchAttempt): Promise<string> => {
      calls++;
      deadlines.push(attempt.deadlineMs);
      if (calls === 2) attempt.progressed = true;
      if (calls <= 2) throw outage();
      return 'ok';
    };
    const result = withRetry({ clock, policy: policy({ attempts: 10, baseDelayMs: 200, maxTotalMs: 250 }), what: 'test', random: () => 0 }, step);
    await settle();
    await clock.advance(1_000 * MS);
    assert.equal(await result, 'ok');
    // Without progress the retry at 300 ms would pass the 250 ms budget (the test above); attempt 2 (at 100 ms)
    // progressed, so the window restarts there: attempt 3 runs at 300 ms with its deadline at 350.
    assert.deepEqual(deadlines, [250, 250, 350]);
  });

  it('stops waiting between attempts when cancelled, leaving no timer', async () => {
    const clock = new FakeClock();
    const controller = new AbortController();
    const { step, startedAtMs } = scripted(clock, [outage(), outage()]);
    const result = withRetry({ clock, policy: policy({}), what: 'test', model: 'm', signal: controller.signal }, step);
    await settle();
    assert.equal(clock.pendingTimers, 1);
    controller.abort();
    await assert.rejects(result, (err: unknown) => err instanceof ServingError && err.code === 'CANCELLED' && err.model === 'm');
    assert.equal(clock.pendingTimers, 0);
    assert.deepEqual(startedAtMs, [0]);
  });
});

describe('callWithDeadline', () => {
  const attempt = (deadlineMs: number): FetchAttempt => ({ number: 1, deadlineMs, progressed: false });

  it('aborts a call unanswered at its deadline and reports a TimeoutError naming the peer', async () => {
    const clock = new FakeClock();
    let callSignal: AbortSignal | undefined;
    const call = (abortSignal: AbortSignal): Promise<never> =>
      new Promise((_, reject) => {
        callSignal = abortSignal;
        abortSignal.addEventListener('abort', () => reject(new Error('aborted by the caller')));
      });
    const result = callWithDeadline({
      clock,
      attempt: attempt(400),
      minMs: 250,
      peer: 'the store',
      call,
      failure: (err) => new ServingError('UPSTREAM_UNAVAILABLE', `${(err as Error).name}: ${(err as Error).message}`),
    });
    const settled = assert.rejects(result, { message: 'TimeoutError: the store did not answer within 400 ms' });
    await clock.advance(399 * MS);
    assert.equal(callSignal?.aborted, false);
    await clock.advance(1 * MS);
    await settled;
    assert.equal(callSignal?.aborted, true);
  });

  it('gives a call at least minMs when the deadline is near or past, and clears its timer on an answer', async () => {
    const clock = new FakeClock();
    await clock.advance(1_000 * MS);
    let callSignal: AbortSignal | undefined;
    let answer: (value: string) => void = () => undefined;
    const result = callWithDeadline({
      clock,
      attempt: attempt(900),
      minMs: 250,
      peer: 'S3',
      call: (abortSignal) => {
        callSignal = abortSignal;
        return new Promise<string>((resolve) => (answer = resolve));
      },
      failure: () => new ServingError('UPSTREAM_UNAVAILABLE', 'failed'),
    });
    await clock.advance(249 * MS);
    assert.equal(callSignal?.aborted, false);
    answer('fine');
    assert.equal(await result, 'fine');
    assert.equal(clock.pendingTimers, 0);
  });

  it("reports the caller's own cancellation as CANCELLED, not as the peer's failure", async () => {
    const clock = new FakeClock();
    const controller = new AbortController();
    const result = callWithDeadline({
      clock,
      attempt: attempt(10_000),
      signal: controller.signal,
      minMs: 250,
      peer: 'S3',
      call: (abortSignal) => new Promise((_, reject) => abortSignal.addEventListener('abort', () => reject(new Error('aborted')))),
      failure: () => new ServingError('UPSTREAM_UNAVAILABLE', 'failed'),
    });
    controller.abort();
    await assert.rejects(result, (err: unknown) => err instanceof ServingError && err.code === 'CANCELLED');
    assert.equal(clock.pendingTimers, 0);
  });
});

function guardOptions(clock: FakeClock, overrides: Partial<TransferGuardOptions> = {}): TransferGuardOptions {
  return {
    clock,
    expectedBytes: undefined,
    idleMs: 0,
    minProgress: { bytesPerSecond: 0, windowMs: 1_000 },
    peer: 'the store',
    minProgressSetting: 'MME_TEST_MIN_BYTES_PER_SECOND',
    onBytes: () => undefined,
    ...overrides,
  };
}

/** Resolves with the error the guard is destroyed with (or undefined when it ends cleanly). */
function outcome(guard: TransferGuard): Promise<Error | undefined> {
  guard.resume();
  return new Promise((resolve) => {
    guard.on('error', resolve);
    guard.on('end', () => resolve(undefined));
  });
}

describe('TransferGuard', () => {
  it('fails a transfer slower than the floor over a window, and lets one at the floor go on', async () => {
    const clock = new FakeClock();
    const guard = new TransferGuard(guardOptions(clock, { minProgress: { bytesPerSecond: 100, windowMs: 1_000 } }));
    const ended = outcome(guard);
    let slow = false;
    guard.once('slow', () => (slow = true));
    guard.write(Buffer.alloc(100));
    await clock.advance(1_000 * MS);
    assert.equal(guard.destroyed, false, '100 bytes in a 1 s window meets 100 B/s');
    guard.write(Buffer.alloc(99));
    await clock.advance(1_000 * MS);
    const err = await ended;
    assert.equal(slow, true);
    assert.equal(err?.message, 'the download delivered 99 bytes in 1000 ms (99 B/s), below the minimum of 100 B/s (MME_TEST_MIN_BYTES_PER_SECOND)');
    assert.equal((err as NodeJS.ErrnoException).code, 'ETIMEDOUT');
    assert.equal(guard.failure, err);
    assert.equal(clock.pendingTimers, 0);
  });

  it('fails a transfer that sends nothing for idleMs; each chunk restarts the wait', async () => {
    const clock = new FakeClock();
    const guard = new TransferGuard(guardOptions(clock, { idleMs: 500 }));
    const ended = outcome(guard);
    await clock.advance(400 * MS);
    guard.write(Buffer.alloc(1));
    await clock.advance(400 * MS);
    assert.equal(guard.destroyed, false);
    await clock.advance(100 * MS);
    const err = await ended;
    assert.equal(err?.message, 'no data received from the store for 500 ms');
  });

  it('fails a body that ends short of its announced length, and passes one that does not', async () => {
    const clock = new FakeClock();
    const counted: number[] = [];
    const short = new TransferGuard(guardOptions(clock, { expectedBytes: 10, onBytes: (n) => counted.push(n) }));
    const shortEnded = outcome(short);
    short.end(Buffer.alloc(6));
    const err = await shortEnded;
    assert.equal(err?.message, 'the connection closed after 6 of 10 bytes');
    assert.equal((err as NodeJS.ErrnoException).code, 'ECONNRESET');
    assert.deepEqual(counted, [6]);
    const whole = new TransferGuard(guardOptions(clock, { expectedBytes: 10 }));
    const wholeEnded = outcome(whole);
    whole.end(Buffer.alloc(10));
    assert.equal(await wholeEnded, undefined);
  });
});

describe('guardedTransfer', () => {
  const consumeAll = async (stream: Readable): Promise<number> => {
    let bytes = 0;
    for await (const chunk of stream) bytes += (chunk as Buffer).length;
    return bytes;
  };

  it('feeds the body to the consumer and marks the attempt as progressed', async () => {
    const clock = new FakeClock();
    const attempt: FetchAttempt = { number: 1, deadlineMs: 0, progressed: false };
    const got = await guardedTransfer({
      body: Readable.from([Buffer.alloc(3), Buffer.alloc(4)]),
      guard: guardOptions(clock, { expectedBytes: 7 }),
      attempt,
      model: 'm',
      action: "downloading 'm.tar.gz'",
      consume: consumeAll,
    });
    assert.equal(got, 7);
    assert.equal(attempt.progressed, true);
  });

  it('turns a cut body into a retryable UPSTREAM_UNAVAILABLE naming the model, whatever the consumer saw', async () => {
    const clock = new FakeClock();
    const body = new PassThrough();
    const attempt: FetchAttempt = { number: 1, deadlineMs: 0, progressed: false };
    const result = guardedTransfer({ body, guard: guardOptions(clock), attempt, model: 'm', action: "downloading 'm.tar.gz'", consume: consumeAll });
    body.write(Buffer.alloc(5));
    await settle();
    body.destroy(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
    await assert.rejects(result, (err: unknown) => {
      assert.ok(err instanceof ServingError);
      assert.equal(err.code, 'UPSTREAM_UNAVAILABLE');
      assert.equal(err.message, "model 'm': downloading 'm.tar.gz' failed: socket hang up");
      assert.equal(isRetryable(err), true);
      return true;
    });
  });

  it("keeps the consumer's own verdict (not retryable) and closes the body", async () => {
    const clock = new FakeClock();
    const body = new PassThrough();
    const attempt: FetchAttempt = { number: 1, deadlineMs: 0, progressed: false };
    const rejected = new ServingError('ARCHIVE_REJECTED', 'an entry escapes the model directory');
    const result = guardedTransfer({
      body,
      guard: guardOptions(clock),
      attempt,
      model: 'm',
      action: "downloading 'm.tar.gz'",
      consume: () => Promise.reject(rejected),
    });
    await assert.rejects(result, (err: unknown) => {
      assert.ok(err instanceof ServingError);
      assert.equal(err.code, 'ARCHIVE_REJECTED');
      assert.equal(err.message, "model 'm': an entry escapes the model directory");
      assert.equal(isRetryable(err), false);
      return true;
    });
    assert.equal(body.destroyed, true);
  });

  it('does not count a trickle as progress: the retry budget is not renewed by it', async () => {
    const clock = new FakeClock();
    const body = new PassThrough();
    const attempt: FetchAttempt = { number: 1, deadlineMs: 0, progressed: false };
    const result = guardedTransfer({
      body,
      guard: guardOptions(clock, { minProgress: { bytesPerSecond: 1_000, windowMs: 1_000 } }),
      attempt,
      model: 'm',
      action: "downloading 'm.tar.gz'",
      consume: consumeAll,
    });
    body.write(Buffer.alloc(10));
    await settle();
    assert.equal(attempt.progressed, true);
    const settled = assert.rejects(
      result,
      (err: unknown) => err instanceof ServingError && isRetryable(err) && /below the minimum of 1000 B\/s/.test(err.message),
    );
    await clock.advance(1_000 * MS);
    await settled;
    assert.equal(attempt.progressed, false);
  });

  it('fails at once, retryably, a body whose connection closed before it was read', async () => {
    const clock = new FakeClock();
    const body = new PassThrough();
    body.on('error', () => undefined);
    body.destroy(new Error('socket hang up'));
    const attempt: FetchAttempt = { number: 1, deadlineMs: 0, progressed: false };
    await assert.rejects(
      guardedTransfer({ body, guard: guardOptions(clock, { idleMs: 60_000 }), attempt, model: 'm', action: "downloading 'm.tar.gz'", consume: consumeAll }),
      (err: unknown) =>
        err instanceof ServingError &&
        isRetryable(err) &&
        err.message === "model 'm': downloading 'm.tar.gz' failed: the connection closed before the body was read (socket hang up)",
    );
    assert.equal(clock.pendingTimers, 0);
  });
});

describe('ActiveTransfers', () => {
  it('reports the running transfer per key on its clock, and forgets it when it ends', () => {
    let now = 0;
    const transfers = new ActiveTransfers(() => now);
    const progress = transfers.start('m', 1_000);
    progress.add(250);
    now = 500;
    assert.deepEqual(transfers.snapshot('m'), { bytes: 250, totalBytes: 1_000, fraction: 0.25, bytesPerSecond: 500, etaSeconds: 1.5, elapsedMs: 500 });
    const retry = transfers.start('m', 1_000);
    transfers.end('m', progress);
    assert.equal(transfers.snapshot('m')?.bytes, 0, "an earlier attempt's end does not remove the retry's report");
    transfers.end('m', retry);
    assert.equal(transfers.snapshot('m'), undefined);
  });
});
