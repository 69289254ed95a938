/**
 * @module http/request-envelope
 * What every HTTP request gets, whichever path serves it (the lean inference
 * path in http/inference-front.ts or express for everything else): the
 * request context, the in-flight count that shutdown drains, the refusal of
 * new work once shutting down, the closing `request` log line and the
 * `onnx_mme_http_requests_total` sample, and the one way an error becomes an
 * answer (status from http/error-response.ts, `{"error", "code"}` body, a
 * warn or error log line). Both paths call these functions, so they cannot
 * drift apart.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { NO_REDACTION, retryAfterSecondsOf, ServingError, shuttingDown, type HostRedactor } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { errorReply, type ErrorReply } from './error-response.js';
import { refusalReasonOf } from '../service/admission.js';
import { createRequestContext, elapsedMs, type CloseListener, type RequestContext } from './request-context.js';

export interface EnvelopeDeps {
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** True once SIGTERM arrived: new inference work is refused with 503. */
  readonly isShuttingDown: () => boolean;
  /** HTTP requests between arrival and the end of their response; shutdown drains this to zero. */
  readonly inflight: { count: number };
  /** MME_ACCESS_LOG: the `request` line for every request at info. Default false: only errors and slow requests (the rest at debug). */
  readonly accessLog?: boolean;
  /** MME_SLOW_REQUEST_MS: a request that took at least this long gets its `request` line at warn, `slow: true`, whatever accessLog says. */
  readonly slowRequestMs?: number;
  /** Cuts the server's own paths, bucket and prefix out of error answers (errors.ts HostRedactor); none by default. */
  readonly redactor?: HostRedactor;
}

/** MME_SLOW_REQUEST_MS's default, for callers that do not pass one. */
export const DEFAULT_SLOW_REQUEST_MS = 1000;

/** The mutable per-request record: the context plus what the closing line needs. */
export interface Envelope {
  readonly ctx: RequestContext;
  /** Path without the query string. */
  readonly path: string;
  /** Metric label: the matched route pattern, never the raw path (unbounded cardinality); `unmatched` until a route takes the request. */
  route: string;
  /** sendError logged this request's failure (a `request rejected`/`request failed` line): its closing line is not owed as an error's. */
  errorLogged: boolean;
  /** The deps' redactor, for sendError. */
  readonly redactor: HostRedactor;
}

export interface OpenOptions {
  /** Path without the query string, when the caller has it already. */
  readonly path?: string;
  /** Where the route label comes from at the end (express: the route it matched); default: `envelope.route`. */
  readonly routeOf?: () => string;
  /** Every answer of this request goes out through writeHead with X-Request-Id in it (the inference front); see createRequestContext. */
  readonly callerWritesId?: boolean;
}

/** Status codes as label strings, made once each: the metric cell lookup then hashes no new string per request. */
const STATUS_LABELS = new Map<number, string>();

function statusLabel(code: number): string {
  let label = STATUS_LABELS.get(code);
  if (label === undefined) STATUS_LABELS.set(code, (label = String(code)));
  return label;
}

/** The path part of a request URL (no query string). */
export function pathOf(url: string | undefined): string {
  if (url === undefined) return '/';
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

/**
 * Start a request: context, in-flight count, and the closing bookkeeping
 * (metric sample and `request` line once the answer is written).
 *
 * Which requests get the `request` line (docs/metrics-and-logs.md, "What is
 * logged per request"): every one at info with MME_ACCESS_LOG; else a slow one
 * (MME_SLOW_REQUEST_MS) at warn and an error (status ≥ 400) that sendError did
 * not log already at warn; the rest at debug. /ping only ever at debug.
 */
export function openEnvelope(req: IncomingMessage, res: ServerResponse, deps: EnvelopeDeps, options: OpenOptions = {}): Envelope {
  const path = options.path ?? pathOf(req.url);
  deps.inflight.count++;
  const envelope = new RequestEnvelope(req, res, deps, path, options.routeOf);
  envelope.ctx = createRequestContext(req, res, deps.logger, envelope, options.callerWritesId === true);
  if (!envelope.ping && deps.logger.isLevelEnabled('debug')) envelope.ctx.log.debug({ method: req.method, path }, 'request received');
  return envelope;
}

/** A class, not a closure over the request: every request holds one until its response closes (plan-runner.ts says why that matters). */
class RequestEnvelope implements Envelope, CloseListener {
  ctx!: RequestContext;
  route = 'unmatched';
  errorLogged = false;
  readonly redactor: HostRedactor;
  readonly ping: boolean;

  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly deps: EnvelopeDeps,
    readonly path: string,
    private readonly routeOf: (() => string) | undefined,
  ) {
    this.redactor = deps.redactor ?? NO_REDACTION;
    this.ping = path === '/ping';
  }

  /** The response closed: the in-flight count, the metric sample and the closing `request` line. */
  closed(finished: boolean): void {
    const { deps, res, ctx } = this;
    deps.inflight.count--;
    if (!finished) return;
    const route = this.routeOf ? this.routeOf() : this.route;
    const status = res.statusCode;
    deps.metrics.httpRequests.cell({ route, status: statusLabel(status) }).inc();
    const durationMs = elapsedMs(ctx);
    const slow = !this.ping && durationMs >= (deps.slowRequestMs ?? DEFAULT_SLOW_REQUEST_MS);
    const level = slow ? 'warn' : this.ping ? 'debug' : deps.accessLog === true ? 'info' : status >= 400 && !this.errorLogged ? 'warn' : 'debug';
    if (!deps.logger.isLevelEnabled(level)) return;
    const fields: Record<string, unknown> = { method: this.req.method, path: this.path, route, status, ...modelFields(ctx), durationMs };
    if (slow) fields['slow'] = true;
    ctx.line(level, fields, 'request');
  }
}

