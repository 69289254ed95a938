/**
 * @module http/infer-exchange
 * One inference over HTTP, whatever the wire format: which body format the
 * headers announce, which answer format Accept allows, the decoder handed to
 * InferenceService (syntax checked before any model is loaded, bound to the
 * model's config when the format needs it), and the answer written back.
 *
 * Request formats (same on every inference route):
 *  - KServe v2 JSON, or TF Serving JSON (`instances` / non-tensor `inputs`);
 *  - KServe v2 JSON + binary tensors, the JSON length in
 *    `Inference-Header-Content-Length` or in the content type
 *    `application/vnd.sagemaker-triton.binary+json;json-header-size=N`
 *    (SageMaker strips custom headers); length 0 = raw tensor bytes;
 *  - text/csv and application/x-npy, for models with one input.
 * Answers: JSON (v2, with binary outputs when asked, or TF Serving style),
 * text/csv or application/x-npy for one output tensor.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { DefaultAccept } from '../config/server-config.js';
import { ServingError } from '../errors.js';
import { HEADER_LENGTH_HEADER, parseHeaderLength, SAGEMAKER_BINARY_CONTENT_TYPE, SAGEMAKER_HEADER_SIZE_PARAM } from '../protocol/binary-tensor.js';
import { CSV_CONTENT_TYPE, encodeCsv, parseCsv } from '../protocol/csv-codec.js';
import type { InferRequest, InferResponse } from '../protocol/infer-types.js';
import { decodeNpy, encodeNpy, NPY_CONTENT_TYPE } from '../protocol/npy-codec.js';
import { binaryBytesBound, npyBytesBound, textBytesBound } from '../protocol/response-size.js';
import type { Tensor } from '../protocol/tensor.js';
import { detectTfServing, encodeTfServingResponse, type TfStyle } from '../protocol/tfserving-codec.js';
import { decodeInferRequest, encodeInferResponse, encodeInferResponseBinary, exactRetry, parseJsonBody, wantsBinaryOutput } from '../protocol/v2-json-codec.js';
import type { RequestBinder } from '../service/inference-call.js';
import { csvBinder, npyBinder, rawBinder, tfBinder } from '../service/request-binders.js';
import { negotiate, parseMediaType } from './media-type.js';

/** SageMaker routes answer binary data with SageMaker's content type; KServe routes with Triton's. */
export type RouteFamily = 'sagemaker' | 'kserve';

export type ResponseType = DefaultAccept;

const RESPONSE_TYPES: readonly ResponseType[] = ['application/json', CSV_CONTENT_TYPE, NPY_CONTENT_TYPE];

/** Accept ranges that mean "the JSON answer": binary outputs are asked for in the JSON itself. */
const JSON_ALIASES: Readonly<Record<string, string>> = {
  'text/json': 'application/json',
  'application/octet-stream': 'application/json',
  [SAGEMAKER_BINARY_CONTENT_TYPE]: 'application/json',
};

/** Content types read as JSON. curl -d sends form-urlencoded and fetch sends text/plain by default. */
const JSON_LIKE = new Set(['application/json', 'text/json', 'application/x-www-form-urlencoded', 'text/plain']);

export const ACCEPTED_CONTENT_TYPES = [
  'application/json',
  `${SAGEMAKER_BINARY_CONTENT_TYPE};${SAGEMAKER_HEADER_SIZE_PARAM}=N`,
  `application/octet-stream (JSON, or binary tensors with ${HEADER_LENGTH_HEADER})`,
  CSV_CONTENT_TYPE,
  NPY_CONTENT_TYPE,
];

type BodyKind =
  /** `octetStream`: sent as application/octet-stream (the AWS SDKs' default), read as JSON like Triton's SageMaker frontend does. */
  | { readonly kind: 'json'; readonly octetStream: boolean }
  | { readonly kind: 'binary'; readonly headerLength: number }
  | { readonly kind: 'csv' }
  | { readonly kind: 'npy' };

/** node lower-cases incoming header names; a constant (an internalized string) is also a fast property lookup. */
const LENGTH_HEADER_KEY = HEADER_LENGTH_HEADER.toLowerCase();

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function unsupported(what: string): ServingError {
  return new ServingError('UNSUPPORTED_MEDIA_TYPE', `${what}; accepted: ${ACCEPTED_CONTENT_TYPES.join(', ')}`);
}

/**
 * Which body format the headers announce; 415 for what we do not read. Its
 * own errors leave the model to the caller; `model` is what the header-length
 * codec names.
 */
