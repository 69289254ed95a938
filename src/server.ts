/**
 * @module server
 * Wires the components for a parsed ServerConfig, listens, and knows how to
 * drain. No env reads and no signal handlers here (main.ts owns those), so
 * tests start real servers on port 0 exactly as production does.
 */
import { cancellationOf } from './cancellation.js';
import { SequenceTracker } from './scheduler/sequence-tracker.js';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { createApp } from './app.js';
import { Admission } from './http/admission.js';
import { createMetricsListener } from './http/metrics-listener.js';
import { startGrpcListener, type GrpcListener } from './grpc/grpc-server.js';
import type { ServerConfig } from './config/server-config.js';
import type { Logger } from './observability/logger.js';
import { createMetrics, type Metrics } from './observability/metrics.js';
import { MemoryManager } from './registry/memory-manager.js';
import { createModelLoader } from './registry/model-loader.js';
import { ModelRegistry } from './registry/model-registry.js';
import { gpuMemory, hostMemoryBytes, modelMemoryBytes, takeBaseline } from './runtime/memory-usage.js';
import { detectHostCapabilities } from './runtime/execution-providers.js';
import { MainThreadCopies } from './runtime/main-thread-copies.js';
import { QuietWindow } from './runtime/quiet-window.js';
import { DEATH_WINDOW_MS, RuntimePool } from './runtime/runtime-pool.js';
import { InferenceService } from './service/inference-service.js';
import { ResponseCache } from './service/response-cache.js';
import { DiskCache } from './store/disk-cache.js';
import { isS3Uri } from './config/s3-uri.js';
import { LocalModelSource } from './store/local-source.js';
import type { ModelSource } from './store/model-source.js';
import { S3ModelSource } from './store/s3-source.js';

export interface RunningServer {
  readonly server: Server;
  readonly port: number;
  /** The separate /metrics listener's port (MME_METRICS_PORT), when there is one. */
  readonly metricsPort: number | undefined;
  /** The KServe v2 gRPC listener's port (MME_GRPC_PORT), when there is one. */
  readonly grpcPort: number | undefined;
  readonly registry: ModelRegistry;
  readonly metrics: Metrics;
  readonly service: InferenceService;
  /** The runtime workers (supervised: a dead one is replaced). */
  readonly pool: RuntimePool;
  /**
   * Drain (not ready, still serving, for MME_DRAIN_SECONDS), then stop accepting, let in-flight
   * requests finish and release every session, all by MME_SHUTDOWN_TIMEOUT_SECONDS.
   */
  shutdown(reason: string): Promise<void>;
  /** Ends the drain period now (a second signal): the rest of the shutdown keeps its deadline. */
  endDrain(): void;
}

function createModelSource(config: ServerConfig, logger: Logger, cache: DiskCache, metrics: Metrics): ModelSource {
  const limits = { maxBytes: config.archiveMaxBytes, maxEntries: config.archiveMaxEntries, maxRatio: config.archiveMaxRatio };
  if (!isS3Uri(config.modelSource)) return new LocalModelSource({ root: config.modelSource, cacheDir: config.cacheDir, cache, limits, logger });
  return new S3ModelSource({
    uri: config.modelSource,
    cacheDir: config.cacheDir,
    cache,
    limits,
    logger,
    minProgress: { bytesPerSecond: config.s3MinBytesPerSecond, windowMs: config.s3ProgressWindowMs },
    onDownload: (event) => {
      metrics.modelDownloads.inc({ outcome: 'success' });
      metrics.modelDownloadBytes.inc(event.bytes);
    },
    ...(config.awsRegion === undefined ? {} : { region: config.awsRegion }),
    ...(config.s3Endpoint === undefined ? {} : { endpoint: config.s3Endpoint }),
  });
}

