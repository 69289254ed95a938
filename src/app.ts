/**
 * @module app
 * createApp(deps) builds the express application with no side effects (no
 * listen, no env reads), so tests and main.ts assemble it the same way. The
 * core (service and below) never imports express; this file and http/ do.
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import { ServingError } from './errors.js';
import { errorReply } from './http/error-response.js';
import { createRequestContext, type RequestContext } from './http/request-context.js';
import { sagemakerRoutes } from './http/sagemaker-routes.js';
import { V2_PATHS, v2Routes } from './http/v2-routes.js';
import type { Logger } from './observability/logger.js';
import type { Metrics } from './observability/metrics.js';
import type { InferenceService } from './service/inference-service.js';

export interface AppDeps {
  readonly service: InferenceService;
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly bodyLimitBytes: number;
  /** Answer type for inference requests without Accept (SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT). */
  readonly defaultAccept: 'application/json' | 'text/csv' | 'application/x-npy';
  /** True once SIGTERM arrived: new inference work is refused with 503. */
  readonly isShuttingDown: () => boolean;
  /** HTTP requests between arrival and the end of their response; shutdown drains this to zero. */
  readonly inflight: { count: number };
}

/** Paths we serve, for telling 404 from 405. */
const KNOWN_PATHS = [
  /^\/ping$/,
  /^\/invocations$/,
  /^\/endpoints\/[^/]+\/invocations$/,
  /^\/models$/,
  /^\/models\/[^/]+$/,
  /^\/models\/[^/]+\/invoke$/,
  /^\/metrics$/,
  ...V2_PATHS,
];

function ctxOf(res: Response): RequestContext {
  return res.locals['ctx'] as RequestContext;
}

function elapsedMs(ctx: RequestContext): number {
  return Math.round((Number(process.hrtime.bigint() - ctx.startedAt) / 1e6) * 100) / 100;
}

/** The model a request resolved to (set by the inference handler), for log lines. */
function modelFields(res: Response): { model?: string; version?: string } {
  const model = res.locals['model'] as string | undefined;
  const version = res.locals['modelVersion'] as string | undefined;
  return { ...(model === undefined ? {} : { model }), ...(version === undefined ? {} : { version }) };
}

/** Metric label for a route: the matched pattern, never the raw path (unbounded cardinality). */
function routeLabel(req: Request): string {
  const route = (req as Request & { route?: { path?: string } }).route?.path;
  return typeof route === 'string' ? route : 'unmatched';
}

/** express and its parsers signal client errors (e.g. a malformed URL) with a 4xx `status`. */
function fromExpressError(err: unknown): unknown {
  if (err instanceof ServingError || typeof err !== 'object' || err === null) return err;
  const status = (err as { status?: unknown }).status;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return new ServingError('INVALID_REQUEST', (err as Error).message || 'bad request');
  }
  return err;
}

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');

  app.use((req, res, next) => {
    const ctx = createRequestContext(req, res, deps.logger);
    res.locals['ctx'] = ctx;
    deps.inflight.count++;
    res.once('close', () => deps.inflight.count--);
    if (req.path !== '/ping') ctx.log.debug({ method: req.method, path: req.path }, 'request received');
    res.on('finish', () => {
      deps.metrics.httpRequests.inc({ route: routeLabel(req), status: String(res.statusCode) });
      if (req.path !== '/ping') {
        ctx.log.debug({ method: req.method, path: req.path, status: res.statusCode, ...modelFields(res), durationMs: elapsedMs(ctx) }, 'request');
      }
    });
    if (deps.isShuttingDown() && req.method === 'POST' && req.path !== '/ping') {
      next(new ServingError('SHUTTING_DOWN', 'the server is shutting down; retry on another instance'));
      return;
    }
    next();
  });

  const routeDeps = { service: deps.service, bodyLimitBytes: deps.bodyLimitBytes, defaultAccept: deps.defaultAccept, context: (_req: Request, res: Response) => ctxOf(res) };
  app.use(sagemakerRoutes(routeDeps));
  app.use(v2Routes({ ...routeDeps, isShuttingDown: deps.isShuttingDown }));

  app.get('/metrics', async (_req, res) => {
    res.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics());
  });

  app.use((req: Request, _res: Response, next: NextFunction) => {
    const known = KNOWN_PATHS.some((p) => p.test(req.path));
    next(
      known
        ? new ServingError('METHOD_NOT_ALLOWED', `method ${req.method} is not allowed on ${req.path}`)
        : new ServingError('ROUTE_NOT_FOUND', `no route for ${req.method} ${req.path}`),
    );
  });

  // express recognises error handlers by their four parameters.
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    // KServe clients get Triton's statuses on the v2 routes (error-response.ts).
    const reply = errorReply(fromExpressError(err), req.path === '/v2' || req.path.startsWith('/v2/') ? 'kserve' : 'sagemaker');
    const ctx = ctxOf(res);
    // The closing `request` line names the model too (the label the client used when it never resolved).
    if (reply.error.model !== undefined && res.locals['model'] === undefined) res.locals['model'] = reply.error.model;
    const fields = {
      status: reply.status,
      code: reply.error.code,
      ...modelFields(res),
      method: req.method,
      path: req.path,
      durationMs: elapsedMs(ctx),
      err: reply.error.message,
    };
    if (reply.status >= 500) ctx.log.error({ ...fields, stack: reply.error.cause instanceof Error ? reply.error.cause.stack : undefined }, 'request failed');
    else ctx.log.warn(fields, 'request rejected');
    if (res.headersSent || res.destroyed) return;
    res.status(reply.status).type('application/json').send(reply.body);
  });

  return app;
}
