/**
 * metric-cells: cells' updates reach prom-client at scrape time with exact
 * totals (no double counting across scrapes, adding up with prom-client's own
 * inc), and a CellHistogram's scrape output is identical to a plain
 * prom-client Histogram fed the same observations.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Histogram, Registry } from 'prom-client';
import { CellCounter, CellGauge, CellHistogram } from '../../../src/observability/metric-cells.js';

/** The sample lines of a scrape (no HELP/TYPE). */
async function samples(registry: Registry): Promise<string[]> {
  return (await registry.metrics()).split('\n').filter((line) => line !== '' && !line.startsWith('#'));
}

describe('CellCounter', () => {
  test('cells of two label sets accumulate; each scrape shows the exact totals', async () => {
    const registry = new Registry();
    const counter = new CellCounter({ name: 'c', help: 'h', labelNames: ['route', 'status'], registers: [registry] });
    const a = counter.cell({ route: 'a', status: 200 });
    const b = counter.cell({ route: 'b', status: 500 });
    a.inc();
    a.inc(2);
    b.inc(0.5);
    assert.equal(counter.cell({ route: 'a', status: '200' }), a, 'the same label values give the same cell');
    assert.deepEqual(await samples(registry), ['c{route="a",status="200"} 3', 'c{route="b",status="500"} 0.5']);

    a.inc(4);
    assert.deepEqual(await samples(registry), ['c{route="a",status="200"} 7', 'c{route="b",status="500"} 0.5']);
    assert.deepEqual(await samples(registry), ['c{route="a",status="200"} 7', 'c{route="b",status="500"} 0.5']);
  });

  test('label sets are told apart by their values alone: a missing label is not an empty one, and no separator character can merge two sets', () => {
    const counter = new CellCounter({ name: 'c', help: 'h', labelNames: ['route', 'status'], registers: [] });
    const missing = counter.cell({ route: 'a' });
    assert.notEqual(counter.cell({ route: 'a', status: '' }), missing);
    assert.equal(counter.cell({ route: 'a' }), missing);
    assert.notEqual(counter.cell({ route: 'a\u0000b', status: 'c' }), counter.cell({ route: 'a', status: 'b\u0000c' }));
  });

  test("prom-client's own inc and a cell's inc on the same label set add up", async () => {
    const registry = new Registry();
    const counter = new CellCounter({ name: 'c', help: 'h', labelNames: ['route'], registers: [registry] });
    const cell = counter.cell({ route: 'a' });
    cell.inc(2);
    counter.inc({ route: 'a' });
    counter.inc({ route: 'a' }, 10);
    assert.deepEqual(await samples(registry), ['c{route="a"} 13']);
    const json = await counter.get();
    assert.deepEqual(json.values, [{ labels: { route: 'a' }, value: 13 }]);
  });

  test('reset zeroes totals and pending increments; held cells keep counting', async () => {
    const registry = new Registry();
    const counter = new CellCounter({ name: 'c', help: 'h', labelNames: ['route'], registers: [registry] });
    const cell = counter.cell({ route: 'a' });
    cell.inc(5);
    assert.deepEqual(await samples(registry), ['c{route="a"} 5']);
    cell.inc(7);
    counter.reset();
    assert.deepEqual(await samples(registry), []);
    cell.inc(1);
    assert.deepEqual(await samples(registry), ['c{route="a"} 1']);
  });

  test('an unlabelled counter shows 0 until its cell is used', async () => {
    const registry = new Registry();
    const counter = new CellCounter({ name: 'c', help: 'h', registers: [registry] });
    assert.deepEqual(await samples(registry), ['c 0']);
    counter.cell({}).inc(3);
    assert.deepEqual(await samples(registry), ['c 3']);
  });

  test('a bad increment throws at the call, not at the scrape; unknown labels are refused', async () => {
    const registry = new Registry();
    const counter = new CellCounter({ name: 'c', help: 'h', labelNames: ['route'], registers: [registry] });
    const cell = counter.cell({ route: 'a' });
    assert.throws(() => cell.inc(-1), TypeError);
    assert.throws(() => cell.inc(Number.NaN), TypeError);
    assert.throws(() => cell.inc(Infinity), TypeError);
    assert.throws(() => counter.cell({ route: 'b', other: 'x' } as never), /Added label "other"/);
    assert.deepEqual(await samples(registry), []);
  });

  test('exemplars are refused', () => {
    assert.throws(() => new CellCounter({ name: 'c', help: 'h', enableExemplars: true, registers: [] }), TypeError);
  });
});

