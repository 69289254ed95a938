/**
 * @module test/unit/service/event-loop-turns
 * Fair turns: past the per-turn budget, waiting requests are started one per
 * model in turn (round robin), arrival order within a model, so a flooded
 * model takes no more of a turn than a model sending one request at a time;
 * the waiters are bounded.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EventLoopTurns } from '../../../src/service/event-loop-turns.js';

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

test('a flooded model and a light one share each turn: round robin across models, arrival order within one', async () => {
  const turns = new EventLoopTurns({ maxQueued: 1000, perTurn: 2 });
  const started: string[] = [];
  // This turn's budget goes to the first two.
  turns.schedule('heavy', () => started.push('h0'));
  turns.schedule('heavy', () => started.push('h1'));
  for (let i = 2; i < 10; i++) turns.schedule('heavy', () => started.push(`h${i}`));
  turns.schedule('light', () => started.push('l0'));
  turns.schedule('light', () => started.push('l1'));
  assert.deepEqual(started, ['h0', 'h1']);
  await turn();
  // The light model's first request starts in the very next turn, though eight heavy ones arrived before it.
  assert.deepEqual(started, ['h0', 'h1', 'h2', 'l0']);
  await turn();
  assert.deepEqual(started.slice(4), ['h3', 'l1']);
  await turn();
  assert.deepEqual(started.slice(6), ['h4', 'h5']);
  assert.equal(turns.queued, 4);
});

test('past maxQueued waiters, schedule refuses and runs nothing', () => {
  const turns = new EventLoopTurns({ maxQueued: 1, perTurn: 1 });
  let ran = 0;
  assert.equal(
    turns.schedule('a', () => ran++),
    true,
  );
  assert.equal(
    turns.schedule('a', () => ran++),
    true,
  );
  assert.equal(
    turns.schedule('b', () => ran++),
    false,
  );
  assert.equal(ran, 1);
});

/** A clock the test moves by hand (µs). */
function fakeClock(): { nowUs(): number; advance(us: number): void } {
  let now = 0;
  return {
    nowUs: () => now,
    advance: (us: number) => {
      now += us;
    },
  };
}

/** Schedules `n` requests of `key` and returns how many started in this turn. */
function startedNow(turns: EventLoopTurns, key: string, n: number, started: string[]): number {
  const before = started.length;
  for (let i = 0; i < n; i++) turns.schedule(key, () => started.push(key));
  return started.length - before;
}

test('a model alone gets long turns; two models in use get short ones, and long turns come back once the second has gone', async () => {
  const clock = fakeClock();
  const turns = new EventLoopTurns({ maxQueued: 1000, perTurn: 8, sharedPerTurn: 2, clock });
  const started: string[] = [];
  assert.equal(startedNow(turns, 'heavy', 20, started), 8, 'alone: the whole per-turn budget');
  assert.equal(turns.shared, false);
  await turn();
  assert.equal(started.length, 16, 'the next turn starts eight more');
  await turn();
  assert.equal(started.length, 20);
  await turn();

  clock.advance(10_000);
  turns.schedule('light', () => started.push('light'));
  assert.equal(turns.shared, true, 'a second model within the window');
  started.length = 0;
  assert.equal(startedNow(turns, 'heavy', 20, started), 1, 'this turn had one start left of the two (the light request took one)');
  for (let t = 0; t < 3; t++) {
    const before = started.length;
    await turn();
    assert.equal(started.length - before, 2, 'two a turn while both are in use');
  }
  while (started.length < 20) await turn();

  // The light model stops: the window it shared, and the one after, keep turns short; then the heavy one has long turns again.
  clock.advance(300_000);
  await turn();
  started.length = 0;
  assert.equal(startedNow(turns, 'heavy', 20, started), 2, 'the window after a shared one is still short');
  while (started.length < 20) await turn();
  clock.advance(600_000);
  await turn();
  started.length = 0;
  assert.equal(startedNow(turns, 'heavy', 20, started), 8, 'alone for two windows: long turns again');
  assert.equal(turns.shared, false);
  while (started.length < 20) await turn();
});

test('arrivals counts the requests admitted in the turn under way, and a new turn starts from none', async () => {
  const turns = new EventLoopTurns({ maxQueued: 10, perTurn: 2 });
  assert.equal(turns.arrivals, 0);
  turns.noteArrival();
  assert.equal(turns.arrivals, 1, 'a lone request');
  turns.noteArrival();
  assert.equal(turns.arrivals, 2, 'two requests arrived together');
  await turn();
  assert.equal(turns.arrivals, 0, 'the next turn starts from none');
  turns.noteArrival();
  assert.equal(turns.arrivals, 1);
});