/** The refusal for new work during shutdown, or undefined when the request may proceed. */
export function shutdownRefusal(req: IncomingMessage, path: string, deps: EnvelopeDeps): ServingError | undefined {
  if (deps.isShuttingDown() && req.method === 'POST' && path !== '/ping') {
    return shuttingDown();
  }
  return undefined;
}

/** The target and model a request resolved to, for log lines (docs/metrics-and-logs.md: the field vocabulary). */
function modelFields(ctx: RequestContext): { target?: string; model?: string; version?: string } {
  const { target, model, modelVersion: version } = ctx;
  return { ...(target === undefined ? {} : { target }), ...(model === undefined ? {} : { model }), ...(version === undefined ? {} : { version }) };
}

/**
 * A refusal that says when to come back (details.retryAfterSeconds, decided where the error is made) says it in
 * Retry-After too, where HTTP clients look.
 */
export function retryAfterHeader(error: ServingError): { 'Retry-After'?: string } {
  const seconds = retryAfterSecondsOf(error);
  return seconds === undefined ? {} : { 'Retry-After': String(seconds) };
}

/** A 405 names the methods its path is served with (details.allow) in Allow, as HTTP requires. */
export function allow(error: ServingError): { Allow?: string } {
  const methods = error.details?.['allow'];
  return Array.isArray(methods) ? { Allow: methods.join(', ') } : {};
}

/** express and its parsers signal client errors (e.g. a malformed URL) with a 4xx `status`. */
function fromFrameworkError(err: unknown): unknown {
  if (err instanceof ServingError || typeof err !== 'object' || err === null) return err;
  const status = (err as { status?: unknown }).status;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return new ServingError('INVALID_REQUEST', (err as Error).message || 'bad request');
  }
  return err;
}

/**
 * Answer an error: KServe clients get Triton's statuses on the v2 routes
 * (error-response.ts), everyone else ours. Logged at warn (client fault) or
 * error (ours, with the stack).
 */
export function sendError(req: IncomingMessage, res: ServerResponse, envelope: Envelope, err: unknown): void {
  const { ctx, path } = envelope;
  const reply = errorReply(fromFrameworkError(err), path === '/v2' || path.startsWith('/v2/') ? 'kserve' : 'sagemaker', envelope.redactor);
  envelope.errorLogged = true;
  // An overload refusal is counted and summarised (observability/refusal-summary.ts), its own line at debug: under a storm
  // there are thousands a second.
  if (refusalReasonOf(reply.error) !== undefined) {
    if (ctx.logs('debug'))
      ctx.line(
        'debug',
        { status: reply.status, code: reply.error.code, ...modelFields(ctx), path, durationMs: elapsedMs(ctx), err: reply.error.message },
        'request rejected',
      );
    writeError(res, ctx, reply);
    return;
  }
  // The closing `request` line names the model too (the label the client used when it never resolved), unless that
  // label is the target, which `target` already carries: `model` holds only a model's own name.
  if (reply.error.model !== undefined && ctx.model === undefined && reply.error.model !== ctx.target) ctx.model = reply.error.model;
  const fields = {
    status: reply.status,
    code: reply.error.code,
    ...modelFields(ctx),
    method: req.method,
    path,
    durationMs: elapsedMs(ctx),
    err: reply.error.message,
  };
  if (reply.status >= 500) ctx.log.error({ ...fields, stack: reply.error.cause instanceof Error ? reply.error.cause.stack : undefined }, 'request failed');
  else ctx.log.warn(fields, 'request rejected');
  writeError(res, ctx, reply);
}

function writeError(res: ServerResponse, ctx: RequestContext, reply: ErrorReply): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(reply.status, {
    'X-Request-Id': ctx.id,
    ...(ctx.traceparent === undefined ? {} : { traceparent: ctx.traceparent }),
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(reply.body),
    ...retryAfterHeader(reply.error),
    ...allow(reply.error),
  });
  res.end(reply.body);
}
