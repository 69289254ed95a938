/**
 * @module http/read-body
 * Reads a request body into one Buffer, enforcing the size limit from the
 * Content-Length header up front and from the bytes actually received.
 *
 * Plain `data`/`end` listeners rather than `for await`: the async iterator
 * allocates an iterator, a promise per chunk and end-of-stream bookkeeping,
 * which for the usual one-chunk inference body cost more than reading it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { retryAfter, ServingError } from '../errors.js';
import type { Admission, ByteTicket } from '../service/admission.js';
import type { Releasable, RequestContext } from './request-context.js';

function tooLarge(limit: number, declared?: string): ServingError {
  return new ServingError(
    'PAYLOAD_TOO_LARGE',
    declared === undefined
      ? `request body exceeds the limit of ${limit} bytes (SAGEMAKER_MAX_PAYLOAD_IN_MB)`
      : `request body of ${declared} bytes exceeds the limit of ${limit} bytes (SAGEMAKER_MAX_PAYLOAD_IN_MB)`,
  );
}

function assemble(chunks: readonly Buffer[], total: number, alignAfter: number | undefined): Buffer {
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
  if (chunks.length === 1) return chunks[0]!;
  return chunks.length === 0 ? Buffer.alloc(0) : Buffer.concat(chunks, total);
}

/** One body being read: what the listeners share, kept on the request itself. */
interface BodyRead {
  readonly limit: number;
  /** The declared Content-Length, already reserved in the ticket. */
  readonly reserved: number;
  readonly alignAfter: number | undefined;
  readonly ticket: ByteTicket | undefined;
  readonly chunks: Buffer[];
  total: number;
  settled: boolean;
  resolve: (body: Buffer) => void;
  reject: (err: unknown) => void;
}

const READ = Symbol('onnx-mme body read');

type Reading = IncomingMessage & { [READ]: BodyRead };

/*
 * The listeners are module functions that find their state on the request
 * (`this` is the emitter): a request waiting for its model keeps no closures
 * of its own alive, which a flood of thousands of waiting requests would
 * otherwise carry through every scavenge (bench/README.md, "overload.bench").
 */

function stop(req: Reading, err: unknown): void {
  const read = req[READ];
  read.settled = true;
  req.removeListener('data', onData);
  req.removeListener('end', onEnd);
  req.removeListener('error', onError);
  req.removeListener('close', onClose);
  read.reject(err);
}

function onData(this: Reading, chunk: Buffer): void {
  const read = this[READ];
  read.total += chunk.length;
  const { total, reserved, ticket } = read;
  if (total > read.limit) {
    stop(this, tooLarge(read.limit));
    this.resume(); // keep draining (no listener keeps the bytes) so the connection can answer
    return;
  }
  if (ticket !== undefined && total > reserved && !ticket.grow(total - Math.max(reserved, total - chunk.length))) {
    stop(this, overloaded(chunk.length));
    this.resume();
    return;
  }
  read.chunks.push(chunk);
}

function onEnd(this: Reading): void {
  // No listener removal on the way every request takes: after 'end' no data or error can come, and a later 'close' finds `settled`.
  const read = this[READ];
  read.settled = true;
  read.resolve(assemble(read.chunks, read.total, read.alignAfter));
}

function onError(this: Reading, err: Error): void {
  // node reports a client that hung up mid-body as an ECONNRESET 'aborted' error: that is a cancellation, not a server fault.
  stop(this, (err as NodeJS.ErrnoException).code === 'ECONNRESET' ? cancelled() : err);
}

function onClose(this: Reading): void {
  if (!this[READ].settled) stop(this, cancelled());
}

function overloaded(bytes: number): ServingError {
  return new ServingError(
    'OVERLOADED',
    `the request body grew past what the server may hold in flight (${bytes} more bytes did not fit under MME_MAX_INFLIGHT_BYTES); retry later`,
    { details: retryAfter() },
  );
}

function cancelled(): ServingError {
  return new ServingError('CANCELLED', 'the client closed the connection before the request body ended');
}