function bodyKind(headers: IncomingHttpHeaders, bodyLength: number, model: string): BodyKind {
  const ct = header(headers, 'content-type');
  const lengthHeader = header(headers, LENGTH_HEADER_KEY);
  const media = ct === undefined || ct.trim() === '' ? undefined : parseMediaType(ct);
  if (ct !== undefined && ct.trim() !== '' && media === undefined) throw unsupported(`malformed Content-Type '${ct.slice(0, 100)}'`);
  const type = media?.type;
  if (type === SAGEMAKER_BINARY_CONTENT_TYPE) {
    const size = media!.params.get(SAGEMAKER_HEADER_SIZE_PARAM);
    if (size === undefined) {
      throw new ServingError(
        'INVALID_REQUEST',
        `Content-Type ${SAGEMAKER_BINARY_CONTENT_TYPE} needs the parameter ${SAGEMAKER_HEADER_SIZE_PARAM}=<length of the JSON header>`,
      );
    }
    const n = parseHeaderLength(size, bodyLength, `${SAGEMAKER_HEADER_SIZE_PARAM} in the Content-Type`, model);
    if (lengthHeader !== undefined && parseHeaderLength(lengthHeader, bodyLength, HEADER_LENGTH_HEADER, model) !== n) {
      throw new ServingError('INVALID_REQUEST', `${HEADER_LENGTH_HEADER} (${lengthHeader}) contradicts ${SAGEMAKER_HEADER_SIZE_PARAM}=${size}`);
    }
    return { kind: 'binary', headerLength: n };
  }
  if (type === CSV_CONTENT_TYPE) return { kind: 'csv' };
  if (type === NPY_CONTENT_TYPE || type === 'application/npy') return { kind: 'npy' };
  const jsonLike = type === undefined || JSON_LIKE.has(type) || type.endsWith('+json');
  if (lengthHeader !== undefined && (jsonLike || type === 'application/octet-stream')) {
    return { kind: 'binary', headerLength: parseHeaderLength(lengthHeader, bodyLength, HEADER_LENGTH_HEADER, model) };
  }
  if (jsonLike) return { kind: 'json', octetStream: false };
  if (type === 'application/octet-stream') return { kind: 'json', octetStream: true };
  throw unsupported(`content type '${type}' is not accepted`);
}

/**
 * The JSON header length a binary request announces, read leniently before
 * the body arrives (only to lay the body out aligned; bodyKind validates it).
 */
export function announcedHeaderLength(headers: IncomingHttpHeaders): number | undefined {
  const fromHeader = header(headers, LENGTH_HEADER_KEY);
  const ct = header(headers, 'content-type');
  const media = ct === undefined ? undefined : parseMediaType(ct);
  const raw = fromHeader ?? (media?.type === SAGEMAKER_BINARY_CONTENT_TYPE ? media.params.get(SAGEMAKER_HEADER_SIZE_PARAM) : undefined);
  return raw !== undefined && /^\s*\d{1,15}\s*$/.test(raw) ? Number(raw) : undefined;
}

/** Negotiation results of recent Accept strings (clients repeat the same few); bounded like media-type's table. */
const NEGOTIATED_LIMIT = 256;
const negotiatedMemo = new Map<string, ResponseType | undefined>();

function negotiated(accept: string, defaultType: ResponseType): ResponseType | undefined {
  const key = `${defaultType}\n${accept}`;
  if (accept.length <= 256) {
    const hit = negotiatedMemo.get(key);
    if (hit !== undefined || negotiatedMemo.has(key)) return hit;
  }
  const offers = [defaultType, ...RESPONSE_TYPES.filter((t) => t !== defaultType)];
  const chosen = negotiate(accept, offers, JSON_ALIASES) as ResponseType | undefined;
  if (accept.length <= 256) {
    if (negotiatedMemo.size >= NEGOTIATED_LIMIT) negotiatedMemo.clear();
    negotiatedMemo.set(key, chosen);
  }
  return chosen;
}

/**
 * The answer format Accept allows: the configured default when Accept is
 * missing or `*\/*`, else the best match; 406 (without the model, which
 * the caller names) when nothing matches.
 */
export function responseTypeFor(accept: string | undefined, defaultType: ResponseType): ResponseType {
  const chosen = accept === undefined ? defaultType : negotiated(accept, defaultType);
  if (chosen === undefined) {
    throw new ServingError('NOT_ACCEPTABLE', `cannot answer in any type of Accept '${(accept ?? '').slice(0, 200)}'; available: ${RESPONSE_TYPES.join(', ')}`);
  }
  return chosen as ResponseType;
}

/** The extra headers of most answers: none (one shared object, not one per answer). */
const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

