/**
 * @module service/inference-service
 * The transport-free use cases: run an inference on a model handle (what the
 * edge resolved the request's model reference into, once; the service never
 * asks which kind of model it holds), and the SageMaker MME management calls.
 * HTTP and gRPC adapters parse, call this, and format; nothing here knows
 * about express. Every inference goes the same way:
 * lease the package → validate against the entry model → answer from the
 * response cache when the model enables it, else run the plan (one step for
 * a single model) → release the lease.
 */
import type { Cancellation } from '../cancellation.js';
import type { ModelConfig } from '../config/model-config-types.js';
import { inModel, retryAfter, ServingError } from '../errors.js';
import { singleModelPlan, type ExecutionPlan } from '../ensemble/execution-plan.js';
import { runPlan } from '../ensemble/plan-runner.js';
import { createMetrics, type Metrics, type ModelMetrics, type TargetMetrics } from '../observability/metrics.js';
import type { Logger } from '../observability/logger.js';
import { checkClassifiable, classificationOf, classify } from '../protocol/classification.js';
import type { InferRequest, InferResponse, RequestedOutput } from '../protocol/infer-types.js';
import type { Tensor } from '../protocol/tensor.js';
import { latestVersion, type LoadedModel } from '../registry/loaded-model.js';
import type { Lease, ManagedModelInfo, ModelHandle, ModelRef, ModelRegistry, RepositoryIndexEntry } from '../registry/model-registry.js';
import type { QueueDepth } from '../scheduler/model-scheduler.js';
import { scheduleOptionsFrom } from '../scheduler/schedule-options.js';
import { modelStat, type ModelStatJson } from './model-statistics.js';
import { outputLabels } from './output-labels.js';
import type { ResponseCache } from './response-cache.js';
import type { InferenceCall, RequestBinder } from './inference-call.js';
import type { RequestTicket } from './admission.js';
import type { RequestStats } from './request-stats.js';
import { validateRequest } from './validate-request.js';

// What the transports need of the registry's vocabulary, through the service (they never import the registry).
export type { ManagedModelInfo, ModelHandle, ModelRef, RepositoryIndexEntry } from '../registry/model-registry.js';
export type { LoadProgressView } from '../registry/load-progress.js';
export { checkModelName, checkTargetHeader } from '../registry/managed-records.js';

/** The queue a request to a model reference joins, as far as it is known before anything is read or loaded. */
export interface ModelQueueView extends QueueDepth {
  /** The same for every request to the same reference. */
  readonly key: string;
  /** The reference's label (what messages name). */
  readonly model: string;
}

type OutputStep = (outputs: Map<string, Tensor>) => Map<string, Tensor>;

const unchanged: OutputStep = (outputs) => outputs;

function isBinder(d: InferRequest | RequestBinder): d is RequestBinder {
  return typeof (d as RequestBinder).bindToModel === 'function';
}

/** A request bound to the entry model of its lease, validated, with what its answer needs. */
interface BoundRequest {
  /** The lease's label: what messages of the protocol's codecs name. */
  readonly label: string;
  readonly pkg: Lease['pkg'];
  readonly entry: LoadedModel;
  readonly version: string;
  readonly plan: ExecutionPlan;
  readonly request: InferRequest;
  /** Rows (1 for a model that does not batch). */
  readonly batch: number;
  readonly wanted: readonly string[];
  readonly cache: ResponseCache | undefined;
  /** Set by the lookup, for the insert of a miss. */
  cacheKey: string | undefined;
}

/** Refused before the model runs: the answer's format (CSV, .npy) carries one tensor. */
function oneTensorOnly(type: string, wanted: readonly string[]): ServingError {
  return new ServingError(
    'NOT_ACCEPTABLE',
    `${type} carries one tensor but the request gets ${wanted.length} outputs (${wanted.map((o) => `'${o}'`).join(', ')}); ask for one output ("outputs": [{"name": ...}] in a KServe v2 request) or accept application/json`,
  );
}

