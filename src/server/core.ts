/**
 * @module server/core
 * The server's core for a parsed ServerConfig, before anything listens: the
 * model source and disk cache, the runtime workers, the memory budget and its
 * manager, the registry with its loader, and the inference service. The
 * transports (server/listeners.ts, the HTTP app) are built on a Core, and
 * shutdown (server/shutdown.ts) releases it.
 */
import os from 'node:os';
import path from 'node:path';
import { sweepLeftoverSandboxes } from '../backends/js-step-leftovers.js';
import { DEFAULT_RUNTIME_WORKER_NICE, type ServerConfig } from '../config/server-config.js';
import { isS3Uri } from '../config/s3-uri.js';
import type { HostRedactor } from '../errors.js';
import { tritonMetadataAliases } from '../grpc/access.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { MemoryManager } from '../registry/memory-manager.js';
import { createModelLoader, type PackageModelLoader } from '../registry/model-loader.js';
import { ModelRegistry } from '../registry/model-registry.js';
import { detectHostCapabilities, type HostCapabilities } from '../runtime/execution-providers.js';
import { MainThreadCopies } from '../runtime/main-thread-copies.js';
import { gpuMemory, hostMemoryBytes, modelMemoryBytes, takeBaseline, type MemoryBaseline } from '../runtime/memory-usage.js';
import { QUIET_WINDOW_US, QuietWindow, type FrontLoad } from '../runtime/quiet-window.js';
import { RuntimePool } from '../runtime/runtime-pool.js';
import { SequenceTracker } from '../scheduler/sequence-tracker.js';
import { AccessPolicy } from '../service/access-policy.js';
import { InferenceService } from '../service/inference-service.js';
import { ResponseCache } from '../service/response-cache.js';
import type { DiskCache } from '../store/disk-cache.js';
import type { ModelSource } from '../store/model-source.js';
import { createModelSource, hostRedactor, localSourcePresent, openCache } from './model-source.js';
import { loadOptionalModules, type OptionalModules } from './optional-modules.js';

/** The memory budget for resident models, and where its figure came from (logged). */
export interface MemoryBudget {
  readonly bytes: number;
  readonly from: string;
}

/** Everything the transports serve from, and what shutdown releases. */
export interface Core {
  readonly host: HostCapabilities;
  readonly cache: DiskCache;
  readonly source: ModelSource;
  /** Whether the model source was there at start-up (a local one may be absent where a platform loads the models). */
  readonly sourcePresent: boolean;
  readonly pool: RuntimePool;
  readonly budget: MemoryBudget;
  readonly memory: MemoryManager;
  readonly httpAccess: AccessPolicy;
  readonly grpcAccess: AccessPolicy;
  readonly registry: ModelRegistry;
  readonly service: InferenceService;
  readonly redactor: HostRedactor;
  /** What only this configuration uses (S3, gRPC), loaded before the idle figure (server/optional-modules.ts). */
  readonly modules: OptionalModules;
}

/** How often measured model memory is reconciled with the budget (memory-manager.ts); a read of /proc and the heap's size. */
const RECONCILE_INTERVAL_MS = 1000;

/**
 * Builds the core in start-up's order: a source or cache the operator named wrongly stops start-up
 * before anything costly starts; onnxruntime's fixed costs are paid before the idle figure is taken.
 * `front` says whether the transports' front has concurrent work (service/admission.ts): the
 * runtime counts the server busy then (runtime/quiet-window.ts).
 */
