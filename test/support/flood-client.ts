/**
 * @module test/support/flood-client
 * A flood of keep-alive inference requests, run as its own process (so the
 * test process that times /ping is not the one saturated):
 *   node flood-client.js <url> <connections> <seconds> <target> <body-json | @file> [timed]
 * Each connection sends POSTs back to back until the time is up, then it
 * prints one JSON line with the status counts (with `timed`, also
 * `latencyMs`: per status, the count and the p50 and p99 in ms from sending
 * the request to the end of its answer). Only loopback URLs.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';

const [url, connectionsArg, secondsArg, target, bodyJson, mode] = process.argv.slice(2);
// node --test runs every file under dist/test/ (support files too): without arguments there is nothing to do.
if (url === undefined) process.exit(0);
if (!url.startsWith('http://127.0.0.1:')) throw new Error('flood-client: only http://127.0.0.1 targets');
const connections = Number(connectionsArg);
const endAt = Date.now() + Number(secondsArg) * 1000;
// A large body comes as @file: an argument holds at most 128 KiB.
const body = bodyJson?.startsWith('@') ? readFileSync(bodyJson.slice(1)) : Buffer.from(bodyJson ?? '{}');
const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
const statuses: Record<string, number> = {};
const timed = mode === 'timed';
const latencies: Record<string, number[]> = {};
let sockets = 0;

function one(): Promise<void> {
  const sent = performance.now();
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
          if (timed) (latencies[res.statusCode ?? 0] ??= []).push(performance.now() - sent);
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
const percentile = (sorted: number[], q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
const latencyMs = Object.fromEntries(
  Object.entries(latencies).map(([status, ms]) => {
    const sorted = ms.sort((a, b) => a - b);
    return [status, { n: sorted.length, p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99) }];
  }),
);
process.stdout.write(`${JSON.stringify({ ...statuses, sockets, ...(timed ? { latencyMs } : {}) })}\n`);
