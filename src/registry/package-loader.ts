/**
 * @module registry/package-loader
 * Turns an extracted model package (one Triton model or a repository) into a
 * LoadedPackage: the entry model and, for ensembles, the step models it needs,
 * each with sessions and schedulers, plus the execution plan. Loads are
 * all-or-nothing: on any failure every session created so far is released.
 */
import type { LoadPhase } from './load-progress.js';
import { statSync } from 'node:fs';
import { readModelFile, yieldTurn } from '../store/small-io.js';
import path from 'node:path';
import { ignoredFieldMessage, ignoredParameterKeys } from '../config/field-support.js';
import { completeModelConfig, finishModelConfig, threadCountParameter, type ModelConfigDraft } from '../config/model-config-draft.js';
import { parseModelConfigDraft } from '../config/model-config-parse.js';
import type { ModelConfig } from '../config/model-config-types.js';
import type { ProviderName } from '../config/server-config.js';
import { isStepBackend, loadStep, STEP_BACKENDS, type LoadedStep } from '../backends/step-backend.js';
import { ensembleSpecFromJson } from '../ensemble/ensemble-spec.js';
import { ensemblePlan, ensembleProblems, singleModelPlan, type EnsembleSpec, type ExecutionPlan, type StepModel } from '../ensemble/execution-plan.js';
import { inModel, ServingError, withModel } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { TargetMetrics } from '../observability/metrics.js';
import { chooseProviders, type HostCapabilities, type ProviderChoice } from '../runtime/execution-providers.js';
import { readGraphSummary, type GraphSummary } from '../runtime/onnx-graph.js';
import { createModelSession, type ModelSession, type MoveOptions, type SessionOptions } from '../runtime/onnx-session.js';
import { MAIN_THREAD } from '../runtime/main-thread-session.js';
import type { RuntimePool } from '../runtime/runtime-pool.js';
import { DEFAULT_BATCHING, requestedInstances, resolveBatchPolicy, type BatchingDefaults, type BatchPolicy } from '../scheduler/batch-policy.js';
import { DynamicBatcher } from '../scheduler/dynamic-batcher.js';
import { systemClock } from '../clock.js';
import { HotInstances } from './hot-instances.js';
import { checkConfigAgainstGraph } from './config-check.js';
import { latestVersion, SessionExecutor, type LoadedModel, type LoadedVersion } from './loaded-model.js';
import type { ModelExecutor, ModelScheduler } from '../scheduler/model-scheduler.js';
import { ownLoadBusy, type QuietWindow } from '../runtime/quiet-window.js';
import { SequenceBatcher } from '../scheduler/sequence-batcher.js';
import { initialStateTensor } from '../scheduler/sequence-tensors.js';
import { SequenceTracker } from '../scheduler/sequence-tracker.js';
import type { Tensor } from '../protocol/tensor.js';
import { chooseEntryModel, scanRepository, type ModelDirectory, type RepositoryLayout } from './repository-layout.js';
import { providerHintsOf } from './provider-hints.js';
import {
  CREATION_PLACEMENT_MAX_FILE_BYTES,
  creationPlacement,
  DEFAULT_PLACEMENT,
  type ElasticInstances,
  type PlacementSettings,
} from '../runtime/session-placement.js';
import { filesBytes, type FilesBytes } from './package-size.js';
import { selectVersions } from './version-policy.js';

export interface LoadedPackage {
  readonly label: string;
  readonly dir: string;
  readonly entry: LoadedModel;
  readonly models: ReadonlyMap<string, LoadedModel>;
  readonly plan: ExecutionPlan;
  /** Live sequences and implicit-state bytes of its stateful models (scheduler/sequence-batcher.ts); absent in test fakes. */
  readonly sequences?: PackageSequences;
  /** The target's series every model of the package counts in (handed back by release); undefined = not counted. */
  readonly metrics: TargetMetrics | undefined;
  /** Stop the schedulers (waiting for running work) and release every session. */
  release(): Promise<void>;
}

/**
 * What the registry needs of a package's sequences: while any is live the
 * package is pinned (never evicted mid-sequence), and the state it holds is
 * counted in the memory budget.
 */
export class PackageSequences {
  live = 0;
  stateBytes = 0;
  /** Set by the model loader once the package holds its reservation (registry/model-loader.ts). */
  onChange: ((stateDelta: number, live: number) => void) | undefined;

  liveChanged(delta: number): void {
    this.live += delta;
    this.onChange?.(0, this.live);
  }

  stateChanged(delta: number): void {
    this.stateBytes += delta;
    this.onChange?.(delta, this.live);
  }
}