/** Triton's failure reasons (nv_inference_request_failure's label). */
function failureReason(e: ServingError): string {
  return e.code === 'OVERLOADED' || e.code === 'TIMEOUT' ? 'REJECTED' : e.code === 'CANCELLED' ? 'CANCELED' : e.isClientFault ? 'OTHER' : 'BACKEND';
}

const ALL_OUTPUTS = new WeakMap<ModelConfig, readonly string[]>();

/** Every output name of a model, in config order (what a request without `outputs` gets); made once per config. */
function allOutputs(config: ModelConfig): readonly string[] {
  let names = ALL_OUTPUTS.get(config);
  if (names === undefined) ALL_OUTPUTS.set(config, (names = Object.freeze(config.output.map((t) => t.name))));
  return names;
}

const LATEST = new WeakMap<ExecutionPlan, { readonly version: string; readonly plan: ExecutionPlan }>();

/**
 * The version a request runs and its plan: the package's plan for the
 * highest loaded version, or a one-step plan on another loaded version.
 * Ensembles (no sessions of their own) serve only the version they report.
 */

function servedVersion(entry: LoadedModel, plan: ExecutionPlan, requested: number | undefined): { version: string; plan: ExecutionPlan } {
  // A package's versions never change while it is loaded: its latest is worked out once (per request otherwise).
  let cached = LATEST.get(plan);
  if (cached === undefined) LATEST.set(plan, (cached = { version: String(latestVersion(entry)?.version ?? 1), plan }));
  if (requested === undefined || String(requested) === cached.version) return cached;
  const latest = Number(cached.version);
  const v = entry.versions.get(requested);
  if (!v) {
    const loaded = entry.versions.size > 0 ? [...entry.versions.keys()].sort((a, b) => a - b) : [latest];
    throw new ServingError('MODEL_NOT_FOUND', `version ${requested} is not available (loaded versions: ${loaded.join(', ')})`);
  }
  return { version: String(requested), plan: singleModelPlan(entry.name, { config: entry.config, version: requested, scheduler: v.scheduler }) };
}

export interface InferenceServiceOptions {
  readonly registry: ModelRegistry;
  readonly metrics: Metrics;
  readonly maxInflight: number;
  /** MME_MAX_QUEUE_SIZE: the queue limit of a model that is not in memory yet (its config is not known); default: none. */
  readonly maxQueueSize?: number;
  /** Serves models with `response_cache { enable: true }`; absent = no cache (MME_RESPONSE_CACHE_BYTES 0). */
  readonly responseCache?: ResponseCache;
  /** MME_MAX_RESPONSE_BYTES: the largest answer; none when absent. */
  readonly maxResponseBytes?: number;
}

let uncounted: TargetMetrics | undefined;

/** The series a package counts in; a package built without a handle (a test's) counts in a registry of its own. */
function seriesOf(pkg: { readonly metrics: TargetMetrics | undefined }): TargetMetrics {
  return pkg.metrics ?? (uncounted ??= createMetrics().forTarget('uncounted'));
}

export class InferenceService {
  private inflight = 0;
  /** Models already warned that they enable a response cache the server does not have (once per load). */
  private readonly uncachedWarned = new WeakSet<LoadedModel>();

  constructor(private readonly options: InferenceServiceOptions) {}

  get inflightCount(): number {
    return this.inflight;
  }

  /**
   * RESPONSE_TOO_LARGE when an answer of at most `boundBytes` (its encoding's
   * bound, computed by the transport from the output tensors) could exceed
   * MME_MAX_RESPONSE_BYTES. Called before the answer is encoded.
   */
  checkAnswerSize(boundBytes: number, model: string): void {
    const cap = this.options.maxResponseBytes;
    if (cap === undefined || boundBytes <= cap) return;
    throw new ServingError(
      'RESPONSE_TOO_LARGE',
      `model '${model}': the answer could take up to ${boundBytes} bytes in the encoding asked for, over MME_MAX_RESPONSE_BYTES (${cap}); ask for fewer outputs, a smaller input, or a binary encoding`,
      { model, details: { maxResponseBytes: cap, boundBytes } },
    );
  }

