/**
 * @module http/read-body
 * Reads a request body into one Buffer, enforcing the size limit from the
 * Content-Length header up front and from the bytes actually received.
 */
import type { IncomingMessage } from 'node:http';
import { ServingError } from '../errors.js';

export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
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
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
}