export interface PackageLoadDeps {
  readonly pool: RuntimePool;
  /** Server default for onnxruntime's intra-op threads per session (config `parameters` may override). */
  readonly intraOpThreads: number | undefined;
  readonly logger: Logger;
  readonly host: HostCapabilities;
  readonly serverProviders: readonly ProviderName[] | undefined;
  /** Server-wide batching defaults (env); DEFAULT_BATCHING when omitted. */
  readonly batching?: BatchingDefaults;
  /** MME_ALLOW_JS_BACKEND: false refuses packages with a `backend: "js"` step. Default true. */
  readonly allowJsBackend?: boolean;
  /** MME_JS_STEP_TIMEOUT_SECONDS: a js step's call deadline where its config sets none. */
  readonly jsStepTimeoutSeconds?: number;
  /** MME_JS_STEP_USER: who a js step runs as when the server is root; js-step-sandbox.ts's default when omitted. */
  readonly jsStepUser?: { readonly uid: number; readonly gid: number };
  /** Which sessions move to the main thread after warm-up (runtime/session-placement.ts); DEFAULT_PLACEMENT when omitted. */
  readonly placement?: PlacementSettings;
  /** The server-wide quiet window every session shares (runtime/quiet-window.ts); omitted: each model judges its own load. */
  readonly quiet?: QuietWindow;
  /** The server-wide bound on live sequences (MME_MAX_SEQUENCES) every sequence batcher shares; omitted: a private one of DEFAULT_MAX_SEQUENCES. */
  readonly sequences?: SequenceTracker;
  /** MME_CONFIG_MAX_BYTES: a larger config.pbtxt is refused unread; DEFAULT_CONFIG_MAX_BYTES when omitted. */
  readonly configMaxBytes?: number;
  /** MME_HOT_MODEL_MAX_INSTANCES: instances a hot model may grow to (registry/hot-instances.ts); omitted or 1: never grows. */
  readonly hotModelMaxInstances?: number;
}

/** What a loaded ONNX version's scheduling is made from (PackageBuilder.scheduling). */
interface VersionParts {
  readonly label: string;
  readonly name: string;
  readonly version: number;
  readonly config: ModelConfig;
  readonly draft: ModelConfigDraft;
  readonly policy: BatchPolicy;
  readonly initialStates: ReadonlyMap<string, Tensor>;
  readonly file: string;
  readonly sessionOptions: SessionOptions;
  readonly sessions: readonly ModelSession[];
  readonly executors: ModelExecutor[];
}

/** MME_MAX_SEQUENCES's default. */
export const DEFAULT_MAX_SEQUENCES = 4096;

export interface PackageLoadRequest {
  readonly dir: string;
  /** Told as the load enters each phase (registry/load-progress.ts): the repository index and the progress lines show it. */
  readonly onPhase?: (phase: LoadPhase) => void;
  /** Model/target name used in messages and logs. */
  readonly label: string;
  /** Name of a root-level model without a config name (e.g. the archive's base name). */
  readonly fallbackName: string;
  /** Choose this model as the entry instead of the automatic rule. */
  readonly preferredEntry?: string;
  /**
   * The target's series (observability/metrics.ts forTarget): schedulers count executions, rows, queue
   * time and batch sizes in each model version's cells. The package owns the handle from here: its
   * release (or a failed load) hands it back. Omitted = not counted.
   */
  readonly metrics?: TargetMetrics;
  /**
   * The `target` label of the package's series: the canonical target key, the SageMaker model name,
   * or the default model's label. The model loader turns it into `metrics` right before the build.
   */
  readonly seriesTarget?: string;
  /** Bytes of the files under a directory of the package, walked once per load (package-size.ts sizeMemo); omitted: walked when asked. */
  readonly sizeOf?: FilesBytes;
  /** The load's graphs of model files read so far, by version directory: placement reads each file once (model-loader.ts). */
  readonly graphs?: Map<string, GraphSummary>;
  /**
   * Aborted when the model is unloaded (DELETE, shutdown) while it loads: the
   * load stops at its next step (between models here; between stages in the
   * model loader) and throws the signal's reason, releasing what it built.
   */
  readonly signal?: AbortSignal;
}

/** The abort's reason when `signal` is aborted (what a load cancelled by an unload throws). */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw signal.reason;
}

const SUPPORTED_PLATFORMS = `onnxruntime_onnx (backend onnxruntime), ensemble, and the processing-step backends ${STEP_BACKENDS.join(', ')}`;