  /**
   * The handle of what a request names (a target, a model SageMaker loaded, a
   * v2/gRPC name, or the default model): the edge resolves it once and passes
   * the handle on. A target is validated here (INVALID_TARGET).
   */
  resolve(ref: ModelRef): ModelHandle {
    return this.options.registry.resolve(ref);
  }

  /**
   * The queue a request to `handle` joins: the entry model's scheduler queue
   * when the model is in memory, else an empty queue with MME_MAX_QUEUE_SIZE
   * (an ensemble, which has no queue of its own, likewise). Never loads,
   * never throws. A string: a reference that did not resolve (as the client
   * spelled it), refused later where it always was; it counts under that alone.
   */
  queueOf(handle: ModelHandle | string): ModelQueueView {
    const fallback = this.options.maxQueueSize ?? Number.POSITIVE_INFINITY;
    if (typeof handle === 'string') return { key: `unresolved:${handle}`, model: handle, queued: 0, limit: fallback };
    const pkg = handle.resident()?.pkg;
    const depth = pkg === undefined ? undefined : latestVersion(pkg.entry)?.scheduler.queueDepth?.();
    return { key: handle.queueKey, model: handle.label, queued: depth?.queued ?? 0, limit: depth?.limit ?? fallback };
  }

  /**
   * One inference, in the order of its steps: a lease on the package (at once
   * when it is in memory), the request bound and validated against the entry
   * model, its outputs prepared, the answer from the response cache or the
   * plan, and the stats recorded. Errors are named for the model here, once.
   */
  async infer(call: InferenceCall): Promise<InferResponse> {
    this.admitOne(call.handle);
    const { stats } = call;
    let lease: Lease | undefined;
    try {
      lease = call.handle.leaseNow() ?? (await this.acquire(call));
      const bound = this.bindAndValidate(call, lease);
      // Without classification there is nothing to prepare: no promise to wait on (the common case).
      const prepared = this.prepareOutputs(bound);
      const postProcess = typeof prepared === 'function' ? prepared : await prepared;
      stats.bound();
      const hit = this.cached(call, bound, postProcess);
      if (hit !== undefined) return hit;
      // Awaited here rather than in a helper: one suspended frame per waiting request, not two (plan-runner.ts says why).
      const raw = await this.run(call, bound);
      return this.answered(call, bound, postProcess, raw);
    } catch (err) {
      const e = inModel(err, lease?.label ?? call.handle.label);
      stats.failed(failureReason(e));
      throw e;
    } finally {
      stats.end();
      lease?.release();
      this.inflight--;
    }
  }

  /** The wait for a package that is not in memory (a load), outside `infer`: its closure would give every call of `infer` a context. */
  private acquire(call: InferenceCall): Promise<Lease> {
    return call.stats.waitFor(() => call.handle.acquire(call.cancel));
  }

  /** MME_MAX_INFLIGHT_REQUESTS: one more request in progress, or OVERLOADED. */
  private admitOne(handle: ModelHandle): void {
    if (this.inflight >= this.options.maxInflight) {
      throw new ServingError('OVERLOADED', `server is at its limit of ${this.options.maxInflight} requests in progress; retry later`, {
        model: handle.label,
        details: retryAfter(),
      });
    }
    this.inflight++;
  }

