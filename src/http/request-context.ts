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
  /** The model (and version) the request resolved to, or the label the client used when it never resolved; for log lines. */
  model: string | undefined;
  modelVersion: string | undefined;
}

const ID_PATTERN = /^[\x21-\x7e]{1,128}$/;

function headerValue(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

class HttpRequestContext implements RequestContext {
  readonly startedAt = process.hrtime.bigint();
  readonly cancel = new CancelSource();
  model: string | undefined = undefined;
  modelVersion: string | undefined = undefined;
  private child: Logger | undefined;

  constructor(
    readonly id: string,
    private readonly root: Logger,
  ) {}

  get log(): Logger {
    return (this.child ??= this.root.child({ reqId: this.id }));
  }
}

/**
 * `onClose(finished)` runs once when the response closes: `finished` is true
 * when the whole answer was written, false when the client went away first
 * (the cancellation has fired by then).
 */
export function createRequestContext(
  req: IncomingMessage,
  res: ServerResponse,
  root: Logger,
  onClose?: (finished: boolean) => void,
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
  const ctx = new HttpRequestContext(id, root);
  // 'close' comes once per response: `on`, without once's wrapper.
  res.on('close', () => {
    const finished = res.writableFinished;
    if (!finished) ctx.cancel.cancel();
    onClose?.(finished);
  });
  if (!callerWritesId) res.setHeader('X-Request-Id', id);
  return ctx;
}

/** Elapsed milliseconds since the request arrived, two decimals (log lines). */
export function elapsedMs(ctx: RequestContext): number {
  return Math.round((Number(process.hrtime.bigint() - ctx.startedAt) / 1e6) * 100) / 100;
}
