/**
 * docs/architecture.md ("Fair shares across models, and where they end")
 * rests a design choice on a fact of Node, not of this server: a connection
 * can move to another thread (nodejs/node#64225) only before it is read, so
 * no thread can be chosen for a tenant, whose name is in the request. This
 * checks that fact on the Node that runs the tests, with a real server and a
 * real client: the day a Node release lets a read connection move, this
 * fails, and the choice is worth revisiting.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import net, { type AddressInfo, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { MessageChannel, type TransferListItem } from 'node:worker_threads';

/** Tries to move `socket` through a MessagePort; the error's message, or undefined when it moved. */
function transferError(socket: Socket): string | undefined {
  const { port1, port2 } = new MessageChannel();
  try {
    port1.postMessage(socket, [socket as unknown as TransferListItem]);
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  } finally {
    port1.close();
    port2.close();
  }
}

describe('moving a connection to another thread (docs/architecture.md)', () => {
  const servers: net.Server[] = [];
  after(() => {
    for (const s of servers) s.close();
  });

  it('works for a connection not yet read', { timeout: 10_000 }, async () => {
    const moved = new Promise<string | undefined>((resolve) => {
      const server = net.createServer({ pauseOnConnect: true }, (socket) => resolve(transferError(socket)));
      servers.push(server);
      server.listen(0, '127.0.0.1', () => {
        const client = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
        client.on('error', () => undefined);
        client.on('close', () => client.destroy());
      });
    });
    assert.equal(await moved, undefined);
  });

  it('is refused once the connection has carried a request, answered and paused', { timeout: 10_000 }, async () => {
    let seen: Promise<string | undefined> | undefined;
    const server = http.createServer((req, res) => {
      req.resume();
      res.end('ok', () => {
        // After the answer, nothing left to write, reading paused: as still as a keep-alive connection gets.
        req.socket.pause();
        seen = new Promise((resolve) => setImmediate(() => resolve(transferError(req.socket))));
      });
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    await new Promise<void>((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port: (server.address() as AddressInfo).port, agent }, (res) => {
          res.resume();
          res.on('end', resolve);
        })
        .on('error', reject);
    });
    while (seen === undefined) await new Promise((r) => setImmediate(r));
    const message = await seen;
    agent.destroy();
    server.closeAllConnections();
    assert.match(message ?? 'it moved', /has not started reading/);
  });
});
