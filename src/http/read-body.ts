/**
 * @module http/read-body
 * Reads a request body into one Buffer, enforcing the size limit from the
 * Content-Length header up front and from the bytes actually received.
 */
import type { IncomingMessage } from 'node:http';
import { ServingError } from '../errors.js';

/**
 * `alignAfter`: the request announced a JSON header of this many bytes before
 * binary tensor data. The body is then laid out so that the byte after the
 * header sits at an 8-byte-aligned address, so numeric tensors become
 * typed-array views on it instead of copies (the chunks are copied into one
 * buffer once either way).
 */
export async function readBody(req: IncomingMessage, limit: number, alignAfter?: number): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    req.resume(); // drain so the connection can answer
    throw new ServingError('PAYLOAD_TOO_LARGE', `request body of ${declared} bytes exceeds the limit of ${limit} bytes (SAGEMAKER_MAX_PAYLOAD_IN_MB)`);
  }
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > limit) {
      req.resume();
      throw new ServingError('PAYLOAD_TOO_LARGE', `request body exceeds the limit of ${limit} bytes (SAGEMAKER_MAX_PAYLOAD_IN_MB)`);
    }
    chunks.push(chunk);
  }
  if (alignAfter !== undefined && Number.isSafeInteger(alignAfter) && alignAfter >= 0 && alignAfter <= total) {
    const pad = (8 - (alignAfter % 8)) % 8;
    const out = Buffer.from(new ArrayBuffer(total + pad), pad, total);
    let offset = 0;
    for (const c of chunks) {
      c.copy(out, offset);
      offset += c.length;
    }
    return out;
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
}
