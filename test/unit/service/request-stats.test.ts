/**
 * RequestStats: what one request counts in its model's cells, step by step,
 * on the real metric cells (observability/metrics.ts).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createMetrics } from '../../../src/observability/metrics.js';
import { RequestStats } from '../../../src/service/request-stats.js';
import { sample } from '../../support/metric-value.js';

function series() {
  const metrics = createMetrics();
  const target = metrics.forTarget('t');
  /** nv_inference_pending_request_count of the model, as /metrics shows it. */
  const pending = async (): Promise<number | undefined> =>
    sample(await metrics.registry.metrics(), 'nv_inference_pending_request_count', { model: 'm', version: '1' });
  return { target, cells: target.forModel('m', '1'), pending };
}

describe('RequestStats', () => {
  test('a run: pending while queued, then success with compute-input, compute-output and the total', async () => {
    const { target, cells, pending } = series();
    const stats = new RequestStats();
    await stats.waitFor(() => new Promise((r) => setTimeout(r, 20)));
    stats.serving(target, 'm', '1');
    stats.bound();
    stats.running(false);
    assert.equal(await pending(), 1, 'counted as pending once it joins the queue');
    const computeUs = stats.computed();
    assert.ok(computeUs >= 0);
    stats.answered(2, computeUs, false);
    stats.end();
    assert.equal(await pending(), 0);
    assert.equal(cells.requestSuccess.total, 1);
    assert.equal(cells.computeInputUs.count, 1);
    assert.ok(cells.computeInputUs.totalUs < 20_000, `the 20 ms wait for the model is not compute-input (${cells.computeInputUs.totalUs} µs)`);
    assert.ok(cells.requestDurationUs.totalUs >= 20_000, 'the total counts the wait');
    assert.equal(cells.computeOutputUs.count, 1);
    assert.equal(cells.inferenceCount.total, 0, "a model's executions are its scheduler's to count");
  });

  test('an ensemble counts its request as one execution of its rows; a cache hit is a success but not an inference', async () => {
    const { target, cells, pending } = series();
    const ran = new RequestStats();
    ran.serving(target, 'm', '1');
    ran.bound();
    ran.running(false);
    ran.answered(3, ran.computed(), true);
    ran.end();
    assert.equal(cells.inferenceCount.total, 3);
    assert.equal(cells.execCount.total, 1);
    const hit = new RequestStats();
    hit.serving(target, 'm', '1');
    hit.bound();
    assert.equal(
      hit.lookup(() => 'kept'),
      'kept',
    );
    hit.cacheHit(3);
    hit.end();
    assert.equal(cells.cacheHits.total, 1);
    assert.equal(cells.cacheHitUs.count, 1);
    assert.equal(cells.requestSuccess.total, 2);
    assert.equal(cells.execCount.total, 1, 'the hit ran nothing');
    assert.equal(await pending(), 0);
  });

  test('a failure counts once the version is known, never before; a miss times lookup and insert', async () => {
    const { target, cells, pending } = series();
    const early = new RequestStats();
    early.failed('OTHER');
    early.end();
    assert.equal(cells.failures.count, 0, 'no version yet: no series to count in');
    const late = new RequestStats();
    late.serving(target, 'm', '1');
    late.bound();
    late.lookup(() => undefined);
    late.running(true);
    late.computed();
    let inserted = false;
    late.cacheMiss(() => (inserted = true));
    assert.ok(inserted);
    assert.equal(cells.cacheMisses.total, 1);
    assert.equal(cells.cacheMissUs.count, 1);
    late.failed('BACKEND');
    late.end();
    assert.equal(cells.failures.count, 1);
    assert.equal(await pending(), 0);
  });
});
