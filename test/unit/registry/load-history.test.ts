/**
 * What the repository index says of a model not in memory
 * (registry/load-history.ts): the last load's error until a load succeeds,
 * "loaded once" after one, nothing for failures that are not the model's, and
 * a bounded map whatever clients name.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ServingError } from '../../../src/errors.js';
import { LOAD_HISTORY_MAX, LoadHistory } from '../../../src/registry/load-history.js';

describe('load history', () => {
  it('the last error until a load succeeds; then loaded once', () => {
    const h = new LoadHistory(() => 1000);
    h.failed('m', new ServingError('INVALID_MODEL', "model 'm': bad config"));
    assert.deepEqual(h.get('m'), { lastError: { code: 'INVALID_MODEL', message: "model 'm': bad config", atMs: 1000 }, loadedOnce: false });
    h.loaded('m');
    assert.deepEqual(h.get('m'), { lastError: undefined, loadedOnce: true });
    h.failed('m', new Error('/host/path/leaks'));
    assert.deepEqual(h.get('m')!.lastError?.message, "model 'm': the load failed", 'a non-ServingError is not copied (it may name a host path)');
    assert.equal(h.get('m')!.loadedOnce, true);
  });

  it('failures that say nothing about the model are not recorded; the map is bounded', () => {
    const h = new LoadHistory();
    for (const code of ['CANCELLED', 'SHUTTING_DOWN', 'MODEL_NOT_FOUND', 'INVALID_TARGET'] as const) h.failed('x', new ServingError(code, 'no'));
    assert.equal(h.get('x'), undefined);
    for (let i = 0; i < LOAD_HISTORY_MAX + 10; i++) h.loaded(`t${i}`);
    assert.equal(h.get('t0'), undefined, 'the oldest forgotten');
    assert.ok(h.get(`t${LOAD_HISTORY_MAX + 9}`));
  });
});
