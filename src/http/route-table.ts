/**
 * @module http/route-table
 * Every HTTP route the server answers, declared once. The express routers
 * register their handlers through `register` with these entries (so a path
 * is spelt in one place), the lean inference path (http/inference-front.ts)
 * labels what it serves with the `lean` entries' patterns, the 404-versus-405
 * answer (app.ts) derives from the patterns, and docs/openapi.json is
 * checked against this table by a test. Patterns are express's (`:param`).
 */
import type { Request, Response, Router } from 'express';

export type RouteMethod = 'GET' | 'POST' | 'DELETE';

export interface RouteSpec {
  readonly method: RouteMethod;
  readonly path: string;
  readonly summary: string;
  /** Served by the lean path (POST inference routes); express declares them too, for the spellings the lean path leaves to it. */
  readonly lean?: true;
}

function route(method: RouteMethod, path: string, summary: string, lean?: true): RouteSpec {
  return Object.freeze({ method, path, summary, ...(lean ? { lean } : {}) });
}

export const ROUTES = Object.freeze({
  ping: route('GET', '/ping', 'Liveness for SageMaker (never touches models)'),
  pingPost: route('POST', '/ping', 'Liveness, POST form'),
  invocations: route(
    'POST',
    '/invocations',
    'Inference; target from X-Amzn-SageMaker-Target-Model or CustomAttributes target-model, else the default model',
    true,
  ),
  endpointInvocations: route('POST', '/endpoints/:endpoint/invocations', "SageMaker Runtime InvokeEndpoint's path (AWS SDKs pointed at the container)", true),
  listModels: route('GET', '/models', 'SageMaker MME: list loaded models'),
  loadModel: route('POST', '/models', 'SageMaker MME: load a model from a directory'),
  describeModel: route('GET', '/models/:name', 'SageMaker MME: describe a loaded model'),
  unloadModel: route('DELETE', '/models/:name', 'SageMaker MME: unload a model'),
  invokeModel: route('POST', '/models/:name/invoke', 'SageMaker MME: inference on a loaded model', true),
  metrics: route('GET', '/metrics', 'Prometheus metrics'),
  v2Live: route('GET', '/v2/health/live', 'KServe v2 liveness'),
  v2Ready: route('GET', '/v2/health/ready', 'KServe v2 readiness'),
  v2Server: route('GET', '/v2', 'KServe v2 server metadata'),
  v2AllStats: route('GET', '/v2/models/stats', 'Triton statistics extension: every loaded model'),
  v2Stats: route('GET', '/v2/models/:model/stats', 'Triton statistics extension: one model'),
  v2VersionStats: route('GET', '/v2/models/:model/versions/:version/stats', 'Triton statistics extension: one model version'),
  v2Metadata: route('GET', '/v2/models/:model', 'KServe v2 model metadata'),
  v2VersionMetadata: route('GET', '/v2/models/:model/versions/:version', 'KServe v2 model version metadata'),
  v2ModelReady: route('GET', '/v2/models/:model/ready', 'KServe v2 model readiness (never loads)'),
  v2VersionReady: route('GET', '/v2/models/:model/versions/:version/ready', 'KServe v2 model version readiness'),
  v2Infer: route('POST', '/v2/models/:model/infer', 'KServe v2 inference', true),
  v2VersionInfer: route('POST', '/v2/models/:model/versions/:version/infer', 'KServe v2 inference on one version', true),
  v2Config: route('GET', '/v2/models/:model/config', 'Triton model configuration extension'),
  v2VersionConfig: route('GET', '/v2/models/:model/versions/:version/config', 'Triton model configuration of one version'),
  repositoryIndex: route('POST', '/v2/repository/index', 'Triton model repository extension: index'),
  repositoryLoad: route('POST', '/v2/repository/models/:model/load', 'Triton model repository extension: load'),
  repositoryUnload: route('POST', '/v2/repository/models/:model/unload', 'Triton model repository extension: unload'),
} satisfies Record<string, RouteSpec>);

export const ROUTE_LIST: readonly RouteSpec[] = Object.freeze(Object.values(ROUTES));

type Handler = (req: Request, res: Response) => unknown;

/** Declares `route` on an express router (express 5 forwards a rejected promise to the error handler). */
export function register(router: Router, spec: RouteSpec, handler: Handler): void {
  const method = spec.method === 'GET' ? 'get' : spec.method === 'POST' ? 'post' : 'delete';
  router[method](spec.path, handler);
}

function patternOf(path: string): RegExp {
  return new RegExp(`^${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:[A-Za-z]+/g, '[^/]+')}$`);
}

/** The distinct path patterns, for telling a wrong method (405) from an unknown path (404). */
export const KNOWN_PATHS: readonly RegExp[] = Object.freeze([...new Set(ROUTE_LIST.map((r) => r.path))].map(patternOf));

/** The methods a path is served with (for a 405's Allow header). */
export function methodsFor(path: string): RouteMethod[] {
  return [...new Set(ROUTE_LIST.filter((r) => patternOf(r.path).test(path)).map((r) => r.method))];
}