export interface HttpAnswer {
  readonly contentType: string;
  readonly headers: Readonly<Record<string, string>>;
  /** Text, or byte chunks written in order (binary tensors straight from their typed arrays). */
  readonly body: string | readonly Buffer[];
}

export interface Exchange {
  /**
   * The request, its syntax checked before any model is loaded, or a binder
   * InferenceService binds to the entry model's config. `model` is what the
   * protocol's codecs name.
   */
  decode(model: string): InferRequest | RequestBinder;
  /** The answer's type when it carries one tensor (CSV, .npy): the request must get exactly one output. */
  readonly oneOutput: string | undefined;
  answer(response: InferResponse): HttpAnswer;
  /** Bytes of text (JSON, CSV) the decoder parses on the main thread: the request's share of a turn (service/event-loop-turns.ts). */
  readonly decodeTextBytes: number;
  /** About how many bytes of text `answer(response)` writes on the main thread (binary outputs cost next to nothing). */
  answerTextBytes(response: InferResponse): number;
  /** The most bytes `answer(response)` can take, computed without encoding (protocol/response-size.ts). */
  answerBytesBound(response: InferResponse): number;
}

/** Characters a number takes in a JSON or CSV answer, about (a float32 printed in full, e.g. 0.14285714924335480, with its separator). */
const TEXT_BYTES_PER_ELEMENT = 16;

/** What decoding learned that the answer depends on. */
interface Learned {
  /** A KServe v2 request (which outputs it wants binary); for a raw binary request, every output is binary. */
  bound: InferRequest | 'all' | undefined;
  /** A TF Serving request is answered TF Serving style. */
  tfStyle: TfStyle | undefined;
}

/** A KServe v2 JSON header followed by binary tensor data, or Triton's raw binary request (header length 0). */
function decodeBinary(body: Buffer, headerLength: number, model: string, learned: Learned): InferRequest | RequestBinder {
  if (headerLength === 0) {
    learned.bound = 'all';
    return rawBinder(body, model);
  }
  const header = body.subarray(0, headerLength);
  const json = parseJsonBody(header, model);
  if (detectTfServing(json) !== undefined) {
    throw new ServingError(
      'INVALID_REQUEST',
      `binary tensor data needs a KServe v2 JSON header ("inputs": [{"name", "datatype", "shape", "parameters": {"binary_data_size"}}])`,
    );
  }
  const binary = body.subarray(headerLength);
  return (learned.bound = exactRetry(
    () => decodeInferRequest(json, model, binary),
    () => decodeInferRequest(parseJsonBody(header, model, true), model, binary),
  ));
}

/** KServe v2 JSON, or TF Serving JSON (bound to the model's inputs later). */
function decodeJson(body: Buffer, octetStream: boolean, model: string, learned: Learned): InferRequest | RequestBinder {
  const read = (exact: boolean): unknown => {
    try {
      return parseJsonBody(body, model, exact);
    } catch (err) {
      if (!octetStream || !(err instanceof ServingError)) throw err;
      throw new ServingError(
        err.code,
        `${err.message} (an application/octet-stream body is read as JSON; for binary tensor data send the JSON length in ${HEADER_LENGTH_HEADER} or use ${SAGEMAKER_BINARY_CONTENT_TYPE};${SAGEMAKER_HEADER_SIZE_PARAM}=N)`,
        { model },
      );
    }
  };
  const json = read(false);
  learned.tfStyle = detectTfServing(json);
  if (learned.tfStyle !== undefined) return tfBinder(learned.tfStyle, json as Record<string, unknown>, () => read(true) as Record<string, unknown>, model);
  return (learned.bound = exactRetry(
    () => decodeInferRequest(json, model),
    () => decodeInferRequest(read(true), model),
  ));
}

function parseRequest(kind: BodyKind, body: Buffer, model: string, learned: Learned): InferRequest | RequestBinder {
  switch (kind.kind) {
    case 'csv':
      return csvBinder(parseCsv(model, body), model);
    case 'npy':
      return npyBinder(decodeNpy(model, body));
    case 'binary':
      return decodeBinary(body, kind.headerLength, model, learned);
    case 'json':
      return decodeJson(body, kind.octetStream, model, learned);
  }
}

/** Whether a KServe v2 answer writes output `name` as raw bytes (the bound request asked for it): the answer and its sizes decide alike. */
function binaryOutput(learned: Learned, name: string): boolean {
  return learned.bound === 'all' || (learned.bound !== undefined && wantsBinaryOutput(learned.bound, name));
}

