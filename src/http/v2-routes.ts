/**
 * @module http/v2-routes
 * The KServe v2 / Triton HTTP routes over the same models as the SageMaker
 * routes, so tritonclient, perf_analyzer and KServe can talk to the
 * container: health, server and model metadata, model readiness, inference
 * (JSON, binary tensors, the other content types), config, and the model
 * repository extension (index, load, unload).
 *
 * Name resolution (a `named` reference, resolved once into a handle by the
 * registry): `{m}` is the SageMaker-managed model of that name when SageMaker
 * loaded one (resident or paged out), else a target
 * of MME_MODEL_SOURCE (`tiny`, `add_sub.tar.gz`, `team%2Fb.tar.gz`), loaded
 * on first use exactly like X-Amzn-SageMaker-Target-Model. Readiness never
 * loads anything; metadata, config, infer and load do.
 */
import express, { type Request, type Response, type Router } from 'express';
import { ServingError } from '../errors.js';
import { parseJsonBody } from '../protocol/v2-json-codec.js';
import type { LoadProgressView, ModelHandle, RepositoryIndexEntry } from '../service/inference-service.js';
import { SERVER_NAME, SERVER_VERSION, V2_EXTENSIONS, parseVersion } from '../service/server-identity.js';
import type { InferRouteDeps } from './infer-route.js';
import { readCountedBody } from './read-body.js';
import { register, ROUTES, type RouteGuard } from './route-table.js';
import type { RequestContext } from './request-context.js';

// One answer for HTTP and gRPC (service/server-identity.ts); re-exported for the HTTP layer's callers.
export { SERVER_NAME, SERVER_VERSION, V2_EXTENSIONS, parseVersion } from '../service/server-identity.js';

export interface V2RouteDeps extends InferRouteDeps {
  /** The access check every route runs behind (http/access-guard.ts). */
  readonly guard: RouteGuard;
  readonly context: (req: Request, res: Response) => RequestContext;
  /** True from SIGTERM on (the drain): ready answers no while requests are still served. */
  readonly isDraining: () => boolean;
  /** Undefined while the server can serve; else why not (runtime workers that keep dying). */
  readonly unhealthy: () => ServingError | undefined;
}

function sendJson(res: Response, status: number, body: unknown): void {
  res
    .status(status)
    .type('application/json')
    .send(`${JSON.stringify(body)}\n`);
}

/** Triton answers health and readiness with an empty 200, and 400 with an error body when the answer is no. */
function yes(res: Response): void {
  res.status(200).type('text/plain').end();
}

function no(res: Response, message: string): void {
  sendJson(res, 400, { error: message });
}

function versionParam(req: Request): number | undefined {
  const raw = req.params['version'];
  return parseVersion(raw === undefined ? undefined : String(raw));
}

/** An optional JSON body (counted under MME_MAX_INFLIGHT_BYTES): empty means `{}`. `model` is what the JSON codec's messages name. */
async function optionalJson(deps: V2RouteDeps, req: Request, res: Response, model: string): Promise<Record<string, unknown>> {
  const body = await readCountedBody(deps.admission, req, res, deps.bodyLimitBytes);
  if (body.length === 0 || body.toString('utf8').trim() === '') return {};
  const parsed = parseJsonBody(body, model);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ServingError('INVALID_REQUEST', `model '${model}': the request body must be a JSON object`, { model });
  }
  return parsed as Record<string, unknown>;
}

export function v2Routes(deps: V2RouteDeps): Router {
  const router = express.Router();
  serverRoutes(router, deps);
  modelRoutes(router, deps);
  repositoryRoutes(router, deps);
  return router;
}

const handleOf = (deps: V2RouteDeps, req: Request): ModelHandle => deps.service.resolve({ kind: 'named', name: String(req.params['model']) });

/** Liveness, readiness and the server's metadata. */
function serverRoutes(router: Router, deps: V2RouteDeps): void {
  register(router, ROUTES.v2Live, deps.guard, (_req, res) => {
    const reason = deps.unhealthy()?.message;
    if (reason === undefined) yes(res);
    else no(res, reason);
  });
  register(router, ROUTES.v2Ready, deps.guard, (_req, res) => {
    const reason = deps.isDraining() ? 'the server is shutting down' : deps.unhealthy()?.message;
    if (reason === undefined) yes(res);
    else no(res, reason);
  });
  register(router, ROUTES.v2Server, deps.guard, (_req, res) => sendJson(res, 200, { name: SERVER_NAME, version: SERVER_VERSION, extensions: V2_EXTENSIONS }));
}

