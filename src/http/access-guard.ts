/**
 * @module http/access-guard
 * The HTTP face of the access policy (service/access-policy.ts): the guard
 * every route of the route table runs behind (http/route-table.ts `register`,
 * the lean inference path, the metrics listener). It reads the caller's
 * headers and, on a refusal, makes sure no body is read for it: a small
 * declared body is left for node to discard (the keep-alive connection
 * stays), anything larger, chunked or of unknown length ends the connection.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AccessPolicy, AccessTarget } from '../service/access-policy.js';
import type { ServingError } from '../errors.js';
import type { RouteGuard } from './route-table.js';

/** A body this small is read and dropped by node after a refusal, so the connection stays open for the client's next request. */
const DRAINED_BODY_BYTES = 64 * 1024;

function headerOf(req: IncomingMessage): (name: string) => string | undefined {
  return (name) => {
    const v = req.headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
}

/** Nobody reads the body of a refused request: a large, unknown-length or chunked one closes the connection instead. */
export function closeUnlessSmallBody(req: IncomingMessage, res: ServerResponse): void {
  const raw = req.headers['content-length'];
  const declared = raw === undefined ? 0 : Number(raw);
  if (!(req.headers['transfer-encoding'] === undefined && Number.isSafeInteger(declared) && declared >= 0 && declared <= DRAINED_BODY_BYTES))
    res.shouldKeepAlive = false;
}

/** The refusal of `req` to `target` under `policy`, or undefined. */
export function httpRefusal(policy: AccessPolicy, target: AccessTarget, req: IncomingMessage, res: ServerResponse): ServingError | undefined {
  // The common case (an unrestricted inference route) costs one map lookup, no closure.
  if (!policy.restricts(target)) return undefined;
  const refused = policy.refusal(target, headerOf(req));
  if (refused !== undefined) closeUnlessSmallBody(req, res);
  return refused;
}

export function routeGuard(policy: AccessPolicy): RouteGuard {
  return (spec, req, res) => httpRefusal(policy, spec, req, res);
}
