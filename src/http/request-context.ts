/**
 * @module http/request-context
 * Per-request facts every handler needs: a request id (SageMaker's inference
 * id or X-Request-Id when the client sent one), a child logger bound to it,
 * a cancellation that fires when the client goes away before the answer
 * (src/cancellation.ts: no AbortController unless something asks for one), and
 * the model the request resolved to (for the closing log line).
 *
 * This runs once per request on the hot path, so what is not always needed
 * is made on first use: the child logger (pino copies the bindings into a new
 * object, and at the default `info` level a successful inference logs
 * nothing). One `close` listener serves both the abort and the caller's own
 * end-of-request work.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CancelSource, type Cancellation } from '../cancellation.js';
import type { Logger } from '../observability/logger.js';
import { newRequestId } from './request-id.js';

export interface RequestContext {
  readonly id: string;
  readonly log: Logger;
  readonly cancel: Cancellation;
  readonly startedAt: bigint;
  /** The target the request named (canonical key, SageMaker model name, or `default`); for log lines. */
  target: string | undefined;
  /** The model (and version) the request resolved to, or the label the client used when it never resolved; for log lines. */
  model: string | undefined;
  modelVersion: string | undefined;
  /** A valid W3C `traceparent` the client sent (logged as traceId/spanId, echoed on the answer). */
  readonly traceparent: string | undefined;
  /**
   * One line with the request's bindings (reqId, traceId, spanId) and `fields`:
   * through `log` when it exists already, else straight from the root logger,
   * so a request that logs only its closing line makes no child logger.
   */
  line(level: 'debug' | 'info' | 'warn' | 'error', fields: Record<string, unknown>, msg: string): void;
  /** Whether a line at `level` would be written (build its fields only then). */
  logs(level: 'debug' | 'info' | 'warn' | 'error'): boolean;
  /** `held.release()` once the response closes, after the context's own close work (the request's admission and bytes). */
  releaseAtClose(held: Releasable): void;
}

/** What a request holds until its response closes (service/admission.ts's tickets). */
export interface Releasable {
  release(): void;
}

/** W3C Trace Context: version-traceid-parentid-flags, lowercase hex; all-zero ids are invalid. */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** The header when it is a valid traceparent (version ff is forbidden; unknown later versions may carry more fields), else undefined. */
export function validTraceparent(raw: string | undefined): string | undefined {
  if (raw === undefined || raw.length > 512) return undefined;
  const m = TRACEPARENT.exec(raw.trim());
  if (m === null || m[1] === 'ff' || (m[1] === '00' && m[5] !== undefined)) return undefined;
  if (/^0+$/.test(m[2]!) || /^0+$/.test(m[3]!)) return undefined;
  return raw.trim();
}

const ID_PATTERN = /^[\x21-\x7e]{1,128}$/;

function headerValue(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

class HttpRequestContext implements RequestContext {
  readonly startedAt = process.hrtime.bigint();
  readonly cancel: CancelSource;
  target: string | undefined = undefined;
  model: string | undefined = undefined;
  modelVersion: string | undefined = undefined;
  private child: Logger | undefined;
  /** At most two per request (its admission and its bytes): fields rather than an array or once-listeners of their own. */
  private held0: Releasable | undefined = undefined;
  private held1: Releasable | undefined = undefined;
  private heldMore: Releasable[] | undefined = undefined;

  constructor(
    readonly id: string,
    private readonly root: Logger,
    readonly traceparent: string | undefined,
    private readonly onClose: CloseListener | undefined,
  ) {
    this.cancel = new CancelSource(id);
  }

  /** The response closed: the caller's own close work, then what the request held goes back, in the order it was taken. */
  closed(finished: boolean): void {
    this.onClose?.closed(finished);
    this.held0?.release();
    this.held1?.release();
    if (this.heldMore !== undefined) for (const held of this.heldMore) held.release();
  }

  get log(): Logger {
    if (this.child !== undefined) return this.child;
    this.child = this.root.child(this.bindings());
    return this.child;
  }

  logs(level: 'debug' | 'info' | 'warn' | 'error'): boolean {
    return this.root.isLevelEnabled(level);
  }

  line(level: 'debug' | 'info' | 'warn' | 'error', fields: Record<string, unknown>, msg: string): void {
    if (this.child !== undefined) this.child[level](fields, msg);
    else this.root[level]({ ...this.bindings(), ...fields }, msg);
  }

  releaseAtClose(held: Releasable): void {
    if (this.held0 === undefined) this.held0 = held;
    else if (this.held1 === undefined) this.held1 = held;
    else (this.heldMore ??= []).push(held);
  }

  private bindings(): Record<string, string> {
    const tp = this.traceparent;
    return tp === undefined ? { reqId: this.id } : { reqId: this.id, traceId: tp.slice(3, 35), spanId: tp.slice(36, 52) };
  }
}

/** Told once when the response closes (http/request-envelope.ts). */
export interface CloseListener {
  /** `finished`: the whole answer was written; false when the client went away first (the cancellation has fired by then). */
  closed(finished: boolean): void;
}

const CONTEXT = Symbol('onnx-mme request context');

type WithContext = ServerResponse & { [CONTEXT]: HttpRequestContext };

/** The `close` listener of every response: a module function that finds the context on the response, no closure per request. */
function onResponseClose(this: WithContext): void {
  closeContext(this, this[CONTEXT]);
}

function closeContext(res: ServerResponse, ctx: HttpRequestContext): void {
  const finished = res.writableFinished;
  if (!finished) ctx.cancel.cancel();
  ctx.closed(finished);
}

export function createRequestContext(
  req: IncomingMessage,
  res: ServerResponse,
  root: Logger,
  onClose?: CloseListener,
  /**
   * The caller writes X-Request-Id in its own writeHead (the lean inference
   * path): a header set here beforehand sends node's writeHead down its slow
   * path, which copies and re-validates every header of the answer.
   */
  callerWritesId = false,
): RequestContext {
  const given = headerValue(req, 'x-amzn-sagemaker-inference-id') ?? headerValue(req, 'x-request-id');
  // Echo a client id only when it is printable and short: it ends up in logs.
  const id = given !== undefined && ID_PATTERN.test(given) ? given : newRequestId();
  const tp = req.headers['traceparent'];
  const ctx = new HttpRequestContext(id, root, tp === undefined ? undefined : validTraceparent(Array.isArray(tp) ? tp[0] : tp), onClose);
  // 'close' comes once per response: `on`, without once's wrapper.
  if ((res as Partial<WithContext>)[CONTEXT] === undefined) {
    (res as WithContext)[CONTEXT] = ctx;
    res.on('close', onResponseClose);
  } else {
    // A second context for one response (an error answered before express's own envelope): a listener of its own.
    res.on('close', () => closeContext(res, ctx));
  }
  if (!callerWritesId) {
    res.setHeader('X-Request-Id', id);
    if (ctx.traceparent !== undefined) res.setHeader('traceparent', ctx.traceparent);
  }
  return ctx;
}

/** Milliseconds since the request arrived, rounded to the microsecond (the log vocabulary's durations). */
export function elapsedMs(ctx: RequestContext): number {
  return Math.round(Number(process.hrtime.bigint() - ctx.startedAt) / 1e3) / 1e3;
}
