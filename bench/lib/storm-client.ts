/**
 * @module bench/lib/storm-client
 * A retry storm as a process of its own: `connections` keep-alive
 * connections, each sending its next request the moment any answer arrives
 * (a refusal included), for `seconds`; a connection the server closes is
 * reopened at once. Raw sockets with one pre-built request, so the client
 * costs a few µs a request and the server, not the load generator, is what
 * is measured. Prints one JSON line: answers by status, and per status the
 * count, p50 and p99 of the time from writing the request to the end of its
 * answer (ms), and how many answers carried Retry-After.
 *   node storm-client.js <port> <connections> <seconds> <path> <target> <body file>
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';

export interface StormResult {
  readonly statuses: Record<string, number>;
  readonly latencyMs: Record<string, { readonly n: number; readonly p50: number; readonly p99: number }>;
  readonly retryAfter: number;
  readonly reconnects: number;
}

function request(path: string, target: string, body: Buffer): Buffer {
  const head =
    `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n` +
    (target === '' ? '' : `X-Amzn-SageMaker-Target-Model: ${target}\r\n`) +
    '\r\n';
  return Buffer.concat([Buffer.from(head, 'latin1'), body]);
}

/** One connection's loop; `record` gets each answer's status, ms and whether it said Retry-After. */
function connection(
  port: number,
  payload: Buffer,
  endAt: number,
  record: (status: number, ms: number, retry: boolean) => void,
  reconnected: () => void,
): Promise<void> {
  return new Promise((resolve) => {
    let sent = 0;
    let pending: Buffer = Buffer.alloc(0);
    let sock: net.Socket;
    const send = (): void => {
      if (performance.now() >= endAt) {
        sock.destroy();
        resolve();
        return;
      }
      sent = performance.now();
      sock.write(payload);
    };
    const open = (): void => {
      sock = net.connect(port, '127.0.0.1', send);
      sock.setNoDelay(true);
      sock.on('data', (d: Buffer) => {
        pending = pending.length === 0 ? d : Buffer.concat([pending, d]);
        for (;;) {
          const end = pending.indexOf('\r\n\r\n');
          if (end < 0) return;
          const head = pending.subarray(0, end).toString('latin1');
          const m = /\r\ncontent-length: *(\d+)/i.exec(head);
          const total = end + 4 + (m ? Number(m[1]) : 0);
          if (pending.length < total) return;
          pending = pending.subarray(total);
          record(Number(head.slice(9, 12)), performance.now() - sent, /\r\nretry-after:/i.test(head));
          if (/\r\nconnection: *close/i.test(head)) {
            sock.destroy();
            return;
          }
          send();
        }
      });
      sock.on('error', () => {});
      sock.on('close', () => {
        if (performance.now() >= endAt) {
          resolve();
          return;
        }
        reconnected();
        pending = Buffer.alloc(0);
        open();
      });
    };
    open();
  });
}

async function main(): Promise<void> {
  const [portArg, connectionsArg, secondsArg, path, target, bodyFile] = process.argv.slice(2);
  const payload = request(path!, target ?? '', readFileSync(bodyFile!));
  const endAt = performance.now() + Number(secondsArg) * 1000;
  const statuses: Record<string, number> = {};
  const latencies: Record<string, number[]> = {};
  let retryAfter = 0;
  let reconnects = 0;
  const record = (status: number, ms: number, retry: boolean): void => {
    statuses[status] = (statuses[status] ?? 0) + 1;
    (latencies[status] ??= []).push(ms);
    if (retry) retryAfter++;
  };
  await Promise.all(Array.from({ length: Number(connectionsArg) }, () => connection(Number(portArg), payload, endAt, record, () => reconnects++)));
  const pct = (sorted: number[], q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
  const latencyMs = Object.fromEntries(
    Object.entries(latencies).map(([s, ms]) => {
      const sorted = ms.sort((a, b) => a - b);
      return [s, { n: sorted.length, p50: pct(sorted, 0.5), p99: pct(sorted, 0.99) }];
    }),
  );
  const result: StormResult = { statuses, latencyMs, retryAfter, reconnects };
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

if (process.argv.length > 2) await main();
