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
import type { ModelConfig } from '../config/model-config-types.js';
import type { DefaultAccept } from '../config/server-config.js';
import { ServingError } from '../errors.js';
import {
  decodeBinaryTensorData,
  HEADER_LENGTH_HEADER,
  parseHeaderLength,
  rawBinaryShape,
  SAGEMAKER_BINARY_CONTENT_TYPE,
  SAGEMAKER_HEADER_SIZE_PARAM,
} from '../protocol/binary-tensor.js';
import { CSV_CONTENT_TYPE, csvToTensor, encodeCsv, parseCsv, type CsvTable } from '../protocol/csv-codec.js';
import type { InferRequest, InferResponse } from '../protocol/infer-types.js';
import { decodeNpy, encodeNpy, NPY_CONTENT_TYPE, type NpyArray } from '../protocol/npy-codec.js';
import { binaryBytesBound, npyBytesBound, textBytesBound } from '../protocol/response-size.js';
import type { Tensor } from '../protocol/tensor.js';
import { detectTfServing, encodeTfServingResponse, tfServingInputs, type TfStyle } from '../protocol/tfserving-codec.js';
import { decodeInferRequest, encodeInferResponse, encodeInferResponseBinary, exactRetry, parseJsonBody, wantsBinaryOutput } from '../protocol/v2-json-codec.js';
import type { RequestBinder } from '../service/inference-call.js';
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

function onlyInput(config: ModelConfig, format: string): ModelConfig['input'][number] {
  const [first, ...more] = config.input;
  if (!first || more.length > 0) {
    throw new ServingError(
      'INVALID_INPUT',
      `${format} needs a model with exactly one input; this one has ${config.input.map((t) => `'${t.name}'`).join(', ')} (send KServe v2 JSON instead)`,
    );
  }
  return first;
}

function plainRequest(inputs: ReadonlyMap<string, Tensor>, parameters: InferRequest['parameters'] = {}): InferRequest {
  return Object.freeze({ id: undefined, inputs, outputs: undefined, parameters });
}

/** The shape a CSV table takes for the model's one input. */
function csvShape(config: ModelConfig, dims: readonly number[], table: CsvTable): number[] {
  const fixed = dims.every((d) => d >= 0);
  const perRow = dims.reduce((a, b) => a * b, 1);
  if (config.maxBatchSize > 0) return fixed && dims.length > 1 && perRow === table.columns ? [table.rows, ...dims] : [table.rows, table.columns];
  if (dims.length !== 2 && table.rows === 1 && fixed && perRow === table.columns) return [...dims];
  return [table.rows, table.columns];
}

/**
 * Binders bind to the entry model's config; their own errors leave the model
 * to InferenceService, and `model` is what the protocol's codecs name.
 */
function csvBinder(table: CsvTable, model: string): RequestBinder {
  return {
    bindToModel(config) {
      const input = onlyInput(config, 'text/csv');
      const tensor = csvToTensor(model, input.name, input.dataType, csvShape(config, input.dims, table), table);
      return plainRequest(new Map([[input.name, tensor]]));
    },
  };
}

function npyBinder(array: NpyArray): RequestBinder {
  return {
    bindToModel(config) {
      const input = onlyInput(config, NPY_CONTENT_TYPE);
      return plainRequest(new Map([[input.name, Object.freeze({ datatype: array.datatype, shape: array.shape, data: array.data })]]));
    },
  };
}

/** `exact()` reads the body again with exact long integers, for when JSON.parse's reading may have rounded one (exactRetry). */
function tfBinder(style: TfStyle, body: Record<string, unknown>, exact: () => Record<string, unknown>, model: string): RequestBinder {
  return {
    bindToModel: (config) =>
      plainRequest(
        exactRetry(
          () => tfServingInputs(model, style, body, config.input),
          () => tfServingInputs(model, style, exact(), config.input),
        ),
      ),
  };
}

/** Triton's raw binary request: no JSON, the body is the one input's bytes, batch 1, every output binary. */
function rawBinder(body: Uint8Array, model: string): RequestBinder {
  return {
    bindToModel(config) {
      const input = onlyInput(config, 'a raw binary request (header length 0)');
      const dims = config.maxBatchSize > 0 ? [1, ...input.dims] : [...input.dims];
      const shape = rawBinaryShape(model, input.name, input.dataType, dims, body);
      const data = decodeBinaryTensorData(model, input.name, input.dataType, shape, body);
      return plainRequest(new Map([[input.name, Object.freeze({ datatype: input.dataType, shape: Object.freeze(shape), data })]]), {
        binary_data_output: true,
      });
    },
  };
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
   * The request, its syntax checked before any model is loaded: bound to the
   * entry model's config inside InferenceService (always, since the bound
   * request decides the answer). `model` is what the protocol's codecs name.
   */
  decode(model: string): RequestBinder;
  answer(response: InferResponse): HttpAnswer;
  /** Bytes of text (JSON, CSV) the decoder parses on the main thread: the request's share of a turn (http/admission.ts). */
  readonly decodeTextBytes: number;
  /** About how many bytes of text `answer(response)` writes on the main thread (binary outputs cost next to nothing). */
  answerTextBytes(response: InferResponse): number;
  /** The most bytes `answer(response)` can take, computed without encoding (protocol/response-size.ts). */
  answerBytesBound(response: InferResponse): number;
}

