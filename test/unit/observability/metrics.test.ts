/**
 * Per-target series (observability/metrics.ts): two targets whose models
 * share a name are two series; a target's series go with its last handle;
 * past the cap targets share one overflow series that never goes down;
 * `*_us` counters are whole microseconds; and every metric labelled
 * `target` is a cell metric, so removal and the cap reach it.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CellCounter, CellDurationCounter, CellGauge, CellHistogram } from '../../../src/observability/metric-cells.js';
import { createMetrics, MODEL_LABELS, OVERFLOW_LABEL } from '../../../src/observability/metrics.js';
import { sample } from '../../support/metric-value.js';

async function scrape(metrics: ReturnType<typeof createMetrics>): Promise<string> {
  return metrics.registry.metrics();
}

describe('per-target metrics', () => {
  test('two targets with the same model name are counted apart', async () => {
    const metrics = createMetrics();
    const a = metrics.forTarget('team/a.tar.gz').forModel('model', '1');
    const b = metrics.forTarget('team/b.tar.gz').forModel('model', '1');
    a.requestSuccess.inc();
    b.requestSuccess.inc();
    b.requestSuccess.inc();
    a.requestDuration.observe(0.001);
    const text = await scrape(metrics);
    assert.equal(sample(text, 'nv_inference_request_success', { target: 'team/a.tar.gz', model: 'model', version: '1' }), 1);
    assert.equal(sample(text, 'nv_inference_request_success', { target: 'team/b.tar.gz', model: 'model', version: '1' }), 2);
    assert.equal(sample(text, 'onnx_mme_request_duration_seconds_count', { target: 'team/a.tar.gz', model: 'model' }), 1);
  });

  test('series go with the last handle of their target, and only then', async () => {
    const metrics = createMetrics();
    const first = metrics.forTarget('t');
    const second = metrics.forTarget('t'); // a reload overlapping the old package
    const cells = first.forModel('m', '1');
    cells.requestSuccess.inc();
    cells.requestDuration.observe(0.01);
    cells.fail('OTHER', 5);
    cells.pending.inc();
    cells.pending.dec();
    cells.queueUs.add(3);
    metrics.forTarget('other').forModel('m', '1').requestSuccess.inc();
    assert.equal(sample(await scrape(metrics), 'nv_inference_request_success', { target: 't' }), 1);
    first.release();
    first.release(); // a second release of one handle is a no-op
    assert.equal(sample(await scrape(metrics), 'nv_inference_request_success', { target: 't' }), 1, 'still held by the second handle');
    second.release();
    const text = await scrape(metrics);
    assert.doesNotMatch(text, /target="t"/, 'no series of the released target is left');
    assert.equal(sample(text, 'nv_inference_request_success', { target: 'other' }), 1);
    assert.deepEqual(
      [...metrics.targets()].map((t) => t.target),
      ['other'],
    );
    // Asked for again: fresh series from zero.
    metrics.forTarget('t').forModel('m', '1').requestSuccess.inc();
    assert.equal(sample(await scrape(metrics), 'nv_inference_request_success', { target: 't' }), 1);
  });

  test('past the cap, targets share the overflow series, which never goes down; stats stay per target', async () => {
    const metrics = createMetrics({ maxTargets: 2 });
    const own = ['a', 'b'].map((t) => metrics.forTarget(t));
    const over = ['c', 'd'].map((t) => metrics.forTarget(t));
    assert.deepEqual(
      [...own, ...over].map((t) => t.overflow),
      [false, false, true, true],
    );
    for (const [i, t] of [...own, ...over].entries()) {
      const cells = t.forModel(`model-${i}`, '1');
      for (let n = 0; n <= i; n++) cells.requestSuccess.inc();
      cells.requestDuration.observe(0.002);
      cells.computeInferUs.add(10.5);
    }
    const o = { target: OVERFLOW_LABEL, model: OVERFLOW_LABEL, version: OVERFLOW_LABEL };
    let text = await scrape(metrics);
    assert.equal(sample(text, 'nv_inference_request_success', o), 3 + 4);
    assert.equal(sample(text, 'onnx_mme_request_duration_seconds_count', o), 2);
    assert.equal(sample(text, 'nv_inference_compute_infer_duration_us', o), 20, 'each target contributes its whole µs');
    assert.equal(sample(text, 'onnx_mme_metrics_overflow_targets'), 2);
    assert.doesNotMatch(text, /target="c"|target="d"/);
    assert.equal(text.match(/^onnx_mme_request_duration_seconds_count\{target="_overflow"/gm)?.length, 1, 'one merged histogram series');
    // Each target keeps its own accumulators.
    assert.equal(over[1]!.forModel('model-3', '1').requestSuccess.total, 4);

    over[0]!.release();
    text = await scrape(metrics);
    assert.equal(sample(text, 'nv_inference_request_success', o), 7, 'the overflow counter keeps what a released target added');
    assert.equal(sample(text, 'onnx_mme_request_duration_seconds_count', o), 2, 'and so does the overflow histogram');
    assert.equal(sample(text, 'onnx_mme_metrics_overflow_targets'), 1);
    // A freed own slot goes to the next new target, not to one already folded.
    own[0]!.release();
    assert.equal(metrics.forTarget('e').overflow, false);
    assert.equal(metrics.forTarget('f').overflow, true);
  });

  test('microsecond counters are whole numbers; the fraction is carried', async () => {
    const metrics = createMetrics();
    const cells = metrics.forTarget('t').forModel('m', '1');
    cells.requestDurationUs.add(0.4);
    cells.requestDurationUs.add(0.4);
    assert.equal(sample(await scrape(metrics), 'nv_inference_request_duration_us', { target: 't' }), 0);
    cells.requestDurationUs.add(0.4);
    cells.requestDurationUs.add(914.648);
    const text = await scrape(metrics);
    assert.equal(sample(text, 'nv_inference_request_duration_us', { target: 't' }), 915);
    for (const line of text.split('\n').filter((l) => /^nv_\w+_us\{/.test(l))) assert.match(line, / \d+$/, line);
    assert.equal(cells.requestDurationUs.count, 4);
  });

  test('no series with an empty model or version', () => {
    const t = createMetrics().forTarget('t');
    assert.throws(() => t.forModel('m', ''), /empty model or version/);
    assert.throws(() => t.forModel('', '1'), /empty model or version/);
  });

  test('every metric labelled `target` is a cell metric whose labels start target, model, version', () => {
    const metrics = createMetrics();
    const labelled = metrics.registry.getMetricsAsArray().filter((m) => ((m as unknown as { labelNames: string[] }).labelNames ?? []).includes('target'));
    assert.ok(labelled.length >= 15);
    for (const m of labelled) {
      const names = (m as unknown as { labelNames: string[] }).labelNames;
      assert.deepEqual(names.slice(0, 3), [...MODEL_LABELS], (m as unknown as { name: string }).name);
      assert.ok(
        m instanceof CellCounter || m instanceof CellDurationCounter || m instanceof CellGauge || m instanceof CellHistogram,
        (m as unknown as { name: string }).name,
      );
    }
  });
});
