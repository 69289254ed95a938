/**
 * @module server
 * Wires the components for a parsed ServerConfig, listens, and knows how to
 * drain. No env reads and no signal handlers here (main.ts owns those), so
 * tests start real servers on port 0 exactly as production does.
 */
import type { Server } from 'node:http';
import { mkdir } from 'node:fs/promises';
import { createApp } from './app.js';
import type { ServerConfig } from './config/server-config.js';
import type { Logger } from './observability/logger.js';
import { createMetrics, type Metrics } from './observability/metrics.js';
import { ModelRegistry } from './registry/model-registry.js';
import { detectHostCapabilities } from './runtime/execution-providers.js';
import { RuntimePool } from './runtime/runtime-pool.js';
import { InferenceService } from './service/inference-service.js';
import { cleanCacheDir } from './store/cache-publish.js';
import { isS3Uri } from './config/s3-uri.js';
import { LocalModelSource } from './store/local-source.js';
import type { ModelSource } from './store/model-source.js';
import { S3ModelSource } from './store/s3-source.js';

export interface RunningServer {
  readonly server: Server;
  readonly port: number;
  readonly registry: ModelRegistry;
  readonly metrics: Metrics;
  readonly service: InferenceService;
  /** Stop accepting, let in-flight requests finish (bounded), release every session. */
  shutdown(reason: string): Promise<void>;
}

function createModelSource(config: ServerConfig, logger: Logger): ModelSource {
  const limits = { maxBytes: config.archiveMaxBytes, maxEntries: config.archiveMaxEntries };
  if (!isS3Uri(config.modelSource)) return new LocalModelSource({ root: config.modelSource, cacheDir: config.cacheDir, limits, logger });
  const region = config.awsRegion ?? (config.s3Endpoint ? 'us-east-1' : undefined);
  return new S3ModelSource({
    uri: config.modelSource,
    cacheDir: config.cacheDir,
    limits,
    logger,
    ...(region === undefined ? {} : { region }),
    ...(config.s3Endpoint === undefined ? {} : { endpoint: config.s3Endpoint }),
  });
}

export async function startServer(config: ServerConfig, logger: Logger, metrics: Metrics = createMetrics({ collectProcessMetrics: true })): Promise<RunningServer> {
  await mkdir(config.cacheDir, { recursive: true });
  const cleaned = await cleanCacheDir(config.cacheDir);
  logger.debug({ cacheDir: config.cacheDir, cleaned }, 'cache directory ready');
  const host = detectHostCapabilities();
  const pool = new RuntimePool(config.runtimeWorkers);
  const source = createModelSource(config, logger);
  const registry = new ModelRegistry({
    source,
    // An S3 prefix is not a repository: without a header only MME_DEFAULT_MODEL (a target) can be served.
    defaultRoot: isS3Uri(config.modelSource) ? undefined : config.modelSource,
    defaultModel: config.defaultModel,
    loadDeps: { pool, intraOpThreads: config.intraOpThreads, logger, host, serverProviders: config.executionProviders },
    logger,
    metrics,
  });
  const service = new InferenceService({ registry, metrics, maxInflight: config.maxInflightRequests });
  let shuttingDown = false;
  const inflight = { count: 0 };
  const app = createApp({ service, metrics, logger, bodyLimitBytes: config.bodyLimitBytes, isShuttingDown: () => shuttingDown, inflight });

  const server = await new Promise<Server>((resolve, reject) => {
    const s = app.listen(config.port, config.host, () => resolve(s));
    s.once('error', reject);
  });
  // Keep-alive longer than typical load balancers' idle timeout, so they close first.
  server.keepAliveTimeout = 65_000;
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  logger.info(
    {
      port,
      source: source.description,
      cacheDir: config.cacheDir,
      multiModel: config.multiModel,
      defaultModel: config.defaultModel,
      providers: config.executionProviders ?? 'auto',
      runtimeWorkers: pool.size,
      intraOpThreads: config.intraOpThreads ?? 'onnxruntime default',
      gpuVisible: host.gpuVisible,
      installedProviders: [...host.installed],
    },
    'onnx-mme listening',
  );

  let stopping: Promise<void> | undefined;
  const shutdown = (reason: string): Promise<void> =>
    (stopping ??= (async () => {
      shuttingDown = true;
      logger.info({ reason, inflight: inflight.count }, 'shutting down: draining in-flight requests');
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const deadline = Date.now() + config.shutdownTimeoutMs;
      while (inflight.count > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      if (inflight.count > 0) logger.warn({ inflight: inflight.count }, 'shutdown deadline reached with requests still running');
      server.closeAllConnections();
      await closed;
      await registry.close();
      await pool.close();
      logger.info('shutdown complete');
    })());

  return { server, port, registry, metrics, service, shutdown };
}

