/**
 * @module observability/metric-cells
 * prom-client metrics whose hot-path updates are plain number additions.
 *
 * prom-client hashes the label object on every `inc`/`observe` (~110-150 ns
 * each); the request path makes about ten such calls, measured at 2.5 µs of
 * a request's 26 µs main-thread CPU. A *cell* is the accumulator of one label
 * set, obtained once (`metric.cell(labels)`: Map lookups by the label
 * values, or held by its owner), so an update costs an addition. The totals
 * reach prom-client when the registry is read: counters and gauges flush
 * their cells from prom-client's `collect` hook; a histogram has no bulk-add
 * API, so `CellHistogram` keeps all its data in cells and builds the scrape
 * output itself, in exactly prom-client's shape.
 *
 * The classes subclass prom-client's own, so they register through
 * `registers: [...]` and pass wherever a Counter/Gauge/Histogram is expected.
 * Exemplars are refused: they describe single observations, which cells fold away.
 *
 * A cell may be *exported as* another label set than the one it is found by
 * (`cell(labels, exportAs)`): the metrics layer uses this to fold targets
 * past its series cap into one overflow series while each target keeps its
 * own accumulators (the statistics extension reads them). `removeFirst(v)`
 * drops every cell whose first label is `v` (a target that was unloaded);
 * an exported-as cell's counts stay in the series it fed, so that series
 * never goes down.
 */
import { format } from 'node:util';
import {
  Counter,
  Gauge,
  Histogram,
  type Aggregator,
  type CounterConfiguration,
  type GaugeConfiguration,
  type HistogramConfiguration,
  type LabelValues,
  type ObserveDataWithExemplar,
} from 'prom-client';

/** One label set of a CellCounter. */
export interface CounterCell {
  /** Adds `by` (finite, ≥ 0) to the series at the next scrape. */
  inc(by?: number): void;
  /** Everything added since the cell was made (or the metric reset), scraped or not. */
  readonly total: number;
}

/**
 * One label set of a CellDurationCounter: durations added in (fractional)
 * microseconds, exported as a whole number of microseconds (Triton's `*_us`
 * counters are integers), with the fraction carried, not lost.
 */
export interface DurationCell {
  /** Adds `us` (finite, ≥ 0) spent by `count` requests (or executions) together. */
  add(us: number, count?: number): void;
  /** Cumulative duration, µs (fractional). */
  readonly totalUs: number;
  /** Cumulative count of what was timed. */
  readonly count: number;
}

/**
 * One label set of a CellGauge. It carries a delta applied at the next
 * scrape, so a `set()` on the same label set between scrapes is not ordered
 * against the cell's updates: keep set() and cells on different label sets.
 */
export interface GaugeCell {
  inc(by?: number): void;
  dec(by?: number): void;
}

/** One label set of a CellHistogram; its counts are the histogram's data. */
export interface HistogramCell {
  observe(value: number): void;
}

/** One entry of `getForPromString().values`, as prom-client's setValuePair builds it. */
export interface HistogramExportValue<L extends string> {
  labels: { le?: number | '+Inf' };
  sharedLabels: LabelValues<L>;
  value: number;
  metricName: string;
  exemplar: null | undefined;
}

export interface HistogramExport<L extends string> {
  name: string;
  help: string;
  type: string;
  values: HistogramExportValue<L>[];
  aggregator: Aggregator;
}

/** Fields prom-client sets on every metric at runtime that its typings leave out. */
interface PromInternals {
  readonly name: string;
  readonly help: string;
  readonly type: string;
  readonly aggregator: Aggregator;
  readonly upperBounds: readonly number[];
  readonly collect?: () => void | Promise<void>;
}

function withoutExemplars<C extends { enableExemplars?: boolean }>(config: C): C {
  if (config.enableExemplars) throw new TypeError('metric cells do not support exemplars');
  return config;
}

function assertFinite(value: unknown): asserts value is number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new TypeError(`Value is not a valid number: ${format(value)}`);
  }
}

/** prom-client's getLabels: a labels object, or one positional value per label name. */
function labelsFrom<L extends string>(names: readonly L[], args: [LabelValues<L>] | string[]): LabelValues<L> {
  const first = args[0];
  if (typeof first === 'object') return first;
  if (names.length !== args.length) {
    throw new Error(`Invalid number of arguments (${args.length}): "${args.join(', ')}" for label names (${names.length}): "${names.join(', ')}".`);
  }
  const labels: LabelValues<L> = {};
  names.forEach((name, i) => (labels[name] = String(args[i])));
  return labels;
}

