/**
 * @module server/shutdown
 * How a running server stops, by one deadline (MME_SHUTDOWN_TIMEOUT_SECONDS
 * after the signal), whatever is stuck: a request on a trickling download, a
 * load that never ends, a worker that does not answer. First the drain period
 * (MME_DRAIN_SECONDS, always shorter than the deadline): not ready, still
 * serving, so balancers take the instance out on their own health checks
 * before anything is refused. Then new work is refused and the listeners
 * close, requests drain until a reserve before the deadline, and sessions and
 * workers are released in the time left.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { ServerConfig } from '../config/server-config.js';
import type { Logger } from '../observability/logger.js';
import type { Core } from './core.js';
import type { Listeners } from './listeners.js';

/**
 * The two phases after SIGTERM, read by the transports: `draining` (not ready, every request still
 * served) from the signal on, `shuttingDown` (new work refused, the listener closed) once the drain
 * period is over; and the requests in flight, which shutdown waits for.
 */
export interface ServingPhase {
  draining: boolean;
  shuttingDown: boolean;
  readonly inflight: { count: number };
  /** The phase as the transports read it (EnvelopeDeps, the gRPC server): made once here, for every listener. */
  readonly isShuttingDown: () => boolean;
  readonly isDraining: () => boolean;
}

export function servingPhase(): ServingPhase {
  const phase: ServingPhase = {
    draining: false,
    shuttingDown: false,
    inflight: { count: 0 },
    isShuttingDown: () => phase.shuttingDown,
    isDraining: () => phase.draining,
  };
  return phase;
}

/**
 * During the drain every answer ends its connection, so a keep-alive peer (a balancer's pool) reconnects,
 * and finds another instance. Answers already under way when the drain begins get the same (see
 * drainPeriod): the set returned holds them.
 */
export function endConnectionsWhileDraining(server: Server, phase: ServingPhase): Set<ServerResponse> {
  const answering = new Set<ServerResponse>();
  server.prependListener('request', (_req: IncomingMessage, res: ServerResponse) => {
    if (phase.draining) {
      res.shouldKeepAlive = false;
      return;
    }
    answering.add(res);
    res.once('close', () => answering.delete(res));
  });
  return answering;
}

export interface ShutdownParts {
  readonly config: ServerConfig;
  readonly logger: Logger;
  readonly phase: ServingPhase;
  readonly listeners: Listeners;
  readonly core: Pick<Core, 'registry' | 'pool' | 'memory'>;
  /** The start's background work still running (MME_PRELOAD's preloads, the survey of the source): stopped when the drain begins. */
  readonly background: AbortController;
}

export interface Shutdown {
  /**
   * Drain (unless `drain` is false: a server stopped as its start completes has no balancer to wait for), then stop
   * accepting, let in-flight requests finish and release every session, all by the deadline. Once.
   */
  shutdown(reason: string, drain?: boolean): Promise<void>;
  /** Ends the drain period now (a second signal): the rest of the shutdown keeps its deadline. */
  endDrain(): void;
}

/** The drain line says how to skip it (main.ts: a second signal ends the drain period at once). */
const DRAIN_HINT = 'a second SIGTERM or SIGINT (Ctrl-C again) ends the drain now';

/** Of the shutdown deadline, at most this much is kept for releasing sessions and workers after requests drain. */
const SHUTDOWN_CLOSE_RESERVE_MS = 2_000;

export function createShutdown(parts: ShutdownParts): Shutdown {
  const { config, logger } = parts;
  let stopping: Promise<void> | undefined;
  const drainCut: DrainCut = { cut: undefined };
  const shutdown = (reason: string, drain = true): Promise<void> =>
    (stopping ??= (async () => {
      const deadline = performance.now() + config.shutdownTimeoutMs;
      const drainUntil = deadline - Math.min(SHUTDOWN_CLOSE_RESERVE_MS, config.shutdownTimeoutMs * 0.2);
      await drainPeriod(parts, reason, drain ? drainCut : undefined);
      await stopServing(parts, reason, drainUntil, deadline);
    })());
  const endDrain = (): void => {
    if (drainCut.cut === undefined) return;
    logger.info('drain period cut short by a second signal');
    drainCut.cut();
  };
  return { shutdown, endDrain };
}

/** The way to end a drain period that is under way (undefined outside one). */
interface DrainCut {
  cut: (() => void) | undefined;
}

/** Not ready, still serving, for MME_DRAIN_SECONDS (or until a second signal cuts it short); no period when `drain` is undefined. */
async function drainPeriod({ config, logger, phase, listeners, background }: ShutdownParts, reason: string, drain: DrainCut | undefined): Promise<void> {
  phase.draining = true;
  background.abort();
  // gRPC: health NOT_SERVING now (Kubernetes' grpc probe, Envoy's health checks); calls are still served.
  listeners.grpc?.stopServing();
  if (config.drainMs <= 0 || drain === undefined) return;
  for (const res of listeners.answering) if (!res.headersSent) res.shouldKeepAlive = false;
  listeners.answering.clear();
  logger.info(
    { reason, drainMs: config.drainMs, inflight: phase.inflight.count, timeoutMs: config.shutdownTimeoutMs, hint: DRAIN_HINT },
    'draining: not ready, still serving',
  );
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, config.drainMs);
    drain.cut = () => {
      clearTimeout(timer);
      resolve();
    };
  });
  drain.cut = undefined;
}

/**
 * New work refused and the HTTP listener closed; requests drain until `drainUntil`, then the
 * connections, the gRPC and metrics listeners, the models and the workers go, each by `deadline`.
 */
async function stopServing({ config, logger, phase, listeners, core }: ShutdownParts, reason: string, drainUntil: number, deadline: number): Promise<void> {
  const { server, grpc, metricsServer } = listeners;
  phase.shuttingDown = true;
  logger.info({ reason, inflight: phase.inflight.count, timeoutMs: config.shutdownTimeoutMs }, 'shutting down: draining in-flight requests');
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  while (phase.inflight.count > 0 && performance.now() < drainUntil) await new Promise((r) => setTimeout(r, 20));
  if (phase.inflight.count > 0) logger.warn({ inflight: phase.inflight.count }, 'shutdown deadline reached with requests still running');
  server.closeAllConnections();
  const abandoned: string[] = [];
  if (!(await beforeDeadline(closed, deadline))) abandoned.push('connections');
  if (grpc && !(await beforeDeadline(grpc.close(Date.now() + 1000), deadline))) abandoned.push('gRPC listener');
  // Scrapers could still read the metrics while requests drained; now that listener goes too.
  if (metricsServer) {
    const metricsClosed = new Promise<void>((resolve) => metricsServer.close(() => resolve()));
    metricsServer.closeAllConnections();
    if (!(await beforeDeadline(metricsClosed, deadline))) abandoned.push('metrics listener');
  }
  // Unloading waits for loads in progress (a download may be stuck); past the deadline it is abandoned.
  if (!(await beforeDeadline(core.registry.close(), deadline))) abandoned.push('model loads and unloads');
  // Terminating the workers is bounded too, and happens even when unloading was abandoned.
  if (!(await beforeDeadline(core.pool.close(), deadline))) abandoned.push('runtime workers');
  if (abandoned.length > 0) {
    logger.warn({ abandoned, timeoutMs: config.shutdownTimeoutMs }, 'shutdown deadline reached: exiting with work still pending');
  } else {
    logger.info('shutdown complete');
  }
  core.memory.stop();
}

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