  /** The version served, the request bound to the entry model's config and validated against it; the stats count from here. */
  private bindAndValidate(call: InferenceCall, lease: Lease): BoundRequest {
    const { pkg, label } = lease;
    const entry = pkg.entry;
    const served = servedVersion(entry, pkg.plan, call.version);
    call.stats.serving(seriesOf(pkg), entry.name, served.version);
    const request = isBinder(call.request) ? call.request.bindToModel(entry.config) : call.request;
    const wanted = request.outputs?.map((o) => o.name) ?? allOutputs(entry.config);
    if (call.oneOutput !== undefined && wanted.length !== 1) throw oneTensorOnly(call.oneOutput, wanted);
    const batch = validateRequest(request, entry.config);
    const cache = entry.config.responseCacheEnabled ? this.options.responseCache : undefined;
    if (entry.config.responseCacheEnabled && cache === undefined && !this.uncachedWarned.has(entry)) {
      this.uncachedWarned.add(entry);
      call.log.warn(
        { model: entry.name },
        'the model enables response_cache but the server has none (MME_RESPONSE_CACHE_BYTES is 0): every request runs the model',
      );
    }
    return { label, pkg, entry, version: served.version, plan: served.plan, request, batch, wanted, cache, cacheKey: undefined };
  }

  /** The answer kept in the response cache, when the model enables one and holds it; else undefined (the key is kept for the insert). */
  private cached(call: InferenceCall, bound: BoundRequest, postProcess: OutputStep): InferResponse | undefined {
    const { cache } = bound;
    if (cache === undefined) return undefined;
    const hit = call.stats.lookup(() =>
      cache.get((bound.cacheKey = cache.keyOf(bound.pkg, bound.entry.name, bound.version, bound.request.inputs, bound.wanted))),
    );
    if (hit === undefined) return undefined;
    const outputs = postProcess(hit);
    call.stats.cacheHit(bound.batch);
    return { id: bound.request.id, modelName: bound.entry.name, modelVersion: bound.version, outputs };
  }

  /** Run the plan (one step for a single model). */
  private run(call: InferenceCall, bound: BoundRequest): Promise<Map<string, Tensor>> {
    call.stats.running(bound.cache !== undefined);
    call.arrival?.arrived();
    return runPlan(bound.plan, bound.request.inputs, bound.wanted, call.cancel, scheduleOptionsFrom(bound.request.parameters, bound.label));
  }

  /** The plan's outputs: a miss kept in the cache, post-processed, recorded. */
  private answered(call: InferenceCall, bound: BoundRequest, postProcess: OutputStep, raw: Map<string, Tensor>): InferResponse {
    const { stats } = call;
    const computeUs = stats.computed();
    if (bound.cache !== undefined && bound.cacheKey !== undefined) {
      const { cache, cacheKey } = bound;
      stats.cacheMiss(() => this.insert(cache, cacheKey, raw));
    }
    const outputs = postProcess(raw);
    stats.answered(bound.batch, computeUs, bound.entry.config.platform === 'ensemble');
    return { id: bound.request.id, modelName: bound.entry.name, modelVersion: bound.version, outputs };
  }

  /** A miss: keep the answer (before post-processing, which may replace outputs in `raw`) and publish the cache's size. */
  private insert(cache: ResponseCache, key: string, raw: ReadonlyMap<string, Tensor>): void {
    const m = this.options.metrics;
    const before = cache.stats().evictions;
    cache.set(key, raw);
    const after = cache.stats();
    m.responseCacheBytes.set(after.bytes);
    m.responseCacheEntries.set(after.entries);
    if (after.evictions > before) m.responseCacheEvictions.inc(after.evictions - before);
  }

  /**
   * Checks the classification requests before the model runs (datatype,
   * label file) and returns the step that turns the raw outputs into the
   * answer's outputs.
   */
  private prepareOutputs(bound: BoundRequest): OutputStep | Promise<OutputStep> {
    const asked = bound.request.outputs?.filter((o) => classificationOf(o) !== undefined);
    if (asked === undefined || asked.length === 0) return unchanged;
    return this.prepareClassification(asked, bound);
  }