/** A label that is absent, kept apart from an empty one (as prom-client's hash does). */
const MISSING = Symbol('missing label');

/**
 * Cells by label values; the labels object is validated and copied once, when
 * the cell is made. Held in nested Maps, one level per label name, keyed by
 * the value itself: a lookup builds no key string, and the same string
 * objects (route patterns, model names) reuse their cached hashes. A number
 * value is keyed by its text, so `200` and `'200'` are one series, as in
 * prom-client.
 */
class CellTable<L extends string, C> {
  private root = new Map<string | symbol, unknown>();
  /** Every cell, in creation order (the order series appear in a scrape); a Set so that an unload removes its cells without visiting every other model's. */
  private readonly all = new Set<C>();

  constructor(
    private readonly names: readonly L[],
    private readonly make: (labels: LabelValues<L>) => C,
  ) {}

  /**
   * Only a new label set is validated; an unknown extra label beside a known set's values is ignored.
   * `exportAs` (validated the same way) is the label set the new cell's series carries; default `labels`.
   */
  get(labels: LabelValues<L>, exportAs?: LabelValues<L>): C {
    let level = this.root;
    const last = this.names.length - 1;
    for (let i = 0; i < last; i++) {
      const key = keyOf(labels[this.names[i]!]);
      let next = level.get(key) as Map<string | symbol, unknown> | undefined;
      if (next === undefined) level.set(key, (next = new Map()));
      level = next;
    }
    const key = last < 0 ? MISSING : keyOf(labels[this.names[last]!]);
    let cell = level.get(key) as C | undefined;
    if (cell === undefined) {
      const exported = exportAs ?? labels;
      for (const name in exported) {
        if (!(this.names as readonly string[]).includes(name)) {
          throw new Error(`Added label "${name}" is not included in initial labelset: ${format(this.names)}`);
        }
      }
      cell = this.make({ ...exported });
      level.set(key, cell);
      this.all.add(cell);
    }
    return cell;
  }

  values(): IterableIterator<C> {
    return this.all.values();
  }

  /** Takes out every cell whose first label is `value`; returns them (the caller settles their series). */
  removeFirst(value: string): C[] {
    if (this.names.length === 0) return [];
    const sub = this.root.get(value);
    if (sub === undefined) return [];
    this.root.delete(value);
    const gone = new Set<C>();
    const walk = (node: unknown, depth: number): void => {
      if (depth === this.names.length - 1) gone.add(node as C);
      else for (const child of (node as Map<unknown, unknown>).values()) walk(child, depth + 1);
    };
    walk(sub, 0);
    for (const c of gone) this.all.delete(c);
    return [...gone];
  }
}

function sameLabels<L extends string>(a: LabelValues<L>, b: LabelValues<L>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => String(a[k as L]) === String(b[k as L]));
}

function keyOf(v: string | number | undefined): string | symbol {
  return v === undefined ? MISSING : typeof v === 'string' ? v : String(v);
}

class CounterCellImpl<L extends string> implements CounterCell {
  pending = 0;
  total = 0;
  /** Used since the last flush: an increment of 0 still makes the series appear, as prom-client's inc does. */
  dirty = false;
  constructor(readonly labels: LabelValues<L>) {}

  inc(by = 1): void {
    // Checked here: a bad value found at flush time would fail every scrape.
    if (!(by >= 0) || by === Infinity) {
      throw new TypeError(`Counter cell increment must be finite and >= 0: ${format(by)}`);
    }
    this.pending += by;
    this.total += by;
    this.dirty = true;
  }
}

export class CellCounter<L extends string = string> extends Counter<L> {
  private readonly table: CellTable<L, CounterCellImpl<L>>;

  constructor(config: CounterConfiguration<L>) {
    super({
      ...withoutExemplars(config),
      collect(this: Counter<L>) {
        if (this instanceof CellCounter) this.flush();
        return config.collect?.call(this);
      },
    });
    this.table = new CellTable(config.labelNames ?? [], (labels) => new CounterCellImpl<L>(labels));
  }

  cell(labels: LabelValues<L>, exportAs?: LabelValues<L>): CounterCell {
    return this.table.get(labels, exportAs);
  }

