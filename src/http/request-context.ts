/**
 * @module http/request-context
 * Per-request facts every handler needs: a request id (SageMaker's inference
 * id or X-Request-Id when the client sent one), a child logger bound to it,
 * and an AbortSignal that fires when the client goes away before the answer.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../observability/logger.js';

export interface RequestContext {
  readonly id: string;
  readonly log: Logger;
  readonly signal: AbortSignal;
  readonly startedAt: bigint;
}

const ID_PATTERN = /^[\x21-\x7e]{1,128}$/;

function headerValue(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

export function createRequestContext(req: IncomingMessage, res: ServerResponse, root: Logger): RequestContext {
  const given = headerValue(req, 'x-amzn-sagemaker-inference-id') ?? headerValue(req, 'x-request-id');
  // Echo a client id only when it is printable and short: it ends up in logs.
  const id = given !== undefined && ID_PATTERN.test(given) ? given : randomUUID();
  const controller = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  res.setHeader('X-Request-Id', id);
  return { id, log: root.child({ reqId: id }), signal: controller.signal, startedAt: process.hrtime.bigint() };
}