  /** Only requests that ask for classification wait here: their label files may have to be read. */
  private async prepareClassification(asked: readonly RequestedOutput[], { entry, label }: BoundRequest): Promise<OutputStep> {
    const batching = entry.config.maxBatchSize > 0;
    const jobs = await Promise.all(
      asked.map(async (o) => {
        const declared = entry.config.output.find((t) => t.name === o.name);
        if (declared) checkClassifiable(label, o.name, declared.dataType);
        return { name: o.name, k: classificationOf(o)!, labels: await outputLabels(entry, o.name) };
      }),
    );
    return (outputs) => {
      for (const job of jobs) {
        const t = outputs.get(job.name);
        if (t) outputs.set(job.name, classify(label, job.name, t, job.k, batching, job.labels));
      }
      return outputs;
    };
  }

  // ------------------------------------------------------------ MME management

  /** POST /models: SageMaker loads a model from a directory under its name. */
  registerModel(name: string, url: string, targetHeader: string | undefined): Promise<ManagedModelInfo> {
    return this.options.registry.managed.register(name, url, targetHeader);
  }

  /** Memory a resident SageMaker-managed model holds, as the memory budget counts it; undefined when it is not resident. */
  managedModelBytes(name: string): number | undefined {
    return this.options.registry.managed.resident(name)?.bytes;
  }

  /** The memory a package directory is predicted to need before it is loaded (the registry's own prediction). */
  predictModelBytes(name: string, dir: string): Promise<number> {
    return this.options.registry.managed.predictBytes(name, dir);
  }

  /** ModelMesh's modelPath (a package directory or the model file in one) as the package directory, checked as a POST /models url is. */
  modelPathDir(name: string, modelPath: string): Promise<string> {
    return this.options.registry.managed.packageDirOf(name, modelPath);
  }

  describeModel(name: string): ManagedModelInfo {
    return this.options.registry.managed.describe(name);
  }

  /** Sorted by name; `after` is the last name of the previous page (the cursor). Costs the page, not the list. */
  listModels(limit: number, after: string | undefined): { models: ManagedModelInfo[]; next: string | undefined } {
    const { models, next } = this.options.registry.managed.page(after, limit);
    return { models, next };
  }

  // ------------------------------------------------------------ KServe v2

  /** Lease the model (loading a target on first use), read its entry model, release. */
  private async inspect<T>(
    handle: ModelHandle,
    version: number | undefined,
    cancel: Cancellation | undefined,
    read: (entry: LoadedModel, version: string) => T,
  ): Promise<T> {
    const lease = handle.leaseNow() ?? (await handle.acquire(cancel));
    try {
      const entry = lease.pkg.entry;
      return read(entry, servedVersion(entry, lease.pkg.plan, version).version);
    } catch (err) {
      throw inModel(err, lease.label);
    } finally {
      lease.release();
    }
  }

  /** KServe v2 model metadata: name, versions, platform, and tensors with -1 for the batch dimension. */
  modelMetadata(handle: ModelHandle, version: number | undefined, cancel?: Cancellation): Promise<ModelMetadata> {
    return this.inspect(handle, version, cancel, (entry, served) => {
      const { config } = entry;
      const tensor = (t: { name: string; dataType: string; dims: readonly number[] }): TensorMetadata => ({
        name: t.name,
        datatype: t.dataType,
        shape: config.maxBatchSize > 0 ? [-1, ...t.dims] : [...t.dims],
      });
      const loaded = [...entry.versions.keys()].sort((a, b) => a - b).map(String);
      return {
        name: entry.name,
        versions: version !== undefined ? [served] : loaded.length > 0 ? loaded : [served],
        platform: config.platform || config.backend,
        inputs: config.input.map(tensor),
        outputs: config.output.map(tensor),
      };
    });
  }

  /** The entry model's effective config in Triton's JSON form (GET .../config). */
  modelConfig(handle: ModelHandle, version: number | undefined, cancel?: Cancellation): Promise<Readonly<Record<string, unknown>>> {
    return this.inspect(handle, version, cancel, (entry) => entry.config.json);
  }

