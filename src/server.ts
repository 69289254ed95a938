/**
 * @module server
 * Wires the components for a parsed ServerConfig, listens, and knows how to
 * drain. No env reads and no signal handlers here (main.ts owns those), so
 * tests start real servers on port 0 exactly as production does. The parts
 * live in server/: the core (server/core.ts), the listeners
 * (server/listeners.ts) and shutdown (server/shutdown.ts); the HTTP app and
 * its admission are built here.
 */
import type { Server } from 'node:http';
import { createApp, type App } from './app.js';
import type { ServerConfig } from './config/server-config.js';
import type { ServingError } from './errors.js';
import type { Logger } from './observability/logger.js';
import { createMetrics, type Metrics } from './observability/metrics.js';
import type { ModelRegistry } from './registry/model-registry.js';
import type { RuntimePool } from './runtime/runtime-pool.js';
import type { InferenceService } from './service/inference-service.js';
import { buildAdmission, type ServerAdmission } from './server/admission.js';
import { logListening, logStartNotices } from './server/announce.js';
import { startBackgroundWork } from './server/background.js';
import { buildCore, type Core } from './server/core.js';
import { startListeners } from './server/listeners.js';
import { createShutdown, servingPhase, type ServingPhase } from './server/shutdown.js';

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
   * requests finish and release every session, all by MME_SHUTDOWN_TIMEOUT_SECONDS. `drain: false` skips the drain
   * period (a server stopped as its start completes: no balancer has seen it ready).
   */
  shutdown(reason: string, drain?: boolean): Promise<void>;
  /** Ends the drain period now (a second signal): the rest of the shutdown keeps its deadline. */
  endDrain(): void;
}

export async function startServer(
  config: ServerConfig,
  logger: Logger,
  metrics: Metrics = createMetrics({ collectProcessMetrics: true, maxTargets: config.metricsMaxTargets }),
): Promise<RunningServer> {
  logStartNotices(config, logger);
  const gate = buildAdmission(config, metrics, logger);
  const { admission } = gate;
  const core = await buildCore(config, logger, metrics, admission);
  const phase = servingPhase();
  const app = buildHttpApp(config, core, phase, metrics, logger, gate);
  const listeners = await startListeners({ app, admission, config, core, phase, metrics, logger });
  logListening(config, logger, core, listeners, admission.limit);
  const background = startBackgroundWork(config, core, logger);
  const { shutdown, endDrain } = createShutdown({ config, logger, phase, listeners, core, background });
  const { server, port, metricsPort, grpc } = listeners;
  const { registry, service, pool } = core;
  return { server, port, metricsPort, grpcPort: grpc?.port, registry, metrics, service, pool, shutdown, endDrain };
}

/** The HTTP request listener: the inference front (behind `gate`'s admission) and express for the rest. */
function buildHttpApp(config: ServerConfig, core: Core, phase: ServingPhase, metrics: Metrics, logger: Logger, gate: ServerAdmission): App {
  const { pool, service, httpAccess, redactor } = core;
  const { admission, held } = gate;
  const unhealthy = (): ServingError | undefined => pool.unhealthy;
  return createApp({
    unhealthy,
    admission,
    ...(held === undefined ? {} : { held }),
    service,
    metrics,
    logger,
    bodyLimitBytes: config.bodyLimitBytes,
    defaultAccept: config.defaultAccept,
    isShuttingDown: phase.isShuttingDown,
    isDraining: phase.isDraining,
    inflight: phase.inflight,
    accessLog: config.accessLog,
    slowRequestMs: config.slowRequestMs,
    access: httpAccess,
    metricsElsewhere: config.metricsPort !== undefined,
    redactor,
  });
}
