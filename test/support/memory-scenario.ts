/**
 * @module test/support/memory-scenario
 * The memory promise tried as an operator would (issue 17): the real server
 * started the way `serve` starts it (its own process, so glibc reads the
 * allocator settings at start), models of real size generated on disk, and
 * the resident set of the server's process tree read from /proc while
 * concurrent cold requests and SageMaker load/unload cycles run.
 * Shared by the integration test and `bench/memory-budget.bench.ts`. Linux only.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { matmul, writeModelDir } from '../../examples/models/zoo.js';

export const MIB = 1024 * 1024;

/** VmRSS of one process, in bytes; 0 once it is gone. */
async function rssOf(pid: number): Promise<number> {
  try {
    const m = /^VmRSS:\s+(\d+) kB/m.exec(await readFile(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Children of `pid` (every thread's list), from /proc/<pid>/task/<tid>/children. */
async function childrenOf(pid: number): Promise<number[]> {
  const out: number[] = [];
  try {
    for (const tid of await readdir(`/proc/${pid}/task`)) {
      try {
        const text = await readFile(`/proc/${pid}/task/${tid}/children`, 'utf8');
        for (const c of text.trim().split(/\s+/)) if (c) out.push(Number(c));
      } catch {
        // the thread ended
      }
    }
  } catch {
    // the process ended
  }
  return out;
}

/** Resident set of `pid` and all its descendants, in bytes. */
export async function processTreeRssBytes(pid: number): Promise<number> {
  let total = 0;
  const queue = [pid];
  const seen = new Set<number>();
  while (queue.length > 0) {
    const p = queue.shift()!;
    if (seen.has(p)) continue;
    seen.add(p);
    total += await rssOf(p);
    queue.push(...(await childrenOf(p)));
  }
  return total;
}

/** Polls the process tree's RSS until stopped; keeps the peak. */
export class TreeRssSampler {
  private timer: NodeJS.Timeout | undefined;
  private reading = false;
  peakBytes = 0;
  samples = 0;

  constructor(
    private readonly pid: number,
    private readonly intervalMs = 10,
  ) {}

  start(): this {
    this.timer = setInterval(() => {
      if (this.reading) return;
      this.reading = true;
      // Never rejects: a process that is gone reads as 0 bytes.
      void processTreeRssBytes(this.pid)
        .then((b) => {
          this.peakBytes = Math.max(this.peakBytes, b);
          this.samples++;
        })
        .finally(() => (this.reading = false));
    }, this.intervalMs);
    return this;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    // One last read: the end state counts too.
    this.peakBytes = Math.max(this.peakBytes, await processTreeRssBytes(this.pid));
  }
}

/** A free loopback TCP port (the kernel's pick, released before the server binds it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const address = s.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      s.close(() => resolve(port));
    });
  });
}

/** The repository root (dist/test/support → three levels up). */
export function repoRoot(): string {
  return path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
}

export interface ServeProcess {
  readonly url: string;
  readonly pid: number;
  readonly stderr: () => string;
  stop(): Promise<void>;
}

/**
 * Start `./serve` (exactly as SageMaker's `docker run IMAGE serve` and `npm
 * start` do, allocator settings included) on a free loopback port, and wait
 * for /ping. `env` replaces inherited variables; `omit` removes some (e.g. to
 * start it without the allocator settings).
 */
export async function startServe(env: Readonly<Record<string, string>>, omit: readonly string[] = []): Promise<ServeProcess> {
  const port = await freePort();
  const childEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('MME_') && !k.startsWith('MALLOC_')) childEnv[k] = v;
  // The scenarios load through POST /models and the v2 repository API: explicit control, urls under the temp directory.
  const control = { MME_MODEL_CONTROL: 'explicit', MME_MODEL_URL_ROOTS: os.tmpdir() };
  Object.assign(childEnv, { MME_HOST: '127.0.0.1', SAGEMAKER_BIND_TO_PORT: String(port), MME_LOG_LEVEL: 'warn', MME_DRAIN_SECONDS: '0' }, control, env);
  for (const k of omit) delete childEnv[k];
  const proc: ChildProcess = spawn(path.join(repoRoot(), 'serve'), [], { env: childEnv, stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => {
    err = (err + d.toString('utf8')).slice(-20_000);
  });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`serve exited with ${proc.exitCode}: ${err}`);
    try {
      const res = await fetch(`${url}/ping`);
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`serve did not answer /ping within 60 s: ${err}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    pid: proc.pid!,
    stderr: () => err,
    stop: async () => {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** `count` MatMul models `in → out` (distinct seeds) written as model directories `m0..` under `root`. */
export async function writeMatMulModels(root: string, count: number, inFeatures = 512, outFeatures = 6144): Promise<string[]> {
  const names: string[] = [];
  for (let i = 0; i < count; i++) {
    const model = matmul({ in: inFeatures, out: outFeatures, seed: 100 + i });
    const name = `m${i}`;
    await writeModelDir(root, name, { onnx: model.onnx, config: model.config! });
    names.push(name);
  }
  return names;
}

/** One request body for a MatMul model of `inFeatures` inputs. */
export function matmulBody(inFeatures = 512): string {
  return JSON.stringify({
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, inFeatures], data: Array.from({ length: inFeatures }, (_, i) => (i % 7) / 7) }],
  });
}

export interface Figures {
  readonly idleBytes: number;
  readonly peakBytes: number;
  readonly afterUnloadBytes: number;
  readonly statuses: Readonly<Record<string, number>>;
}

function count(statuses: Record<string, number>, status: number): void {
  statuses[status] = (statuses[status] ?? 0) + 1;
}

/**
 * Self-managed targets: `rounds` rounds of one concurrent request per model
 * (X-Amzn-SageMaker-Target-Model = the model directory), then SageMaker
 * mode: POST /models each model (from `root`), invoke each, DELETE all; the
 * RSS after the unloads is read once it settles (the last of a few reads).
 */
export async function runScenario(server: ServeProcess, root: string, names: readonly string[], rounds: number, inFeatures = 512): Promise<Figures> {
  const idleBytes = await processTreeRssBytes(server.pid);
  const sampler = new TreeRssSampler(server.pid).start();
  const statuses: Record<string, number> = {};
  const body = matmulBody(inFeatures);
  const headers = { 'content-type': 'application/json' };
  try {
    for (let r = 0; r < rounds; r++) {
      await Promise.all(
        names.map(async (name) => {
          const res = await fetch(`${server.url}/invocations`, { method: 'POST', headers: { ...headers, 'X-Amzn-SageMaker-Target-Model': name }, body });
          await res.arrayBuffer();
          count(statuses, res.status);
        }),
      );
    }
    // SageMaker mode: the same models loaded by SageMaker's own API; the self-managed ones go first (as on an endpoint
    // that only SageMaker drives), by unloading them through the v2 repository API.
    for (const name of names) await (await fetch(`${server.url}/v2/repository/models/${name}/unload`, { method: 'POST' })).arrayBuffer();
    for (let r = 0; r < rounds; r++) {
      await Promise.all(
        names.map(async (name) => {
          const res = await fetch(`${server.url}/models`, {
            method: 'POST',
            headers,
            body: JSON.stringify({ model_name: `sm-${name}`, url: path.join(root, name) }),
          });
          await res.arrayBuffer();
          count(statuses, res.status);
          const inv = await fetch(`${server.url}/models/sm-${name}/invoke`, { method: 'POST', headers, body });
          await inv.arrayBuffer();
          count(statuses, inv.status);
        }),
      );
      for (const name of names) {
        const res = await fetch(`${server.url}/models/sm-${name}`, { method: 'DELETE' });
        await res.arrayBuffer();
        count(statuses, res.status);
      }
    }
  } finally {
    await sampler.stop();
  }
  // Freed memory goes back to the kernel at once with the allocator settings; a few reads show the settled figure.
  let afterUnloadBytes = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 5; i++) {
    await new Promise((r) => setTimeout(r, 100));
    afterUnloadBytes = Math.min(afterUnloadBytes, await processTreeRssBytes(server.pid));
  }
  return { idleBytes, peakBytes: sampler.peakBytes, afterUnloadBytes, statuses };
}
