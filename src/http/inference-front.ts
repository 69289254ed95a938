/**
 * @module http/inference-front
 * The lean path for inference requests, in front of express. Measured on a
 * 2-core box (bench/invocations.bench.ts, bench/README.md): with the tiny
 * model, express's per-request work (app and router dispatch over every
 * layer, prototype swaps on req/res, res.send's type and length handling)
 * cost more main-thread time than reading, decoding, batching and answering
 * the request itself. The inference routes therefore go straight from
 * node:http to the shared handler (http/infer-route.ts); everything else
 * (health, metrics, MME management, v2 metadata and repository, 404/405)
 * stays in express.
 *
 * Only the canonical spelling of each route is taken here: `POST` and an
 * exact, case-sensitive path whose parameters decode. Anything else (a
 * trailing slash, other letter case, a malformed `%` escape) falls through to
 * express, which declares every route too and answers those requests
 * itself. Both paths share the request envelope (http/request-envelope.ts:
 * request id, in-flight count, shutdown refusal, log lines, the route metric)
 * and the error answer, so a request cannot tell which path served it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ModelHandle, ModelRef } from '../service/inference-service.js';
import { closeUnlessSmallBody } from './access-guard.js';
import { refLabel, serveInference, type InferRouteDeps } from './infer-route.js';
import { invocationRef } from './invocation-target.js';
import { canonicalModelPath } from './model-path.js';
import { ROUTES, type RouteGuard, type RouteSpec } from './route-table.js';
import type { RouteFamily } from './infer-exchange.js';
import type { RequestTicket } from './admission.js';
import { openEnvelope, pathOf, sendError, shutdownRefusal, type Envelope, type EnvelopeDeps } from './request-envelope.js';
import { parseVersion } from './v2-routes.js';

export interface InferenceFrontDeps extends InferRouteDeps, EnvelopeDeps {
  /** The access check of the route table's routes (http/access-guard.ts), the same one express's routes run behind. */
  readonly guard: RouteGuard;
}

const TARGET_HEADER = 'x-amzn-sagemaker-target-model';

/** A matched inference route: its metric label (express's pattern), family, and how to build the model reference. */
export interface InferenceRouteMatch {
  /** The route table's entry: its pattern is the metric label, its group the access check's. */
  readonly spec: RouteSpec;
  readonly route: string;
  readonly family: RouteFamily;
  /** Throws a ServingError for a bad parameter (e.g. a version that is not a positive integer). */
  readonly resolve: (req: IncomingMessage, deps: InferRouteDeps) => { ref: ModelRef; version: number | undefined };
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  const s = Array.isArray(v) ? v[0] : v;
  return s === undefined || s === '' ? undefined : s;
}

/** A path segment decoded as express decodes parameters; undefined when it cannot be (express then answers). */
function decodeSegment(raw: string): string | undefined {
  if (raw === '') return undefined;
  if (!raw.includes('%')) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}

const INVOCATIONS: InferenceRouteMatch = {
  spec: ROUTES.invocations,
  route: ROUTES.invocations.path,
  family: 'sagemaker',
  resolve: (req) => ({ ref: invocationRef(req.headers), version: undefined }),
};

const ENDPOINT_INVOCATIONS: InferenceRouteMatch = { ...INVOCATIONS, spec: ROUTES.endpointInvocations, route: ROUTES.endpointInvocations.path };

/**
 * The inference route a canonical `POST` path names, or undefined (then
 * express decides). Segments are split by hand: a regex per route per request
 * is what the lean path exists to avoid.
 */
