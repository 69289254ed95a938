/**
 * @module http/inference-front
 * The one entrance of every HTTP inference request (/invocations,
 * /endpoints/{e}/invocations, /models/{m}/invoke, /v2/models/{m}[/versions/{v}]/infer),
 * in front of express, which serves only what is not inference (health,
 * metrics, MME management, v2 metadata and repository, 404/405).
 *
 * Each request passes the same gates in the same order, whatever its route:
 * shutdown refusal → access check (service/access-policy.ts) → model
 * reference → admission (service/admission.ts: in-flight requests and the
 * model's queue, decided when the headers arrive, before a byte of the body
 * is read) → a fair share of an event-loop turn → the handler
 * (http/infer-route.ts). A refusal for overload is answered at once with
 * Retry-After, and its keep-alive connection is held unread until a place
 * frees for it (http/held-connections.ts).
 *
 * Routes are matched by hand (a regex per route per request cost more than
 * the rest of the match): fixed segments case-insensitively and an optional
 * trailing slash, as express matches them, so no spelling of an inference
 * route reaches express.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ServingError } from '../errors.js';
import { refusalReasonOf, type RequestTicket } from '../service/admission.js';
import type { AccessPolicy } from '../service/access-policy.js';
import type { ModelHandle, ModelRef } from '../service/inference-service.js';
import { closeUnlessSmallBody } from './access-guard.js';
import { ANY, type HeldConnections } from './held-connections.js';
import { refLabel, serveInference, type InferRouteDeps } from './infer-route.js';
import type { RouteFamily } from './infer-exchange.js';
import { invocationRef } from './invocation-target.js';
import { canonicalModelPath } from './model-path.js';
import { openEnvelope, pathOf, sendError, shutdownRefusal, type Envelope, type EnvelopeDeps } from './request-envelope.js';
import { ROUTES, type RouteGuard, type RouteSpec } from './route-table.js';
import { parseVersion } from './v2-routes.js';

export interface InferenceFrontDeps extends InferRouteDeps, EnvelopeDeps {
  /** The access check of the route table's routes (http/access-guard.ts), the same one express's routes run behind. */
  readonly guard: RouteGuard;
  /** The policy behind `guard`: which inference routes depend on the caller at all is read from it once. */
  readonly access: AccessPolicy;
  /** Where refused keep-alive connections wait unread; none: refused connections are read again at once. */
  readonly held?: HeldConnections;
}

const TARGET_HEADER = 'x-amzn-sagemaker-target-model';

/** A matched inference route: its table entry (metric label, access group), family, and how to build the model reference. */
export interface InferenceRouteMatch {
  readonly spec: RouteSpec;
  readonly family: RouteFamily;
  /** Throws a ServingError for a bad parameter (a segment that does not decode, a version that is not a positive integer). */
  readonly resolve: (req: IncomingMessage) => { ref: ModelRef; version: number | undefined };
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  const s = Array.isArray(v) ? v[0] : v;
  return s === undefined || s === '' ? undefined : s;
}

/** A path segment decoded as express decodes parameters; a malformed `%` escape is the client's error. */
function decodeSegment(raw: string, what: string): string {
  if (!raw.includes('%')) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new ServingError('INVALID_REQUEST', `the ${what} in the path is not valid percent-encoding: '${raw.slice(0, 200)}'`);
  }
}

const INVOCATIONS: InferenceRouteMatch = {
  spec: ROUTES.invocations,
  family: 'sagemaker',
  resolve: (req) => ({ ref: invocationRef(req.headers), version: undefined }),
};

const ENDPOINT_INVOCATIONS: InferenceRouteMatch = { ...INVOCATIONS, spec: ROUTES.endpointInvocations };

/** Every route the front serves. */
const INFERENCE_SPECS: readonly RouteSpec[] = [ROUTES.invocations, ROUTES.endpointInvocations, ROUTES.invokeModel, ROUTES.v2Infer, ROUTES.v2VersionInfer];

/** A fixed segment as express compares it: case-insensitively. */
function is(segment: string | undefined, fixed: string): boolean {
  return segment === fixed || (segment !== undefined && segment.length === fixed.length && segment.toLowerCase() === fixed);
}

function invokeModel(rawName: string): InferenceRouteMatch {
  return {
    spec: ROUTES.invokeModel,
    family: 'sagemaker',
    resolve: (req) => ({ ref: { kind: 'managed', name: decodeSegment(rawName, 'model name'), targetHeader: header(req, TARGET_HEADER) }, version: undefined }),
  };
}

function v2Infer(rawModel: string, rawVersion: string | undefined): InferenceRouteMatch {
  return {
    spec: rawVersion === undefined ? ROUTES.v2Infer : ROUTES.v2VersionInfer,
    family: 'kserve',
    resolve: () => ({
      ref: { kind: 'named', name: decodeSegment(rawModel, 'model name') },
      version: rawVersion === undefined ? undefined : parseVersion(decodeSegment(rawVersion, 'version')),
    }),
  };
}

/** The inference route a `POST` path names (any spelling express would match), or undefined (then express decides). */
export function matchInferenceRoute(path: string): InferenceRouteMatch | undefined {
  if (path === '/invocations') return INVOCATIONS;
  const parts = path.split('/');
  // parts[0] is '' (the path starts with '/'); one trailing slash leaves a last '' that express ignores too.
  if (parts[0] !== '') return undefined;
  if (parts.length > 2 && parts[parts.length - 1] === '') parts.pop();
  if (parts.length === 2) return is(parts[1], 'invocations') ? INVOCATIONS : undefined;
  if (parts.length === 4 && is(parts[1], 'endpoints') && is(parts[3], 'invocations') && parts[2] !== '') return ENDPOINT_INVOCATIONS;
  if (parts.length === 4 && is(parts[1], 'models') && is(parts[3], 'invoke') && parts[2] !== '') return invokeModel(parts[2]!);
  if (!is(parts[1], 'v2') || !is(parts[2], 'models') || !is(parts[parts.length - 1], 'infer') || parts[3] === '') return undefined;
  if (parts.length === 5) return v2Infer(parts[3]!, undefined);
  if (parts.length === 7 && is(parts[4], 'versions') && parts[5] !== '') return v2Infer(parts[3]!, parts[5]);
  return undefined;
}

