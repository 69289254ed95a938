/**
 * @module observability/metrics
 * Every Prometheus metric the server exports, declared once, by area
 * (metrics-request.ts: inference, transports, response cache, sequences;
 * metrics-models.ts: loads, memory, store, process) and composed here into
 * one `Metrics` object with the per-target series handles. Modules receive
 * the typed `Metrics` object (never the global registry) so each server
 * instance, and each test, has its own registry. Names follow Triton's
 * `nv_inference_*` where they mean the same thing, so existing dashboards work;
 * histograms are added because counters alone cannot give percentiles.
 *
 * Per-model series carry `target` (the canonical target key, or the
 * SageMaker model name) before Triton's `model` and `version`: two tenants'
 * packages whose configs are both named `model` are two series. They are
 * cells (metric-cells.ts: plain accumulators read at scrape time), handed
 * out per package by `forTarget`; when the last package of a target is
 * released its series are removed. At most `maxTargets` targets have series
 * of their own: the rest are counted in one overflow series
 * (target=model=version=`_overflow`), so 10,000 targets cannot make 10,000
 * series sets. Each target still keeps its own accumulators, which the
 * statistics extension (GET /v2/models/{m}/stats) reads.
 *
 * Adding a metric: declare it in its area's function and interface (a new
 * area joins DeclaredMetrics and createMetrics). A per-model one is a
 * cell metric (CellCounter, CellDurationCounter, CellGauge, CellHistogram)
 * whose labelNames start with MODEL_LABELS, and its cell is added to
 * ModelMetrics in `modelCells`; removal and the cap then apply to it
 * (test/unit/observability/metrics.test.ts checks that every metric with a
 * `target` label is such a metric).
 */
import { Registry, collectDefaultMetrics } from 'prom-client';
import {
  CellCounter,
  CellDurationCounter,
  CellGauge,
  CellHistogram,
  type CounterCell,
  type DurationCell,
  type GaugeCell,
  type HistogramCell,
} from './metric-cells.js';
import {
  modelLifecycleMetrics,
  modelMemoryMetrics,
  processMetrics,
  storeMetrics,
  type ModelLifecycleMetrics,
  type ModelMemoryMetrics,
  type ProcessMetrics,
  type StoreMetrics,
} from './metrics-models.js';
import {
  inferenceMetrics,
  instanceMetrics,
  MODEL_LABELS,
  responseCacheMetrics,
  sequenceMetrics,
  transportMetrics,
  type InferenceMetrics,
  type InstanceMetrics,
  type ModelLabel,
  type ResponseCacheMetrics,
  type SequenceMetrics,
  type TransportMetrics,
} from './metrics-request.js';

export { MODEL_LABELS, type ModelLabel };
export { processThreadCount } from './metrics-models.js';

/** The label value of every part of the overflow series (targets past the cap). */
export const OVERFLOW_LABEL = '_overflow';

/** Live targets with series of their own when MME_METRICS_MAX_TARGETS is not set. */
export const DEFAULT_MAX_TARGETS = 500;

/** Counts and summed time of the executions of one batch size (Triton's batch_stats). */
export interface BatchStat {
  count: number;
  inputUs: number;
  inferUs: number;
  outputUs: number;
}

/** Most distinct batch sizes kept per model version (a batch size is at most max_batch_size rows). */
const MAX_BATCH_STATS = 4096;

/**
 * The cells of one model version of one target that the request path
 * updates: its scheduler holds the batch ones, the service looks the set up
 * once per request. Names say which metric each feeds; the statistics
 * extension reads the same cells.
 */
