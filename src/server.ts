/**
 * @module server
 * Wires the components for a parsed ServerConfig, listens, and knows how to
 * drain. No env reads and no signal handlers here (main.ts owns those), so
 * tests start real servers on port 0 exactly as production does.
 */
import { cancellationOf } from './cancellation.js';
import { SequenceTracker } from './scheduler/sequence-tracker.js';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { realpathSync } from 'node:fs';
import { HostRedactor } from './errors.js';
import path from 'node:path';
import { createApp } from './app.js';
import { Admission } from './service/admission.js';
import { HeldConnections } from './http/held-connections.js';
import { createAdmissionMetrics } from './observability/admission-metrics.js';
import { RefusalSummary } from './observability/refusal-summary.js';
import { createMetricsListener } from './http/metrics-listener.js';
import { startGrpcListener, type GrpcListener } from './grpc/grpc-server.js';
import { DEFAULT_MODEL_SOURCE, type ServerConfig } from './config/server-config.js';
import type { Logger } from './observability/logger.js';
import { createMetrics, type Metrics } from './observability/metrics.js';
import { MemoryManager } from './registry/memory-manager.js';
import { createModelLoader } from './registry/model-loader.js';
import { ModelRegistry } from './registry/model-registry.js';
import { logSurvey, surveyLocalSource } from './registry/package-survey.js';
import { gpuMemory, hostMemoryBytes, modelMemoryBytes, takeBaseline } from './runtime/memory-usage.js';
import { detectHostCapabilities } from './runtime/execution-providers.js';
import { MainThreadCopies } from './runtime/main-thread-copies.js';
import { QuietWindow } from './runtime/quiet-window.js';
import { DEATH_WINDOW_MS, RuntimePool } from './runtime/runtime-pool.js';
import { tritonMetadataAliases } from './grpc/access.js';
import { AccessPolicy } from './service/access-policy.js';
import { InferenceService } from './service/inference-service.js';
import { ResponseCache } from './service/response-cache.js';
import { DiskCache } from './store/disk-cache.js';
import { isS3Uri, parseS3Uri } from './config/s3-uri.js';
import { LocalModelSource } from './store/local-source.js';
import type { ModelSource } from './store/model-source.js';
import { S3ModelSource } from './store/s3-source.js';
import { checkCacheDir, checkLocalSource } from './store/startup-checks.js';
import { ServingError, StartupError } from './errors.js';
import { listenFailure } from './config/listen-failure.js';
import { startSummary } from './observability/start-summary.js';

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

/** What no client answer may name: the source root and cache directory (as configured and as resolved), the bucket and prefix. */
function hostRedactor(config: ServerConfig): HostRedactor {
  const resolved = (p: string): string[] => {
    try {
      const real = realpathSync(p);
      return real === p ? [p] : [p, real];
    } catch {
      return [p];
    }
  };
  if (isS3Uri(config.modelSource)) {
    const { bucket, prefix } = parseS3Uri(config.modelSource);
    return new HostRedactor({ paths: [], cacheDir: config.cacheDir, bucket, prefix });
  }
  return new HostRedactor({ paths: resolved(config.modelSource), cacheDir: config.cacheDir });
}

/** Refusals counted and summarised; each freed place reads a held connection again. */
function wireAdmission(admission: Admission, held: HeldConnections | undefined, metrics: Metrics, logger: Logger): void {
  const counted = createAdmissionMetrics(metrics.registry, () => ({
    requestsInFlight: admission.requestsInFlight,
    queued: admission.queued,
    heldConnections: held?.size ?? 0,
  }));
  const summary = new RefusalSummary(logger, unrefTimer);
  admission.onRefusal((reason, model) => {
    counted.refused(reason, model);
    summary.note(reason, model);
  });
  if (held !== undefined) admission.onFreed((key) => held.wake(key));
}