export function matchInferenceRoute(path: string): InferenceRouteMatch | undefined {
  if (path === '/invocations') return INVOCATIONS;
  const parts = path.split('/');
  // parts[0] is '' (the path starts with '/').
  if (parts[0] !== '') return undefined;
  if (parts.length === 4 && parts[1] === 'endpoints' && parts[3] === 'invocations') {
    return decodeSegment(parts[2]!) === undefined ? undefined : ENDPOINT_INVOCATIONS;
  }
  if (parts.length === 4 && parts[1] === 'models' && parts[3] === 'invoke') {
    const name = decodeSegment(parts[2]!);
    if (name === undefined) return undefined;
    return {
      spec: ROUTES.invokeModel,
      route: ROUTES.invokeModel.path,
      family: 'sagemaker',
      resolve: (req) => ({ ref: { kind: 'managed', name, targetHeader: header(req, TARGET_HEADER) }, version: undefined }),
    };
  }
  if (parts[1] === 'v2' && parts[2] === 'models' && parts[parts.length - 1] === 'infer') {
    const model = parts.length === 5 || (parts.length === 7 && parts[4] === 'versions') ? decodeSegment(parts[3]!) : undefined;
    if (model === undefined) return undefined;
    if (parts.length === 5) {
      return {
        spec: ROUTES.v2Infer,
        route: ROUTES.v2Infer.path,
        family: 'kserve',
        resolve: () => ({ ref: { kind: 'named', name: model }, version: undefined }),
      };
    }
    const rawVersion = decodeSegment(parts[5]!);
    if (rawVersion === undefined) return undefined;
    return {
      spec: ROUTES.v2VersionInfer,
      route: ROUTES.v2VersionInfer.path,
      family: 'kserve',
      resolve: () => ({ ref: { kind: 'named', name: model }, version: parseVersion(rawVersion) }),
    };
  }
  return undefined;
}

/**
 * The server's request listener: inference routes on the lean path,
 * everything else handed to `fallback` (the express app).
 */
export function createInferenceFront(
  deps: InferenceFrontDeps,
  fallback: (req: IncomingMessage, res: ServerResponse) => void,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    let path = pathOf(req.url);
    // A nested model name (`/v2/models/team/x/infer`, as tritonclient sends it) becomes one encoded segment for every route.
    if (path.startsWith('/v2/')) {
      const canonical = canonicalModelPath(path);
      if (canonical !== undefined) {
        req.url = canonical + (req.url ?? '').slice(path.length);
        path = canonical;
      }
    }
    if (req.method !== 'POST') {
      fallback(req, res);
      return;
    }
    const match = matchInferenceRoute(path);
    if (match === undefined) {
      fallback(req, res);
      return;
    }
    // serveInference and sendError write X-Request-Id in their writeHead.
    const envelope = openEnvelope(req, res, deps, { path, callerWritesId: true });
    const refused = shutdownRefusal(req, path, deps);
    if (refused !== undefined) {
      // Refused before any route took it, exactly as the express middleware does.
      sendError(req, res, envelope, refused);
      return;
    }
    envelope.route = match.route;
    // Restricted groups and model control, before the target is resolved or a byte of the body read (service/access-policy.ts).
    const denied = deps.guard(match.spec, req, res);
    if (denied !== undefined) {
      sendError(req, res, envelope, denied);
      return;
    }
    let resolved: ReturnType<InferenceRouteMatch['resolve']>;
    try {
      resolved = match.resolve(req, deps);
    } catch (err) {
      sendError(req, res, envelope, err);
      return;
    }
    // The refusal's log line names the target as serveInference does.
    envelope.ctx.target = refLabel(resolved.ref);
    let handle: ModelHandle | undefined;
    try {
      handle = deps.service.resolve(resolved.ref);
    } catch {
      // A reference that does not resolve (INVALID_TARGET) is refused after the body's own checks, where it always was.
      handle = undefined;
    }
    let admitted: RequestTicket;
    try {
      // Over MME_MAX_INFLIGHT_REQUESTS or the model's queue: answered now, in this call, before any turn or body (admission.ts).
      admitted = deps.admission.admit(deps.service.queueOf(handle, envelope.ctx.target));
    } catch (err) {
      refuseUnread(req, res, envelope, err);
      return;
    }
    res.once('close', admitted.release);
    const start = (): void => {
      // A client that gave up while waiting for its turn costs nothing more.
      if (req.destroyed) return;
      serveInference(deps, req, res, envelope.ctx, resolved.ref, match.family, resolved.version, admitted, handle).catch((err: unknown) =>
        sendError(req, res, envelope, err),
      );
    };
    try {
      deps.admission.schedule(start);
    } catch (err) {
      refuseUnread(req, res, envelope, err);
    }
  };
}

/**
 * Refused before a byte of the body is read. A small declared body is left
 * for node to discard and the keep-alive connection is kept (a flood's
 * clients retry on it instead of reconnecting); a large, unknown-length or
 * chunked one closes the connection rather than node reading a body nobody
 * wants.
 */
function refuseUnread(req: IncomingMessage, res: ServerResponse, envelope: Envelope, err: unknown): void {
  closeUnlessSmallBody(req, res);
  sendError(req, res, envelope, err);
}
