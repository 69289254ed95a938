/**
 * @module test/support/ping-under-flood
 * A flood of inference requests from test/support/flood-client.ts, run as a
 * process of its own, with /ping timed on a fresh connection every 200 ms
 * meanwhile (as a health check connects): what faults-flood and
 * queue-limits both measure.
 */
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { repoRoot } from './serve-process.js';

export interface Ping {
  readonly ms: number;
  readonly status: string;
}

/** One /ping on a fresh connection: ms to the first byte of the answer, and its status line. */
export function ping(url: string): Promise<Ping> {
  const started = performance.now();
  return new Promise((resolve) => {
    const sock = net.connect(Number(new URL(url).port), '127.0.0.1', () => sock.write('GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'));
    let done = false;
    const finish = (status: string): void => {
      if (done) return;
      done = true;
      sock.destroy();
      resolve({ ms: performance.now() - started, status });
    };
    sock.once('data', (d: Buffer) => finish(d.toString('latin1').split('\r\n')[0] ?? ''));
    sock.on('error', () => finish('error'));
    sock.on('close', () => finish('closed without an answer'));
  });
}

export interface Flood {
  readonly connections: number;
  readonly seconds: number;
  readonly target: string;
  /** The request body (JSON), or @file for one too large for an argument. */
  readonly body: string;
  /** Ask the client for per-status latencies too (flood-client.ts's `timed`). */
  readonly timed?: boolean;
}

/**
 * Floods `url` for `flood.seconds` and pings it every 200 ms meanwhile, from
 * 700 ms after the connections opened (the queue fills first) until 1.5 s
 * before the end; the pings and the client's last line (its counts), parsed.
 */
export async function pingUnderFlood(url: string, flood: Flood): Promise<{ pings: Ping[]; result: Record<string, unknown> }> {
  const args = [path.join(repoRoot, 'dist/test/support/flood-client.js'), url, String(flood.connections), String(flood.seconds), flood.target, flood.body];
  const client = spawn(process.execPath, flood.timed === true ? [...args, 'timed'] : args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  client.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => client.once('exit', () => resolve()));
  while (!out.includes('started')) await new Promise((r) => setTimeout(r, 10));
  await new Promise((r) => setTimeout(r, 700));
  const pings: Ping[] = [];
  const until = performance.now() + (flood.seconds - 1.5) * 1000;
  while (performance.now() < until) {
    pings.push(await ping(url));
    await new Promise((r) => setTimeout(r, 200));
  }
  await exited;
  return { pings, result: JSON.parse(out.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown> };
}