export async function startServer(
  config: ServerConfig,
  logger: Logger,
  metrics: Metrics = createMetrics({ collectProcessMetrics: true, maxTargets: config.metricsMaxTargets }),
): Promise<RunningServer> {
  // Nothing silently ignored: a misspelt or foreign setting is named once, with what it probably meant.
  for (const n of config.environmentNotices) logger[n.level]({ env: n.name }, n.message);
  await mkdir(config.cacheDir, { recursive: true });
  // Sweeps what a crash left half-written and indexes complete entries for reuse, before serving.
  const cache = new DiskCache({ dir: config.cacheDir, maxBytes: config.cacheMaxBytes, logger, metrics });
  await cache.open();
  const host = detectHostCapabilities();
  const pool = new RuntimePool(config.runtimeWorkers, { tensorrtCacheDir: path.join(config.cacheDir, '.tensorrt') });
  // onnxruntime's fixed per-thread cost, paid before the idle figure is taken (runtime/prime.ts).
  await pool.prime(config.intraOpThreads, config.mainThreadMaxRunUs > 0).catch((err: unknown) => {
    logger.warn({ err: (err as Error).message }, 'could not prime onnxruntime at start-up; its fixed cost will be paid by the first model loaded');
  });
  const source = createModelSource(config, logger, cache, metrics);
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
  const registry = new ModelRegistry({
    source,
    // An S3 prefix is not a repository: without a header only MME_DEFAULT_MODEL (a target) can be served.
    defaultRoot: isS3Uri(config.modelSource) ? undefined : config.modelSource,
    defaultModel: config.defaultModel,
    revalidateMs: config.revalidateMs,
    memory,
    loader: createModelLoader({
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
        },
        allowJsBackend: config.allowJsBackend,
        jsStepTimeoutSeconds: config.jsStepTimeoutSeconds,
        jsStepUser: config.jsStepUser,
        placement: { mainThreadMaxRunUs: config.mainThreadMaxRunUs, mainThreadOnlyMaxRunUs: config.mainThreadOnlyMaxRunUs, cpuCount: config.cpuCount },
        quiet: new QuietWindow(),
        sequences: new SequenceTracker(config.maxSequences),
        configMaxBytes: config.configMaxBytes,
      },
    }),
    logger,
    metrics,
    // A SageMaker url's tree may hold no more entries than an archive may (registry/managed-url.ts).
    managedUrls: {
      maxEntries: config.archiveMaxEntries,
      cacheDir: config.cacheDir,
      ...(config.modelUrlRoots === undefined ? {} : { roots: config.modelUrlRoots }),
    },
    configMaxBytes: config.configMaxBytes,
  });
  const service = new InferenceService({
    registry,
    metrics,
    maxInflight: config.maxInflightRequests,
    maxQueueSize: config.maxQueueSize,
    ...(config.responseCacheBytes > 0 ? { responseCache: new ResponseCache(config.responseCacheBytes) } : {}),
  });
  // Two phases after SIGTERM: `draining` (not ready, every request still served) from the signal on,
  // `shuttingDown` (new work refused, the listener closed) once the drain period is over.
  let draining = false;
  let shuttingDown = false;
  const inflight = { count: 0 };
  const admission = new Admission({
    maxInflightBytes: config.maxInflightBytes ?? Math.max(4 * config.bodyLimitBytes, Math.floor(hostMemoryBytes() * INFLIGHT_MEMORY_SHARE)),
    maxQueued: config.maxInflightRequests,
    maxRequests: config.maxInflightRequests,
  });
  // A dead runtime worker is replaced by the pool; the models it held are dropped so the next request reloads them.
  pool.onWorkerLost((index, cause) => {
    logger.error({ worker: index, cause, recentDeaths: pool.recentDeaths }, 'runtime worker died; replaced');
    registry.dropSessionsOn(index, cause);
  });
  const unhealthy = (): string | undefined =>
    pool.healthy ? undefined : `runtime workers keep dying (${pool.recentDeaths} in the last ${DEATH_WINDOW_MS / 1000} s); this instance should be replaced`;
  const app = createApp({
    unhealthy,
    admission,
    service,
    metrics,
    logger,
    bodyLimitBytes: config.bodyLimitBytes,
    defaultAccept: config.defaultAccept,
    isShuttingDown: () => shuttingDown,
    isDraining: () => draining,
    inflight,
    accessLog: config.accessLog,
    slowRequestMs: config.slowRequestMs,
  });

  const server = await new Promise<Server>((resolve, reject) => {
    // An accept queue as deep as the connection cap (the kernel caps it at net.core.somaxconn): a burst of
    // new connections then waits in it, instead of being dropped and retried after 1, 3, 7 s of SYN backoff.
    const s = app.listen(config.port, config.host, () => resolve(s), {
      backlog: config.maxConnections,
      // Peers that stall: headers and whole requests must arrive in time (node answers 408 and closes).
      headersTimeoutMs: config.headersTimeoutMs,
      requestTimeoutMs: config.requestTimeoutMs,
    });
    s.once('error', reject);
  });
  // Keep-alive longer than typical load balancers' idle timeout, so they close first.
  server.keepAliveTimeout = 65_000;
  // Connections are capped: node closes those beyond at once.
  server.maxConnections = config.maxConnections;
  // During the drain every answer ends its connection, so a keep-alive peer (a balancer's pool) reconnects,
  // and finds another instance. Answers already under way when the drain begins get the same (see shutdown).
  const answering = new Set<ServerResponse>();
  server.prependListener('request', (_req: IncomingMessage, res: ServerResponse) => {
    if (draining) {
      res.shouldKeepAlive = false;
      return;
    }
    answering.add(res);
    res.once('close', () => answering.delete(res));
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  // MME_METRICS_PORT: a second listener for scrapers (inside SAGEMAKER_SAFE_PORT_RANGE, checked at config time).
  let metricsServer: Server | undefined;
  let metricsPort: number | undefined;
  if (config.metricsPort !== undefined) {
    const listener = createMetricsListener(metrics, logger);
    try {
      await new Promise<void>((resolve, reject) => {
        listener.once('error', reject);
        listener.listen(config.metricsPort, config.host, () => resolve());
      });
    } catch (err) {
      // Nothing half-started: the main listener and the workers go too, and startup fails with the cause.
      await new Promise<void>((resolve) => server.close(() => resolve()));
      memory.stop();
      await pool.close();
      throw err;
    }
    metricsServer = listener;
    const a = listener.address();
    metricsPort = typeof a === 'object' && a ? a.port : config.metricsPort;
  }
  // MME_GRPC_PORT: the same service layer, models, limits and drain as HTTP, over gRPC.
  let grpc: GrpcListener | undefined;
  if (config.grpcPort !== undefined) {
    try {
      grpc = await startGrpcListener({
        host: config.host,
        port: config.grpcPort,
        maxMessageBytes: config.bodyLimitBytes,
        tls:
          config.grpcTlsCertFile === undefined || config.grpcTlsKeyFile === undefined
            ? undefined
            : { certFile: config.grpcTlsCertFile, keyFile: config.grpcTlsKeyFile, caFile: config.grpcTlsCaFile },
        service,
        metrics,
        logger,
        isShuttingDown: () => shuttingDown,
        isDraining: () => draining,
        inflight,
        modelMesh: config.modelMesh ? { capacityBytes: budget.bytes, maxLoadingConcurrency: Math.max(1, pool.size) } : undefined,
      });
    } catch (err) {
      // Nothing half-started, as for the metrics listener.
      await new Promise<void>((resolve) => server.close(() => resolve()));
      if (metricsServer) await new Promise<void>((resolve) => metricsServer!.close(() => resolve()));
      await pool.close();
      throw err;
    }
  }
  const grpcPort = grpc?.port;
  logger.info(
    {
      port,
      metricsPort,
      grpcPort,
      grpcTls: grpc?.tls,
      modelMesh: config.modelMesh,
      source: source.description,
      cacheDir: config.cacheDir,
      multiModel: config.multiModel,
      defaultModel: config.defaultModel,
      providers: config.executionProviders ?? 'auto',
      ortTelemetry: config.ortTelemetry,
      cpuCount: config.cpuCount,
      runtimeWorkers: pool.size,
      loadConcurrency: config.loadConcurrency,
      mainThreadCopies: config.mainThreadCopies,
      memoryBudgetBytes: budget.bytes,
      memoryBudgetFrom: budget.from,
      maxLoadedModels: config.maxLoadedModels,
      intraOpThreads: config.intraOpThreads ?? 'onnxruntime default',
      dynamicBatching: config.dynamicBatching,
      mainThreadMaxRunUs: config.mainThreadMaxRunUs,
      mainThreadOnlyMaxRunUs: config.mainThreadOnlyMaxRunUs,
      responseCacheBytes: config.responseCacheBytes,
      maxInflightBytes: admission.limit,
      maxConnections: config.maxConnections,
      gpuVisible: host.gpuVisible,
      installedProviders: [...host.installed],
    },
    'onnx-mme listening',
  );
  if (config.ortTelemetry) {
    logger.warn("MME_ORT_TELEMETRY=true: onnxruntime's telemetry is on; it stores events under $HOME/.cache/Microsoft and uploads them to Microsoft");
  }

  // Which model answers requests without a target is decided once, here (registry/default-model.ts).
  registry.chooseDefault().then(
    (choice) =>
      logger.info(
        { defaultModel: choice.kind === 'target' ? choice.target : choice.kind === 'repository' ? choice.label : undefined, kind: choice.kind },
        choice.kind === 'none' ? 'no default model: requests without a target model are answered 404' : 'default model chosen',
      ),
    (err: unknown) =>
      logger.warn({ err: (err as Error).message }, 'could not choose the default model at start-up; the first request without a target tries again'),
  );
  const preloading = preload(config.preload, registry, logger);

  let stopping: Promise<void> | undefined;
  let cutDrain: (() => void) | undefined;
  // Every wait below ends by one deadline (MME_SHUTDOWN_TIMEOUT_SECONDS after the signal), whatever is
  // stuck: a request on a trickling download, a load that never ends, a worker that does not answer.
  // First the drain period (config.drainMs, always shorter than the deadline): not ready, still serving,
  // so balancers take the instance out on their own health checks before anything is refused.
  // Then requests drain until a reserve before the deadline, so releasing sessions and workers gets time of its own.
  const shutdown = (reason: string): Promise<void> =>
    (stopping ??= (async () => {
      const deadline = performance.now() + config.shutdownTimeoutMs;
      const drainUntil = deadline - Math.min(SHUTDOWN_CLOSE_RESERVE_MS, config.shutdownTimeoutMs * 0.2);
      draining = true;
      preloading.abort();
      // gRPC: health NOT_SERVING now (Kubernetes' grpc probe, Envoy's health checks); calls are still served.
      grpc?.stopServing();
      if (config.drainMs > 0) {
        for (const res of answering) if (!res.headersSent) res.shouldKeepAlive = false;
        answering.clear();
        logger.info({ reason, drainMs: config.drainMs, inflight: inflight.count, timeoutMs: config.shutdownTimeoutMs }, 'draining: not ready, still serving');
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, config.drainMs);
          cutDrain = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        cutDrain = undefined;
      }
      shuttingDown = true;
      logger.info({ reason, inflight: inflight.count, timeoutMs: config.shutdownTimeoutMs }, 'shutting down: draining in-flight requests');
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      while (inflight.count > 0 && performance.now() < drainUntil) await new Promise((r) => setTimeout(r, 20));
      if (inflight.count > 0) logger.warn({ inflight: inflight.count }, 'shutdown deadline reached with requests still running');
      server.closeAllConnections();
      const abandoned: string[] = [];
      if (!(await beforeDeadline(closed, deadline))) abandoned.push('connections');
      if (grpc && !(await beforeDeadline(grpc.close(Date.now() + 1000), deadline))) abandoned.push('gRPC listener');
      // Scrapers could still read the metrics while requests drained; now that listener goes too.
      if (metricsServer) {
        const m = metricsServer;
        const metricsClosed = new Promise<void>((resolve) => m.close(() => resolve()));
        m.closeAllConnections();
        if (!(await beforeDeadline(metricsClosed, deadline))) abandoned.push('metrics listener');
      }
      // Unloading waits for loads in progress (a download may be stuck); past the deadline it is abandoned.
      if (!(await beforeDeadline(registry.close(), deadline))) abandoned.push('model loads and unloads');
      // Terminating the workers is bounded too, and happens even when unloading was abandoned.
      if (!(await beforeDeadline(pool.close(), deadline))) abandoned.push('runtime workers');
      if (abandoned.length > 0) {
        logger.warn({ abandoned, timeoutMs: config.shutdownTimeoutMs }, 'shutdown deadline reached: exiting with work still pending');
      } else {
        logger.info('shutdown complete');
      }
      memory.stop();
    })());

  const endDrain = (): void => {
    if (cutDrain === undefined) return;
    logger.info('drain period cut short by a second signal');
    cutDrain();
  };
  return { server, port, metricsPort, grpcPort, registry, metrics, service, pool, shutdown, endDrain };
}

