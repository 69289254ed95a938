/**
 * @module test/support/flood-client
 * A flood of keep-alive inference requests, run as its own process (so the
 * test process that times /ping is not the one saturated):
 *   node flood-client.js <url> <connections> <seconds> <target> <body-json | @file>
 * Each connection sends POSTs back to back until the time is up, then it
 * prints one JSON line with the status counts. Only loopback URLs.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';

const [url, connectionsArg, secondsArg, target, bodyJson] = process.argv.slice(2);
// node --test runs every file under dist/test/ (support files too): without arguments there is nothing to do.
if (url === undefined) process.exit(0);
if (!url.startsWith('http://127.0.0.1:')) throw new Error('flood-client: only http://127.0.0.1 targets');
const connections = Number(connectionsArg);
const endAt = Date.now() + Number(secondsArg) * 1000;
// A large body comes as @file: an argument holds at most 128 KiB.
const body = bodyJson?.startsWith('@') ? readFileSync(bodyJson.slice(1)) : Buffer.from(bodyJson ?? '{}');
const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
const statuses: Record<string, number> = {};
let sockets = 0;

function one(): Promise<void> {
  return new Promise((resolve) => {
    const req = http.request(
      `${url}/invocations`,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': body.length, 'x-amzn-sagemaker-target-model': target ?? '' },
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          statuses[res.statusCode ?? 0] = (statuses[res.statusCode ?? 0] ?? 0) + 1;
          resolve();
        });
      },
    );
    req.once('socket', (s) => {
      if (!(s as unknown as { counted?: boolean }).counted) {
        (s as unknown as { counted?: boolean }).counted = true;
        sockets++;
      }
    });
    req.on('error', () => {
      statuses['error'] = (statuses['error'] ?? 0) + 1;
      resolve();
    });
    req.end(body);
  });
}

async function loop(): Promise<void> {
  while (Date.now() < endAt) await one();
}

process.stdout.write('started\n');
await Promise.all(Array.from({ length: connections }, () => loop()));
agent.destroy();
process.stdout.write(`${JSON.stringify({ ...statuses, sockets })}\n`);