  /** Drops the cells whose first label is `value`, and their series (an exported-as cell's counts stay where they went). */
  removeFirst(value: string): void {
    for (const cell of this.table.removeFirst(value)) {
      if (cell.labels[this.firstName] === value) super.remove(cell.labels);
      else if (cell.dirty) this.inc(cell.labels, cell.pending);
    }
  }

  private get firstName(): L {
    return this.labelNamesOf[0]!;
  }

  private get labelNamesOf(): readonly L[] {
    return (this as unknown as { labelNames: readonly L[] }).labelNames;
  }

  override reset(): void {
    super.reset();
    // prom-client's constructor calls reset() before this class's fields exist.
    if (this.table === undefined) return;
    for (const cell of this.table.values()) {
      cell.pending = 0;
      cell.total = 0;
      cell.dirty = false;
    }
  }

  private flush(): void {
    for (const cell of this.table.values()) {
      if (!cell.dirty) continue;
      const by = cell.pending;
      cell.pending = 0;
      cell.dirty = false;
      this.inc(cell.labels, by);
    }
  }
}

class DurationCellImpl<L extends string> implements DurationCell {
  totalUs = 0;
  count = 0;
  /** Whole microseconds already handed to prom-client. */
  exportedUs = 0;
  dirty = false;
  constructor(readonly labels: LabelValues<L>) {}

  add(us: number, count = 1): void {
    if (!(us >= 0) || us === Infinity) throw new TypeError(`Duration cell value must be finite and >= 0: ${format(us)}`);
    this.totalUs += us;
    this.count += count;
    this.dirty = true;
  }
}

/** A counter of microseconds fed by DurationCells: the series is always a whole number of µs. */
export class CellDurationCounter<L extends string = string> extends Counter<L> {
  private readonly table: CellTable<L, DurationCellImpl<L>>;

  constructor(config: CounterConfiguration<L>) {
    super({
      ...withoutExemplars(config),
      collect(this: Counter<L>) {
        if (this instanceof CellDurationCounter) this.flush();
        return config.collect?.call(this);
      },
    });
    this.table = new CellTable(config.labelNames ?? [], (labels) => new DurationCellImpl<L>(labels));
  }

  cell(labels: LabelValues<L>, exportAs?: LabelValues<L>): DurationCell {
    return this.table.get(labels, exportAs);
  }

  /** As CellCounter.removeFirst. */
  removeFirst(value: string): void {
    const first = (this as unknown as { labelNames: readonly L[] }).labelNames[0]!;
    for (const cell of this.table.removeFirst(value)) {
      if (cell.labels[first] === value) super.remove(cell.labels);
      else this.settle(cell);
    }
  }

  override reset(): void {
    super.reset();
    if (this.table === undefined) return;
    for (const cell of this.table.values()) {
      cell.totalUs = 0;
      cell.count = 0;
      cell.exportedUs = 0;
      cell.dirty = false;
    }
  }

  private settle(cell: DurationCellImpl<L>): void {
    if (!cell.dirty) return;
    cell.dirty = false;
    const whole = Math.floor(cell.totalUs);
    this.inc(cell.labels, whole - cell.exportedUs);
    cell.exportedUs = whole;
  }

  private flush(): void {
    for (const cell of this.table.values()) this.settle(cell);
  }
}

class GaugeCellImpl<L extends string> implements GaugeCell {
  delta = 0;
  /** Used since the last flush: an inc and a dec between two scrapes still show the series (at its value), as prom-client would. */
  dirty = false;
  constructor(readonly labels: LabelValues<L>) {}

  inc(by = 1): void {
    assertFinite(by);
    this.delta += by;
    this.dirty = true;
  }

  dec(by = 1): void {
    assertFinite(by);
    this.delta -= by;
    this.dirty = true;
  }
}

export class CellGauge<L extends string = string> extends Gauge<L> {
  private readonly table: CellTable<L, GaugeCellImpl<L>>;

  constructor(config: GaugeConfiguration<L>) {
    super({
      ...withoutExemplars(config),
      collect(this: Gauge<L>) {
        if (this instanceof CellGauge) this.flush();
        return config.collect?.call(this);
      },
    });
    this.table = new CellTable(config.labelNames ?? [], (labels) => new GaugeCellImpl<L>(labels));
  }

  cell(labels: LabelValues<L>, exportAs?: LabelValues<L>): GaugeCell {
    return this.table.get(labels, exportAs);
  }

