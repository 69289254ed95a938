/**
 * @module test/unit/http/admission
 * The per-turn budgets of http/admission.ts: inference starts per turn and
 * bytes of text (JSON/CSV parse and answer) per turn. What is over a budget
 * waits for a later event-loop turn, in arrival order, so a poll phase (where
 * /ping is answered) comes between; one item larger than the text budget
 * runs alone in its turn. Bytes in flight: refused before the body is read.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Admission } from '../../../src/service/admission.js';
import { ServingError } from '../../../src/errors.js';

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

test('text that fits the turn goes at once (no await); past the budget it waits for a later turn, in order', async () => {
  const a = new Admission({ maxInflightBytes: 1e9, maxQueued: 10, textBytesPerTurn: 100 });
  assert.equal(a.textTurn(60), undefined);
  assert.equal(a.textTurn(40), undefined);
  const order: string[] = [];
  const late1 = a.textTurn(50);
  const late2 = a.textTurn(50);
  const late3 = a.textTurn(50);
  assert.ok(late1 && late2 && late3);
  assert.equal(a.textQueued, 3);
  void late1.then(() => order.push('1'));
  void late2.then(() => order.push('2'));
  void late3.then(() => order.push('3'));
  // Later arrivals queue behind the waiters even when they would fit: arrival order holds.
  const small = a.textTurn(1);
  assert.ok(small);
  void small.then(() => order.push('small'));
  await turn();
  assert.deepEqual(order, ['1', '2']);
  await turn();
  assert.deepEqual(order, ['1', '2', '3', 'small']);
  assert.equal(a.textQueued, 0);
});

test('one item larger than the whole budget runs alone in its turn', async () => {
  const a = new Admission({ maxInflightBytes: 1e9, maxQueued: 10, textBytesPerTurn: 100 });
  assert.equal(a.textTurn(500), undefined, 'the first in a turn always goes');
  const order: number[] = [];
  const next = [a.textTurn(500), a.textTurn(10), a.textTurn(500)];
  next.forEach((p, i) => void p!.then(() => order.push(i)));
  await turn();
  assert.deepEqual(order, [0]);
  await turn();
  assert.deepEqual(order, [0, 1]);
  await turn();
  assert.deepEqual(order, [0, 1, 2]);
  // Nothing waits: the next turn starts empty.
  await turn();
  assert.equal(a.textTurn(500), undefined);
  assert.equal(a.textTurn(0), undefined, 'no text (binary tensors) never waits');
});

test('inference starts per turn: past perTurn they wait; past maxQueued they are refused, unread', async () => {
  const a = new Admission({ maxInflightBytes: 1e9, maxQueued: 2, perTurn: 2 });
  const started: number[] = [];
  for (let i = 0; i < 4; i++) a.schedule(() => started.push(i));
  assert.deepEqual(started, [0, 1]);
  assert.throws(
    () => a.schedule(() => started.push(9)),
    (err) => err instanceof ServingError && err.code === 'OVERLOADED',
  );
  await turn();
  assert.deepEqual(started, [0, 1, 2, 3]);
});

test('bytes in flight: a request that does not fit is refused before its body is read; release gives the bytes back', () => {
  const a = new Admission({ maxInflightBytes: 100, maxQueued: 10 });
  const t1 = a.reserve(80);
  assert.throws(
    () => a.reserve(30),
    (err) => err instanceof ServingError && err.code === 'OVERLOADED' && /MME_MAX_INFLIGHT_BYTES/.test(err.message),
  );
  assert.equal(t1.grow(30), false);
  assert.equal(t1.grow(20), true);
  t1.add(50);
  assert.equal(a.bytesInFlight, 150);
  t1.release();
  t1.release();
  assert.equal(a.bytesInFlight, 0);
});

test("admit: a model's queue counts the requests on their way to it; over its limit or MME_MAX_INFLIGHT_REQUESTS, refused at once", () => {
  const a = new Admission({ maxInflightBytes: 1e9, maxQueued: 100, maxRequests: 5 });
  const m = (queued: number) => ({ key: 'target:m', model: 'm', queued, limit: 3 });
  const t1 = a.admit(m(1));
  const t2 = a.admit(m(1));
  assert.equal(a.onTheWayTo('target:m'), 2);
  // 1 waiting in the model + 2 on their way = its limit of 3.
  assert.throws(
    () => a.admit(m(1)),
    (e: unknown) =>
      e instanceof ServingError &&
      e.code === 'OVERLOADED' &&
      /model 'm': the queue is full \(1 requests waiting, 2 more on their way to it; max_queue_size 3\)/.test(e.message) &&
      e.model === 'm',
  );
  // Once one joins the model's queue, the scheduler counts it instead.
  t1.arrived();
  t1.arrived();
  assert.equal(a.onTheWayTo('target:m'), 1);
  assert.throws(() => a.admit(m(2)), /queue is full/);
  a.admit(m(1));
  // Another model has its own queue; the server-wide bound counts every admitted request until its answer closes.
  const other = { key: 'target:o', model: 'o', queued: 0, limit: 100 };
  a.admit(other);
  a.admit(other);
  assert.equal(a.requestsInFlight, 5);
  assert.throws(
    () => a.admit(other),
    (e: unknown) => e instanceof ServingError && e.code === 'OVERLOADED' && /limit of 5 requests in progress \(MME_MAX_INFLIGHT_REQUESTS\)/.test(e.message),
  );
  t2.release();
  t2.release();
  assert.equal(a.requestsInFlight, 4);
  assert.equal(a.onTheWayTo('target:m'), 1, 'a request released before it arrived leaves the count too');
  t1.release();
  assert.equal(a.requestsInFlight, 3);
  assert.equal(a.onTheWayTo('target:m'), 1);
  a.admit(other);
});

test('a refusal says when to come back and why; every refusal and every freed place is announced', () => {
  const a = new Admission({ maxInflightBytes: 100, maxQueued: 10, maxRequests: 1 });
  const refusals: string[] = [];
  const freed: string[] = [];
  a.onRefusal((reason, model) => refusals.push(`${reason}:${model}`));
  a.onFreed((key) => freed.push(key));
  const m = { key: 'target:m', model: 'm', queued: 0, limit: 10 };
  const t = a.admit(m);
  assert.throws(
    () => a.admit(m),
    (e: unknown) => e instanceof ServingError && e.details?.['retryAfterSeconds'] === 1 && e.details['reason'] === 'inflight_requests',
  );
  assert.throws(
    () => a.reserve(200, 'm'),
    (e: unknown) => e instanceof ServingError && e.details?.['reason'] === 'inflight_bytes',
  );
  assert.deepEqual(refusals, ['inflight_requests:m', 'inflight_bytes:m']);
  t.release();
  t.release();
  assert.deepEqual(freed, ['target:m'], 'announced once');
});

test('a place kept for a woken connection counts as taken for everyone but the request that claims it', () => {
  const a = new Admission({ maxInflightBytes: 1e9, maxQueued: 10, maxRequests: 2 });
  const m = { key: 'target:m', model: 'm', queued: 0, limit: 100 };
  a.admit(m);
  a.keepPlace('*');
  assert.throws(() => a.admit(m), /MME_MAX_INFLIGHT_REQUESTS/, 'a fresh request finds the kept place taken');
  const claimed = a.admit(m, '*');
  assert.equal(a.requestsInFlight, 2);
  claimed.release();
  // A kept place that nobody claims is given back.
  a.keepPlace('*');
  assert.throws(() => a.admit(m));
  a.dropPlace('*');
  a.dropPlace('*');
  a.admit(m);
  // Per model: a place kept in a model's queue counts against that queue only.
  const q = { key: 'target:q', model: 'q', queued: 1, limit: 2 };
  const b = new Admission({ maxInflightBytes: 1e9, maxQueued: 10 });
  b.keepPlace('target:q');
  assert.throws(() => b.admit(q), /queue is full/);
  b.admit({ ...q, key: 'target:r', model: 'r' });
  b.admit(q, 'target:q');
});

test('busy: requests admitted together in a turn, requests waiting for a turn, text waiting, or connections held', async () => {
  const a = new Admission({ maxInflightBytes: 1e9, maxQueued: 10, perTurn: 2, textBytesPerTurn: 100 });
  const queue = { key: 'm', model: 'm', queued: 0, limit: 100 };
  assert.equal(a.busy, false);
  a.admit(queue).release();
  assert.equal(a.busy, false, 'one request in its turn: a lone client');
  a.admit(queue).release();
  assert.equal(a.busy, true, 'two admitted in one turn (either transport: gRPC admits without a turn of its own)');
  await turn();
  assert.equal(a.busy, false, 'the next turn starts from none');
  for (let i = 0; i < 3; i++) a.schedule(() => undefined);
  assert.equal(a.busy, true, 'a request waits for a turn');
  await turn();
  await turn();
  assert.equal(a.busy, false);
  assert.equal(a.textTurn(100), undefined);
  const late = a.textTurn(1);
  assert.equal(a.busy, true, 'text waiting for a turn');
  await late;
  await turn();
  assert.equal(a.busy, false);
  const held = { size: 1 };
  a.countHeld(held);
  assert.equal(a.busy, true, 'a refused connection held unread');
  held.size = 0;
  assert.equal(a.busy, false);
});
