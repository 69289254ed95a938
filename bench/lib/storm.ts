/**
 * @module bench/lib/storm
 * Runs a retry storm (bench/lib/storm-client.ts) as a process of its own and,
 * while it runs, times /ping on a new connection each time, as a health
 * check connects: what bench/overload.bench.ts and
 * test/integration/overload.test.ts both measure.
 */
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { StormResult } from './storm-client.js';

const STORM_CLIENT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'storm-client.js');

/** /ping on a new connection: ms to the first byte of the answer (or to the error). */
export function pingMs(port: number): Promise<number> {
  const started = performance.now();
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1', () => sock.write('GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
    const done = (): void => {
      sock.destroy();
      resolve(performance.now() - started);
    };
    sock.once('data', done);
    sock.once('error', done);
  });
}

export interface StormOptions {
  readonly connections: number;
  readonly seconds: number;
  readonly route: string;
  readonly target: string;
  readonly bodyFile: string;
  /** Time /ping every this many ms after the first `pingAfterMs` (default 500); none when absent. */
  readonly pingEveryMs?: number;
  readonly pingAfterMs?: number;
}

/** The storm's result and the /ping times taken while it ran. */
export async function runStorm(port: number, options: StormOptions): Promise<{ storm: StormResult; pingsMs: number[] }> {
  const { connections, seconds, route, target, bodyFile, pingEveryMs } = options;
  const child = spawn(process.execPath, [STORM_CLIENT, String(port), String(connections), String(seconds), route, target, bodyFile], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  let running = true;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve())).then(() => (running = false));
  const pingsMs: number[] = [];
  if (pingEveryMs !== undefined) {
    await new Promise((r) => setTimeout(r, options.pingAfterMs ?? 500));
    while (running) {
      pingsMs.push(await pingMs(port));
      await new Promise((r) => setTimeout(r, pingEveryMs));
    }
  }
  await exited;
  return { storm: JSON.parse(out.trim().split('\n').at(-1)!) as StormResult, pingsMs };
}