/**
 * `alignAfter`: the request announced a JSON header of this many bytes before
 * binary tensor data. The body is then laid out so that the byte after the
 * header sits at an 8-byte-aligned address, so numeric tensors become
 * typed-array views on it instead of copies (the chunks are copied into one
 * buffer once either way).
 *
 * `ticket`: the request's bytes in flight (service/admission.ts). Its declared
 * Content-Length is reserved already; bytes past it (a body without one)
 * are reserved as they arrive, and the request fails with OVERLOADED once
 * they no longer fit.
 *
 * A client that goes away before the body ends (a close, or node's
 * ECONNRESET `aborted` error) rejects with CANCELLED; any other stream error
 * with that error. A request's body is read once.
 */
export function readBody(req: IncomingMessage, limit: number, alignAfter?: number, ticket?: ByteTicket): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    req.resume(); // drain so the connection can answer
    return Promise.reject(tooLarge(limit, declared));
  }
  const read: BodyRead = {
    limit,
    reserved: declared === undefined ? 0 : Number(declared),
    alignAfter,
    ticket,
    chunks: [],
    total: 0,
    settled: false,
    resolve: noop,
    reject: noop,
  };
  const promise = new Promise<Buffer>((resolve, reject) => {
    read.resolve = resolve;
    read.reject = reject;
  });
  (req as Reading)[READ] = read;
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('error', onError);
  req.on('close', onClose);
  return promise;
}

function noop(): void {}

/**
 * The request's bytes in flight, held until its response closes. Refused
 * unread (OVERLOADED) when they do not fit; the connection then closes, so a
 * stalled upload does not keep it, and node does not read the rest of a body
 * nobody wants.
 */
export function reserveBytes(
  admission: Admission,
  req: IncomingMessage,
  res: ServerResponse,
  limit: number,
  /** Releases the ticket when the response closes (the request's context). */
  holder: Pick<RequestContext, 'releaseAtClose'>,
  model?: string,
): ByteTicket {
  const raw = req.headers['content-length'];
  const declared = raw === undefined ? 0 : Number(raw);
  // A body over the limit is refused by readBody with 413; it reserves nothing.
  let ticket: ByteTicket;
  try {
    ticket = admission.reserve(Number.isSafeInteger(declared) && declared >= 0 && declared <= limit ? declared : 0, model);
  } catch (err) {
    res.shouldKeepAlive = false;
    throw err;
  }
  holder.releaseAtClose(ticket);
  return ticket;
}

/**
 * The body of a route that is not inference (a load, an unload, the
 * repository index), counted under the same bytes in flight as inference
 * bodies: refused unread when it does not fit, so no route lets a client
 * park uploads outside MME_MAX_INFLIGHT_BYTES, and read as sent (a
 * Content-Encoding is refused, naming it, rather than ignored). Its refusal is counted
 * without a model (the name in such a request is not a loaded model's, and
 * must not become a metric label).
 */
export function readCountedBody(admission: Admission, req: IncomingMessage, res: ServerResponse, limit: number): Promise<Buffer> {
  const coding = req.headers['content-encoding']?.trim().toLowerCase();
  if (coding !== undefined && coding !== '' && coding !== 'identity') {
    // Only inference bodies are decompressed (http/content-encoding.ts); this one would be parsed as it came.
    res.shouldKeepAlive = false;
    throw new ServingError(
      'UNSUPPORTED_MEDIA_TYPE',
      `Content-Encoding '${coding.slice(0, 40)}' is not accepted on ${req.method ?? 'POST'} ${(req.url ?? '').split('?')[0]!.slice(0, 200)}: send its JSON body uncompressed (only inference requests may be compressed)`,
    );
  }
  // These routes are rare and have no inference context here: a listener of their own.
  const holder = { releaseAtClose: (held: Releasable) => void res.once('close', () => held.release()) };
  return readBody(req, limit, undefined, reserveBytes(admission, req, res, limit, holder));
}