  /** As CellCounter.removeFirst. */
  removeFirst(value: string): void {
    const first = (this as unknown as { labelNames: readonly L[] }).labelNames[0]!;
    for (const cell of this.table.removeFirst(value)) {
      if (cell.labels[first] === value) super.remove(cell.labels);
      else if (cell.dirty) this.inc(cell.labels, cell.delta);
    }
  }

  override reset(): void {
    super.reset();
    // prom-client's constructor calls reset() before this class's fields exist.
    if (this.table === undefined) return;
    for (const cell of this.table.values()) {
      cell.delta = 0;
      cell.dirty = false;
    }
  }

  private flush(): void {
    for (const cell of this.table.values()) {
      if (!cell.dirty) continue;
      const delta = cell.delta;
      cell.delta = 0;
      cell.dirty = false;
      // prom-client's Gauge.inc takes negative deltas (no sign check).
      this.inc(cell.labels, delta);
    }
  }
}

class HistogramCellImpl<L extends string> implements HistogramCell {
  /** Per-bucket (not cumulative) counts, index-aligned with the upper bounds. */
  readonly counts: number[];
  sum = 0;
  count = 0;
  /** Whether the label set is in the output: observed (or zero()'d) since the last reset. */
  shown = false;
  /** Exported as a label set other cells may share (the overflow series): merged with them at scrape time. */
  merged = false;

  constructor(
    readonly labels: LabelValues<L>,
    private readonly bounds: readonly number[],
    /** The histogram's output order: prom-client lists label sets by first observation, not by cell creation. */
    private readonly shownCells: HistogramCellImpl<L>[],
  ) {
    this.counts = bounds.map(() => 0);
  }

  observe(value: number): void {
    assertFinite(value);
    this.record(value);
  }

  record(value: number): void {
    const bounds = this.bounds;
    // prom-client's findBound: the first bound with value <= bound; above the last, only +Inf (the count).
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        this.counts[i]! += 1;
        break;
      }
    }
    this.sum += value;
    this.count += 1;
    if (!this.shown) this.show();
  }

  show(): void {
    if (this.shown) return;
    this.shown = true;
    this.shownCells.push(this);
  }

  /** Zeroes the data; the caller decides whether the label set stays shown. */
  clear(): void {
    this.counts.fill(0);
    this.sum = 0;
    this.count = 0;
  }
}

export class CellHistogram<L extends string = string> extends Histogram<L> {
  private readonly table: CellTable<L, HistogramCellImpl<L>>;
  private readonly shownCells: HistogramCellImpl<L>[] = [];
  private readonly names: readonly L[];

  constructor(config: HistogramConfiguration<L>) {
    super(withoutExemplars(config));
    // prom-client's constructor sets `observe` as an own property, which would hide this class's method.
    Reflect.deleteProperty(this, 'observe');
    const bounds = this.internals.upperBounds;
    this.names = config.labelNames ?? [];
    this.table = new CellTable(this.names, (labels) => new HistogramCellImpl<L>(labels, bounds, this.shownCells));
    // prom-client shows an unlabelled histogram, all zeros, from construction until the first reset().
    if (this.names.length === 0) this.table.get({}).show();
  }

  cell(labels: LabelValues<L>, exportAs?: LabelValues<L>): HistogramCell {
    const cell = this.table.get(labels, exportAs);
    if (exportAs !== undefined && !sameLabels(exportAs, labels)) cell.merged = true;
    return cell;
  }

  /** As CellCounter.removeFirst: a merged cell's counts move to a cell of its export labels, so its series never goes down. */
  removeFirst(value: string): void {
    for (const cell of this.table.removeFirst(value)) {
      if (cell.shown) this.shownCells.splice(this.shownCells.indexOf(cell), 1);
      if (!cell.merged || !cell.shown) continue;
      const keep = this.table.get(cell.labels);
      keep.merged = true;
      keep.counts.forEach((_, i) => (keep.counts[i]! += cell.counts[i]!));
      keep.sum += cell.sum;
      keep.count += cell.count;
      keep.show();
    }
  }