describe('CellGauge', () => {
  test('inc/dec through a cell; a negative net delta is reflected', async () => {
    const registry = new Registry();
    const gauge = new CellGauge({ name: 'g', help: 'h', labelNames: ['model'], registers: [registry] });
    const m1 = gauge.cell({ model: 'm1' });
    const m2 = gauge.cell({ model: 'm2' });
    m1.inc(5);
    m1.dec(2);
    m2.dec();
    assert.deepEqual(await samples(registry), ['g{model="m1"} 3', 'g{model="m2"} -1']);
    m1.dec(10);
    m2.inc();
    m2.inc();
    assert.deepEqual(await samples(registry), ['g{model="m1"} -7', 'g{model="m2"} 1']);
    gauge.inc({ model: 'm2' }, 4);
    assert.deepEqual(await samples(registry), ['g{model="m1"} -7', 'g{model="m2"} 5']);
  });

  test('reset drops pending deltas', async () => {
    const registry = new Registry();
    const gauge = new CellGauge({ name: 'g', help: 'h', registers: [registry] });
    const cell = gauge.cell({});
    cell.inc(4);
    gauge.reset();
    assert.deepEqual(await samples(registry), ['g 0']);
    cell.dec(2);
    assert.deepEqual(await samples(registry), ['g -2']);
  });
});

describe('CellHistogram', () => {
  const buckets = [0.1, 1, 5];

  test('scrape text and get() values are identical to a plain Histogram fed the same observations', async () => {
    const cellRegistry = new Registry();
    const plainRegistry = new Registry();
    const config = { name: 'h', help: 'latency', labelNames: ['model', 'code'] as const, buckets };
    const cells = new CellHistogram({ ...config, registers: [cellRegistry] });
    const plain = new Histogram({ ...config, registers: [plainRegistry] });

    // Created before "a" but observed after it: output follows first observation, as prom-client's does.
    const b = cells.cell({ model: 'b', code: 500 });
    const a = cells.cell({ model: 'a', code: 200 });
    const feed: [{ model: string; code: number }, number, 'cell' | 'observe' | 'labels'][] = [
      [{ model: 'a', code: 200 }, 0.1, 'cell'], // exactly on the first bound
      [{ model: 'a', code: 200 }, 0.05, 'cell'], // below the first bound
      [{ model: 'b', code: 500 }, 1, 'observe'], // on a middle bound
      [{ model: 'a', code: 200 }, 7, 'observe'], // above the last bound
      [{ model: 'c', code: 200 }, 5, 'observe'], // on the last bound; a label set seen only once
      [{ model: 'b', code: 500 }, -3, 'cell'], // negative: first bucket
      [{ model: 'b', code: 500 }, 0.30000000000000004, 'labels'],
      [{ model: 'a', code: 200 }, 1e9, 'cell'],
      [{ model: 'a', code: 200 }, 0, 'observe'],
    ];
    for (const [labels, value, via] of feed) {
      plain.observe(labels, value);
      if (via === 'observe') cells.observe(labels, value);
      else if (via === 'labels') cells.labels(labels.model, String(labels.code)).observe(value);
      else (labels.model === 'a' ? a : b).observe(value);
    }

    const text = await cellRegistry.metrics();
    assert.equal(text, await plainRegistry.metrics());
    assert.match(text, /h_bucket\{le="\+Inf",model="a",code="200"\} 5/);
    assert.deepEqual((await cells.get()).values, (await plain.get()).values);
    assert.deepEqual(await cellRegistry.getMetricsAsJSON(), await plainRegistry.getMetricsAsJSON());

    // zero() shows a label set with zeros; remove() drops one until it is observed again.
    cells.zero({ model: 'z', code: 200 });
    plain.zero({ model: 'z', code: 200 });
    cells.remove({ model: 'a', code: 200 });
    plain.remove({ model: 'a', code: 200 });
    cells.remove('b', '500');
    plain.remove('b', '500');
    a.observe(2);
    plain.observe({ model: 'a', code: 200 }, 2);
    assert.equal(await cellRegistry.metrics(), await plainRegistry.metrics());
    assert.deepEqual((await cells.get()).values, (await plain.get()).values);
  });

  test('an unlabelled histogram matches prom-client: zeros at first, empty after reset, then observed', async () => {
    const cellRegistry = new Registry();
    const plainRegistry = new Registry();
    const cells = new CellHistogram({ name: 'u', help: 'h', buckets, registers: [cellRegistry] });
    const plain = new Histogram({ name: 'u', help: 'h', buckets, registers: [plainRegistry] });
    assert.equal(await cellRegistry.metrics(), await plainRegistry.metrics());
    assert.ok((await cellRegistry.metrics()).includes('u_count 0'));
    cells.reset();
    plain.reset();
    assert.equal(await cellRegistry.metrics(), await plainRegistry.metrics());
    assert.deepEqual(await samples(cellRegistry), []);
    cells.observe(0.5);
    plain.observe(0.5);
    cells.cell({}).observe(3);
    plain.observe(3);
    assert.equal(await cellRegistry.metrics(), await plainRegistry.metrics());
  });

  test('a created but unobserved cell does not appear', async () => {
    const registry = new Registry();
    const histogram = new CellHistogram({ name: 'h', help: 'h', labelNames: ['model'], buckets, registers: [registry] });
    histogram.cell({ model: 'ghost' });
    histogram.cell({ model: 'seen' }).observe(1);
    const text = await registry.metrics();
    assert.ok(!text.includes('ghost'));
    assert.ok(text.includes('h_count{model="seen"} 1'));
  });

  test('reset, then observing again through held cells, works', async () => {
    const registry = new Registry();
    const histogram = new CellHistogram({ name: 'h', help: 'h', labelNames: ['model'], buckets, registers: [registry] });
    const held = histogram.cell({ model: 'm' });
    held.observe(0.5);
    held.observe(3);
    histogram.reset();
    assert.deepEqual(await samples(registry), []);
    held.observe(2);
    assert.deepEqual(await samples(registry), [
      'h_bucket{le="0.1",model="m"} 0',
      'h_bucket{le="1",model="m"} 0',
      'h_bucket{le="5",model="m"} 1',
      'h_bucket{le="+Inf",model="m"} 1',
      'h_sum{model="m"} 2',
      'h_count{model="m"} 1',
    ]);
  });

  test('startTimer observes into the cells; invalid values and labels throw as in prom-client', async () => {
    const registry = new Registry();
    const histogram = new CellHistogram({ name: 'h', help: 'h', labelNames: ['model'], buckets, registers: [registry] });
    histogram.startTimer({ model: 't' })();
    histogram.labels({ model: 't' }).startTimer()();
    assert.ok((await samples(registry)).includes('h_count{model="t"} 2'));
    assert.throws(() => histogram.observe({ model: 't' }, Number.NaN), /Value is not a valid number: NaN/);
    assert.throws(() => histogram.cell({ model: 't' }).observe(Infinity), TypeError);
    assert.throws(() => histogram.observe({ other: 'x' } as never, 1), /Added label "other"/);
    assert.ok((await samples(registry)).includes('h_count{model="t"} 2'));
  });
});

