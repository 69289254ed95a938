/**
 * @module test/unit/http/read-body
 * Reading a body: the bytes as sent, the size limit (declared and actual),
 * and the aligned layout for binary tensor requests (the byte after the JSON
 * header at an 8-byte-aligned address, so numeric tensors need no copy).
 */
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { describe, test } from 'node:test';
import { ServingError } from '../../../src/errors.js';
import { readBody } from '../../../src/http/read-body.js';

function fakeRequest(chunks: Buffer[], headers: Record<string, string> = {}): IncomingMessage {
  const stream = Readable.from(chunks) as unknown as IncomingMessage;
  (stream as { headers: Record<string, string> }).headers = headers;
  return stream;
}

const bytes = (n: number, seed = 1) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff));

describe('readBody', () => {
  test('one or several chunks come back as the same bytes', async () => {
    assert.deepEqual(await readBody(fakeRequest([bytes(10)]), 100), bytes(10));
    const parts = [bytes(7, 1), bytes(9, 2), bytes(3, 3)];
    assert.deepEqual(await readBody(fakeRequest(parts), 100), Buffer.concat(parts));
  });

  for (const headerLength of [0, 1, 5, 8, 13, 150]) {
    test(`alignAfter ${headerLength}: the data after the header starts 8-byte aligned, bytes unchanged`, async () => {
      const parts = [bytes(100, 4), bytes(77, 5), bytes(3, 6)];
      const body = await readBody(fakeRequest(parts), 1000, headerLength);
      assert.deepEqual(body, Buffer.concat(parts));
      assert.equal((body.byteOffset + headerLength) % 8, 0);
    });
  }

  test('an announced length beyond the body is ignored (validated later), the bytes still come back', async () => {
    const body = await readBody(fakeRequest([bytes(10)]), 100, 50);
    assert.deepEqual(body, bytes(10));
  });

  test('over the limit: by Content-Length, or by what arrives', async () => {
    await assert.rejects(
      readBody(fakeRequest([bytes(10)], { 'content-length': '500' }), 100),
      (err: unknown) => err instanceof ServingError && err.code === 'PAYLOAD_TOO_LARGE',
    );
    await assert.rejects(readBody(fakeRequest([bytes(60), bytes(60)]), 100), (err: unknown) => err instanceof ServingError && err.code === 'PAYLOAD_TOO_LARGE');
  });

  test('a body that outgrows what may be held in flight (MME_MAX_INFLIGHT_BYTES): OVERLOADED, saying when to come back', async () => {
    let held = 0;
    const ticket = { grow: (n: number) => (held + n <= 10 ? ((held += n), true) : false), add: () => undefined, release: () => undefined };
    await assert.rejects(
      readBody(fakeRequest([bytes(8), bytes(8)]), 100, undefined, ticket),
      (err: unknown) => err instanceof ServingError && err.code === 'OVERLOADED' && err.details?.['retryAfterSeconds'] === 1,
    );
  });

  test('a client that goes away before the body ends: CANCELLED; a stream error: that error', async () => {
    const cut = new Readable({ read() {} }) as unknown as IncomingMessage & Readable;
    (cut as { headers: Record<string, string> }).headers = {};
    const pending = readBody(cut, 100);
    cut.push(bytes(10));
    cut.destroy();
    await assert.rejects(pending, (err: unknown) => err instanceof ServingError && err.code === 'CANCELLED');

    const reset = new Readable({ read() {} }) as unknown as IncomingMessage & Readable;
    (reset as { headers: Record<string, string> }).headers = {};
    const hungUp = readBody(reset, 100);
    reset.destroy(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }));
    await assert.rejects(hungUp, (err: unknown) => err instanceof ServingError && err.code === 'CANCELLED');

    const broken = new Readable({ read() {} }) as unknown as IncomingMessage & Readable;
    (broken as { headers: Record<string, string> }).headers = {};
    const failing = readBody(broken, 100);
    broken.destroy(new Error('disk on fire'));
    await assert.rejects(failing, /disk on fire/);
  });

  test('an empty body is an empty buffer', async () => {
    assert.equal((await readBody(fakeRequest([]), 100)).length, 0);
  });
});
