/**
 * @module test/unit/http/request-context
 * A request context's close, on a real node:http server and client: the
 * response's one close listener tells the context whether the answer
 * finished, cancels the request when the client left first, and releases what
 * the request holds in the order it was taken; a second context on the same
 * response gets a listener of its own.
 */
import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { createRequestContext, type RequestContext } from '../../../src/http/request-context.js';
import { silentLogger } from '../../../src/observability/logger.js';

/** A real server whose handler is `handle`; resolves with its port. */
async function serverWith(handle: (req: IncomingMessage, res: ServerResponse) => void, t: { after(fn: () => void): void }): Promise<number> {
  const server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.close());
  return (server.address() as AddressInfo).port;
}

function get(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    request({ port, host: '127.0.0.1', path: '/' }, (res) => {
      res.resume();
      res.on('end', resolve);
    })
      .on('error', reject)
      .end();
  });
}

test('the response closing tells the context, then releases what the request holds, in the order it was taken', async (t) => {
  const events: string[] = [];
  const closed = new Promise<void>((resolve) => {
    void serverWith((req, res) => {
      const ctx = createRequestContext(req, res, silentLogger(), { closed: (finished) => events.push(`closed ${finished}`) }, true);
      ctx.releaseAtClose({ release: () => events.push('admission') });
      ctx.releaseAtClose({ release: () => events.push('bytes') });
      ctx.releaseAtClose({ release: () => events.push('third') });
      res.on('close', () => setImmediate(resolve));
      res.end('ok');
    }, t).then(get);
  });
  await closed;
  assert.deepEqual(events, ['closed true', 'admission', 'bytes', 'third']);
});

test('a client that goes away first: the cancellation fires and the context is told the answer was not finished', async (t) => {
  let ctx: RequestContext | undefined;
  const told: boolean[] = [];
  const released: string[] = [];
  const closed = new Promise<void>((resolve) => {
    void serverWith((req, res) => {
      ctx = createRequestContext(req, res, silentLogger(), { closed: (finished) => told.push(finished) }, true);
      ctx.releaseAtClose({ release: () => released.push('admission') });
      res.on('close', () => setImmediate(resolve));
      // No answer: the client aborts.
    }, t).then((port) => {
      const r = request({ port, host: '127.0.0.1', path: '/' });
      r.on('error', () => {});
      r.end();
      setTimeout(() => r.destroy(), 50);
    });
  });
  await closed;
  assert.deepEqual(told, [false]);
  assert.deepEqual(released, ['admission']);
  assert.equal(ctx!.cancel.aborted, true);
});

test('two contexts on one response (an error answered before the router made its own): each is told once', async (t) => {
  const told: string[] = [];
  const closed = new Promise<void>((resolve) => {
    void serverWith((req, res) => {
      createRequestContext(req, res, silentLogger(), { closed: () => told.push('first') }, true);
      createRequestContext(req, res, silentLogger(), { closed: () => told.push('second') }, true);
      res.on('close', () => setImmediate(resolve));
      res.end('ok');
    }, t).then(get);
  });
  await closed;
  assert.deepEqual(told.sort(), ['first', 'second']);
});