/** A timer that never keeps the process alive (the refusal summary's window). */
const unrefTimer = {
  setTimer(delayUs: number, fn: () => void): () => void {
    const t = setTimeout(fn, delayUs / 1000);
    t.unref();
    return () => clearTimeout(t);
  },
};

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
  logger.info(
    { modelControl: config.modelControl.mode, modelControlFrom: config.modelControl.reason },
    config.modelControl.mode === 'explicit'
      ? `model control explicit (${config.modelControl.reason}): models are loaded and unloaded through the API, from directories under MME_MODEL_URL_ROOTS`
      : `model control none (${config.modelControl.reason}): every load and unload API is refused; models of MME_MODEL_SOURCE load on first use (MME_MODEL_CONTROL=explicit turns the API on)`,
  );
  if (config.modelControl.mode === 'explicit' && !config.multiModel && !config.httpRestrictedApi.some((r) => r.groups.includes('model-repository'))) {
    // Off SageMaker the port may be reachable by anything in the cluster: loading a model runs its code.
    logger.warn(
      'model control explicit without a key on the model-repository group: anyone who reaches the port may load models from MME_MODEL_URL_ROOTS (MME_HTTP_RESTRICTED_API=model-repository:<header>=<value> restricts it)',
    );
  }
  // Fail fast, before anything costly starts: a source or cache the operator named wrongly stops start-up naming the setting.
  const local = !isS3Uri(config.modelSource);
  const sourcePresent = !local || (await localSourcePresent(config, logger));
  const cache = await openCache(config, logger, metrics);
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
  const httpAccess = new AccessPolicy({ modelControl: config.modelControl, restrictions: config.httpRestrictedApi, setting: 'MME_HTTP_RESTRICTED_API' });
  const grpcAccess = new AccessPolicy({
    modelControl: config.modelControl,
    restrictions: config.grpcRestrictedProtocol,
    setting: 'MME_GRPC_RESTRICTED_PROTOCOL',
    aliases: tritonMetadataAliases,
  });
  const registry = new ModelRegistry({
    source,
    // An S3 prefix is not a repository: without a header only MME_DEFAULT_MODEL (a target) can be served.
    defaultRoot: isS3Uri(config.modelSource) ? undefined : config.modelSource,
    defaultModel: config.defaultModel,
    revalidateMs: config.revalidateMs,
    missingTtlMs: config.missingTargetTtlMs,
    missingLookupsPerSecond: config.missingTargetLookupsPerSecond,
    progressIntervalMs: config.progressLogMs,
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
    // Model names are the model-repository group's: where a key guards it, an inference answer does not list them either.
    listNames: ![...httpAccess.restrictedGroups, ...grpcAccess.restrictedGroups].includes('model-repository'),
  });
  const service = new InferenceService({
    registry,
    metrics,
    maxInflight: config.maxInflightRequests,
    maxQueueSize: config.maxQueueSize,
    maxResponseBytes: config.maxResponseBytes,
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
  const held = config.holdRefusedConnections ? new HeldConnections(admission) : undefined;
  wireAdmission(admission, held, metrics, logger);
  // A dead runtime worker is replaced by the pool; the models it held are dropped so the next request reloads them.
  pool.onWorkerLost((index, cause) => {
    logger.error({ worker: index, cause, recentDeaths: pool.recentDeaths }, 'runtime worker died; replaced');
    registry.dropSessionsOn(index, cause);
  });
  const redactor = hostRedactor(config);
  const unhealthy = (): string | undefined =>
    pool.healthy ? undefined : `runtime workers keep dying (${pool.recentDeaths} in the last ${DEATH_WINDOW_MS / 1000} s); this instance should be replaced`;
  const app = createApp({
    unhealthy,
    admission,
    ...(held === undefined ? {} : { held }),
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
    access: httpAccess,
    metricsElsewhere: config.metricsPort !== undefined,
    redactor,
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
  }).catch(async (err: unknown) => {
    // Nothing half-started: the workers go, and start-up fails naming the setting.
    memory.stop();
    await pool.close();
    throw listenFailure(err, 'HTTP', 'SAGEMAKER_BIND_TO_PORT', config.host, config.port);
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
    const listener = createMetricsListener(metrics, logger, httpAccess);
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
      throw listenFailure(err, 'metrics', 'MME_METRICS_PORT', config.host, config.metricsPort);
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
        admission,
        metrics,
        logger,
        isShuttingDown: () => shuttingDown,
        isDraining: () => draining,
        inflight,
        access: grpcAccess,
        redactor,
        modelMesh: config.modelMesh ? { capacityBytes: budget.bytes, maxLoadingConcurrency: Math.max(1, pool.size) } : undefined,
      });
    } catch (err) {
      // Nothing half-started, as for the metrics listener.
      await new Promise<void>((resolve) => server.close(() => resolve()));
      if (metricsServer) await new Promise<void>((resolve) => metricsServer!.close(() => resolve()));
      memory.stop();
      await pool.close();
      throw err instanceof StartupError ? err : listenFailure(err, 'gRPC', 'MME_GRPC_PORT', config.host, config.grpcPort);
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
      modelControl: config.modelControl.mode,
      modelControlFrom: config.modelControl.reason,
      modelUrlRoots: config.modelUrlRoots,
      // Group names only: the values are never logged.
      restrictedHttpApis: httpAccess.restrictedGroups,
      ...(grpc === undefined ? {} : { restrictedGrpcProtocols: grpcAccess.restrictedGroups }),
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
  // The same facts for a person: one line, bytes in MiB/GiB (the line above keeps raw counts for tools).
  logger.info(
    startSummary({
      host: config.host,
      port,
      grpcPort,
      grpcTls: grpc?.tls ?? false,
      metricsPort,
      source: source.description,
      sourceKind: !sourcePresent ? 'absent' : local ? 'local' : 's3',
      cacheDir: config.cacheDir,
      cacheBytes: cache.maxBytes,
      budgetBytes: budget.bytes,
      budgetFrom: budget.from,
      runtimeWorkers: pool.size,
      providers: config.executionProviders ?? 'auto',
      gpuVisible: host.gpuVisible,
      logLevel: config.logLevel,
      modelControl: config.modelControl,
    }),
  );
  if (source instanceof S3ModelSource) probeS3Source(source, logger);
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
  // Triton's model table for a local source: after listening and in the background, so /ping never waits for it.
  if (!isS3Uri(config.modelSource)) surveySource(source, config, logger);
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
        logger.info(
          { reason, drainMs: config.drainMs, inflight: inflight.count, timeoutMs: config.shutdownTimeoutMs, hint: DRAIN_HINT },
          'draining: not ready, still serving',
        );
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

/**
 * Whether the local source exists; one that is missing or unreadable stops start-up (StartupError)
 * unless a platform loads the models (config.modelSourceOptional), which is logged.
 */
async function localSourcePresent(config: ServerConfig, logger: Logger): Promise<boolean> {
  if (await checkLocalSource(config.modelSource, config.modelSourceOptional)) return true;
  // Expected with the default where a platform loads the models; a source the operator named and that is missing deserves a warning.
  logger[config.modelSource === DEFAULT_MODEL_SOURCE ? 'info' : 'warn'](
    { source: config.modelSource, setting: 'MME_MODEL_SOURCE' },
    `no model source: ${config.modelSource} does not exist; ${config.multiModel ? 'SageMaker loads models through POST /models (SAGEMAKER_MULTI_MODEL=true)' : 'model-mesh loads models through loadModel (MME_MODEL_MESH=true)'}, so start-up goes on`,
  );
  return false;
}

/** The disk cache, writable and open: what a crash left half-written swept, complete entries indexed for reuse. */
async function openCache(config: ServerConfig, logger: Logger, metrics: Metrics): Promise<DiskCache> {
  await checkCacheDir(config.cacheDir);
  const cache = new DiskCache({ dir: config.cacheDir, maxBytes: config.cacheMaxBytes, logger, metrics });
  try {
    await cache.open();
  } catch (err) {
    const why = `the cache directory ${config.cacheDir} cannot be used (${(err as Error).message}): set MME_CACHE_DIR to a writable directory`;
    throw new StartupError('MME_CACHE_DIR', why, { cause: err });
  }
  return cache;
}

/** The drain line says how to skip it (main.ts: a second signal ends the drain period at once). */
const DRAIN_HINT = 'a second SIGTERM or SIGINT (Ctrl-C again) ends the drain now';

/** How long start-up's check of an S3 source waits for its answer; it never holds up serving. */
const S3_PROBE_TIMEOUT_MS = 5_000;

/**
 * An S3 source that denies or does not answer gets one warning at start naming the bucket and prefix
 * and the problem, instead of the first request finding it. In the background: /ping and models
 * already cached are served meanwhile, and a source that recovers needs no restart.
 */
function probeS3Source(source: S3ModelSource, logger: Logger): void {
  const signal = AbortSignal.timeout(S3_PROBE_TIMEOUT_MS);
  source.probe(signal).then(
    () => logger.debug({ source: source.description }, 'model source answers'),
    (err: unknown) => {
      const problem = signal.aborted ? `listing ${source.description} got no answer within ${S3_PROBE_TIMEOUT_MS / 1000} s` : (err as Error).message;
      // A role with s3:GetObject alone (least privilege) is denied the listing and still loads models by name.
      const denied = !signal.aborted && err instanceof ServingError && err.code === 'ACCESS_DENIED';
      logger.warn(
        { source: source.description, bucket: source.bucket, prefix: source.prefix, setting: 'MME_MODEL_SOURCE', err: problem },
        denied
          ? `MME_MODEL_SOURCE cannot be listed: ${problem}. Models still load by name where s3:GetObject is allowed; the repository index needs s3:ListBucket on the prefix. Check the bucket and prefix and the credentials`
          : `MME_MODEL_SOURCE does not answer: ${problem}. Check the bucket and prefix, the credentials and AWS_ENDPOINT_URL_S3; models not yet loaded cannot load until it answers`,
      );
    },
  );
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

/** Every model of a local source with its state at start-up (registry/package-survey.ts); never rejects. */
function surveySource(source: ModelSource, config: ServerConfig, logger: Logger): void {
  source
    .list()
    .then((entries) => surveyLocalSource(config.modelSource, entries, { configMaxBytes: config.configMaxBytes }))
    .then(
      (rows) => logSurvey(rows, logger),
      (err: unknown) => logger.warn({ err: (err as Error).message }, 'could not list the model source at start-up; models are checked when loaded'),
    );
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