/**
 * Batches dispatched to one session at a time: one running and one waiting
 * in its runtime worker, so the worker starts the next batch the moment one
 * ends rather than idling while the main thread answers the batch that
 * ended and forms the next (a round trip the worker cannot overlap). No
 * memory is added: it is the same session. Measured on the 2-core bench box,
 * 256→1024→1024→16 MLP at 64 connections, one instance: 19.1k req/s with
 * one batch per instance, 21.3k with two; the tiny model was unchanged
 * (32.3k). The cost: a batch formed while another runs is taken from the
 * queue a batch earlier, so a request arriving then waits one batch longer
 * (and can no longer be cancelled or jump it by priority).
 */
const SESSION_BATCHES_PER_INSTANCE = 2;

/** Most instances a processing step may ask for: each is only a concurrency slot in this process. */
const MAX_STEP_INSTANCES = 64;

/** A config naming a processing-step backend (backends/): `backend: "image"`, `"tokenizer"`, `"js"`, ... */
function stepBackendOf(draft: ModelConfigDraft): string | undefined {
  return isStepBackend(draft.backend) && draft.platform === '' ? draft.backend : undefined;
}

async function modelFilePath(md: ModelDirectory, version: number, fileName: string): Promise<string> {
  const p = path.join(md.dir, String(version), fileName);
  try {
    const s = statSync(p);
    // Triton allows model.onnx to be a directory holding model.onnx plus external-data files.
    return s.isDirectory() ? path.join(p, 'model.onnx') : p;
  } catch {
    throw new ServingError('INVALID_MODEL', `'${md.name}' version ${version} has no ${fileName}`);
  }
}

/** Refuse another framework before looking for a model.onnx it would not have (e.g. backend "python", platform "tensorrt_plan"). */
function refuseOtherFramework(draft: ModelConfigDraft): void {
  const { backend, platform } = draft;
  if ((backend !== '' && backend !== 'onnxruntime') || (platform !== '' && platform !== 'onnxruntime_onnx')) {
    throw new ServingError(
      'INVALID_MODEL',
      `platform '${platform || '(none)'}' backend '${backend || '(none)'}' is not supported; onnx-mme serves ${SUPPORTED_PLATFORMS}`,
    );
  }
}

/**
 * The name a model of the package `pkg` goes by in messages and logs: the
 * package's own for a single-model package, `<package>/<model>` for each
 * model of a repository.
 */
export function modelLabelOf(pkg: Pick<PackageLoadRequest, 'label'>, layout: RepositoryLayout, md: ModelDirectory): string {
  return layout.singleModel ? pkg.label : `${pkg.label}/${md.name}`;
}

/**
 * The checks of a load that need no session (registry/package-survey.ts, the
 * start-up survey of a local source): config.pbtxt parsed, the platform one
 * onnx-mme serves, the versions the policy selects and their model files
 * present, an ensemble's steps present in the package. Throws the error the
 * load would, without the model's name (the caller names it: modelLabelOf).
 */
export async function preflightModel(layout: RepositoryLayout, md: ModelDirectory): Promise<void> {
  const draft = await parseModelConfigDraft(md.configText, { sourceName: `${md.name}/config.pbtxt`, directoryName: md.name });
  if (draft.platform === 'ensemble') {
    const names = new Set(layout.models.map((m) => m.name));
    const missing = (finishModelConfig(draft).ensembleSteps ?? []).map((s) => s.modelName).filter((n) => !names.has(n));
    if (missing.length > 0) throw new ServingError('INVALID_MODEL', `ensemble steps name models the package lacks: ${[...new Set(missing)].join(', ')}`);
    return;
  }
  if (stepBackendOf(draft) !== undefined) return;
  refuseOtherFramework(draft);
  const fileName = draft.defaultModelFilename || 'model.onnx';
  for (const version of selectVersions(md.versions, draft.versionPolicy)) await modelFilePath(md, version, fileName);
}

/** Exported for registry/package-check (the `onnx-mme validate` collecting mode); the server only uses loadPackage. */
export class PackageBuilder {
  private readonly models = new Map<string, LoadedModel>();
  private readonly sessions: ModelSession[] = [];
  /** Processing steps created so far (loaded or not): released by abort(). */
  private readonly steps: LoadedStep[] = [];
  private readonly loading = new Set<string>();
  readonly sequences = new PackageSequences();
  private readonly tracker: SequenceTracker;

  /** Builds the package of `request` (its name for messages, its series, its abort signal) from `layout`. */
  constructor(
    private readonly layout: RepositoryLayout,
    private readonly request: Pick<PackageLoadRequest, 'label' | 'metrics' | 'signal' | 'sizeOf' | 'graphs'>,
    private readonly deps: PackageLoadDeps,
  ) {
    this.tracker = deps.sequences ?? new SequenceTracker(DEFAULT_MAX_SEQUENCES);
  }

