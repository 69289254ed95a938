/**
 * @module app
 * createApp(deps) builds the server's request listener with no side effects
 * (no listen, no env reads), so tests and main.ts assemble it the same way:
 * the lean inference path (http/inference-front.ts) in front of the express
 * application that serves every route. The core (service and below) never
 * imports express; this file and http/ do.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import express, { type NextFunction, type Request, type Response } from 'express';
import { routeGuard } from './http/access-guard.js';
import { ServingError, type HostRedactor } from './errors.js';
import type { Admission } from './service/admission.js';
import type { HeldConnections } from './http/held-connections.js';
import { createInferenceFront } from './http/inference-front.js';
import { openEnvelope, sendError, shutdownRefusal, type Envelope } from './http/request-envelope.js';
import type { RequestContext } from './http/request-context.js';
import { sagemakerRoutes } from './http/sagemaker-routes.js';
import { methodsFor, register, ROUTES } from './http/route-table.js';
import { v2Routes } from './http/v2-routes.js';
import type { Logger } from './observability/logger.js';
import type { Metrics } from './observability/metrics.js';
import type { AccessPolicy } from './service/access-policy.js';
import type { InferenceService } from './service/inference-service.js';

export interface AppDeps {
  readonly service: InferenceService;
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly bodyLimitBytes: number;
  /** Answer type for inference requests without Accept (SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT). */
  readonly defaultAccept: 'application/json' | 'text/csv' | 'application/x-npy';
  /** True once the drain period after SIGTERM is over: new inference work is refused with 503. */
  readonly isShuttingDown: () => boolean;
  /** True from SIGTERM on: readiness (/ping, /v2/health/ready) answers 503 while requests are still served. */
  readonly isDraining: () => boolean;
  /** HTTP requests between arrival and the end of their response; shutdown drains this to zero. */
  readonly inflight: { count: number };
  /** MME_ACCESS_LOG (default false): the `request` line for every request at info, not only errors and slow ones. */
  readonly accessLog?: boolean;
  /** MME_SLOW_REQUEST_MS: requests at least this slow always get their `request` line (at warn). */
  readonly slowRequestMs?: number;
  /** Undefined while the server can serve; else why not (/ping answers 503). */
  readonly unhealthy: () => ServingError | undefined;
  /** Bytes in flight and inference work per event-loop turn, checked before a body is read. */
  readonly admission: Admission;
  /** Where keep-alive connections refused for overload wait unread (MME_HOLD_REFUSED_CONNECTIONS); none: read again at once. */
  readonly held?: HeldConnections;
  /** Who may call what (MME_HTTP_RESTRICTED_API, MME_MODEL_CONTROL): checked by every route before its body is read. */
  readonly access: AccessPolicy;
  /** MME_METRICS_PORT is set: /metrics is served there only, and the main port answers 404 for it. */
  readonly metricsElsewhere?: boolean;
  /** Cuts the server's own paths, bucket and prefix out of error answers. */
  readonly redactor?: HostRedactor;
}

/** The server's request listener, and `listen` as express's app has it (an http.Server on this listener). */
export interface App {
  (req: IncomingMessage, res: ServerResponse): void;
  listen(port: number, host: string, callback: () => void, limits?: ListenLimits): Server;
}

/** What a peer may hold of the listener (server.ts passes them from the config). */
export interface ListenLimits {
  /** The kernel's accept queue; connections past it wait for SYN retries (1, 3, 7 s), /ping's too. */
  readonly backlog: number;
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
}

function envelopeOf(res: Response): Envelope | undefined {
  return res.locals['envelope'] as Envelope | undefined;
}

function ctxOf(res: Response): RequestContext {
  return envelopeOf(res)!.ctx;
}

/** Metric label for a route: the matched pattern, never the raw path (unbounded cardinality). */
function routeLabel(req: Request): string {
  const route = (req as Request & { route?: { path?: string } }).route?.path;
  return typeof route === 'string' ? route : 'unmatched';
}

/** A path no route serves with this method: 405 naming the methods it is served with (its Allow header), else 404. */
function noRoute(req: Request): ServingError {
  const methods = methodsFor(req.path);
  if (methods.length === 0) return new ServingError('ROUTE_NOT_FOUND', `no route for ${req.method} ${req.path}`);
  // express answers HEAD with a GET route.
  const allow = methods.includes('GET') ? [...methods, 'HEAD'] : methods;
  return new ServingError('METHOD_NOT_ALLOWED', `method ${req.method} is not allowed on ${req.path}`, { details: { allow } });
}

/**
 * The express application for every route (no side effects: no listen, no
 * env reads), behind the lean inference path (http/inference-front.ts) that
 * serves the canonical inference requests without express.
 */
export function createApp(deps: AppDeps): App {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');

  app.use((req, res, next) => {
    const envelope = openEnvelope(req, res, deps, { path: req.path, routeOf: () => routeLabel(req) });
    res.locals['envelope'] = envelope;
    // No route serves OPTIONS: express would answer it itself (200 and Allow, in front of no access check).
    const refused = req.method === 'OPTIONS' ? noRoute(req) : shutdownRefusal(req, req.path, deps);
    if (refused !== undefined) {
      next(refused);
      return;
    }
    next();
  });

  const guard = routeGuard(deps.access);
  const routeDeps = {
    guard,
    service: deps.service,
    bodyLimitBytes: deps.bodyLimitBytes,
    defaultAccept: deps.defaultAccept,
    admission: deps.admission,
    unhealthy: deps.unhealthy,
    isDraining: deps.isDraining,
    context: (_req: Request, res: Response) => ctxOf(res),
  };
  app.use(sagemakerRoutes(routeDeps));
  app.use(v2Routes(routeDeps));

  register(app as unknown as express.Router, ROUTES.metrics, guard, async (_req, res) => {
    // A scraper port of its own keeps the series off the port clients reach.
    if (deps.metricsElsewhere === true) throw new ServingError('ROUTE_NOT_FOUND', 'GET /metrics is served on the metrics port (MME_METRICS_PORT), not here');
    res.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics());
  });

  app.use((req: Request, _res: Response, next: NextFunction) => next(noRoute(req)));

  // express recognises error handlers by their four parameters.
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    // An error raised before the first middleware (inside express itself) has no envelope yet.
    sendError(req, res, envelopeOf(res) ?? openEnvelope(req, res, deps, { path: req.path, routeOf: () => routeLabel(req) }), err);
  });

  const front = createInferenceFront({ ...deps, guard }, app) as App;
  front.listen = (port, host, callback, limits) => {
    if (limits === undefined) return createServer(front).listen(port, host, callback);
    const server = createServer(
      {
        headersTimeout: limits.headersTimeoutMs,
        requestTimeout: limits.requestTimeoutMs,
        // node checks both timeouts on this interval (30 s by default, so a 4 s timeout would hold for 30).
        connectionsCheckingInterval: Math.max(100, Math.min(1_000, limits.headersTimeoutMs / 4)),
      },
      front,
    );
    return server.listen({ port, host, backlog: limits.backlog }, callback);
  };
  return front;
}
