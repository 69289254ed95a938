/**
 * FailedLoads with a fake clock: which errors are remembered, the back-off
 * window doubling per failure of one version (capped), a new version or an
 * explicit forget ending it, and the bounded map.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ServingError } from '../../../src/errors.js';
import { FAILED_LOAD_BASE_MS, FAILED_LOAD_MAX_MS, FailedLoads } from '../../../src/registry/failed-loads.js';

function clock() {
  let t = 1000;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}
const broken = new ServingError('INVALID_MODEL', "model 'm': config.pbtxt does not match the ONNX model", { model: 'm' });

describe('FailedLoads', () => {
  it('remembers errors of the object, not transient ones', () => {
    assert.equal(FailedLoads.remembers(broken), true);
    assert.equal(FailedLoads.remembers(new ServingError('ARCHIVE_REJECTED', 'x')), true);
    for (const code of ['UPSTREAM_UNAVAILABLE', 'INSUFFICIENT_MEMORY', 'INSUFFICIENT_STORAGE', 'MODEL_NOT_FOUND'] as const) {
      assert.equal(FailedLoads.remembers(new ServingError(code, 'x')), false, code);
    }
    assert.equal(FailedLoads.remembers(new Error('x')), false);
    // A model larger than the whole disk budget: no eviction will ever make room, so it is remembered; a full cache is not.
    assert.equal(FailedLoads.remembers(new ServingError('INSUFFICIENT_STORAGE', 'x', { details: { wholeBudget: true } })), true);
    assert.equal(FailedLoads.remembers(new ServingError('INSUFFICIENT_STORAGE', 'x', { details: { wholeBudget: false } })), false);
  });

  it('the same error, naming the model, until the window ends; each failure of one version doubles it, up to the cap', () => {
    const c = clock();
    const f = new FailedLoads({ now: c.now });
    let expected = FAILED_LOAD_BASE_MS;
    for (let failure = 1; failure <= 10; failure++) {
      f.record('m', 'etag-1', broken);
      assert.equal(f.inWindow('m'), true);
      const again = f.stillFailing('m', 'etag-1');
      assert.ok(again);
      assert.equal(again.code, 'INVALID_MODEL');
      assert.equal(again.model, 'm');
      assert.ok(again.message.startsWith(broken.message), again.message);
      c.advance(expected - 1);
      assert.equal(f.inWindow('m'), true, `failure ${failure}: still in its ${expected} ms window`);
      c.advance(1);
      assert.equal(f.inWindow('m'), false, `failure ${failure}: window over after ${expected} ms`);
      assert.equal(f.stillFailing('m', 'etag-1'), undefined);
      expected = Math.min(FAILED_LOAD_MAX_MS, expected * 2);
    }
  });

  it("a remembered failure of the server's says when it loads again (Retry-After); a package's own fault does not", () => {
    const c = clock();
    const f = new FailedLoads({ now: c.now });
    const tooBig = new ServingError('INSUFFICIENT_STORAGE', "model 'big': larger than the whole disk budget", {
      model: 'big',
      details: { wholeBudget: true, needBytes: 10, budgetBytes: 5 },
    });
    const fresh = f.record('big', 'etag-1', tooBig);
    assert.deepEqual(fresh.details, { wholeBudget: true, needBytes: 10, budgetBytes: 5, retryAfterSeconds: FAILED_LOAD_BASE_MS / 1000 });
    c.advance(FAILED_LOAD_BASE_MS / 2 + 1);
    const remembered = f.stillFailing('big', 'etag-1');
    assert.equal(remembered?.code, 'INSUFFICIENT_STORAGE');
    assert.deepEqual(remembered.details, { wholeBudget: true, needBytes: 10, budgetBytes: 5, retryAfterSeconds: Math.ceil(FAILED_LOAD_BASE_MS / 2000) });
    c.advance(FAILED_LOAD_BASE_MS / 2 - 2);
    assert.equal(f.stillFailing('big', 'etag-1')?.details?.['retryAfterSeconds'], 1, 'never less than a second');
    // The second failure of the same version: the doubled window.
    c.advance(1);
    assert.equal(f.record('big', 'etag-1', tooBig).details?.['retryAfterSeconds'], (2 * FAILED_LOAD_BASE_MS) / 1000);

    assert.equal(f.record('m', 'etag-1', broken), broken, 'a 400 is answered as it is');
    assert.equal(f.stillFailing('m', 'etag-1')?.details, undefined);
  });

  it('a new version ends the window and starts the count again', () => {
    const c = clock();
    const f = new FailedLoads({ now: c.now });
    f.record('m', 'etag-1', broken);
    f.record('m', 'etag-1', broken);
    assert.equal(f.stillFailing('m', 'etag-2'), undefined, 'changed object: load it');
    assert.equal(f.inWindow('m'), false);
    f.record('m', 'etag-2', broken);
    c.advance(FAILED_LOAD_BASE_MS);
    assert.equal(f.inWindow('m'), false, 'first failure of the new version: the base window');
  });

  it('forget (an explicit load) ends it; targets are independent; the map is bounded', () => {
    const f = new FailedLoads({ now: clock().now });
    f.record('a', 'v', broken);
    f.record('b', 'v', broken);
    f.forget('a');
    assert.equal(f.inWindow('a'), false);
    assert.equal(f.inWindow('b'), true);
    for (let i = 0; i < 5000; i++) f.record(`t${i}`, 'v', broken);
    assert.ok(f.size <= 1024);
    assert.equal(f.inWindow('t4999'), true);
  });
});