  async load(md: ModelDirectory): Promise<LoadedModel> {
    const done = this.models.get(md.name);
    if (done) return done;
    // Unloaded while loading: no further model's sessions are created (those made so far are released by the caller).
    throwIfAborted(this.request.signal);
    if (this.loading.has(md.name)) {
      throw new ServingError('INVALID_MODEL', `model '${this.request.label}': ensemble steps refer back to '${md.name}' (a cycle)`, {
        model: this.request.label,
      });
    }
    this.loading.add(md.name);
    // finally: a model that failed may be asked for again (the collecting check
    // goes on after a failure) and must not then look like a cycle.
    try {
      const sourceName = `${md.name}/config.pbtxt`;
      // A large config is parsed in the config thread: it must not hold /ping (config/model-config-parse.ts).
      const draft = await parseModelConfigDraft(md.configText, { sourceName, directoryName: md.name });
      // The one place a model's load errors get its name.
      const model = await withModel(this.labelOf(md), () =>
        draft.platform === 'ensemble' ? this.loadEnsemble(md, draft) : stepBackendOf(draft) !== undefined ? this.loadStep(md, draft) : this.loadOnnx(md, draft),
      );
      this.models.set(md.name, model);
      return model;
    } finally {
      this.loading.delete(md.name);
    }
  }

  private labelOf(md: ModelDirectory): string {
    return modelLabelOf(this.request, this.layout, md);
  }

  /** The server's batching defaults (env), or the env's own defaults for callers without a server config. */
  private get batching(): BatchingDefaults {
    return this.deps.batching ?? DEFAULT_BATCHING;
  }

  /** Models loaded so far, by directory name. */
  get loaded(): ReadonlyMap<string, LoadedModel> {
    return this.models;
  }

  private async loadEnsemble(md: ModelDirectory, draft: ModelConfigDraft): Promise<LoadedModel> {
    let config: ModelConfig;
    try {
      config = finishModelConfig(draft);
    } catch (err) {
      if (!(err instanceof ServingError)) throw err;
      // The config's own wiring is wrong; still check the steps against their models, so one error lists everything.
      const spec = ensembleSpecFromJson(draft.json, md.name);
      await this.loadStepModels(spec);
      const { problems } = ensembleProblems(spec, (name, version) => this.stepModel(name, version), { wiring: false });
      if (problems.length === 0) throw err;
      throw new ServingError('INVALID_MODEL', `${err.message}; ${problems.join('; ')}`, { model: err.model ?? md.name, cause: err });
    }
    await this.loadStepModels(config);
    this.warnIgnored(config, md, false);
    return { name: md.name, dir: md.dir, config, versions: new Map() };
  }

  private async loadStepModels(spec: EnsembleSpec): Promise<void> {
    for (const step of spec.ensembleSteps ?? []) {
      const dep = this.layout.models.find((m) => m.name === step.modelName);
      if (dep) await this.load(dep); // a missing one is reported by plan validation with the others
    }
  }

  /**
   * The loaded step model for an ensemble step, or undefined. Versions are
   * numbered from 1, so -1 (Triton's "latest") and 0 (model_version left out)
   * both mean the highest loaded version.
   */
  private stepModel(name: string, version: number): StepModel | undefined {
    const m = this.models.get(name);
    if (!m || m.config.platform === 'ensemble') return undefined;
    const v = version > 0 ? m.versions.get(version) : latestVersion(m);
    return v ? { config: m.config, version: v.version, scheduler: v.scheduler } : undefined;
  }