export interface ModelMetrics {
  readonly target: string;
  readonly model: string;
  readonly version: string;
  readonly requestSuccess: CounterCell;
  readonly requestDurationUs: DurationCell;
  /** onnx_mme_request_duration_seconds. */
  readonly requestDuration: HistogramCell;
  readonly pending: GaugeCell;
  readonly computeInputUs: DurationCell;
  readonly computeOutputUs: DurationCell;
  /** Counted per request: a batch's run time is added once for each of its requests (Triton's rule). */
  readonly computeInferUs: DurationCell;
  readonly inferenceCount: CounterCell;
  readonly execCount: CounterCell;
  /** Counted per request (count = requests that waited). */
  readonly queueUs: DurationCell;
  readonly batchSize: HistogramCell;
  readonly cacheHits: CounterCell;
  readonly cacheMisses: CounterCell;
  readonly cacheHitUs: DurationCell;
  readonly cacheMissUs: DurationCell;
  /** A failed request of this version, by reason (Triton's REJECTED, CANCELED, BACKEND, OTHER), with its duration. */
  fail(reason: string, us: number): void;
  /** Failed requests and their summed duration (µs); the count is the sum of nv_inference_request_failure over reasons. */
  readonly failures: { readonly count: number; readonly us: number };
  /** One execution of `size` rows: its input preparation, run and output split times (µs). */
  recordBatch(size: number, inputUs: number, inferUs: number, outputUs: number): void;
  /** Executions by batch size, in the order sizes were first seen. */
  readonly batchStats: ReadonlyMap<number, Readonly<BatchStat>>;
  /** A stateful model's live sequences changed by `delta` (onnx_mme_sequences_live; its series exist once used). */
  sequenceLive(delta: number): void;
  /** A hot model's added instances changed by `delta` (onnx_mme_model_instances_added; its series exist once used). */
  instancesAdded(delta: number): void;
  /** A sequence waited for a slot (onnx_mme_sequence_slot_waits_total). */
  sequenceSlotWait(): void;
  /** A sequence ended, by reason (onnx_mme_sequence_ends_total). */
  sequenceEnded(reason: string): void;
  /** process.hrtime.bigint() when the last request finished (successfully or not); 0n = none yet. */
  lastInferenceAt: bigint;
}

/** A package's handle on its target's series: hand it back (release) when the package is released. */
export interface TargetMetrics {
  /** The target the handle was asked for. */
  readonly target: string;
  /** Whether its series are folded into the overflow series (the cap was reached when it was first asked for). */
  readonly overflow: boolean;
  /** The cells of `model` version `version` (made on first use, then two Map lookups). */
  forModel(model: string, version: string): ModelMetrics;
  /** Every model version's cells made so far, in creation order. */
  models(): Iterable<ModelMetrics>;
  /** The package's entry model (what a client addressing the target runs), once the package is built. */
  readonly entryModel: string | undefined;
  setEntryModel(model: string): void;
  /** Once per forTarget call; the series go when the target's last handle is released. */
  release(): void;
}

/** A live target as the statistics extension reads it. */
export type TargetView = Omit<TargetMetrics, 'release' | 'setEntryModel'>;

/** Every metric the server declares, by area (metrics-request.ts, metrics-models.ts). */
export interface DeclaredMetrics
  extends
    InferenceMetrics,
    TransportMetrics,
    ModelLifecycleMetrics,
    ModelMemoryMetrics,
    StoreMetrics,
    ResponseCacheMetrics,
    SequenceMetrics,
    InstanceMetrics,
    ProcessMetrics {}

export interface Metrics extends DeclaredMetrics {
  readonly registry: Registry;
  /** A handle on `target`'s series (shared by every package of it that is loaded; counted). */
  forTarget(target: string): TargetMetrics;
  /** The targets with a live handle, in the order they were first asked for. */
  targets(): Iterable<TargetView>;
  /** A live target's view, or undefined. */
  target(target: string): TargetView | undefined;
  /** Live targets with series of their own (MME_METRICS_MAX_TARGETS). */
  readonly maxTargets: number;
}

/** A cell metric with per-model labels: what forTarget's removal walks. */
interface PerModelMetric {
  removeFirst(target: string): void;
}

