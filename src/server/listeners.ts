/**
 * @module server/listeners
 * The server's sockets, started on a built core: the HTTP listener (the app
 * it is given), the separate /metrics listener (MME_METRICS_PORT) and the
 * KServe v2 gRPC listener (MME_GRPC_PORT). Nothing half-started: when one
 * cannot listen, those already listening close, the core's workers go, and
 * start-up fails naming the setting.
 */
import type { Server, ServerResponse } from 'node:http';
import type { App } from '../app.js';
import { listenFailure } from '../config/listen-failure.js';
import type { ServerConfig } from '../config/server-config.js';
import { StartupError } from '../errors.js';
import type { GrpcListener } from '../grpc/grpc-server.js';
import { createMetricsListener } from '../http/metrics-listener.js';
import type { Admission } from '../service/admission.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Core } from './core.js';
import { endConnectionsWhileDraining, type ServingPhase } from './shutdown.js';

export interface Listeners {
  readonly server: Server;
  readonly port: number;
  /** HTTP answers under way, which the drain tells to end their connections (server/shutdown.ts). */
  readonly answering: Set<ServerResponse>;
  readonly metricsServer: Server | undefined;
  readonly metricsPort: number | undefined;
  readonly grpc: GrpcListener | undefined;
}

export interface ListenerParts {
  readonly app: App;
  /** The HTTP front's admission, which gRPC inference passes too (service/admission.ts). */
  readonly admission: Admission;
  readonly config: ServerConfig;
  readonly core: Core;
  readonly phase: ServingPhase;
  readonly metrics: Metrics;
  readonly logger: Logger;
}

/** HTTP first, then the metrics listener, then gRPC; a failure undoes what was started before it. */
export async function startListeners(parts: ListenerParts): Promise<Listeners> {
  const { config, core } = parts;
  const stopCore = async (): Promise<void> => {
    core.memory.stop();
    await core.pool.close();
  };
  const server = await listenHttp(parts.app, config).catch(async (err: unknown) => {
    await stopCore();
    throw listenFailure(err, 'HTTP', 'SAGEMAKER_BIND_TO_PORT', config.host, config.port);
  });
  const answering = endConnectionsWhileDraining(server, parts.phase);
  const port = portOf(server, config.port);
  let metricsServer: Server | undefined;
  if (config.metricsPort !== undefined) {
    try {
      metricsServer = await listenMetrics(parts, config.metricsPort);
    } catch (err) {
      await closeServer(server);
      await stopCore();
      throw listenFailure(err, 'metrics', 'MME_METRICS_PORT', config.host, config.metricsPort);
    }
  }
  const metricsPort = metricsServer === undefined ? undefined : portOf(metricsServer, config.metricsPort!);
  let grpc: GrpcListener | undefined;
  if (config.grpcPort !== undefined) {
    try {
      grpc = await listenGrpc(parts, config.grpcPort);
    } catch (err) {
      await closeServer(server);
      if (metricsServer) await closeServer(metricsServer);
      await stopCore();
      throw err instanceof StartupError ? err : listenFailure(err, 'gRPC', 'MME_GRPC_PORT', config.host, config.grpcPort);
    }
  }
  return { server, port, answering, metricsServer, metricsPort, grpc };
}

async function listenHttp(app: App, config: ServerConfig): Promise<Server> {
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
  return server;
}

/** MME_METRICS_PORT: a second listener for scrapers (inside SAGEMAKER_SAFE_PORT_RANGE, checked at config time). */
async function listenMetrics({ config, core, metrics, logger }: ListenerParts, port: number): Promise<Server> {
  const listener = createMetricsListener(metrics, logger, core.httpAccess);
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(port, config.host, () => resolve());
  });
  return listener;
}

/** MME_GRPC_PORT: the same service layer, models, limits and drain as HTTP, over gRPC. */
function listenGrpc({ config, core, phase, metrics, logger, admission }: ListenerParts, port: number): Promise<GrpcListener> {
  const grpc = core.modules.grpc;
  if (grpc === undefined) throw new Error('MME_GRPC_PORT needs grpc/grpc-server.js loaded (server/optional-modules.ts)');
  return grpc.startGrpcListener({
    host: config.host,
    port,
    maxMessageBytes: config.bodyLimitBytes,
    tls:
      config.grpcTlsCertFile === undefined || config.grpcTlsKeyFile === undefined
        ? undefined
        : { certFile: config.grpcTlsCertFile, keyFile: config.grpcTlsKeyFile, caFile: config.grpcTlsCaFile },
    service: core.service,
    admission,
    metrics,
    logger,
    isShuttingDown: phase.isShuttingDown,
    isDraining: phase.isDraining,
    inflight: phase.inflight,
    access: core.grpcAccess,
    redactor: core.redactor,
    modelMesh: config.modelMesh ? { capacityBytes: core.budget.bytes, maxLoadingConcurrency: Math.max(1, core.pool.size) } : undefined,
  });
}

function portOf(server: Server, configured: number): number {
  const address = server.address();
  return typeof address === 'object' && address ? address.port : configured;
}

function closeServer(server: Server): Promise<void> {
  return new Promise<void>((resolve) => server.close(() => resolve()));
}