  /**
   * A processing step (backends/): the config is taken as written (there is
   * no graph to complete it from), each served version gets one LoadedStep,
   * and it is scheduled exactly like an ONNX model: its own DynamicBatcher,
   * with instance_group count batches at once (default 1).
   */
  private async loadStep(md: ModelDirectory, draft: ModelConfigDraft): Promise<LoadedModel> {
    const modelLabel = this.labelOf(md);
    const config = finishModelConfig(draft);
    this.warnIgnored(config, md, false);
    if (config.sequenceBatching !== undefined) {
      throw new ServingError('INVALID_MODEL', `sequence_batching is served for onnxruntime models only, not for backend '${config.backend}'`);
    }
    const versions = selectVersions(md.versions, config.versionPolicy);
    const policy = resolveBatchPolicy(config, draft.dynamicBatchingWritten, this.batching);
    const instances = Math.min(MAX_STEP_INSTANCES, requestedInstances(config.instanceGroup, true));
    const loaded = new Map<number, LoadedVersion>();
    for (const version of versions) {
      const step = await loadStep({
        config,
        modelDir: md.dir,
        versionDir: path.join(md.dir, String(version)),
        version,
        label: modelLabel,
        logger: this.deps.logger,
        allowJs: this.deps.allowJsBackend ?? true,
        ...(this.deps.jsStepTimeoutSeconds === undefined ? {} : { jsTimeoutSeconds: this.deps.jsStepTimeoutSeconds }),
        ...(this.deps.jsStepUser === undefined ? {} : { jsStepUser: this.deps.jsStepUser }),
      });
      this.steps.push(step);
      // Every instance shares the step: an instance is a slot for one batch in flight (steps are async, not thread-bound).
      const executor = this.reportingLoad(step);
      const executors: ModelExecutor[] = Array.from({ length: instances }, () => executor);
      const scheduler = this.batcher(modelLabel, md.name, version, policy, executors);
      loaded.set(version, {
        version,
        session: undefined,
        sessions: [],
        executors,
        scheduler,
        release: () => step.release(),
        backend: config.backend,
        ...(step.stopped ? { stopped: step.stopped } : {}),
      });
    }
    if (loaded.size === 0) throw new ServingError('INVALID_MODEL', 'no version to load');
    this.deps.logger.debug(
      { model: modelLabel, backend: config.backend, versions, instances, batching: policy.source, maxBatchSize: policy.maxBatchSize },
      'processing step loaded',
    );
    return { name: md.name, dir: md.dir, config, versions: loaded };
  }

  private async loadOnnx(md: ModelDirectory, draft: ModelConfigDraft): Promise<LoadedModel> {
    const modelLabel = this.labelOf(md);
    refuseOtherFramework(draft);
    const versions = selectVersions(md.versions, draft.versionPolicy);
    const fileName = draft.defaultModelFilename || 'model.onnx';
    const providerChoice = chooseProviders(providerHintsOf(draft), this.deps.serverProviders, this.deps.host);
    for (const w of providerChoice.warnings) this.deps.logger.warn({ model: modelLabel }, w);

    const sessionOptions = this.sessionOptions(draft, modelLabel, providerChoice);
    let config: ModelConfig | undefined;
    let policy: BatchPolicy | undefined;
    let initialStates: ReadonlyMap<string, Tensor> | undefined;
    let instances = 1;
    const loaded = new Map<number, LoadedVersion>();
    for (const version of versions) {
      const file = await modelFilePath(md, version, fileName);
      const mainThread = await this.creationThread(md, version, file, draft, config, providerChoice.providers[0]);
      const session = await createModelSession(file, mainThread === undefined ? sessionOptions : { ...sessionOptions, mainThread });
      this.sessions.push(session);
      if (!config) {
        // Auto-complete from the first loaded version's graph, as Triton does.
        config = completeModelConfig(draft, session, this.batching.autoCompleteMaxBatchSize);
        if (config.platform !== 'onnxruntime_onnx' && config.backend !== 'onnxruntime') {
          throw new ServingError(
            'INVALID_MODEL',
            `platform '${config.platform || '(none)'}' backend '${config.backend || '(none)'}' is not supported; onnx-mme serves ${SUPPORTED_PLATFORMS}`,
          );
        }
      }
      checkConfigAgainstGraph(config, session, version);
      // The user's own dynamic_batching block is Triton's knobs; none (or auto-complete's empty one) gets the server default.
      policy ??= resolveBatchPolicy(config, draft.dynamicBatchingWritten, this.batching);
      if (loaded.size === 0) instances = this.instanceCount(config, session, md);
      // One session per instance, each on its own worker: a worker runs one session at a
      // time and one session never overlaps its own runs (bench/README.md, "instance-overlap").
      const sessions = [session];
      while (sessions.length < instances) {
        const more = await createModelSession(file, { ...sessionOptions, avoidWorkers: new Set(sessions.map((s) => s.worker)) });
        this.sessions.push(more);
        sessions.push(more);
      }
      const cfg = config;
      const executors = sessions.map((s) => new SessionExecutor(s, cfg));
      initialStates ??= await this.initialStates(md, config);
      const scheduling = this.scheduling({
        label: modelLabel,
        name: md.name,
        version,
        config,
        draft,
        policy,
        initialStates,
        file,
        sessionOptions,
        sessions,
        executors,
      });
      loaded.set(version, { version, session, sessions, executors, ...scheduling });
    }
    if (!config || !policy) throw new ServingError('INVALID_MODEL', 'no version to load');
    this.warnIgnored(config, md, true);
    this.deps.logger.debug(
      {
        model: modelLabel,
        versions,
        provider: loaded.values().next().value?.session?.provider,
        instances,
        workers: loaded
          .values()
          .next()
          .value?.sessions.map((s) => s.worker),
        batching: policy.source,
        maxBatchSize: policy.maxBatchSize,
        preferredBatchSizes: policy.preferredBatchSizes,
        maxQueueDelayUs: policy.maxQueueDelayUs,
      },
      'model sessions created',
    );
    return { name: md.name, dir: md.dir, config, versions: loaded };
  }