export async function buildCore(config: ServerConfig, logger: Logger, metrics: Metrics, front: FrontLoad): Promise<Core> {
  const sourcePresent = isS3Uri(config.modelSource) || (await localSourcePresent(config, logger));
  const cache = await openCache(config, logger, metrics);
  await sweepJsStepLeftovers(logger);
  const host = detectHostCapabilities();
  const pool = new RuntimePool(config.runtimeWorkers, { tensorrtCacheDir: path.join(config.cacheDir, '.tensorrt'), nice: config.runtimeWorkerNice });
  // onnxruntime's fixed per-thread cost, paid before the idle figure is taken (runtime/prime.ts).
  await pool.prime(config.intraOpThreads, config.mainThreadMaxRunUs > 0).catch((err: unknown) => {
    logger.warn({ err: (err as Error).message }, 'could not prime onnxruntime at start-up; its fixed cost will be paid by the first model loaded');
  });
  warnWorkerNice(config, pool, logger);
  const modules = await loadOptionalModules(config);
  const source = createModelSource(config, { logger, cache, metrics, s3: modules.s3 });
  const budget = await memoryBudget(config, host, logger);
  // Idle: after start-up, with onnxruntime's fixed costs paid (pool.prime above); model memory is measured above it.
  const idle = takeBaseline();
  const memory = new MemoryManager({
    budgetBytes: budget.bytes,
    maxModels: config.maxLoadedModels,
    waitMs: config.memoryWaitMs,
    logger,
    metrics,
    measure: () => modelMemoryBytes(idle),
  });
  memory.startReconciling(RECONCILE_INTERVAL_MS);
  const httpAccess = new AccessPolicy({ modelControl: config.modelControl, restrictions: config.httpRestrictedApi, setting: 'MME_HTTP_RESTRICTED_API' });
  const grpcAccess = new AccessPolicy({
    modelControl: config.modelControl,
    restrictions: config.grpcRestrictedProtocol,
    setting: 'MME_GRPC_RESTRICTED_PROTOCOL',
    aliases: tritonMetadataAliases,
  });
  // Model names are the model-repository group's: where a key guards it, an inference answer does not list them either.
  const listNames = ![...httpAccess.restrictedGroups, ...grpcAccess.restrictedGroups].includes('model-repository');
  const loader = createLoader(config, { memory, host, pool, idle, logger, metrics, front });
  const registry = createRegistry(config, { source, memory, loader, logger, metrics, listNames });
  const service = new InferenceService({
    registry,
    metrics,
    maxInflight: config.maxInflightRequests,
    maxQueueSize: config.maxQueueSize,
    maxResponseBytes: config.maxResponseBytes,
    ...(config.responseCacheBytes > 0 ? { responseCache: new ResponseCache(config.responseCacheBytes) } : {}),
  });
  // A dead runtime worker is replaced by the pool; the models it held are dropped so the next request reloads them.
  pool.onWorkerLost((index, cause) => {
    logger.error({ worker: index, cause, recentDeaths: pool.recentDeaths }, 'runtime worker died; replaced');
    registry.dropSessionsOn(index, cause);
  });
  const redactor = hostRedactor(config);
  return { host, cache, source, sourcePresent, pool, budget, memory, httpAccess, grpcAccess, registry, service, redactor, modules };
}

/** MME_RUNTIME_WORKER_NICE not taken: not Linux, or the workers' setpriority failed (they run at the main thread's priority). */
function warnWorkerNice(config: ServerConfig, pool: RuntimePool, logger: Logger): void {
  if (config.runtimeWorkerNice === 0) return;
  if (process.platform !== 'linux') {
    // The default is no request of the operator's: said at info, where a value they chose is a warning.
    const level = config.runtimeWorkerNice === DEFAULT_RUNTIME_WORKER_NICE ? 'info' : 'warn';
    logger[level]({ setting: 'MME_RUNTIME_WORKER_NICE', platform: process.platform }, 'MME_RUNTIME_WORKER_NICE is ignored: it applies on Linux only');
    return;
  }
  for (const err of pool.niceErrors)
    logger.warn(
      { setting: 'MME_RUNTIME_WORKER_NICE', err },
      "the runtime workers could not take MME_RUNTIME_WORKER_NICE; they run at the main thread's priority",
    );
}

/** The js-step sandboxes a server that ended without unloading its models left in the temp directory (backends/js-step-leftovers.ts). */
async function sweepJsStepLeftovers(logger: Logger): Promise<void> {
  const removed = await sweepLeftoverSandboxes(os.tmpdir());
  if (removed > 0)
    logger.info({ removed }, `removed ${removed} js-step sandbox directories left in the temp directory by a server that ended without unloading its models`);
}

interface LoaderParts {
  readonly memory: MemoryManager;
  readonly host: HostCapabilities;
  readonly pool: RuntimePool;
  readonly idle: MemoryBaseline;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly front: FrontLoad;
}

