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
