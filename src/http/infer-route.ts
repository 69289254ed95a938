/**
 * @module http/infer-route
 * The one inference handler behind /invocations, /endpoints/{e}/invocations,
 * /models/{m}/invoke and /v2/models/{m}[/versions/{v}]/infer: negotiate the
 * answer type (406 before reading the body), read the body under the limit,
 * hand the decoder to InferenceService, write the answer. Binary answers go
 * out as chunks straight from the output tensors' memory.
 */
import type { Request, Response } from 'express';
import type { DefaultAccept } from '../config/server-config.js';
import type { InferenceService, ModelRef } from '../service/inference-service.js';
import { announcedHeaderLength, prepareExchange, responseTypeFor, type HttpAnswer, type RouteFamily } from './infer-exchange.js';
import { readBody } from './read-body.js';
import type { RequestContext } from './request-context.js';

export interface InferRouteDeps {
  readonly service: InferenceService;
  readonly bodyLimitBytes: number;
  readonly defaultAccept: DefaultAccept;
}

const CUSTOM_ATTRIBUTES = 'x-amzn-sagemaker-custom-attributes';

/** What the request log line reports about the model (names that resolved, never raw input). */
export function noteModel(res: Response, model: string, version: string): void {
  res.locals['model'] = model;
  res.locals['modelVersion'] = version;
}

export function refLabel(ref: ModelRef): string {
  return ref.kind === 'target' ? ref.target : ref.kind === 'managed' ? ref.name : 'default';
}

function send(res: Response, answer: HttpAnswer): void {
  res.status(200);
  for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
  if (typeof answer.body === 'string') {
    res.type(answer.contentType).send(answer.body);
    return;
  }
  res.setHeader('Content-Type', answer.contentType);
  res.setHeader('Content-Length', String(answer.body.reduce((n, b) => n + b.length, 0)));
  res.cork();
  for (const chunk of answer.body) res.write(chunk);
  res.end();
}

export async function serveInference(
  deps: InferRouteDeps,
  req: Request,
  res: Response,
  ctx: RequestContext,
  ref: ModelRef,
  family: RouteFamily,
  version?: number,
): Promise<void> {
  const label = refLabel(ref);
  const accept = req.headers['accept'];
  const responseType = responseTypeFor(Array.isArray(accept) ? accept.join(',') : accept, deps.defaultAccept, label);
  const body = await readBody(req, deps.bodyLimitBytes, announcedHeaderLength(req.headers));
  const exchange = prepareExchange(req.headers, body, family, responseType, label);
  const response = await deps.service.infer(ref, exchange.decode, ctx, version === undefined ? {} : { version });
  noteModel(res, response.modelName, response.modelVersion);
  const answer = exchange.answer(response);
  if (family === 'sagemaker') {
    const attrs = req.headers[CUSTOM_ATTRIBUTES];
    const value = Array.isArray(attrs) ? attrs[0] : attrs;
    if (value !== undefined && value !== '') res.setHeader('X-Amzn-SageMaker-Custom-Attributes', value);
  }
  send(res, answer);
}