/** The model loader with the server's settings: how sessions are made, batched, placed and measured. */
function createLoader(config: ServerConfig, { memory, host, pool, idle, logger, metrics, front }: LoaderParts): PackageModelLoader {
  return createModelLoader({
    memory,
    gpuVisible: host.gpuVisible,
    reclaim: () => pool.reclaim(),
    logger,
    metrics,
    concurrency: config.loadConcurrency,
    idleRssBytes: idle.rssBytes,
    copies: new MainThreadCopies(config.mainThreadCopies),
    loadDeps: {
      pool,
      intraOpThreads: config.intraOpThreads,
      logger,
      host,
      serverProviders: config.executionProviders,
      batching: {
        enabled: config.dynamicBatching,
        maxQueueDelayUs: config.batchMaxDelayUs,
        maxBatchSize: config.batchMaxSize,
        maxQueueSize: config.maxQueueSize,
        autoCompleteMaxBatchSize: config.defaultMaxBatchSize,
      },
      allowJsBackend: config.allowJsBackend,
      jsStepTimeoutSeconds: config.jsStepTimeoutSeconds,
      jsStepUser: config.jsStepUser,
      placement: { mainThreadMaxRunUs: config.mainThreadMaxRunUs, mainThreadOnlyMaxRunUs: config.mainThreadOnlyMaxRunUs, cpuCount: config.cpuCount },
      quiet: new QuietWindow(QUIET_WINDOW_US, undefined, front),
      sequences: new SequenceTracker(config.maxSequences),
      configMaxBytes: config.configMaxBytes,
      hotModelMaxInstances: config.hotModelMaxInstances,
    },
  });
}

interface RegistryParts {
  readonly source: ModelSource;
  readonly memory: MemoryManager;
  readonly loader: PackageModelLoader;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly listNames: boolean;
}

function createRegistry(config: ServerConfig, { source, memory, loader, logger, metrics, listNames }: RegistryParts): ModelRegistry {
  return new ModelRegistry({
    source,
    // An S3 prefix is not a repository: without a header only MME_DEFAULT_MODEL (a target) can be served.
    defaultRoot: isS3Uri(config.modelSource) ? undefined : config.modelSource,
    defaultModel: config.defaultModel,
    revalidateMs: config.revalidateMs,
    missingTtlMs: config.missingTargetTtlMs,
    missingLookupsPerSecond: config.missingTargetLookupsPerSecond,
    progressIntervalMs: config.progressLogMs,
    memory,
    loader,
    logger,
    metrics,
    // A SageMaker url's tree may hold no more entries than an archive may (registry/managed-url.ts).
    managedUrls: {
      maxEntries: config.archiveMaxEntries,
      cacheDir: config.cacheDir,
      ...(config.modelUrlRoots === undefined ? {} : { roots: config.modelUrlRoots }),
    },
    configMaxBytes: config.configMaxBytes,
    listNames,
  });
}

/** Share of the host's (container's) memory the default budget gives models; the rest is the server, requests and the allocator's slack. */
const HOST_MEMORY_SHARE = 0.7;
/** Share of GPU memory when sessions run on CUDA by default (CUDA context and workspaces need the rest). */
const GPU_MEMORY_SHARE = 0.8;

/**
 * MME_MEMORY_BUDGET_BYTES, else a share of the memory the models will live in:
 * GPU memory when sessions default to CUDA here, else the container limit (or RAM).
 */
async function memoryBudget(config: ServerConfig, host: HostCapabilities, logger: Logger): Promise<MemoryBudget> {
  if (config.memoryBudgetBytes !== undefined) return { bytes: config.memoryBudgetBytes, from: 'MME_MEMORY_BUDGET_BYTES' };
  const wantsGpu = (config.executionProviders ?? ['cuda']).some((p) => p !== 'cpu');
  if (wantsGpu && host.gpuVisible && host.installed.has('cuda')) {
    const gpu = await gpuMemory(0);
    if (gpu) return { bytes: Math.floor(gpu.totalBytes * GPU_MEMORY_SHARE), from: 'GPU memory (nvidia-smi)' };
    logger.warn('a GPU is visible but nvidia-smi did not answer: the memory budget falls back to host memory');
  }
  return { bytes: Math.floor(hostMemoryBytes() * HOST_MEMORY_SHARE), from: 'host memory (cgroup limit or RAM)' };
}
