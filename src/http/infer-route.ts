/**
 * @module http/infer-route
 * The one inference handler behind /invocations, /endpoints/{e}/invocations,
 * /models/{m}/invoke and /v2/models/{m}[/versions/{v}]/infer, on plain
 * node:http objects, entered only through http/inference-front.ts: negotiate
 * the answer type (406 before reading the body), read the body under the
 * limit, decode it and build the InferenceCall (service/inference-call.ts)
 * InferenceService runs, write the answer. Text answers go out as one string, so
 * node writes the head and the body in a single send; binary answers go out
 * as chunks straight from the output tensors' memory.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { DefaultAccept } from '../config/server-config.js';
import { inModel, withModel, withModelSync } from '../errors.js';
import type { InferRequest } from '../protocol/infer-types.js';
import type { InferenceCall, RequestBinder } from '../service/inference-call.js';
import { EdgeInferenceCall, type InferenceService, type ModelHandle, type ModelRef } from '../service/inference-service.js';
import { RequestStats } from '../service/request-stats.js';
import {
  announcedHeaderLength,
  prepareExchange,
  responseTypeFor,
  type Exchange,
  type HttpAnswer,
  type ResponseType,
  type RouteFamily,
} from './infer-exchange.js';
import type { Admission, ByteTicket, RequestTicket } from '../service/admission.js';
import { answerCoding, decodeBody, encodeBody, MIN_COMPRESS_BYTES, requestCodings, type Coding } from './content-encoding.js';
import { readBody, reserveBytes } from './read-body.js';
import type { RequestContext } from './request-context.js';

export interface InferRouteDeps {
  readonly service: InferenceService;
  readonly bodyLimitBytes: number;
  readonly defaultAccept: DefaultAccept;
  /** Bytes in flight and work per turn (service/admission.ts). */
  readonly admission: Admission;
}

const CUSTOM_ATTRIBUTES = 'x-amzn-sagemaker-custom-attributes';

/** The name a request gave its model, for the log line and messages before the model is known. */
export function refLabel(ref: ModelRef): string {
  return ref.kind === 'target' ? ref.target : ref.kind === 'default' ? 'default' : ref.name;
}

/** The common text type's header value, made once: a value built per answer is a new string node re-checks and flattens each time. */
const JSON_UTF8 = 'application/json; charset=utf-8';

/**
 * `id`: X-Request-Id, written here rather than set beforehand (request-context.ts says why).
 * The headers go to writeHead as a flat [name, value, …] list, which node
 * writes without walking an object's keys.
 */
function send(res: ServerResponse, ctx: RequestContext, answer: HttpAnswer, customAttributes: string | undefined, ticket: ByteTicket): void {
  const headers = answerHeaders(ctx.id, ctx.traceparent, answer, customAttributes);
  if (typeof answer.body === 'string') {
    // What express's res.type(...).send(string) wrote: the type with charset=utf-8 and the byte length.
    const type = answer.contentType === 'application/json' ? JSON_UTF8 : `${answer.contentType}; charset=utf-8`;
    const bytes = Buffer.byteLength(answer.body);
    ticket.add(bytes);
    headers.push('Content-Type', type, 'Content-Length', bytes);
    res.writeHead(200, headers);
    res.end(answer.body);
    return;
  }
  let length = 0;
  for (const b of answer.body) length += b.length;
  ticket.add(length);
  headers.push('Content-Type', answer.contentType, 'Content-Length', length);
  res.writeHead(200, headers);
  res.cork();
  for (const chunk of answer.body) res.write(chunk);
  res.end();
}

function answerHeaders(id: string, traceparent: string | undefined, answer: HttpAnswer, customAttributes: string | undefined): (string | number)[] {
  const headers: (string | number)[] = traceparent === undefined ? ['X-Request-Id', id] : ['X-Request-Id', id, 'traceparent', traceparent];
  for (const name in answer.headers) headers.push(name, answer.headers[name]!);
  if (customAttributes !== undefined) headers.push('X-Amzn-SageMaker-Custom-Attributes', customAttributes);
  return headers;
}

/** An answer the client accepts compressed (content-encoding.ts): small ones go out as they are. */
async function sendCompressed(
  res: ServerResponse,
  ctx: RequestContext,
  answer: HttpAnswer,
  customAttributes: string | undefined,
  coding: Coding,
  ticket: ByteTicket,
): Promise<void> {
  const plain = typeof answer.body === 'string' ? Buffer.from(answer.body, 'utf8') : Buffer.concat(answer.body as readonly Uint8Array[]);
  if (plain.length < MIN_COMPRESS_BYTES) {
    send(res, ctx, answer, customAttributes, ticket);
    return;
  }
  const body = await encodeBody(plain, coding);
  ticket.add(plain.length + body.length);
  const headers = answerHeaders(ctx.id, ctx.traceparent, answer, customAttributes);
  const type =
    typeof answer.body !== 'string' ? answer.contentType : answer.contentType === 'application/json' ? JSON_UTF8 : `${answer.contentType}; charset=utf-8`;
  headers.push('Content-Type', type, 'Content-Encoding', coding, 'Vary', 'Accept-Encoding', 'Content-Length', body.length);
  res.writeHead(200, headers);
  res.end(body);
}

