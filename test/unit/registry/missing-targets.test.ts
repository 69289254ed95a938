import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ServingError } from '../../../src/errors.js';
import { MissingTargets } from '../../../src/registry/missing-targets.js';

const miss = (t: string) => new ServingError('MODEL_NOT_FOUND', `model '${t}' not found`, { model: t });

it('remembers a miss for its TTL, and not longer', () => {
  let now = 0;
  const m = new MissingTargets({ ttlMs: 5000, lookupsPerSecond: 0, now: () => now });
  const err = miss('a');
  m.record('a', err);
  assert.equal(m.remembered('a'), err);
  now = 4999;
  assert.equal(m.remembered('a'), err);
  // Its own answers handed out again do not renew it.
  m.record('a', err);
  now = 5000;
  assert.equal(m.remembered('a'), undefined);
  assert.equal(m.size, 0);
});

it('is bounded in entries, oldest forgotten first', () => {
  const m = new MissingTargets({ ttlMs: 5000, lookupsPerSecond: 0, maxEntries: 3, now: () => 0 });
  for (const t of ['a', 'b', 'c', 'd']) m.record(t, miss(t));
  assert.equal(m.size, 3);
  assert.equal(m.remembered('a'), undefined);
  assert.ok(m.remembered('d'));
});

it('pays misses from a bucket of twice the rate that refills at the rate; found objects pass', () => {
  let now = 0;
  const m = new MissingTargets({ ttlMs: 0, lookupsPerSecond: 2, now: () => now });
  for (let i = 0; i < 4; i++) {
    m.admitLookup(`k${i}`);
    m.record(`k${i}`, miss(`k${i}`));
  }
  assert.throws(
    () => m.admitLookup('k5'),
    (e: unknown) =>
      e instanceof ServingError && e.code === 'OVERLOADED' && e.details?.['retryAfterSeconds'] === 1 && /MME_MISSING_TARGET_LOOKUPS_PER_SECOND/.test(e.message),
  );
  m.foundObject('known');
  m.admitLookup('known');
  now = 500;
  m.admitLookup('k5');
});

it('forget and foundObject drop a remembered miss', () => {
  const m = new MissingTargets({ ttlMs: 5000, lookupsPerSecond: 0, now: () => 0 });
  m.record('a', miss('a'));
  m.forget('a');
  assert.equal(m.remembered('a'), undefined);
  m.record('b', miss('b'));
  m.foundObject('b');
  assert.equal(m.remembered('b'), undefined);
});