function answerOf(response: InferResponse, responseType: ResponseType, family: RouteFamily, learned: Learned): HttpAnswer {
  if (responseType === CSV_CONTENT_TYPE || responseType === NPY_CONTENT_TYPE) {
    const [tensor] = response.outputs.values();
    if (!tensor) throw new ServingError('INTERNAL', `model '${response.modelName}': the model produced no output`, { model: response.modelName });
    return responseType === CSV_CONTENT_TYPE
      ? { contentType: CSV_CONTENT_TYPE, headers: NO_HEADERS, body: encodeCsv(tensor) }
      : { contentType: NPY_CONTENT_TYPE, headers: NO_HEADERS, body: encodeNpy(tensor) };
  }
  if (learned.tfStyle !== undefined)
    return {
      contentType: 'application/json',
      headers: NO_HEADERS,
      body: `${encodeTfServingResponse(response.modelName, learned.tfStyle, response.outputs)}\n`,
    };
  let anyBinary = false;
  for (const name of response.outputs.keys()) if ((anyBinary = binaryOutput(learned, name))) break;
  if (!anyBinary) return { contentType: 'application/json', headers: NO_HEADERS, body: `${encodeInferResponse(response)}\n` };
  const encoded = encodeInferResponseBinary(response, (name) => binaryOutput(learned, name));
  const json = Buffer.from(encoded.json, 'utf8');
  const headerLength = String(json.length);
  return {
    contentType: family === 'sagemaker' ? `${SAGEMAKER_BINARY_CONTENT_TYPE};${SAGEMAKER_HEADER_SIZE_PARAM}=${headerLength}` : 'application/octet-stream',
    headers: { [HEADER_LENGTH_HEADER]: headerLength },
    body: [json, ...encoded.chunks],
  };
}

function textBytesOf(response: InferResponse, responseType: ResponseType, learned: Learned): number {
  if (responseType === NPY_CONTENT_TYPE) return 0;
  let bytes = 0;
  for (const [name, t] of response.outputs) {
    if (learned.tfStyle === undefined && responseType !== CSV_CONTENT_TYPE && binaryOutput(learned, name)) continue;
    bytes += t.data.length * TEXT_BYTES_PER_ELEMENT;
  }
  return bytes;
}

/** The most bytes an answer can write, before it writes any (MME_MAX_RESPONSE_BYTES): per output, in the form it will take. */
function bytesBoundOf(response: InferResponse, responseType: ResponseType, learned: Learned): number {
  let bytes = 0;
  for (const [name, t] of response.outputs) {
    if (responseType === NPY_CONTENT_TYPE) bytes += npyBytesBound(name, t);
    else if (learned.tfStyle === undefined && responseType !== CSV_CONTENT_TYPE && binaryOutput(learned, name))
      bytes += binaryBytesBound(name, t) + textBytesBound(name, EMPTY);
    else bytes += textBytesBound(name, t);
  }
  return bytes;
}

/**
 * Set up one inference: the decoder the edge runs before InferenceService.infer
 * and the writer of its answer. Throws 415 (content type) or 400 (header
 * lengths) before anything is loaded; its own errors leave the model to the
 * caller, and `model` is what the header-length codec names.
 */
export function prepareExchange(headers: IncomingHttpHeaders, body: Buffer, family: RouteFamily, responseType: ResponseType, model: string): Exchange {
  return new HttpExchange(bodyKind(headers, body.length, model), body, family, responseType);
}

/** A class, not an object of closures: a request waiting for its model holds one object here (plan-runner.ts says why that matters). */
class HttpExchange implements Exchange, Learned {
  bound: InferRequest | 'all' | undefined = undefined;
  tfStyle: TfStyle | undefined = undefined;
  readonly oneOutput: string | undefined;
  readonly decodeTextBytes: number;

  constructor(
    private readonly kind: BodyKind,
    private readonly body: Buffer,
    private readonly family: RouteFamily,
    private readonly responseType: ResponseType,
  ) {
    this.oneOutput = responseType === 'application/json' ? undefined : responseType;
    this.decodeTextBytes = kind.kind === 'json' || kind.kind === 'csv' ? body.length : kind.kind === 'binary' ? kind.headerLength : 0;
  }

  decode(model: string): InferRequest | RequestBinder {
    return parseRequest(this.kind, this.body, model, this);
  }

  answer(response: InferResponse): HttpAnswer {
    return answerOf(response, this.responseType, this.family, this);
  }

  answerTextBytes(response: InferResponse): number {
    return textBytesOf(response, this.responseType, this);
  }

  answerBytesBound(response: InferResponse): number {
    return bytesBoundOf(response, this.responseType, this);
  }
}

/** A binary output's JSON header entry costs what an empty tensor's text does. */
const EMPTY: Tensor = Object.freeze({ datatype: 'UINT8', shape: Object.freeze([0]), data: new Uint8Array(0) });