function isPerModel(m: unknown): m is PerModelMetric {
  if (!(m instanceof CellCounter || m instanceof CellDurationCounter || m instanceof CellGauge || m instanceof CellHistogram)) return false;
  return (m as unknown as { labelNames: readonly string[] }).labelNames[0] === 'target';
}

/** The cell of each `reason` of a per-model counter with a reason label, made on first use (exported as the overflow series when `as` says so). */
function byReason(
  metric: CellCounter<ModelLabel | 'reason'>,
  labels: Record<ModelLabel, string>,
  as: Record<ModelLabel, string> | undefined,
): (reason: string) => CounterCell {
  const cells = new Map<string, CounterCell>();
  return (reason) => {
    let cell = cells.get(reason);
    if (cell === undefined) cells.set(reason, (cell = metric.cell({ ...labels, reason }, as && { ...as, reason })));
    return cell;
  };
}

function modelCells(metrics: DeclaredMetrics, target: string, model: string, version: string, overflow: boolean): ModelMetrics {
  const labels = { target, model, version };
  const as = overflow ? { target: OVERFLOW_LABEL, model: OVERFLOW_LABEL, version: OVERFLOW_LABEL } : undefined;
  const failures = { count: 0, us: 0 };
  const batchStats = new Map<number, BatchStat>();
  const failCell = byReason(metrics.requestFailure, labels, as);
  // Made on first use: a stateless model has no sequence series.
  let live: GaugeCell | undefined;
  let slotWaits: CounterCell | undefined;
  let added: GaugeCell | undefined;
  const endCell = byReason(metrics.sequenceEnds, labels, as);
  return {
    target,
    model,
    version,
    requestSuccess: metrics.requestSuccess.cell(labels, as),
    requestDurationUs: metrics.requestDurationUs.cell(labels, as),
    requestDuration: metrics.requestDuration.cell(labels, as),
    pending: metrics.pendingRequests.cell(labels, as),
    computeInputUs: metrics.computeInputDurationUs.cell(labels, as),
    computeOutputUs: metrics.computeOutputDurationUs.cell(labels, as),
    computeInferUs: metrics.computeInferDurationUs.cell(labels, as),
    inferenceCount: metrics.inferenceCount.cell(labels, as),
    execCount: metrics.execCount.cell(labels, as),
    queueUs: metrics.queueDurationUs.cell(labels, as),
    batchSize: metrics.batchSize.cell(labels, as),
    cacheHits: metrics.cacheHits.cell(labels, as),
    cacheMisses: metrics.cacheMisses.cell(labels, as),
    cacheHitUs: metrics.cacheHitDurationUs.cell(labels, as),
    cacheMissUs: metrics.cacheMissDurationUs.cell(labels, as),
    fail(reason, us) {
      failCell(reason).inc();
      failures.count += 1;
      failures.us += us;
    },
    failures,
    sequenceLive(delta) {
      (live ??= metrics.sequencesLive.cell(labels, as)).inc(delta);
    },
    instancesAdded(delta) {
      (added ??= metrics.instancesAdded.cell(labels, as)).inc(delta);
    },
    sequenceSlotWait() {
      (slotWaits ??= metrics.sequenceSlotWaits.cell(labels, as)).inc();
    },
    sequenceEnded(reason) {
      endCell(reason).inc();
    },
    recordBatch(size, inputUs, inferUs, outputUs) {
      let stat = batchStats.get(size);
      if (stat === undefined) {
        if (batchStats.size >= MAX_BATCH_STATS) return;
        batchStats.set(size, (stat = { count: 0, inputUs: 0, inferUs: 0, outputUs: 0 }));
      }
      stat.count += 1;
      stat.inputUs += inputUs;
      stat.inferUs += inferUs;
      stat.outputUs += outputUs;
    },
    batchStats,
    lastInferenceAt: 0n,
  };
}