  /** Whether the model (and version) is ready: a resident target, or a model SageMaker loaded; never loads anything. */
  modelReady(handle: ModelHandle, version: number | undefined): boolean {
    return handle.ready(version);
  }

  /**
   * Triton's statistics extension: every version of the entry model of each
   * loaded target (`handle` undefined), or of the one named (and version).
   * Never loads anything: a model that is not in memory is MODEL_NOT_FOUND.
   */
  modelStatistics(handle: ModelHandle | undefined, version: number | undefined): { model_stats: ModelStatJson[] } {
    const nowHr = process.hrtime.bigint();
    const nowMs = Date.now();
    const entryStats = (label: string, t: { readonly entryModel: string | undefined; models(): Iterable<ModelMetrics> }): ModelStatJson[] =>
      [...t.models()]
        .filter((c) => c.model === t.entryModel && (version === undefined || c.version === String(version)))
        .sort((a, b) => Number(a.version) - Number(b.version))
        .map((c) => modelStat(label, c, nowHr, nowMs));
    if (handle === undefined) {
      return { model_stats: [...this.options.metrics.targets()].flatMap((t) => entryStats(t.target, t)) };
    }
    const name = handle.label;
    const pkg = handle.resident()?.pkg;
    if (pkg?.metrics === undefined) {
      throw new ServingError('MODEL_NOT_FOUND', `model '${name}' is not loaded: statistics are kept for loaded models only`, { model: name });
    }
    const stats = entryStats(name, pkg.metrics);
    if (version !== undefined && stats.length === 0) {
      throw new ServingError('MODEL_NOT_FOUND', `model '${name}': version ${version} is not loaded`, { model: name });
    }
    return { model_stats: stats };
  }

  /** An explicit load (v2 repository load, model-mesh): loaded and kept resident; a remembered failed load is retried now. */
  load(handle: ModelHandle, cancel?: Cancellation): Promise<void> {
    return handle.load(cancel);
  }

  /** An explicit unload (DELETE /models/{name}, v2 repository unload), waiting for its requests; MODEL_NOT_FOUND when it is not loaded. */
  unload(handle: ModelHandle): Promise<void> {
    return handle.unload();
  }

  /** The repository index: SageMaker-managed models, then every target of the model source with its state; `readyOnly` keeps the READY ones. */
  async repositoryIndex(readyOnly: boolean): Promise<RepositoryIndexEntry[]> {
    const rows = await this.options.registry.repositoryIndex();
    return readyOnly ? rows.filter((r) => r.state === 'READY') : rows;
  }
}

export interface TensorMetadata {
  readonly name: string;
  readonly datatype: string;
  readonly shape: readonly number[];
}

export interface ModelMetadata {
  readonly name: string;
  readonly versions: readonly string[];
  readonly platform: string;
  readonly inputs: readonly TensorMetadata[];
  readonly outputs: readonly TensorMetadata[];
}

/** What an edge's per-request context gives a call: the client's cancellation and the request's log (made on first use on HTTP). */
export interface CallSource {
  readonly cancel: Cancellation;
  readonly log: Logger;
}

/**
 * The InferenceCall both edges build: a class, not an object literal with a
 * getter, whose getter is a closure made per request and kept while the
 * request waits for its model. Here rather than in inference-call.ts (types
 * only), so a warm request runs no code of one more file.
 */
export class EdgeInferenceCall implements InferenceCall {
  constructor(
    readonly handle: ModelHandle,
    readonly request: InferRequest | RequestBinder,
    readonly version: number | undefined,
    private readonly source: CallSource,
    readonly arrival: Pick<RequestTicket, 'arrived'> | undefined,
    readonly oneOutput: string | undefined,
    readonly stats: RequestStats,
  ) {}

  get cancel(): Cancellation {
    return this.source.cancel;
  }

  get log(): Logger {
    return this.source.log;
  }
}
