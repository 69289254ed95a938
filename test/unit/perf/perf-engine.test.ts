/**
 * The pieces of `onnx-mme perf` that need no server: sweep ranges, the
 * percentile definition, the stable-window rule, reading the server's
 * counters (Triton's statistics document and Prometheus text), the request
 * bodies it builds (decoded by the server's own codec), and the chart.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { windowsAgree } from '../../../src/perf/load-step.js';
import { percentile, summarize } from '../../../src/perf/latency-stats.js';
import { concreteShape, encodeV2, generatedTensors, payloadsFromFile, RANDOM_VARIANTS } from '../../../src/perf/request-payloads.js';
import { countersFromMetrics, countersFromStats, splitBetween, ZERO_COUNTERS } from '../../../src/perf/server-split.js';
import { MAX_STEPS, parseSweep } from '../../../src/perf/sweep-spec.js';
import { renderXyChart } from '../../../src/perf/xy-chart.js';
import { decodeInferRequest } from '../../../src/protocol/v2-json-codec.js';

describe('perf sweep ranges', () => {
  it('reads N, start:end[:step] and start:end:xFACTOR', () => {
    assert.deepEqual(parseSweep('4', '--concurrency', { integer: true }), [4]);
    assert.deepEqual(parseSweep('1:4', '--concurrency', { integer: true }), [1, 2, 3, 4]);
    assert.deepEqual(parseSweep('2:10:4', '--concurrency', { integer: true }), [2, 6, 10]);
    assert.deepEqual(parseSweep('1:64:x2', '--concurrency', { integer: true }), [1, 2, 4, 8, 16, 32, 64]);
    // "up to" ends on the end even when the factor overshoots it.
    assert.deepEqual(parseSweep('1:48:x2', '--concurrency', { integer: true }), [1, 2, 4, 8, 16, 32, 48]);
    assert.deepEqual(parseSweep('12.5:50:x2', '--rate', { integer: false }), [12.5, 25, 50]);
  });
  it('refuses malformed ranges with the flag named', () => {
    for (const bad of ['0', '-1', '1.5', 'x', '8:1', '1:8:x1', '1:8:0', '1:2:3:4', '']) {
      assert.throws(() => parseSweep(bad, '--concurrency', { integer: true }), /--concurrency/, bad);
    }
    assert.throws(() => parseSweep('1:1000', '--concurrency', { integer: true }), new RegExp(`more than ${MAX_STEPS} steps`));
  });
});

describe('perf statistics', () => {
  it('nearest-rank percentiles', () => {
    const values = Array.from({ length: 100 }, (_, i) => 100 - i);
    const s = summarize(values);
    assert.equal(s.p50Ms, 50);
    assert.equal(s.p90Ms, 90);
    assert.equal(s.p99Ms, 99);
    assert.equal(s.maxMs, 100);
    assert.equal(s.meanMs, 50.5);
    assert.ok(Number.isNaN(percentile([], 50)));
    assert.equal(percentile([7], 99), 7);
  });
  it('two windows agree within the tolerance on throughput and mean latency', () => {
    assert.ok(windowsAgree({ throughput: 100, meanMs: 10 }, { throughput: 108, meanMs: 10.5 }, 0.1));
    assert.ok(!windowsAgree({ throughput: 100, meanMs: 10 }, { throughput: 120, meanMs: 10 }, 0.1));
    assert.ok(!windowsAgree({ throughput: 100, meanMs: 10 }, { throughput: 100, meanMs: 13 }, 0.1));
    assert.ok(windowsAgree({ throughput: 0, meanMs: 0 }, { throughput: 0, meanMs: 0 }, 0.1));
  });
});

describe('perf server split', () => {
  it("reads Triton's statistics document, summed over versions", () => {
    const stat = (n: number) => ({ count: n, ns: n * 2000 });
    const doc = {
      model_stats: [
        {
          name: 'm',
          version: '1',
          inference_count: 40,
          execution_count: 10,
          inference_stats: { success: stat(10), queue: stat(10), compute_input: stat(10), compute_infer: stat(10), compute_output: stat(10) },
        },
        {
          name: 'm',
          version: '2',
          inference_count: 8,
          execution_count: 2,
          inference_stats: { success: stat(2), queue: stat(2), compute_input: stat(2), compute_infer: stat(2), compute_output: stat(2) },
        },
      ],
    };
    const c = countersFromStats(doc)!;
    assert.deepEqual(c, { success: 12, queueUs: 24, computeInputUs: 24, computeInferUs: 24, computeOutputUs: 24, inferences: 48, executions: 12 });
    const split = splitBetween(ZERO_COUNTERS, c, 'stats')!;
    assert.equal(split.batchSize, 4);
    assert.equal(split.queueMs, 0.002);
    assert.equal(countersFromStats({ error: 'no' }), undefined);
  });
  it('reads nv_inference_* counters from Prometheus text for the named model only (extra labels allowed)', () => {
    const text = [
      '# HELP nv_inference_request_success x',
      'nv_inference_request_success{model="m",version="1"} 10',
      'nv_inference_request_success{model="m",version="2",target="m.tar.gz"} 5',
      'nv_inference_request_success{model="other",version="1"} 99',
      'nv_inference_queue_duration_us{model="m",version="1"} 1500',
      'nv_inference_count{model="m",version="1"} 30',
      'nv_inference_exec_count{model="m",version="1"} 10',
    ].join('\n');
    const c = countersFromMetrics(text, ['m'])!;
    assert.equal(c.success, 15);
    assert.equal(c.queueUs, 1500);
    assert.equal(splitBetween(ZERO_COUNTERS, c, 'metrics')!.batchSize, 3);
    assert.equal(countersFromMetrics(text, ['absent']), undefined);
    assert.equal(splitBetween(c, c, 'metrics'), undefined, 'no requests in between: no split');
  });
});

describe('perf request bodies', () => {
  const inputs = [
    { name: 'A', datatype: 'FP32', shape: [-1, 4] },
    { name: 'B', datatype: 'INT64', shape: [-1, -1] },
    { name: 'S', datatype: 'BYTES', shape: [1] },
  ];
  const shape = { shapes: new Map<string, number[]>(), batchSize: 2, fillDims: 3 };

  it('fills -1 dims from the batch size, --fill-dims or --shape, and checks a given shape against the model', () => {
    assert.deepEqual(concreteShape(inputs[0]!, shape), [2, 4]);
    assert.deepEqual(concreteShape(inputs[1]!, shape), [2, 3]);
    assert.deepEqual(concreteShape(inputs[1]!, { ...shape, shapes: new Map([['B', [5, 7]]]) }), [5, 7]);
    assert.throws(() => concreteShape(inputs[0]!, { ...shape, shapes: new Map([['A', [1, 5]]]) }), /dim 1 must be 4/);
    assert.throws(() => concreteShape(inputs[0]!, { ...shape, shapes: new Map([['A', [1]]]) }), /has 2 dims/);
  });

  it('builds JSON and binary bodies the server decodes to the same tensors', () => {
    const variants = generatedTensors(inputs, shape, 'random');
    assert.equal(variants.length, RANDOM_VARIANTS);
    assert.notDeepEqual(variants[0]!.get('A')!.data, variants[1]!.get('A')!.data, 'variants differ');
    const json = encodeV2(variants[0]!, false);
    const fromJson = decodeInferRequest(JSON.parse(json.body.toString()), 'm');
    const bin = encodeV2(variants[0]!, true);
    const header = JSON.parse(bin.body.subarray(0, bin.jsonHeaderLength).toString()) as Record<string, unknown>;
    const fromBinary = decodeInferRequest(header, 'm', bin.body.subarray(bin.jsonHeaderLength));
    assert.equal(fromBinary.parameters['binary_data_output'], true);
    for (const name of ['A', 'B', 'S']) {
      assert.deepEqual(fromJson.inputs.get(name)!.shape, variants[0]!.get(name)!.shape);
      assert.deepEqual(fromBinary.inputs.get(name)!.data, fromJson.inputs.get(name)!.data, name);
    }
    const zeros = generatedTensors(inputs, shape, 'zero');
    assert.equal(zeros.length, 1);
    assert.ok((zeros[0]!.get('A')!.data as Float32Array).every((v) => v === 0));
  });

  it('reads JSON lines, re-encoding them with --binary', () => {
    const line = JSON.stringify({ inputs: [{ name: 'A', datatype: 'FP32', shape: [1, 2], data: [[1, 2]] }] });
    const asJson = payloadsFromFile('r.jsonl', Buffer.from(`${line}\n\n${line}\n`), false, undefined);
    assert.equal(asJson.length, 2);
    assert.equal(asJson[0]!.body.toString(), line);
    const [binary] = payloadsFromFile('r.jsonl', Buffer.from(line), true, undefined);
    assert.equal(binary!.body.length - binary!.jsonHeaderLength!, 8);
    assert.throws(() => payloadsFromFile('r.jsonl', Buffer.from('{"inputs": 3}\n'), false, undefined), /r\.jsonl:1: expected a KServe v2 request/);
    assert.throws(() => payloadsFromFile('r.jsonl', Buffer.from('\n'), false, undefined), /no requests/);
  });

  it('re-encodes INT64 beyond 2^53 from JSON lines with every digit (--binary)', () => {
    const line = '{"inputs":[{"name":"A","datatype":"INT64","shape":[2],"data":[9007199254740993,-9223372036854775808]}]}';
    const [binary] = payloadsFromFile('r.jsonl', Buffer.from(line), true, undefined);
    const raw = binary!.body.subarray(binary!.jsonHeaderLength!);
    assert.deepEqual([raw.readBigInt64LE(0), raw.readBigInt64LE(8)], [9007199254740993n, -9223372036854775808n]);
  });
});

describe('perf chart', () => {
  it('draws points and lines on a log latency axis, and leaves out what is not finite', () => {
    const svg = renderXyChart({
      title: 'a <b> & c',
      xLabel: 'latency (ms)',
      yLabel: 'req/s',
      logX: true,
      series: [
        {
          name: 'p50',
          color: '#000',
          line: true,
          points: [
            { x: 0.5, y: 100, label: 'c=1' },
            { x: 5, y: 900 },
            { x: Number.NaN, y: 3 },
          ],
        },
      ],
      highlight: { x: 5, y: 900, label: 'chosen', color: '#f00' },
    });
    assert.match(svg, /^<svg /);
    assert.match(svg, /a &lt;b&gt; &amp; c/);
    assert.match(svg, /<path d="M[\d.]+,[\d.]+ L[\d.]+,[\d.]+"/);
    assert.match(svg, />chosen</);
    assert.doesNotMatch(svg, /NaN|Infinity/);
  });
  it('draws an empty frame when no point is finite (a step with no successful answer)', () => {
    for (const points of [[], [{ x: Number.NaN, y: 0 }]]) {
      const svg = renderXyChart({ title: 't', xLabel: 'x', yLabel: 'y', logX: true, series: [{ name: 'p50', color: '#000', line: true, points }] });
      assert.match(svg, /<\/svg>\n$/);
      assert.doesNotMatch(svg, /NaN|Infinity/);
    }
  });
});