export interface MetricsOptions {
  readonly collectProcessMetrics?: boolean;
  /** Live targets with series of their own (MME_METRICS_MAX_TARGETS); default DEFAULT_MAX_TARGETS. */
  readonly maxTargets?: number;
}

export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  if (options.collectProcessMetrics) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const declared: DeclaredMetrics = {
    ...inferenceMetrics(registers),
    ...transportMetrics(registers),
    ...modelLifecycleMetrics(registers),
    ...modelMemoryMetrics(registers),
    ...storeMetrics(registers),
    ...responseCacheMetrics(registers),
    ...sequenceMetrics(registers),
    ...instanceMetrics(registers),
    ...processMetrics(registers),
  };
  const table: TenantTable = {
    declared,
    maxTargets: options.maxTargets ?? DEFAULT_MAX_TARGETS,
    tenants: new Map(),
    ownSeries: 0,
    perModel: Object.values(declared).filter(isPerModel),
  };
  return {
    registry,
    maxTargets: table.maxTargets,
    forTarget: (target) => handleOn(table, target),
    targets: () => table.tenants.values(),
    target: (target) => table.tenants.get(target),
    ...declared,
  };
}

interface Tenant extends TargetMetrics {
  refs: number;
  entryModel: string | undefined;
}

/** The live targets and the cap on those with series of their own. */
interface TenantTable {
  readonly declared: DeclaredMetrics;
  readonly maxTargets: number;
  readonly tenants: Map<string, Tenant>;
  /** Live targets with series of their own (the rest are in the overflow series). */
  ownSeries: number;
  /** What a released target's series are removed from. */
  readonly perModel: readonly PerModelMetric[];
}

/** A caller's handle on `target`'s tenant (made on first use); counted. */
function handleOn(table: TenantTable, target: string): TargetMetrics {
  let tenant = table.tenants.get(target);
  if (tenant === undefined) table.tenants.set(target, (tenant = newTenant(table, target)));
  tenant.refs += 1;
  // Each caller's own handle: releasing it twice hands back one reference, not two.
  let held = true;
  const shared = tenant;
  return {
    target,
    overflow: shared.overflow,
    forModel: shared.forModel,
    models: shared.models,
    get entryModel() {
      return shared.entryModel;
    },
    setEntryModel: shared.setEntryModel,
    release() {
      if (!held) return;
      held = false;
      shared.release();
    },
  };
}

function newTenant(table: TenantTable, target: string): Tenant {
  const { declared } = table;
  const overflow = table.ownSeries >= table.maxTargets;
  if (overflow) declared.overflowTargets.inc();
  else table.ownSeries++;
  /** By model, then version: the request path looks its set up with strings it already holds, building no key. */
  const byModel = new Map<string, Map<string, ModelMetrics>>();
  const all: ModelMetrics[] = [];
  const tenant: Tenant = {
    target,
    overflow,
    refs: 0,
    entryModel: undefined,
    setEntryModel(model) {
      tenant.entryModel = model;
    },
    forModel(model, version) {
      let versions = byModel.get(model);
      if (versions === undefined) byModel.set(model, (versions = new Map()));
      let cells = versions.get(version);
      if (cells === undefined) {
        // Never an empty label: a version not known yet is not a series.
        if (model === '' || version === '') throw new Error(`metrics: empty model or version label for target '${target}'`);
        versions.set(version, (cells = modelCells(declared, target, model, version, overflow)));
        all.push(cells);
      }
      return cells;
    },
    models: () => all.values(),
    release() {
      if (tenant.refs <= 0) return;
      tenant.refs -= 1;
      if (tenant.refs > 0 || table.tenants.get(target) !== tenant) return;
      table.tenants.delete(target);
      if (overflow) declared.overflowTargets.dec();
      else table.ownSeries--;
      for (const m of table.perModel) m.removeFirst(target);
    },
  };
  return tenant;
}