/** A model's statistics, metadata, readiness and config, each with and without `/versions/{v}`. */
function modelRoutes(router: Router, deps: V2RouteDeps): void {
  const { service } = deps;
  // Before /v2/models/:model, which would take `stats` for a model name.
  register(router, ROUTES.v2AllStats, deps.guard, (_req, res) => sendJson(res, 200, service.modelStatistics(undefined, undefined)));
  const stats = (req: Request, res: Response): void => sendJson(res, 200, service.modelStatistics(handleOf(deps, req), versionParam(req)));
  register(router, ROUTES.v2Stats, deps.guard, stats);
  register(router, ROUTES.v2VersionStats, deps.guard, stats);

  const metadata = async (req: Request, res: Response): Promise<void> => {
    const ctx = deps.context(req, res);
    sendJson(res, 200, await service.modelMetadata(handleOf(deps, req), versionParam(req), ctx.cancel));
  };
  register(router, ROUTES.v2Metadata, deps.guard, metadata);
  register(router, ROUTES.v2VersionMetadata, deps.guard, metadata);

  const ready = (req: Request, res: Response): void => {
    const name = String(req.params['model']);
    const version = versionParam(req);
    if (service.modelReady(handleOf(deps, req), version)) yes(res);
    else
      no(
        res,
        `model '${name}'${version === undefined ? '' : ` version ${version}`} is not ready (not loaded: it loads on its first inference or on POST /v2/repository/models/${name}/load)`,
      );
  };
  register(router, ROUTES.v2ModelReady, deps.guard, ready);
  register(router, ROUTES.v2VersionReady, deps.guard, ready);

  const config = async (req: Request, res: Response): Promise<void> => {
    const ctx = deps.context(req, res);
    sendJson(res, 200, await service.modelConfig(handleOf(deps, req), versionParam(req), ctx.cancel));
  };
  register(router, ROUTES.v2Config, deps.guard, config);
  register(router, ROUTES.v2VersionConfig, deps.guard, config);
}

/** Triton's repository index row, plus where a source model is: on local disk (`cached`) and how big its archive is. */
function indexRow(r: RepositoryIndexEntry): Record<string, unknown> {
  return {
    name: r.name,
    ...(r.version === undefined ? {} : { version: r.version }),
    state: r.state,
    reason: r.reason,
    ...(r.cached === undefined ? {} : { cached: r.cached }),
    ...(r.sizeBytes === undefined ? {} : { size_bytes: r.sizeBytes }),
    // While resident (docs/memory-and-caching.md): its share of the budget, and what its load measured.
    ...(r.reservedBytes === undefined ? {} : { reserved_bytes: r.reservedBytes }),
    ...(r.measuredBytes === undefined ? {} : { measured_bytes: r.measuredBytes }),
    ...(r.lastUsedMs === undefined ? {} : { last_used: new Date(r.lastUsedMs).toISOString() }),
    ...(r.lastError === undefined
      ? {}
      : { last_error: { code: r.lastError.code, message: r.lastError.message, at: new Date(r.lastError.atMs).toISOString() } }),
    // While LOADING: the phase, and the download's share done where S3 gave its size (`LOADING 43%`).
    ...(r.progress === undefined ? {} : { progress: progressJson(r.progress) }),
  };
}

/** The repository extension: the index, and explicit loads and unloads. */
function repositoryRoutes(router: Router, deps: V2RouteDeps): void {
  const { service } = deps;
  register(router, ROUTES.repositoryIndex, deps.guard, async (req, res) => {
    const body = await optionalJson(deps, req, res, 'repository');
    const readyOnly = body['ready'];
    if (readyOnly !== undefined && typeof readyOnly !== 'boolean')
      throw new ServingError('INVALID_REQUEST', `'ready' must be true or false, got ${JSON.stringify(readyOnly)}`);
    const rows = await service.repositoryIndex(readyOnly === true);
    sendJson(res, 200, rows.map(indexRow));
  });

  register(router, ROUTES.repositoryLoad, deps.guard, async (req, res) => {
    const name = String(req.params['model']);
    const body = await optionalJson(deps, req, res, name);
    const params = body['parameters'];
    if (params !== undefined && (typeof params !== 'object' || params === null || Array.isArray(params))) {
      throw new ServingError('INVALID_REQUEST', `model '${name}': 'parameters' must be an object`, { model: name });
    }
    const overrides = Object.keys((params ?? {}) as Record<string, unknown>).filter((k) => k === 'config' || k.startsWith('file:'));
    if (overrides.length > 0) {
      throw new ServingError(
        'UNSUPPORTED',
        `model '${name}': load parameters ${overrides.map((k) => `'${k}'`).join(', ')} are not supported: models load from the model source as they are`,
        { model: name },
      );
    }
    const ctx = deps.context(req, res);
    ctx.log.info({ model: name }, 'load requested (v2 repository)');
    await service.load(handleOf(deps, req), ctx.cancel);
    yes(res);
  });

  register(router, ROUTES.repositoryUnload, deps.guard, async (req, res) => {
    const name = String(req.params['model']);
    await optionalJson(deps, req, res, name); // unload_dependents is always true here: a package's step models go with it
    const ctx = deps.context(req, res);
    ctx.log.info({ model: name }, 'unload requested (v2 repository)');
    await service.unload(handleOf(deps, req));
    yes(res);
  });
}

/** A load's progress in the index's snake_case; fields the load does not know are left out. */
function progressJson(p: LoadProgressView): Record<string, unknown> {
  return {
    phase: p.phase,
    ...(p.fraction === undefined ? {} : { percent: Math.floor(p.fraction * 100) }),
    ...(p.bytes === undefined ? {} : { bytes: p.bytes }),
    ...(p.totalBytes === undefined ? {} : { total_bytes: p.totalBytes }),
    ...(p.bytesPerSecond === undefined ? {} : { bytes_per_second: p.bytesPerSecond }),
    ...(p.etaSeconds === undefined ? {} : { eta_seconds: p.etaSeconds }),
    elapsed_ms: p.elapsedMs,
  };
}