  /**
   * Where a version's first session is created (runtime/session-placement.ts
   * creationPlacement): on the main thread when placement would put it there
   * only, decided from the graph its file declares, so no worker session is
   * made, warmed up and released for it. A model that is not a small CPU one
   * is created in its worker without reading anything; so is one whose
   * graph or config cannot be read ahead: its session's creation, or the
   * config's completion from it, then gives the error as for any model.
   * The graph read is kept in the load's `graphs` for placement after it.
   */
  private async creationThread(
    md: ModelDirectory,
    version: number,
    file: string,
    draft: ModelConfigDraft,
    completed: ModelConfig | undefined,
    provider: ProviderName | undefined,
  ): Promise<MoveOptions | undefined> {
    // Each session's creation is a step of its own in the event loop (store/small-io.ts yieldTurn).
    await yieldTurn();
    const sizeOf = this.request.sizeOf ?? filesBytes;
    const versionDir = path.join(md.dir, String(version));
    if (provider !== 'cpu' || (await sizeOf(versionDir)) > CREATION_PLACEMENT_MAX_FILE_BYTES) return undefined;
    let graph: GraphSummary;
    let config: ModelConfig;
    try {
      graph = readGraphSummary(await readModelFile(file));
      config = completed ?? completeModelConfig(draft, graph, this.batching.autoCompleteMaxBatchSize);
    } catch {
      return undefined;
    }
    this.request.graphs?.set(versionDir, graph);
    const instances = Math.min(requestedInstances(config.instanceGroup, true), Math.max(1, this.deps.pool.size));
    const placement = this.deps.placement ?? DEFAULT_PLACEMENT;
    const placed = { version, fileBytes: () => sizeOf(versionDir), graph: async () => graph };
    // A bad execution_thread: the placement after the load refuses it, naming the model.
    return creationPlacement(config, placed, placement, instances).catch(() => undefined);
  }

  /**
   * Sessions per version: what instance_group asks for, at most one per
   * runtime worker, since instances on one worker would take turns and only
   * add memory.
   */
  private instanceCount(config: ModelConfig, session: ModelSession, md: ModelDirectory): number {
    const wanted = requestedInstances(config.instanceGroup, session.provider === 'cpu');
    const workers = Math.max(1, this.deps.pool.size);
    if (wanted <= workers) return wanted;
    this.deps.logger.warn(
      { model: this.labelOf(md), instances: wanted, workers },
      `instance_group asks for ${wanted} instances but there are ${workers} runtime workers (MME_RUNTIME_WORKERS); ` +
        `loading ${workers}: a worker runs one session at a time, so more would only take memory`,
    );
    return workers;
  }

  /**
   * A processing step runs in-process, so it has no placement of its own, but
   * its busy batches count for the server's quiet window like a session's
   * (runtime/quiet-window.ts): a busy pipeline keeps main-thread copies idle.
   */
  private reportingLoad(step: ModelExecutor): ModelExecutor {
    const quiet = this.deps.quiet;
    if (quiet === undefined) return step;
    return {
      execute: (inputs, outputNames, load) => {
        if (ownLoadBusy(load)) quiet.markBusy();
        return step.execute(inputs, outputNames, load);
      },
    };
  }

  /** Logs each config field the server ignores (config/field-support.ts), and, for ONNX models, each `parameters` key onnxruntime is not given. */
  private warnIgnored(config: ModelConfig, md: ModelDirectory, onnx: boolean): void {
    const label = this.labelOf(md);
    for (const f of config.ignoredFields) this.deps.logger.warn({ model: label, field: f.path }, ignoredFieldMessage(f));
    if (!onnx) return;
    for (const key of ignoredParameterKeys(config.parameters)) {
      this.deps.logger.warn(
        { model: label, field: `parameters.${key}` },
        `config.pbtxt parameter '${key}' is ignored: onnx-mme reads only intra_op_thread_count, inter_op_thread_count and execution_thread for an ONNX model`,
      );
    }
  }

  /** How every session of the model is made: its providers, graph level and threads, with the server's defaults. */
  private sessionOptions(draft: ModelConfigDraft, label: string, providerChoice: ProviderChoice): SessionOptions {
    return {
      pool: this.deps.pool,
      providerChoice,
      graphLevel: draft.graphLevel,
      intraOpThreads: threadCountParameter(draft, 'intra_op_thread_count') ?? this.deps.intraOpThreads,
      interOpThreads: threadCountParameter(draft, 'inter_op_thread_count'),
      logger: this.deps.logger,
      model: label,
      ...(this.deps.quiet ? { quiet: this.deps.quiet } : {}),
    };
  }