/** The request's path, with a nested model name (`/v2/models/team/x/infer`, as tritonclient sends it) as one encoded segment. */
function canonicalPath(req: IncomingMessage): string {
  const path = pathOf(req.url);
  if (!path.startsWith('/v2/')) return path;
  const canonical = canonicalModelPath(path);
  if (canonical === undefined) return path;
  req.url = canonical + (req.url ?? '').slice(path.length);
  return canonical;
}

/** `scheme://authority` at the start of an absolute-form request target. */
const ABSOLUTE_FORM = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i;

/**
 * An absolute-form target (`POST http://host/invocations`, as a client
 * talking to a proxy sends it) as the origin form every route and access
 * check reads: HTTP/1.1 servers must accept it (RFC 9112 3.2.2), and one
 * path decides where a request goes and what guards it.
 */
function originForm(url: string): string {
  const authority = ABSOLUTE_FORM.exec(url);
  if (authority === null) return url;
  const rest = url.slice(authority[0].length);
  return rest.startsWith('/') ? rest : `/${rest}`;
}

/**
 * The server's request listener: inference routes through the front,
 * everything else handed to `fallback` (the express app).
 */
export function createInferenceFront(
  deps: InferenceFrontDeps,
  fallback: (req: IncomingMessage, res: ServerResponse) => void,
): (req: IncomingMessage, res: ServerResponse) => void {
  // The policy is fixed at start-up: an inference route that no restriction covers skips the guard on every request.
  const guarded = new Set(INFERENCE_SPECS.filter((spec) => deps.access.restricts(spec)));
  return (req, res) => {
    // Origin form ('/…') and '*' are as sent; anything else is read as an absolute form.
    if (req.url !== undefined && req.url.charCodeAt(0) !== 0x2f && req.url !== '*') req.url = originForm(req.url);
    const path = canonicalPath(req);
    const match = req.method === 'POST' ? matchInferenceRoute(path) : undefined;
    if (match === undefined) {
      fallback(req, res);
      return;
    }
    // serveInference and sendError write X-Request-Id in their writeHead.
    const envelope = openEnvelope(req, res, deps, { path, callerWritesId: true });
    envelope.route = match.spec.path;
    const refused = shutdownRefusal(req, path, deps) ?? (guarded.has(match.spec) ? deps.guard(match.spec, req, res) : undefined);
    if (refused !== undefined) {
      sendError(req, res, envelope, refused);
      return;
    }
    enter(deps, req, res, envelope, match);
  };
}

/** Past the route's own gates: resolve the model, admit, and start in a fair share of a turn. */
function enter(deps: InferenceFrontDeps, req: IncomingMessage, res: ServerResponse, envelope: Envelope, match: InferenceRouteMatch): void {
  let resolved: ReturnType<InferenceRouteMatch['resolve']>;
  try {
    resolved = match.resolve(req);
  } catch (err) {
    sendError(req, res, envelope, err);
    return;
  }
  // The refusal's log line names the target as serveInference does.
  const target = refLabel(resolved.ref);
  envelope.ctx.target = target;
  let handle: ModelHandle | undefined;
  try {
    handle = deps.service.resolve(resolved.ref);
  } catch {
    // A reference that does not resolve (INVALID_TARGET) is refused after the body's own checks.
    handle = undefined;
  }
  const queue = deps.service.queueOf(handle ?? target);
  let admitted: RequestTicket;
  try {
    // A connection woken for a freed place claims the place kept for it (http/held-connections.ts).
    let claimed = deps.held?.claim(req.socket);
    if (claimed !== undefined && claimed !== ANY && claimed !== queue.key) {
      // Its retry went to another model: the place kept for the first goes back.
      deps.admission.dropPlace(claimed);
      claimed = undefined;
    }
    admitted = deps.admission.admit(queue, claimed);
  } catch (err) {
    refuseUnread(deps, req, res, envelope, err, queue.key);
    return;
  }
  envelope.ctx.releaseAtClose(admitted);
  const start = (): void => {
    // A client that gave up while waiting for its turn costs nothing more.
    if (req.destroyed) return;
    const entry = { ref: resolved.ref, family: match.family, version: resolved.version, admitted, handle };
    serveInference(deps, req, res, envelope.ctx, entry).catch((err: unknown) => sendError(req, res, envelope, err));
  };
  try {
    deps.admission.schedule(start, queue.key, queue.model);
  } catch (err) {
    refuseUnread(deps, req, res, envelope, err, queue.key);
  }
}

/**
 * Refused before a byte of the body is read. A small declared body is left
 * for node to discard and the keep-alive connection is kept, held unread
 * until a place frees for it; a large, unknown-length or chunked one closes
 * the connection rather than node reading a body nobody wants.
 */
function refuseUnread(deps: InferenceFrontDeps, req: IncomingMessage, res: ServerResponse, envelope: Envelope, err: unknown, key: string): void {
  closeUnlessSmallBody(req, res);
  sendError(req, res, envelope, err);
  const reason = err instanceof ServingError ? refusalReasonOf(err) : undefined;
  if (deps.held !== undefined && reason !== undefined && res.shouldKeepAlive) {
    deps.held.hold(req.socket, reason === 'queue_full' ? key : ANY);
  }
}