describe('collect given by the user', () => {
  test('still runs, with this bound to the metric, after the cells are flushed', async () => {
    const registry = new Registry();
    const calls: string[] = [];
    const counter: CellCounter<'k'> = new CellCounter({
      name: 'c',
      help: 'h',
      labelNames: ['k'],
      registers: [registry],
      collect() {
        calls.push('counter');
        assert.equal(this, counter);
        this.inc({ k: 'collected' });
        // The flush has already run, so this reaches the next scrape.
        counter.cell({ k: 'cell' }).inc(100);
      },
    });
    counter.cell({ k: 'cell' }).inc(2);
    new CellGauge({
      name: 'g',
      help: 'h',
      registers: [registry],
      async collect() {
        calls.push('gauge');
        await Promise.resolve();
        this.set(42);
      },
    })
      .cell({})
      .inc(1);
    new CellHistogram({
      name: 'hist',
      help: 'h',
      labelNames: ['k'],
      buckets: [1],
      registers: [registry],
      collect() {
        calls.push('histogram');
        this.observe({ k: 'collected' }, 0.5);
      },
    });
    assert.deepEqual(await samples(registry), [
      'c{k="cell"} 2',
      'c{k="collected"} 1',
      'g 42',
      'hist_bucket{le="1",k="collected"} 1',
      'hist_bucket{le="+Inf",k="collected"} 1',
      'hist_sum{k="collected"} 0.5',
      'hist_count{k="collected"} 1',
    ]);
    assert.deepEqual(calls, ['counter', 'gauge', 'histogram']);
    assert.ok((await samples(registry)).includes('c{k="cell"} 102'));
  });
});