  /** A version's scheduler: its sequence batcher, or its dynamic batcher and, for a model that may grow when hot, its elastic instances. */
  private scheduling(v: VersionParts): Pick<LoadedVersion, 'scheduler' | 'elastic' | 'release'> {
    const { label, name, version, config, executors } = v;
    if (config.sequenceBatching !== undefined) return { scheduler: this.sequenceBatcher(label, name, version, config, executors, v.initialStates) };
    const hot = this.hotInstances(v);
    const onSaturation = hot === undefined ? undefined : (saturated: boolean): void => hot.saturation(saturated);
    const scheduler = this.batcher(label, name, version, v.policy, executors, SESSION_BATCHES_PER_INSTANCE, onSaturation);
    if (hot === undefined) return { scheduler };
    return { scheduler, elastic: this.elastic(hot, scheduler, v), release: () => hot.release() };
  }

  /**
   * A version of a dynamic-batching model that may grow instances while hot (registry/hot-instances.ts): a CPU session
   * and no instance_group (the operator's count is kept as written); placement enables it for a model in the workers only.
   */
  private hotInstances(v: VersionParts): HotInstances | undefined {
    const { label, version } = v;
    const max = Math.min(this.deps.hotModelMaxInstances ?? 1, Math.max(1, this.deps.pool.size));
    // The completed config always has a group (Triton's normalisation); what counts is whether config.pbtxt wrote one.
    if (max <= 1 || v.sessions[0]!.provider !== 'cpu' || v.draft.instanceGroups.length > 0) return undefined;
    return new HotInstances({
      model: label,
      version,
      maxInstances: max,
      batchesPerInstance: SESSION_BATCHES_PER_INSTANCE,
      clock: systemClock,
      logger: this.deps.logger,
      ...(this.request.metrics ? { onChange: (delta: number) => this.request.metrics!.forModel(v.name, String(version)).instancesAdded(delta) } : {}),
    });
  }

  /** How a hot version grows: a session on a runtime worker none of its instances holds, booked as a main-thread copy is. */
  private elastic(hot: HotInstances, scheduler: DynamicBatcher, v: VersionParts): ElasticInstances {
    const { file, sessionOptions: options, config, sessions } = v;
    const versionDir = path.dirname(file);
    const pool = this.deps.pool;
    // The load's walk of the package already has the version's bytes (the figure a main-thread copy is booked at).
    const sizeOf = this.request.sizeOf ?? filesBytes;
    return {
      get workers() {
        return hot.addedWorkers;
      },
      enable: (book) =>
        hot.enable(scheduler, async () => {
          const used = new Set([...sessions.map((s) => s.worker), ...hot.addedWorkers]);
          if (used.has(MAIN_THREAD)) return 'never';
          if (used.size >= pool.size) return 'no room';
          const booked = book.tryGrow(await sizeOf(versionDir));
          if (booked === undefined) return 'no room';
          const release = async (s?: ModelSession): Promise<void> => {
            await s?.release();
            book.shrink(booked);
          };
          let added: ModelSession;
          try {
            added = await createModelSession(file, { ...options, avoidWorkers: used });
          } catch (err) {
            await release();
            throw err;
          }
          if (used.has(added.worker)) {
            await release(added);
            return 'no room';
          }
          return { executor: new SessionExecutor(added, config), worker: added.worker, release: () => release(added) };
        }),
    };
  }

  /** The one scheduler every model version runs through, ONNX or processing step alike. */
  private batcher(
    modelLabel: string,
    name: string,
    version: number,
    policy: BatchPolicy,
    executors: ModelExecutor[],
    batchesPerInstance = 1,
    onSaturation?: (saturated: boolean) => void,
  ): DynamicBatcher {
    return new DynamicBatcher({
      model: modelLabel,
      policy,
      instances: executors,
      batchesPerInstance,
      logger: this.deps.logger,
      ...(onSaturation ? { onSaturation } : {}),
      ...(this.request.metrics ? { metrics: this.request.metrics.forModel(name, String(version)) } : {}),
    });
  }