/** Default MME_MAX_INFLIGHT_BYTES: this share of the container's memory (the model budget takes 70%). */
const INFLIGHT_MEMORY_SHARE = 0.1;

/** Of the shutdown deadline, at most this much is kept for releasing sessions and workers after requests drain. */
const SHUTDOWN_CLOSE_RESERVE_MS = 2_000;

/** Waits for `work` until `deadline` (performance.now() time); true when it settled in time. */
async function beforeDeadline(work: Promise<unknown>, deadline: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), Math.max(0, deadline - performance.now()));
  });
  try {
    return await Promise.race([
      work.then(
        () => true,
        () => true,
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Most preloads in progress at once: enough to overlap downloads, few enough not to starve requests. */
const PRELOAD_CONCURRENCY = 2;
/** How often measured model memory is reconciled with the budget (memory-manager.ts); a read of /proc and the heap's size. */
const RECONCILE_INTERVAL_MS = 1000;

/**
 * MME_PRELOAD: fetch and load targets in the background after listening, so
 * /ping answers at once (SageMaker's health check) while the first requests for
 * these models find them warm. A failure is logged and the target is simply
 * loaded on demand later.
 */
function preload(targets: readonly string[], registry: ModelRegistry, logger: Logger): AbortController {
  const controller = new AbortController();
  const queue = [...targets];
  const next = async (): Promise<void> => {
    for (let target = queue.shift(); target !== undefined && !controller.signal.aborted; target = queue.shift()) {
      const started = performance.now();
      try {
        const lease = await registry.resolve({ kind: 'target', target }).acquire(cancellationOf(controller.signal));
        lease.release();
        logger.info({ model: target, durationMs: Math.round(performance.now() - started) }, 'preloaded model');
      } catch (err) {
        if (controller.signal.aborted) return;
        logger.warn({ model: target, err: (err as Error).message }, 'preloading model failed; it will be loaded on first use');
      }
    }
  };
  for (let i = 0; i < Math.min(PRELOAD_CONCURRENCY, queue.length); i++) void next();
  return controller;
}

/** Share of the host's (container's) memory the default budget gives models; the rest is the server, requests and the allocator's slack. */
const HOST_MEMORY_SHARE = 0.7;
/** Share of GPU memory when sessions run on CUDA by default (CUDA context and workspaces need the rest). */
const GPU_MEMORY_SHARE = 0.8;

/**
 * MME_MEMORY_BUDGET_BYTES, else a share of the memory the models will live in:
 * GPU memory when sessions default to CUDA here, else the container limit (or RAM).
 */
async function memoryBudget(config: ServerConfig, host: ReturnType<typeof detectHostCapabilities>, logger: Logger): Promise<{ bytes: number; from: string }> {
  if (config.memoryBudgetBytes !== undefined) return { bytes: config.memoryBudgetBytes, from: 'MME_MEMORY_BUDGET_BYTES' };
  const wantsGpu = (config.executionProviders ?? ['cuda']).some((p) => p !== 'cpu');
  if (wantsGpu && host.gpuVisible && host.installed.has('cuda')) {
    const gpu = await gpuMemory(0);
    if (gpu) return { bytes: Math.floor(gpu.totalBytes * GPU_MEMORY_SHARE), from: 'GPU memory (nvidia-smi)' };
    logger.warn('a GPU is visible but nvidia-smi did not answer: the memory budget falls back to host memory');
  }
  return { bytes: Math.floor(hostMemoryBytes() * HOST_MEMORY_SHARE), from: 'host memory (cgroup limit or RAM)' };
}
