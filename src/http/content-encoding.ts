/**
 * @module http/content-encoding
 * Compressed request bodies and answers on the inference routes.
 *
 * Requests: `Content-Encoding: gzip` or `deflate` (tritonclient's
 * `request_compression_algorithm`; `deflate` is the zlib format, as
 * tritonclient and RFC 9110 mean it, with raw deflate accepted too) is
 * decoded after the compressed bytes were read under the body limit. The
 * decoded bytes are held to the same limit (SAGEMAKER_MAX_PAYLOAD_IN_MB)
 * and to MAX_RATIO times the compressed size, so a small bomb cannot make a
 * large buffer; zlib stops at that size (maxOutputLength) rather than
 * inflating everything first. Decoding runs on libuv's thread pool. Any
 * other coding is refused with 415, naming it. Inference-Header-Content-Length
 * counts decoded bytes (tritonclient sends the uncompressed JSON size).
 *
 * Answers: with `Accept-Encoding` naming gzip or deflate (q > 0), answers
 * of at least MIN_COMPRESS_BYTES are compressed (tritonclient's
 * `response_compression_algorithm` reads Content-Encoding and decompresses);
 * smaller ones go out as they are, which every client accepts.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { ServingError } from '../errors.js';

/** Most decoded bytes per compressed byte (gzip of typical tensors and JSON stays far below; a bomb is far above). */
export const MAX_RATIO = 200;
/** Answers below this are not worth a compression pass. */
export const MIN_COMPRESS_BYTES = 1024;

const gunzip = promisify(zlib.gunzip);
const inflate = promisify(zlib.inflate);
const inflateRaw = promisify(zlib.inflateRaw);
const gzip = promisify(zlib.gzip);
const deflate = promisify(zlib.deflate);

export type Coding = 'gzip' | 'deflate';

/** The request's content codings in the order they were applied; undefined for none (or only `identity`). */
export function requestCodings(headers: IncomingHttpHeaders): Coding[] | undefined {
  const raw = headers['content-encoding'];
  if (raw === undefined || raw === '') return undefined;
  const codings: Coding[] = [];
  for (const item of raw.split(',')) {
    const c = item.trim().toLowerCase();
    if (c === '' || c === 'identity') continue;
    if (c === 'gzip' || c === 'x-gzip') codings.push('gzip');
    else if (c === 'deflate') codings.push('deflate');
    else {
      throw new ServingError('UNSUPPORTED_MEDIA_TYPE', `Content-Encoding '${c.slice(0, 40)}' is not supported (gzip, deflate or identity)`);
    }
  }
  return codings.length === 0 ? undefined : codings;
}

function tooLarge(limit: number, byRatio: boolean): ServingError {
  return new ServingError(
    'PAYLOAD_TOO_LARGE',
    byRatio
      ? `the compressed request body expands more than ${MAX_RATIO} times; refused`
      : `the decompressed request body exceeds the limit of ${limit} bytes (SAGEMAKER_MAX_PAYLOAD_IN_MB)`,
  );
}

async function decodeOne(body: Buffer, coding: Coding, maxOutputLength: number): Promise<Buffer> {
  const options = { maxOutputLength };
  if (coding === 'gzip') return gunzip(body, options);
  try {
    return await inflate(body, options);
  } catch (err) {
    // Some clients send raw deflate for `deflate`: accepted when it is not the zlib format.
    if ((err as NodeJS.ErrnoException).code === 'Z_DATA_ERROR') return inflateRaw(body, options);
    throw err;
  }
}

/**
 * The decoded body, within `limit` bytes and MAX_RATIO × its compressed
 * size; `alignAfter` as in read-body (the byte after the JSON header lands
 * on an 8-byte boundary).
 */
export async function decodeBody(body: Buffer, codings: readonly Coding[], limit: number, alignAfter?: number): Promise<Buffer> {
  let out = body;
  for (const coding of [...codings].reverse()) {
    const byRatio = out.length * MAX_RATIO < limit;
    const max = Math.max(1, Math.min(limit, out.length * MAX_RATIO));
    try {
      out = await decodeOne(out, coding, max);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ERR_BUFFER_TOO_LARGE' || err instanceof RangeError) throw tooLarge(limit, byRatio);
      throw new ServingError('INVALID_REQUEST', `the request body is not valid ${coding} data (${(err as Error).message})`);
    }
  }
  if (alignAfter !== undefined && Number.isSafeInteger(alignAfter) && alignAfter >= 0 && alignAfter <= out.length && (out.byteOffset + alignAfter) % 8 !== 0) {
    const pad = (8 - (alignAfter % 8)) % 8;
    const aligned = Buffer.from(new ArrayBuffer(out.length + pad), pad, out.length);
    out.copy(aligned);
    return aligned;
  }
  return out;
}

/** The answer coding an Accept-Encoding asks for (gzip preferred at equal q), or undefined. */
export function answerCoding(acceptEncoding: string | string[] | undefined): Coding | undefined {
  if (acceptEncoding === undefined) return undefined;
  const text = Array.isArray(acceptEncoding) ? acceptEncoding.join(',') : acceptEncoding;
  let best: Coding | undefined;
  let bestQ = 0;
  for (const item of text.split(',')) {
    const [name, ...params] = item.trim().toLowerCase().split(';');
    const coding = name === 'gzip' || name === 'x-gzip' ? 'gzip' : name === 'deflate' ? 'deflate' : undefined;
    if (coding === undefined) continue;
    const qParam = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    const q = qParam === undefined ? 1 : Number(qParam.slice(2));
    if (!(q > 0)) continue;
    if (q > bestQ || (q === bestQ && coding === 'gzip')) {
      best = coding;
      bestQ = q;
    }
  }
  return best;
}

/** Compresses an answer body (on libuv's thread pool). */
export function encodeBody(body: Buffer, coding: Coding): Promise<Buffer> {
  return coding === 'gzip' ? gzip(body) : deflate(body);
}