  /** Each state input's tensor at the start of a sequence (zeros, or the initial_state data_file from `initial_state/`). */
  private async initialStates(md: ModelDirectory, config: ModelConfig): Promise<ReadonlyMap<string, Tensor>> {
    const out = new Map<string, Tensor>();
    for (const state of config.sequenceBatching?.states ?? []) {
      const source = state.initialState?.source;
      let bytes: Uint8Array | undefined;
      if (source?.kind === 'file') {
        try {
          bytes = await readModelFile(path.join(md.dir, 'initial_state', source.file));
        } catch {
          throw new ServingError(
            'INVALID_MODEL',
            `initial_state data_file '${source.file}' of state '${state.inputName}' is missing from the model's initial_state/ folder`,
          );
        }
      }
      out.set(state.inputName, initialStateTensor(state, config.maxBatchSize > 0, bytes, this.labelOf(md)));
    }
    return out;
  }

  /** A stateful model's scheduler (config sequence_batching): scheduler/sequence-batcher.ts. */
  private sequenceBatcher(
    modelLabel: string,
    name: string,
    version: number,
    config: ModelConfig,
    executors: ModelExecutor[],
    initialStates: ReadonlyMap<string, Tensor>,
  ): ModelScheduler {
    const cells = this.request.metrics?.forModel(name, String(version));
    const sequences = this.sequences;
    return new SequenceBatcher({
      model: modelLabel,
      config: config.sequenceBatching!,
      maxBatchSize: config.maxBatchSize,
      instances: executors,
      batchesPerInstance: SESSION_BATCHES_PER_INSTANCE,
      initialStates,
      tracker: this.tracker,
      maxQueued: this.batching.maxQueueSize,
      onStateBytes: (delta) => sequences.stateChanged(delta),
      logger: this.deps.logger,
      metrics: {
        ...(cells ? { batch: cells } : {}),
        liveChanged: (delta) => {
          sequences.liveChanged(delta);
          cells?.sequenceLive(delta);
        },
        slotWait: () => cells?.sequenceSlotWait(),
        ended: (reason) => cells?.sequenceEnded(reason),
      },
    });
  }

  plan(entry: LoadedModel): ExecutionPlan {
    if (entry.config.platform !== 'ensemble') {
      const v = latestVersion(entry)!;
      return singleModelPlan(entry.name, { config: entry.config, version: v.version, scheduler: v.scheduler });
    }
    return ensemblePlan(entry.config, (name, version) => this.stepModel(name, version));
  }

  packaged(entry: LoadedModel, dir: string): LoadedPackage {
    const plan = this.plan(entry);
    const models = new Map(this.models);
    let released: Promise<void> | undefined;
    const metrics = this.request.metrics;
    if (metrics !== undefined) {
      metrics.setEntryModel(entry.name);
      // Every served version has its cells from the start (an ensemble has no scheduler to make them): statistics list them before any traffic.
      const versions = entry.versions.size > 0 ? [...entry.versions.keys()] : [latestVersion(entry)?.version ?? 1];
      for (const v of versions) metrics.forModel(entry.name, String(v));
    }
    return {
      label: this.request.label,
      dir,
      entry,
      models,
      plan,
      sequences: this.sequences,
      metrics,
      // The series go only after the schedulers stopped: nothing counts in them afterwards.
      release: () => (released ??= releaseModels(models).finally(() => metrics?.release())),
    };
  }

  async abort(): Promise<void> {
    await Promise.allSettled([...this.sessions.map((s) => s.release()), ...this.steps.map((s) => s.release())]);
  }

  /** Stop the schedulers of every loaded model, then release every session created (loaded or not). */
  async releaseAll(): Promise<void> {
    await releaseModels(this.models);
    await this.abort();
  }
}

async function releaseModels(models: ReadonlyMap<string, LoadedModel>): Promise<void> {
  const all = [...models.values()].flatMap((m) => [...m.versions.values()]);
  await Promise.allSettled(all.map((v) => v.scheduler.close()));
  await Promise.allSettled(all.flatMap((v) => [...v.sessions.map((s) => s.release()), ...(v.release ? [v.release()] : [])]));
}

/** The package's sessions, schedulers and plan; its errors name the model (request.label) once, here. */
export async function loadPackage(request: PackageLoadRequest, deps: PackageLoadDeps): Promise<LoadedPackage> {
  let builder: PackageBuilder | undefined;
  try {
    const layout = await scanRepository(request.dir, request.fallbackName, deps.configMaxBytes === undefined ? {} : { configMaxBytes: deps.configMaxBytes });
    const entryDir = chooseEntryModel(layout, request.preferredEntry);
    builder = new PackageBuilder(layout, request, deps);
    const entry = await builder.load(entryDir);
    return builder.packaged(entry, layout.root);
  } catch (err) {
    // Step models that loaded before the failure have schedulers too: stop them, then free every session.
    await builder?.releaseAll();
    request.metrics?.release();
    throw inModel(err, request.label);
  }
}
