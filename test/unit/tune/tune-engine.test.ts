/**
 * The parts of `onnx-mme tune` that need no server: a candidate's score under
 * each objective, the knobs written into the user's config (and only
 * those), the search space, the sweep's stop rule, the Pareto front and the
 * config diff.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ModelConfigDescriptor } from '../../../src/config/model-config-schema.js';
import { parseModelConfig } from '../../../src/config/model-config.js';
import { parseTextFormat, printTextFormat } from '../../../src/config/pbtxt/parser.js';
import type { PerfStep } from '../../../src/perf/perf-run.js';
import { keepGoing } from '../../../src/tune/load-worker.js';
import { unifiedDiff } from '../../../src/tune/line-diff.js';
import { paretoFront } from '../../../src/tune/tune-report.js';
import { scoreOf } from '../../../src/tune/tune-run.js';
import { applySetting, effectKey, searchSpace, settingOf, withValue } from '../../../src/tune/tune-space.js';

function step(concurrency: number, throughputRps: number, p99Ms: number, errors = 0): PerfStep {
  return {
    mode: 'concurrency',
    concurrency,
    rateRps: undefined,
    throughputRps,
    latency: { count: 100, meanMs: p99Ms / 2, p50Ms: p99Ms / 2, p90Ms: p99Ms, p95Ms: p99Ms, p99Ms, maxMs: p99Ms },
    requests: 100,
    errors,
    errorsByStatus: errors ? { '429': errors } : {},
    requestsSent: 100,
    dropped: 0,
    stable: true,
    windows: 2,
    measuredMs: 1000,
    clientCpuPct: 10,
    clientEventLoopPct: 10,
    server: undefined,
    clientSaturated: false,
  };
}

const USER = `name: "m"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]
version_policy { latest { num_versions: 2 } }
`;

describe('tune scoring', () => {
  const steps = [step(1, 100, 2), step(4, 300, 8), step(16, 500, 40), step(64, 700, 90, 3)];
  it('throughput: the best step without errors', () => {
    const s = scoreOf({ steps }, { kind: 'throughput' });
    assert.equal(s.score, 500);
    assert.equal(s.at?.concurrency, 16);
  });
  it('latency objective: the best step whose p99 met it, not the fastest overall', () => {
    assert.equal(scoreOf({ steps }, { kind: 'latency', p99Ms: 10 }).at?.concurrency, 4);
    assert.equal(scoreOf({ steps }, { kind: 'latency', p99Ms: 1 }).score, 0);
  });
  it('the sweep stops once p99 passes the objective, throughput is flat, or a request failed', () => {
    const rule = { p99Ms: 10, flatGain: 0.05 };
    assert.ok(keepGoing(rule, steps[1]!, steps.slice(0, 2)));
    assert.ok(!keepGoing(rule, steps[2]!, steps.slice(0, 3)), 'p99 40 > 10');
    const flat = [step(1, 100, 1), step(4, 103, 1)];
    assert.ok(!keepGoing({ p99Ms: undefined, flatGain: 0.05 }, flat[1]!, flat));
    assert.ok(!keepGoing({ p99Ms: undefined, flatGain: 0.05 }, steps[3]!, steps), 'errors end it');
  });
});

describe('tune knobs', () => {
  const json = parseTextFormat(USER, ModelConfigDescriptor, 'config.pbtxt');
  const user = settingOf(json, 1);

  it('reads the setting a config has', () => {
    assert.deepEqual(user, { instances: 1, maxBatchSize: 8, delayUs: undefined, preferred: [], intraOpThreads: undefined, executionThread: 'auto' });
  });

  it('writes only the knobs that changed; everything else stays as the user wrote it, and the result is a valid config', () => {
    let s = withValue(user, 'maxBatchSize', 16);
    s = withValue(s, 'delayUs', 500);
    s = withValue(s, 'preferred', 'half-and-max');
    s = withValue(s, 'instances', 2);
    s = withValue(s, 'intraOpThreads', 2);
    s = withValue(s, 'executionThread', 'worker');
    const out = applySetting(json, s, user);
    const text = printTextFormat(out, ModelConfigDescriptor);
    const config = parseModelConfig(text, { sourceName: 'config.pbtxt', directoryName: 'm' });
    assert.equal(config.maxBatchSize, 16);
    assert.deepEqual(config.dynamicBatching?.preferredBatchSize, [8, 16]);
    assert.equal(config.dynamicBatching?.maxQueueDelayMicroseconds, 500);
    assert.equal(config.instanceGroup[0]?.count, 2);
    assert.equal(config.parameters['intra_op_thread_count'], '2');
    assert.equal(config.parameters['execution_thread'], 'worker');
    assert.match(text, /num_versions: 2/, 'unrelated fields kept');
    assert.deepEqual(settingOf(out, 2), s, 'reads back as the setting written');
    assert.equal(
      printTextFormat(applySetting(json, user, user), ModelConfigDescriptor),
      printTextFormat(json, ModelConfigDescriptor),
      'no change, no difference',
    );
  });

  it("a candidate equal in effect to a setting is the same configuration: no intra_op_thread_count runs the server's thread count", () => {
    const user = settingOf({ max_batch_size: 8 }, 1);
    assert.equal(user.intraOpThreads, undefined);
    const one = withValue(user, 'intraOpThreads', 1);
    const two = withValue(user, 'intraOpThreads', 2);
    assert.equal(effectKey(one, { intraOpThreads: 1 }), effectKey(user, { intraOpThreads: 1 }), 'threads 1 = the default where the server runs 1');
    assert.notEqual(effectKey(two, { intraOpThreads: 1 }), effectKey(user, { intraOpThreads: 1 }));
    assert.notEqual(
      effectKey(one, { intraOpThreads: undefined }),
      effectKey(user, { intraOpThreads: undefined }),
      "onnxruntime's own default is not a number tune can name",
    );
  });

  it('a smaller max_batch_size keeps preferred sizes valid', () => {
    const s = withValue(withValue(user, 'preferred', 'max'), 'maxBatchSize', 4);
    assert.deepEqual(s.preferred, []);
  });

  it('searches batching knobs only for a batching model, instances up to the runtime workers', () => {
    const dims = searchSpace(user, { workers: 2, cores: 2, cpu: true, maxBatchCap: 64 });
    assert.deepEqual(
      dims.map((d) => d.dimension),
      ['maxBatchSize', 'instances', 'delayUs', 'preferred', 'intraOpThreads', 'executionThread'],
    );
    assert.deepEqual(dims.find((d) => d.dimension === 'instances')!.values, [1, 2]);
    const none = searchSpace({ ...user, maxBatchSize: 0 }, { workers: 4, cores: 4, cpu: false, maxBatchCap: 64 });
    assert.deepEqual(
      none.map((d) => d.dimension),
      ['instances', 'intraOpThreads'],
    );
  });
});

describe('tune report helpers', () => {
  it('Pareto front: higher throughput at lower p99 only', () => {
    const front = paretoFront([
      { x: 1, y: 10 },
      { x: 2, y: 5 },
      { x: 3, y: 20 },
      { x: 4, y: 15 },
      { x: 5, y: 30 },
    ]);
    assert.deepEqual(front, [
      { x: 1, y: 10 },
      { x: 3, y: 20 },
      { x: 5, y: 30 },
    ]);
  });
  it('unified diff', () => {
    const d = unifiedDiff('a\nb\nc\nd\n', 'a\nB\nc\nd\ne\n', 'old', 'new');
    assert.equal(d, '--- old\n+++ new\n@@ -1,4 +1,5 @@\n a\n-b\n+B\n c\n d\n+e\n');
    assert.equal(unifiedDiff('x\n', 'x\n', 'a', 'b'), '');
  });
});
