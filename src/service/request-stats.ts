/**
 * @module service/request-stats
 * One request's timings and its model's metric cells, as Triton keeps its
 * per-request statistics (docs/metrics-and-logs.md): the request's start, the
 * wait for its model to load (left out of compute-input), the compute-input,
 * compute and compute-output phases, the response-cache lookup and insert,
 * and success or failure. The edge starts it before decoding the body (so the
 * decode counts as compute-input); InferenceService drives it through the
 * request's steps. Every per-request clock read is here: one read ends a phase
 * and starts the next (a read and its BigInt arithmetic cost about 0.05 µs).
 */
import type { ModelMetrics, TargetMetrics } from '../observability/metrics.js';

const now = (): bigint => process.hrtime.bigint();

export class RequestStats {
  private readonly startedAt: bigint;
  private waitNs = 0n;
  private boundAt = 0n;
  /** Where the phase in progress started (compute, then compute-output). */
  private phaseAt = 0n;
  private lookupNs = 0n;
  private series: TargetMetrics | undefined;
  private model = '';
  private version = '';
  private modelCells: ModelMetrics | undefined;
  /** The pending gauge counts the request from the moment it joins its model's queue until it ends. */
  private pending = false;

  constructor(startedAt: bigint = now()) {
    this.startedAt = startedAt;
  }

  /** `wait` is a wait for the model (a load): its time is not compute-input. */
  async waitFor<T>(wait: () => Promise<T>): Promise<T> {
    const start = now();
    try {
      return await wait();
    } finally {
      this.waitNs += now() - start;
    }
  }

  /** The request runs `model` `version`, whose cells are in `series` (made only when something is counted). */
  serving(series: TargetMetrics, model: string, version: string): void {
    this.series = series;
    this.model = model;
    this.version = version;
  }

  /** The request is bound, validated and its outputs prepared: compute-input ends. */
  bound(): void {
    this.phaseAt = this.boundAt = now();
  }

  /** The version is known: failures count from here (a version that is not loaded has no series, never an empty label). */
  get counted(): boolean {
    return this.series !== undefined;
  }

  private cells(): ModelMetrics {
    return (this.modelCells ??= this.series!.forModel(this.model, this.version));
  }

  /** A response-cache lookup, timed (Triton's hit time is the lookup; a miss adds the insert). */
  lookup<T>(get: () => T): T {
    const start = now();
    try {
      return get();
    } finally {
      this.lookupNs = now() - start;
    }
  }

  /** Answered from the response cache: a hit is not an inference (Triton excludes it from compute and the ensemble's counts). */
  cacheHit(batch: number): void {
    const cells = this.cells();
    cells.cacheHits.inc();
    cells.cacheHitUs.add(Number(this.lookupNs) / 1000);
    this.succeeded(cells, batch, 0, now(), false);
  }

  /** The request joins its model's queue; compute starts (after the lookup when there was one). */
  running(afterLookup: boolean): void {
    this.cells().pending.inc();
    this.pending = true;
    if (afterLookup) this.phaseAt = now();
  }

  /** The plan ran: compute ends, compute-output starts. */
  computed(): number {
    const at = now();
    const computeUs = Number(at - this.phaseAt) / 1000;
    this.phaseAt = at;
    return computeUs;
  }

  /** A miss kept in the cache: Triton's miss time is lookup + insert; compute-output starts after it. */
  cacheMiss(insert: () => void): void {
    const start = now();
    insert();
    const cells = this.cells();
    cells.cacheMisses.inc();
    this.phaseAt = now();
    cells.cacheMissUs.add(Number(this.lookupNs + this.phaseAt - start) / 1000);
  }

  /**
   * Answered by running the model. A model's executions, rows and compute time
   * are counted by its scheduler, once per batch (so nv_inference_exec_count
   * counts batches and nv_inference_count rows); an ensemble has no scheduler
   * of its own, so here each request is one execution of it.
   */
  answered(batch: number, computeUs: number, ensemble: boolean): void {
    const done = now();
    const cells = this.cells();
    // Triton's compute-input and compute-output phases (see metrics.ts for what they cover here).
    cells.computeInputUs.add(Number(this.boundAt - this.startedAt - this.waitNs) / 1000);
    cells.computeOutputUs.add(Number(done - this.phaseAt) / 1000);
    this.succeeded(cells, batch, computeUs, done, ensemble);
  }

  private succeeded(cells: ModelMetrics, batch: number, computeUs: number, done: bigint, ensemble: boolean): void {
    const totalUs = Number(done - this.startedAt) / 1000;
    cells.requestSuccess.inc();
    if (ensemble) {
      cells.inferenceCount.inc(batch);
      cells.execCount.inc();
      cells.computeInferUs.add(computeUs);
    }
    cells.requestDurationUs.add(totalUs);
    cells.requestDuration.observe(totalUs / 1e6);
    cells.lastInferenceAt = done;
  }

  /** Failed with `reason` (Triton's failure reasons); counted only once the version is known. */
  failed(reason: string): void {
    if (!this.counted) return;
    const at = now();
    const cells = this.cells();
    cells.fail(reason, Number(at - this.startedAt) / 1000);
    cells.lastInferenceAt = at;
  }

  /** The request is over: it leaves the pending gauge. */
  end(): void {
    if (this.pending) this.modelCells!.pending.dec();
    this.pending = false;
  }
}
