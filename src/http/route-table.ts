/**
 * @module http/route-table
 * Every HTTP route the server answers, declared once. The express routers
 * register their handlers through `register` with these entries (so a path
 * is spelt in one place), the lean inference path (http/inference-front.ts)
 * labels what it serves with the `lean` entries' patterns, the 404-versus-405
 * answer (app.ts) derives from the patterns, and docs/openapi.json is
 * checked against this table by a test. Patterns are express's (`:param`).
 *
 * Each route belongs to one API group (Triton's, for MME_HTTP_RESTRICTED_API)
 * and says whether it loads or unloads models (MME_MODEL_CONTROL). `register`
 * puts the access check (service/access-policy.ts, through the guard the app
 * passes) in front of every handler it declares, so whatever spelling express
 * matched (other letter case, a trailing slash) the route's own group decides,
 * before the handler reads a byte of the body.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request, Response, Router } from 'express';
import type { AccessTarget } from '../service/access-policy.js';
import type { ServingError } from '../errors.js';

export type RouteMethod = 'GET' | 'POST' | 'DELETE';

export interface RouteSpec extends AccessTarget {
  readonly method: RouteMethod;
  readonly path: string;
  readonly summary: string;
  /** An inference route: served by the front (http/inference-front.ts), never by express. */
  readonly lean?: true;
}

type Group = AccessTarget['group'];

function route(method: RouteMethod, path: string, group: Group, summary: string, extra: { lean?: true; controls?: true } = {}): RouteSpec {
  return Object.freeze({ method, path, group, summary, ...extra });
}

const LEAN = { lean: true } as const;
const CONTROLS = { controls: true } as const;

export const ROUTES = Object.freeze({
  ping: route('GET', '/ping', 'open', 'Liveness for SageMaker (never touches models)'),
  pingPost: route('POST', '/ping', 'open', 'Liveness, POST form'),
  invocations: route(
    'POST',
    '/invocations',
    'inference',
    'Inference; target from X-Amzn-SageMaker-Target-Model or CustomAttributes target-model, else the default model',
    LEAN,
  ),
  endpointInvocations: route(
    'POST',
    '/endpoints/:endpoint/invocations',
    'inference',
    "SageMaker Runtime InvokeEndpoint's path (AWS SDKs pointed at the container)",
    LEAN,
  ),
  listModels: route('GET', '/models', 'model-repository', 'SageMaker MME: list loaded models'),
  loadModel: route('POST', '/models', 'model-repository', 'SageMaker MME: load a model from a directory', CONTROLS),
  describeModel: route('GET', '/models/:name', 'model-repository', 'SageMaker MME: describe a loaded model'),
  unloadModel: route('DELETE', '/models/:name', 'model-repository', 'SageMaker MME: unload a model', CONTROLS),
  invokeModel: route('POST', '/models/:name/invoke', 'inference', 'SageMaker MME: inference on a loaded model', LEAN),
  metrics: route('GET', '/metrics', 'metrics', 'Prometheus metrics'),
  v2Live: route('GET', '/v2/health/live', 'health', 'KServe v2 liveness'),
  v2Ready: route('GET', '/v2/health/ready', 'health', 'KServe v2 readiness'),
  v2Server: route('GET', '/v2', 'metadata', 'KServe v2 server metadata'),
  v2AllStats: route('GET', '/v2/models/stats', 'statistics', 'Triton statistics extension: every loaded model'),
  v2Stats: route('GET', '/v2/models/:model/stats', 'statistics', 'Triton statistics extension: one model'),
  v2VersionStats: route('GET', '/v2/models/:model/versions/:version/stats', 'statistics', 'Triton statistics extension: one model version'),
  v2Metadata: route('GET', '/v2/models/:model', 'metadata', 'KServe v2 model metadata'),
  v2VersionMetadata: route('GET', '/v2/models/:model/versions/:version', 'metadata', 'KServe v2 model version metadata'),
  v2ModelReady: route('GET', '/v2/models/:model/ready', 'health', 'KServe v2 model readiness (never loads)'),
  v2VersionReady: route('GET', '/v2/models/:model/versions/:version/ready', 'health', 'KServe v2 model version readiness'),
  v2Infer: route('POST', '/v2/models/:model/infer', 'inference', 'KServe v2 inference', LEAN),
  v2VersionInfer: route('POST', '/v2/models/:model/versions/:version/infer', 'inference', 'KServe v2 inference on one version', LEAN),
  v2Config: route('GET', '/v2/models/:model/config', 'model-config', 'Triton model configuration extension'),
  v2VersionConfig: route('GET', '/v2/models/:model/versions/:version/config', 'model-config', 'Triton model configuration of one version'),
  repositoryIndex: route('POST', '/v2/repository/index', 'model-repository', 'Triton model repository extension: index'),
  repositoryLoad: route('POST', '/v2/repository/models/:model/load', 'model-repository', 'Triton model repository extension: load', CONTROLS),
  repositoryUnload: route('POST', '/v2/repository/models/:model/unload', 'model-repository', 'Triton model repository extension: unload', CONTROLS),
} satisfies Record<string, RouteSpec>);

export const ROUTE_LIST: readonly RouteSpec[] = Object.freeze(Object.values(ROUTES));

type Handler = (req: Request, res: Response) => unknown;

/** The access check of one request to one route (http/access-guard.ts): the refusal, or undefined. */
export type RouteGuard = (spec: RouteSpec, req: IncomingMessage, res: ServerResponse) => ServingError | undefined;

/**
 * Declares `route` on an express router behind `guard` (express 5 forwards a
 * thrown error or a rejected promise to the error handler).
 */
export function register(router: Router, spec: RouteSpec, guard: RouteGuard, handler: Handler): void {
  const method = spec.method === 'GET' ? 'get' : spec.method === 'POST' ? 'post' : 'delete';
  router[method](spec.path, (req: Request, res: Response) => {
    const refused = guard(spec, req, res);
    if (refused !== undefined) throw refused;
    return handler(req, res);
  });
}

/** A route's path as express matches it: letter case ignored, one trailing slash allowed. */
function patternOf(path: string): RegExp {
  return new RegExp(`^${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:[A-Za-z]+/g, '[^/]+')}/?$`, 'i');
}

const PATTERNS: readonly { readonly pattern: RegExp; readonly method: RouteMethod }[] = Object.freeze(
  ROUTE_LIST.map((r) => Object.freeze({ pattern: patternOf(r.path), method: r.method })),
);

/** The distinct path patterns: a path none of them matches is unknown (404), one that some match is served with other methods (405). */
export const KNOWN_PATHS: readonly RegExp[] = Object.freeze([...new Set(ROUTE_LIST.map((r) => r.path))].map(patternOf));

/** The methods a path is served with: none for an unknown path (404), else a wrong method's 405 names them in Allow. */
export function methodsFor(path: string): RouteMethod[] {
  return [...new Set(PATTERNS.filter((p) => p.pattern.test(path)).map((p) => p.method))];
}