/** Characters a number takes in a JSON or CSV answer, about (a float32 printed in full, e.g. 0.14285714924335480, with its separator). */
const TEXT_BYTES_PER_ELEMENT = 16;

/** What decoding and binding learned that the answer depends on. */
interface Learned {
  /** The bound request (which outputs it wants binary). */
  bound: InferRequest | undefined;
  /** A TF Serving request is answered TF Serving style. */
  tfStyle: TfStyle | undefined;
}

/** A KServe v2 JSON header followed by binary tensor data, or Triton's raw binary request (header length 0). */
function decodeBinary(body: Buffer, headerLength: number, model: string): InferRequest | RequestBinder {
  if (headerLength === 0) return rawBinder(body, model);
  const header = body.subarray(0, headerLength);
  const json = parseJsonBody(header, model);
  if (detectTfServing(json) !== undefined) {
    throw new ServingError(
      'INVALID_REQUEST',
      `binary tensor data needs a KServe v2 JSON header ("inputs": [{"name", "datatype", "shape", "parameters": {"binary_data_size"}}])`,
    );
  }
  const binary = body.subarray(headerLength);
  return exactRetry(
    () => decodeInferRequest(json, model, binary),
    () => decodeInferRequest(parseJsonBody(header, model, true), model, binary),
  );
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
  return exactRetry(
    () => decodeInferRequest(json, model),
    () => decodeInferRequest(read(true), model),
  );
}

function parseRequest(kind: BodyKind, body: Buffer, model: string, learned: Learned): InferRequest | RequestBinder {
  switch (kind.kind) {
    case 'csv':
      return csvBinder(parseCsv(model, body), model);
    case 'npy':
      return npyBinder(decodeNpy(model, body));
    case 'binary':
      return decodeBinary(body, kind.headerLength, model);
    case 'json':
      return decodeJson(body, kind.octetStream, model, learned);
  }
}

/** Binds `decoded` and checks that a CSV or .npy answer gets one output; the bound request is kept for the answer. */
function answerBinder(decoded: InferRequest | RequestBinder, responseType: ResponseType, learned: Learned): RequestBinder {
  return {
    bindToModel(config) {
      const request = 'bindToModel' in decoded ? decoded.bindToModel(config) : decoded;
      if (responseType !== 'application/json') {
        const outputs = request.outputs?.map((o) => o.name) ?? config.output.map((t) => t.name);
        if (outputs.length !== 1) {
          throw new ServingError(
            'NOT_ACCEPTABLE',
            `${responseType} carries one tensor but the request gets ${outputs.length} outputs (${outputs.map((o) => `'${o}'`).join(', ')}); ask for one output ("outputs": [{"name": ...}] in a KServe v2 request) or accept application/json`,
          );
        }
      }
      learned.bound = request;
      return request;
    },
  };
}

/** Whether a KServe v2 answer writes output `name` as raw bytes (the bound request asked for it): the answer and its sizes decide alike. */
function binaryOutput(learned: Learned, name: string): boolean {
  return learned.bound !== undefined && wantsBinaryOutput(learned.bound, name);
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
  const kind = bodyKind(headers, body.length, model);
  const learned: Learned = { bound: undefined, tfStyle: undefined };
  return {
    decode: (name) => answerBinder(parseRequest(kind, body, name, learned), responseType, learned),
    answer: (response) => answerOf(response, responseType, family, learned),
    decodeTextBytes: kind.kind === 'json' || kind.kind === 'csv' ? body.length : kind.kind === 'binary' ? kind.headerLength : 0,
    answerTextBytes: (response) => textBytesOf(response, responseType, learned),
    answerBytesBound: (response) => bytesBoundOf(response, responseType, learned),
  };
}

/** A binary output's JSON header entry costs what an empty tensor's text does. */
const EMPTY: Tensor = Object.freeze({ datatype: 'UINT8', shape: Object.freeze([0]), data: new Uint8Array(0) });