/** What the front resolved for an inference request before its body is read. */
export interface InferenceEntry {
  readonly ref: ModelRef;
  readonly family: RouteFamily;
  readonly version: number | undefined;
  /** Its place in the front's counts (service/admission.ts): it stops counting as on its way once it joins the model's queue. */
  readonly admitted: RequestTicket | undefined;
  /** The model, when the front resolved `ref` already (it counts the request against the model's queue). */
  readonly handle: ModelHandle | undefined;
}

/**
 * Negotiate, read the body, build the InferenceCall (the body decoded, the
 * model resolved), hand it to InferenceService, write the answer. The errors
 * of this edge's own checks name the model as the request names it.
 *
 * The body is awaited here, not in a helper of its own: every async frame a
 * request waits in is a generator and a promise more (ensemble/plan-runner.ts says why that matters).
 */
export async function serveInference(
  deps: InferRouteDeps,
  req: IncomingMessage,
  res: ServerResponse,
  ctx: RequestContext,
  entry: InferenceEntry,
): Promise<void> {
  const label = refLabel(entry.ref);
  ctx.target = label;
  const responseType = negotiate(deps, req, label);
  const ticket = reserveBytes(deps.admission, req, res, deps.bodyLimitBytes, ctx, label);
  // Compressed bodies are read under the limit as they come, then decoded under it again (content-encoding.ts).
  const codings = req.headers['content-encoding'] === undefined ? undefined : withModelSync(label, () => requestCodings(req.headers));
  const raw = await readBody(req, deps.bodyLimitBytes, codings === undefined ? announcedHeaderLength(req.headers) : undefined, ticket);
  const body = codings === undefined ? raw : await decompressed(deps, req, raw, codings, ticket, label);
  const exchange = exchangeOf(req, body, entry.family, responseType, label);
  // Parsing and writing text is main-thread work: each takes its bytes from the turn's budget (admission.ts).
  const decodeTurn = deps.admission.textTurn(exchange.decodeTextBytes);
  if (decodeTurn !== undefined) await decodeTurn;
  const response = await deps.service.infer(callOf(deps, ctx, entry, exchange));
  ctx.model = response.modelName;
  ctx.modelVersion = response.modelVersion;
  // Refused before a byte of it is encoded: the process holds the output tensors, never an oversized copy of them.
  deps.service.checkAnswerSize(exchange.answerBytesBound(response), response.modelName);
  const answerTurn = deps.admission.textTurn(exchange.answerTextBytes(response));
  if (answerTurn !== undefined) await answerTurn;
  const answer = exchange.answer(response);
  const customAttributes = entry.family === 'sagemaker' ? customAttributesOf(req) : undefined;
  const coding = req.headers['accept-encoding'] === undefined ? undefined : answerCoding(req.headers['accept-encoding']);
  if (coding === undefined) send(res, ctx, answer, customAttributes, ticket);
  else await sendCompressed(res, ctx, answer, customAttributes, coding, ticket);
}

/** The answer's type (406 before the body is read). */
function negotiate(deps: InferRouteDeps, req: IncomingMessage, label: string): ResponseType {
  const accept = req.headers['accept'];
  try {
    return responseTypeFor(Array.isArray(accept) ? accept.join(',') : accept, deps.defaultAccept);
  } catch (err) {
    throw inModel(err, label);
  }
}

/** A compressed body decoded under the limit; the decoded copy is in flight too. */
async function decompressed(deps: InferRouteDeps, req: IncomingMessage, raw: Buffer, codings: Coding[], ticket: ByteTicket, label: string): Promise<Buffer> {
  const body = await withModel(label, () => decodeBody(raw, codings, deps.bodyLimitBytes, announcedHeaderLength(req.headers)));
  ticket.add(body.length);
  return body;
}

/** The body's format read (415, 400 before anything is loaded). */
function exchangeOf(req: IncomingMessage, body: Buffer, family: RouteFamily, responseType: ResponseType, label: string): Exchange {
  try {
    return prepareExchange(req.headers, body, family, responseType, label);
  } catch (err) {
    throw inModel(err, label);
  }
}

/** SageMaker's custom attributes, echoed on the answer. */
function customAttributesOf(req: IncomingMessage): string | undefined {
  const attrs = req.headers[CUSTOM_ATTRIBUTES];
  const value = Array.isArray(attrs) ? attrs[0] : attrs;
  return value !== undefined && value !== '' ? value : undefined;
}

/** The one validated value the service gets: the model resolved (unless the front did), the body decoded, the stats started. */
function callOf(deps: InferRouteDeps, ctx: RequestContext, entry: InferenceEntry, exchange: Exchange): InferenceCall {
  // Resolved once (a target is validated here, after the body's own checks, before it is decoded), unless the front already did.
  const handle = entry.handle ?? deps.service.resolve(entry.ref);
  // Compute-input time counts the decode, as Triton's does.
  const stats = new RequestStats();
  let request: InferRequest | RequestBinder;
  try {
    request = exchange.decode(handle.label);
  } catch (err) {
    throw inModel(err, handle.label);
  }
  return new EdgeInferenceCall(handle, request, entry.version, ctx, entry.admitted, exchange.oneOutput, stats);
}