  override observe(value: number): void;
  override observe(labels: LabelValues<L>, value: number): void;
  /** Typed for the base class only: exemplars are refused, so this throws, as prom-client does without them. */
  override observe(observeData: ObserveDataWithExemplar<L>): void;
  override observe(labelsOrValue: LabelValues<L> | ObserveDataWithExemplar<L> | number, value?: number): void {
    if (typeof labelsOrValue === 'object') {
      // Any object is a labels object here, as in prom-client without exemplars (the exemplar form fails validation).
      const cell = this.table.get(labelsOrValue as LabelValues<L>);
      assertFinite(value);
      cell.record(value);
    } else {
      const cell = this.table.get({});
      assertFinite(labelsOrValue);
      cell.record(labelsOrValue);
    }
  }

  // prom-client's labels()/zero()/remove() write its own hashMap, which this class does not read.
  override labels(...values: string[]): Histogram.Internal<L>;
  override labels(labels: LabelValues<L>): Histogram.Internal<L>;
  override labels(...args: [LabelValues<L>] | string[]): Histogram.Internal<L> {
    const labels = labelsFrom(this.names, args);
    const cell = this.table.get(labels);
    return {
      observe: (value) => cell.observe(value),
      // prom-client's timer ends by calling this.observe, which is this class's.
      startTimer: () => this.startTimer(labels),
    };
  }

  override zero(labels: LabelValues<L>): void {
    const cell = this.table.get(labels);
    cell.clear();
    cell.show();
  }

  override remove(...values: string[]): void;
  override remove(labels: LabelValues<L>): void;
  override remove(...args: [LabelValues<L>] | string[]): void {
    // Zeroed rather than dropped, so a cell held by its owner stays this histogram's.
    const cell = this.table.get(labelsFrom(this.names, args));
    if (!cell.shown) return;
    cell.clear();
    cell.shown = false;
    this.shownCells.splice(this.shownCells.indexOf(cell), 1);
  }

  override reset(): void {
    super.reset();
    // prom-client's constructor calls reset() before this class's fields exist.
    if (this.table === undefined) return;
    for (const cell of this.table.values()) {
      cell.clear();
      cell.shown = false;
    }
    this.shownCells.length = 0;
  }

  /** What prom-client's registry reads (and its get() splays): the same values its own Histogram builds. */
  async getForPromString(): Promise<HistogramExport<L>> {
    const internals = this.internals;
    if (internals.collect) {
      const v = internals.collect();
      if (v instanceof Promise) await v;
    }
    const { name, upperBounds } = internals;
    const bucketName = `${name}_bucket`;
    const values: HistogramExportValue<L>[] = [];
    for (const cell of this.exported()) {
      const sharedLabels = cell.labels;
      let cumulative = 0;
      for (let i = 0; i < upperBounds.length; i++) {
        cumulative += cell.counts[i]!;
        values.push({ labels: { le: upperBounds[i]! }, sharedLabels, value: cumulative, metricName: bucketName, exemplar: null });
      }
      values.push(
        { labels: { le: '+Inf' }, sharedLabels, value: cell.count, metricName: bucketName, exemplar: null },
        { labels: {}, sharedLabels, value: cell.sum, metricName: `${name}_sum`, exemplar: undefined },
        { labels: {}, sharedLabels, value: cell.count, metricName: `${name}_count`, exemplar: undefined },
      );
    }
    return { name, help: internals.help, type: internals.type, values, aggregator: internals.aggregator };
  }

  /** The shown cells, merged ones summed per export label set (only the overflow series has any). */
  private exported(): Iterable<{ labels: LabelValues<L>; counts: readonly number[]; sum: number; count: number }> {
    if (!this.shownCells.some((c) => c.merged)) return this.shownCells;
    const out: { labels: LabelValues<L>; counts: number[]; sum: number; count: number }[] = [];
    const byKey = new Map<string, (typeof out)[number]>();
    for (const cell of this.shownCells) {
      if (!cell.merged) {
        out.push(cell);
        continue;
      }
      const key = JSON.stringify(this.names.map((n) => cell.labels[n]));
      let sum = byKey.get(key);
      if (sum === undefined) {
        byKey.set(key, (sum = { labels: cell.labels, counts: cell.counts.map(() => 0), sum: 0, count: 0 }));
        out.push(sum);
      }
      cell.counts.forEach((c, i) => (sum.counts[i]! += c));
      sum.sum += cell.sum;
      sum.count += cell.count;
    }
    return out;
  }

  private get internals(): PromInternals {
    // prom-client's typings omit the runtime fields its own code reads; they are set by its constructor.
    return this as unknown as PromInternals;
  }
}
