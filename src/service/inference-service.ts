/**
 * @module service/inference-service
 * The transport-free use cases: run an inference on a model reference, and
 * the SageMaker MME management calls. HTTP adapters parse, call this, and
 * format; nothing here knows about express. Every inference goes the same way:
 * lease the package → validate against the entry model → run the plan (one
 * step for a single model) → release the lease.
 */
import { ServingError, toServingError } from '../errors.js';
import { runPlan } from '../ensemble/plan-runner.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { InferRequest, InferResponse } from '../protocol/infer-types.js';
import { latestVersion } from '../registry/loaded-model.js';
import type { Lease, ManagedModelInfo, ModelRegistry } from '../registry/model-registry.js';
import { normalizeTarget } from '../store/target-path.js';
import { validateRequest } from './validate-request.js';

/** Which model a request addresses. */
export type ModelRef =
  | { readonly kind: 'target'; readonly target: string }
  | { readonly kind: 'managed'; readonly name: string; readonly targetHeader: string | undefined }
  | { readonly kind: 'default' };

export interface InferContext {
  readonly signal?: AbortSignal;
  readonly log: Logger;
}

/** Decodes a request body once the model is known (protocols may need the model's config). */
export type RequestDecoder = (label: string) => InferRequest;

export interface InferenceServiceOptions {
  readonly registry: ModelRegistry;
  readonly metrics: Metrics;
  readonly maxInflight: number;
}

function refLabel(ref: ModelRef): string {
  switch (ref.kind) {
    case 'target':
      return ref.target;
    case 'managed':
      return ref.name;
    case 'default':
      return 'default';
  }
}

export class InferenceService {
  private inflight = 0;

  constructor(private readonly options: InferenceServiceOptions) {}

  get inflightCount(): number {
    return this.inflight;
  }

  private acquire(ref: ModelRef, signal: AbortSignal | undefined): Promise<Lease> {
    const { registry } = this.options;
    switch (ref.kind) {
      case 'target':
        return registry.acquireTarget(ref.target, signal);
      case 'managed':
        return registry.acquireManaged(ref.name, ref.targetHeader);
      case 'default':
        return registry.acquireDefault(signal);
    }
  }

  async infer(ref: ModelRef, decode: RequestDecoder, ctx: InferContext): Promise<InferResponse> {
    if (this.inflight >= this.options.maxInflight) {
      throw new ServingError('OVERLOADED', `server is at its limit of ${this.options.maxInflight} requests in progress; retry later`, {
        model: refLabel(ref),
      });
    }
    this.inflight++;
    const started = process.hrtime.bigint();
    let lease: Lease | undefined;
    let modelName = refLabel(ref);
    let version = '';
    try {
      // Reject a bad target, then a malformed body, before anything is loaded.
      if (ref.kind === 'target') normalizeTarget(ref.target);
      const request = decode(refLabel(ref));
      lease = await this.acquire(ref, ctx.signal);
      const { pkg } = lease;
      const entry = pkg.entry;
      modelName = entry.name;
      version = String(latestVersion(entry)?.version ?? 1);
      const batch = validateRequest(request, entry.config, lease.label);
      const wanted = request.outputs?.map((o) => o.name) ?? entry.config.output.map((t) => t.name);
      const computeStart = process.hrtime.bigint();
      const outputs = await runPlan(pkg.plan, request.inputs, wanted, ctx.signal);
      const computeUs = Number(process.hrtime.bigint() - computeStart) / 1000;
      this.record(modelName, version, batch, computeUs, started);
      return { id: request.id, modelName, modelVersion: version, outputs };
    } catch (err) {
      const e = toServingError(err, lease?.label ?? refLabel(ref));
      const reason = e.code === 'OVERLOADED' || e.code === 'TIMEOUT' ? 'REJECTED' : e.code === 'CANCELLED' ? 'CANCELED' : e.isClientFault ? 'OTHER' : 'BACKEND';
      if (lease) this.options.metrics.requestFailure.inc({ model: modelName, version, reason });
      throw e;
    } finally {
      lease?.release();
      this.inflight--;
    }
  }

  private record(model: string, version: string, batch: number, computeUs: number, started: bigint): void {
    const m = this.options.metrics;
    const totalUs = Number(process.hrtime.bigint() - started) / 1000;
    const labels = { model, version };
    m.requestSuccess.inc(labels);
    m.inferenceCount.inc(labels, batch);
    m.execCount.inc(labels);
    m.requestDurationUs.inc(labels, totalUs);
    m.computeInferDurationUs.inc(labels, computeUs);
    m.requestDuration.observe({ model }, totalUs / 1e6);
  }

  // ------------------------------------------------------------ MME management

  loadModel(name: string, url: string, targetHeader: string | undefined): Promise<ManagedModelInfo> {
    return this.options.registry.loadManaged(name, url, targetHeader);
  }

  unloadModel(name: string, targetHeader: string | undefined): Promise<void> {
    return this.options.registry.unloadManaged(name, targetHeader);
  }

  describeModel(name: string): ManagedModelInfo {
    return this.options.registry.describeManaged(name);
  }

  /** Sorted by name; `after` is the last name of the previous page (the cursor). */
  listModels(limit: number, after: string | undefined): { models: ManagedModelInfo[]; next: string | undefined } {
    const all = this.options.registry.listManaged();
    const start = after === undefined ? 0 : all.findIndex((m) => m.modelName > after);
    const from = start < 0 ? all.length : start;
    const page = all.slice(from, from + limit);
    const more = from + limit < all.length;
    return { models: page, next: more ? page[page.length - 1]?.modelName : undefined };
  }
}
