/**
 * @module test/support/haproxy-fleet
 * A fleet as an operator runs one on plain hosts: several `serve` processes on
 * loopback ports, one S3-compatible server holding the models, and HAProxy
 * (the Debian package) in front, configured from examples/haproxy/haproxy.cfg
 * with only its addresses changed, a stats socket in place of its stats page
 * (and, where a scenario says so, its retries or balance algorithm). Shared by the recipe test and bench/cluster.bench.ts.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { repoRoot, startServe, type ServeProcess } from './serve-process.js';

export const RECIPE = path.join(repoRoot, 'examples', 'haproxy', 'haproxy.cfg');

/** The haproxy binary; installed from Debian's packages when missing (apt-get update once, then install). */
export function haproxyBinary(): string {
  for (const p of ['/usr/sbin/haproxy', '/usr/bin/haproxy']) if (existsSync(p)) return p;
  try {
    execFileSync('apt-get', ['update'], { stdio: 'ignore', timeout: 300_000 });
    execFileSync('apt-get', ['install', '-y', 'haproxy'], { stdio: 'ignore', timeout: 300_000, env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  } catch (err) {
    throw new Error(
      `haproxy is not installed and 'apt-get install -y haproxy' failed (${(err as Error).message}); install the Debian package haproxy to run this`,
    );
  }
  for (const p of ['/usr/sbin/haproxy', '/usr/bin/haproxy']) if (existsSync(p)) return p;
  throw new Error('apt-get install -y haproxy succeeded but no haproxy binary was found in /usr/sbin or /usr/bin');
}

export type Balance = 'recipe' | 'roundrobin' | 'consistent';

export interface RecipeOptions {
  readonly port: number;
  readonly servers: readonly { readonly name: string; readonly port: number }[];
  readonly statsSocket: string;
  /** 'recipe': as written (L7 retries); 'conn-failure': HAProxy's default, connection failures only, no redispatch. */
  readonly retries: 'recipe' | 'conn-failure';
  /** 'recipe': bounded-load consistent hashing as written; the others replace it (for the bench's comparison). */
  readonly balance?: Balance;
}

/** examples/haproxy/haproxy.cfg with loopback addresses; everything else as written unless the options say. */
export function recipeConfig(options: RecipeOptions): string {
  const out: string[] = [];
  let section = '';
  for (const line of readFileSync(RECIPE, 'utf8').split('\n')) {
    const t = line.trim();
    if (/^[a-z]/.test(line)) section = t;
    // The stats page has a fixed port (fleets run side by side here): the fleet reads the stats socket it adds instead.
    if (section === 'frontend stats') continue;
    if (t === 'global') {
      out.push(line, `    stats socket ${options.statsSocket} level admin`);
      continue;
    }
    if (t.startsWith('bind ')) {
      out.push(`    bind 127.0.0.1:${options.port}`);
      continue;
    }
    if (t.startsWith('server ')) continue;
    if (options.retries === 'conn-failure' && (t.startsWith('retry-on ') || t.startsWith('option redispatch'))) continue;
    if (options.balance === 'roundrobin' && (t.startsWith('hash-type ') || t.startsWith('hash-balance-factor '))) continue;
    if (options.balance === 'roundrobin' && t.startsWith('balance ')) {
      out.push('    balance roundrobin');
      continue;
    }
    if (options.balance === 'consistent' && t.startsWith('hash-balance-factor ')) continue;
    out.push(line);
  }
  // The server lines go where the recipe's were: at the end of the backend.
  while (out.length > 0 && out[out.length - 1]!.trim() === '') out.pop();
  for (const s of options.servers) out.push(`    server ${s.name} 127.0.0.1:${s.port}`);
  return `${out.join('\n')}\n`;
}

export interface Haproxy {
  readonly url: string;
  readonly port: number;
  /** Server name → HAProxy's status (UP, DOWN, `UP 1/2`, ...), from the stats socket. */
  states(): Promise<Map<string, string>>;
  /** Waits until each named server is UP (or, with `up` false, not UP), within `timeoutMs`. */
  waitFor(names: readonly string[], up: boolean, timeoutMs: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startHaproxy(dir: string, options: RecipeOptions): Promise<Haproxy> {
  const cfg = path.join(dir, `haproxy-${options.port}.cfg`);
  await writeFile(cfg, recipeConfig(options));
  const proc: ChildProcess = spawn(haproxyBinary(), ['-db', '-f', cfg], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const states = async (): Promise<Map<string, string>> => {
    const csv = await new Promise<string>((resolve, reject) => {
      const sock = net.connect(options.statsSocket);
      let text = '';
      sock.on('data', (d) => (text += d.toString()));
      sock.on('end', () => resolve(text));
      sock.on('error', reject);
      sock.write('show stat\n');
    });
    const lines = csv.split('\n').filter((l) => l !== '');
    const header = lines[0]!.replace(/^# /, '').split(',');
    const sv = header.indexOf('svname');
    const status = header.indexOf('status');
    const map = new Map<string, string>();
    for (const l of lines.slice(1)) {
      const cells = l.split(',');
      if (cells[sv] !== 'FRONTEND' && cells[sv] !== 'BACKEND') map.set(cells[sv]!, cells[status]!);
    }
    return map;
  };
  const started = Date.now();
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`haproxy exited with ${proc.exitCode}: ${stderr}`);
    const ok = await states().then(
      () => true,
      () => false,
    );
    if (ok) break;
    if (Date.now() - started > 10_000) throw new Error(`haproxy did not open its stats socket within 10 s: ${stderr}`);
    await sleep(50);
  }
  return {
    url: `http://127.0.0.1:${options.port}`,
    port: options.port,
    states,
    waitFor: async (names, up, timeoutMs) => {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const s = await states();
        if (names.every((n) => (s.get(n) === 'UP') === up)) return;
        if (Date.now() > until) throw new Error(`haproxy: ${names.join(', ')} not ${up ? 'UP' : 'down'} within ${timeoutMs} ms: ${JSON.stringify([...s])}`);
        await sleep(100);
      }
    },
    stop: async () => {
      if (proc.exitCode === null) proc.kill('SIGKILL');
      await exited;
    },
  };
}

/** A free loopback port (closed again: a server restarted on it must get the same one). */
export async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

export interface Instance {
  readonly name: string;
  readonly port: number;
  process: ServeProcess;
  /** Log lines of every process this instance has run (restarts included). */
  readonly lines: Record<string, unknown>[][];
}

/** Starts `serve` for an instance on its port (a restart reuses the port, as a host would). */
export async function startInstance(name: string, port: number, env: Record<string, string>, previous?: Instance): Promise<Instance> {
  const process = await startServe({ ...env, SAGEMAKER_BIND_TO_PORT: String(port) });
  if (previous) {
    previous.process = process;
    previous.lines.push(process.lines);
    return previous;
  }
  return { name, port, process, lines: [process.lines] };
}

/** `model loaded` lines of an instance, every process counted. */
export function loadsOf(instance: Instance): number {
  return instance.lines.reduce((n, lines) => n + lines.filter((l) => l['msg'] === 'model loaded').length, 0);
}

export interface Outcome {
  readonly sent: number;
  readonly ok: number;
  /** Every failure: HTTP status (0: no answer) and what came back. */
  readonly failures: { status: number; detail: string }[];
}

export interface DriveOptions {
  readonly url: string;
  readonly concurrency: number;
  /** Target (the header's value) of the request at position i. */
  target(i: number): string;
  readonly body: Buffer;
  /** Stops sending when true (checked before each request), or after `count` requests. */
  readonly stop?: () => boolean;
  readonly count?: number;
  readonly timeoutMs?: number;
}

/** Sends requests through a keep-alive agent with `concurrency` workers; every answer is checked (200 or a failure). */
export async function drive(options: DriveOptions): Promise<Outcome> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: options.concurrency });
  const url = new URL(options.url);
  let next = 0;
  let ok = 0;
  const failures: { status: number; detail: string }[] = [];
  const one = (i: number): Promise<void> =>
    new Promise<void>((resolve) => {
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          path: '/invocations',
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', 'content-length': options.body.length, 'x-amzn-sagemaker-target-model': options.target(i) },
          timeout: options.timeoutMs ?? 30_000,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            if (res.statusCode === 200) ok++;
            else failures.push({ status: res.statusCode ?? 0, detail: Buffer.concat(chunks).toString('utf8').slice(0, 200) });
            resolve();
          });
          res.on('error', (err) => {
            failures.push({ status: 0, detail: err.message });
            resolve();
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error('timed out')));
      req.on('error', (err) => {
        failures.push({ status: 0, detail: err.message });
        resolve();
      });
      req.end(options.body);
    });
  const worker = async (): Promise<void> => {
    for (;;) {
      if (options.stop?.() === true) return;
      if (options.count !== undefined && next >= options.count) return;
      await one(next++);
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, () => worker()));
  agent.destroy();
  return { sent: next, ok, failures };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
