/**
 * @module http/sagemaker-routes
 * SageMaker's container contract other than inference: /ping and the MME
 * management API under /models. The inference routes (/invocations,
 * /endpoints/{name}/invocations, /models/{name}/invoke) enter through
 * http/inference-front.ts. Handlers only translate HTTP to InferenceService
 * calls and back.
 */
import express, { type Request, type Response, type Router } from 'express';
import { ServingError } from '../errors.js';
import { errorReply } from './error-response.js';
import { retryAfterHeader } from './request-envelope.js';
import { parseJsonBody } from '../protocol/v2-json-codec.js';
import { checkModelName, checkTargetHeader, type ManagedModelInfo } from '../service/inference-service.js';
import type { InferRouteDeps } from './infer-route.js';
import { readCountedBody } from './read-body.js';
import { register, ROUTES, type RouteGuard } from './route-table.js';
import type { RequestContext } from './request-context.js';

export interface RouteDeps extends InferRouteDeps {
  /** The access check every route runs behind (http/access-guard.ts). */
  readonly guard: RouteGuard;
  readonly context: (req: Request, res: Response) => RequestContext;
  /** Undefined while the server can serve; else why not (runtime workers that keep dying): /ping answers 503 with it. */
  readonly unhealthy: () => ServingError | undefined;
  /** True from SIGTERM on (the drain): /ping answers 503 so balancers stop sending while requests are still served. */
  readonly isDraining: () => boolean;
}

const TARGET_HEADER = 'x-amzn-sagemaker-target-model';
const DEFAULT_LIST_LIMIT = 100;
const MAX_LIST_LIMIT = 1000;

function header(req: Request, name: string): string | undefined {
  const v = req.headers[name];
  const s = Array.isArray(v) ? v[0] : v;
  return s === undefined || s === '' ? undefined : s;
}

function sendJson(res: Response, status: number, body: string): void {
  res.status(status).type('application/json').send(`${body}\n`);
}

function describe(m: ManagedModelInfo): Record<string, unknown> {
  return {
    modelName: m.modelName,
    modelUrl: m.modelUrl,
    ...(m.targetModel === undefined ? {} : { targetModel: m.targetModel }),
    ...(m.entryModel === undefined ? {} : { entryModel: m.entryModel }),
    ...(m.loadedAt === undefined ? {} : { loadedAt: m.loadedAt }),
    // Memory while resident (docs/memory-and-caching.md): its share of the budget, and what its load measured.
    ...(m.reservedBytes === undefined ? {} : { reservedBytes: m.reservedBytes }),
    ...(m.measuredBytes === undefined ? {} : { measuredBytes: m.measuredBytes }),
  };
}

function encodeToken(name: string): string {
  return Buffer.from(name, 'utf8').toString('base64url');
}

function decodeToken(token: string): string {
  if (!/^[A-Za-z0-9_-]+$/.test(token)) throw new ServingError('INVALID_REQUEST', `invalid next_page_token '${token}'`);
  return Buffer.from(token, 'base64url').toString('utf8');
}

function parseLimit(raw: unknown): number {
  if (raw === undefined) return DEFAULT_LIST_LIMIT;
  const n = Number(raw);
  if (typeof raw !== 'string' || !Number.isInteger(n) || n < 1 || n > MAX_LIST_LIMIT) {
    throw new ServingError('INVALID_REQUEST', `limit must be an integer between 1 and ${MAX_LIST_LIMIT}, got '${String(raw)}'`);
  }
  return n;
}

export function sagemakerRoutes(deps: RouteDeps): Router {
  const router = express.Router();
  const { service } = deps;

  // Health: cheap, never touches models (SageMaker allows 2 s; a model failing must not fail the endpoint).
  // Only a server that cannot serve anything (its runtime workers keep dying) answers 503, so the platform replaces it;
  // and a draining one (after SIGTERM), so balancers take it out while it still serves what they send.
  const ping = (_req: Request, res: Response): void => {
    if (deps.isDraining()) {
      sendJson(res, 503, JSON.stringify({ error: 'the server is shutting down: not ready, requests already sent are still served', code: 'SHUTTING_DOWN' }));
      return;
    }
    const unhealthy = deps.unhealthy();
    if (unhealthy === undefined) {
      res.status(200).end();
      return;
    }
    const reply = errorReply(unhealthy);
    res.set(retryAfterHeader(unhealthy));
    sendJson(res, reply.status, reply.body.trimEnd());
  };
  register(router, ROUTES.ping, deps.guard, ping);
  register(router, ROUTES.pingPost, deps.guard, ping);

  register(router, ROUTES.listModels, deps.guard, (req, res) => {
    const limit = parseLimit(req.query['limit']);
    const token = req.query['next_page_token'];
    const after = typeof token === 'string' && token !== '' ? decodeToken(token) : undefined;
    const page = service.listModels(limit, after);
    const body: Record<string, unknown> = { models: page.models.map(describe) };
    if (page.next !== undefined) body['nextPageToken'] = encodeToken(page.next);
    sendJson(res, 200, JSON.stringify(body));
  });

  register(router, ROUTES.loadModel, deps.guard, async (req, res) => {
    const body = parseJsonBody(await readCountedBody(deps.admission, req, res, deps.bodyLimitBytes), 'load');
    const b = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
    const name = b['model_name'];
    const url = b['url'];
    if (typeof name !== 'string' || name === '' || typeof url !== 'string' || url === '') {
      throw new ServingError('INVALID_REQUEST', 'load request must be JSON {"model_name": "...", "url": "/opt/ml/models/<name>/model"}');
    }
    // Checked before anything is logged: a 3 MiB name must not reach the log either.
    checkModelName(name);
    const ctx = deps.context(req, res);
    const targetHeader = checkTargetHeader(name, header(req, TARGET_HEADER));
    ctx.log.info({ model: name, url: url.slice(0, 4096), targetModel: targetHeader }, 'load requested');
    const info = await service.registerModel(name, url, targetHeader);
    sendJson(res, 200, JSON.stringify({ status: `Model "${name}" loaded`, ...describe(info) }));
  });

  register(router, ROUTES.describeModel, deps.guard, (req, res) => {
    sendJson(res, 200, JSON.stringify(describe(service.describeModel(String(req.params['name'])))));
  });

  register(router, ROUTES.unloadModel, deps.guard, async (req, res) => {
    const name = String(req.params['name']);
    const ctx = deps.context(req, res);
    ctx.log.info({ model: name, targetModel: header(req, TARGET_HEADER) }, 'unload requested');
    await service.unload(service.resolve({ kind: 'managed', name, targetHeader: header(req, TARGET_HEADER) }));
    sendJson(res, 200, JSON.stringify({ status: `Model "${name}" unloaded` }));
  });

  return router;
}
