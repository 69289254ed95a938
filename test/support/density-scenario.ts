/**
 * The density scenario (issue 28), shared by test/integration/density.test.ts
 * and bench/density.bench.ts: N generated models resident in a real server
 * started by `./serve` (the allocator settings users ship), one or two requests each,
 * against the same sessions in a plain onnxruntime-node process
 * (test/support/raw-sessions.ts) started with the launcher's settings too
 * (test/support/launcher.ts), so both sides allocate alike.
 * Resident set and threads come from /proc; reserved and measured bytes
 * from /metrics and the repository index. Linux only.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { mlp, tiny, writeModelDir } from '../../examples/models/zoo.js';
import { launcherEnv } from './launcher.js';
import { freePort, repoRoot } from './memory-scenario.js';

export type DensityKind = 'tiny' | 'mlp';

/** Input features of each kind: tiny 16 → 4 (about 0.5 KB of weights), the MLP 256 → 512 → 256 → 16 (about 1 MB). */
export const FEATURES: Readonly<Record<DensityKind, number>> = Object.freeze({ tiny: 16, mlp: 256 });

/** Node told it has `cpus` CPUs (os.availableParallelism), as on a machine that size: the server's defaults follow. */
export function cpusPreload(cpus: number): string {
  return `--import=data:text/javascript,${encodeURIComponent(`import os from "node:os"; os.availableParallelism = () => ${cpus};`)}`;
}

/** `count` models of `kind` in a model repository under `root`, each with its own weights (seeded). */
export async function writeDensityModels(root: string, kind: DensityKind, count: number): Promise<string[]> {
  const names: string[] = [];
  for (let i = 0; i < count; i++) {
    const name = `${kind}_${String(i).padStart(5, '0')}`;
    const model = kind === 'tiny' ? tiny({ in: 16, out: 4, seed: i + 1 }) : mlp({ in: 256, hidden: [512, 256], out: 16, seed: i + 1 });
    await writeModelDir(root, name, { onnx: model.onnx, config: model.config });
    names.push(name);
  }
  return names;
}

export interface ProcFigures {
  readonly rssKb: number;
  readonly threads: number;
}

export async function procFigures(pid: number | 'self'): Promise<ProcFigures> {
  const text = await readFile(`/proc/${pid}/status`, 'utf8');
  const rss = /^VmRSS:\s+(\d+) kB$/m.exec(text);
  const threads = /^Threads:\s+(\d+)$/m.exec(text);
  if (!rss || !threads) throw new Error(`/proc/${pid}/status has no VmRSS or Threads line`);
  return { rssKb: Number(rss[1]), threads: Number(threads[1]) };
}

export interface Served {
  readonly url: string;
  readonly pid: number;
  stop(): Promise<void>;
}

/** `<checkout>/serve` (default: this one) with exactly `env` added to PATH/HOME-like basics, on a free port; waits for /ping. */
export async function startServeAt(env: Readonly<Record<string, string>>, checkout = repoRoot()): Promise<Served> {
  const port = await freePort();
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !k.startsWith('MME_') && !k.startsWith('MALLOC_') && k !== 'NODE_OPTIONS') base[k] = v;
  const proc: ChildProcess = spawn(path.join(checkout, 'serve'), [], {
    env: { ...base, MME_HOST: '127.0.0.1', SAGEMAKER_BIND_TO_PORT: String(port), MME_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => (err = (err + d.toString('utf8')).slice(-10_000)));
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`serve exited with ${proc.exitCode}: ${err}`);
    try {
      if ((await fetch(`${url}/ping`)).status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`serve did not answer /ping within 120 s: ${err}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    pid: proc.pid!,
    stop: async () => {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** The raw reference for the models under `root`: RSS and threads before and after its sessions exist. */
export async function rawFigures(
  root: string,
  features: number,
): Promise<{ readonly models: number; readonly before: ProcFigures; readonly after: ProcFigures }> {
  const entry = path.join(repoRoot(), 'dist', 'test', 'support', 'raw-sessions.js');
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('MALLOC_') && k !== 'NODE_OPTIONS') base[k] = v;
  const proc = spawn(process.execPath, [entry, root, String(features)], { env: { ...base, ...launcherEnv() }, stdio: ['pipe', 'pipe', 'inherit'] });
  try {
    const line = await new Promise<string>((resolve, reject) => {
      const rl = createInterface({ input: proc.stdout! });
      rl.once('line', resolve);
      proc.once('exit', (code) => reject(new Error(`raw-sessions exited with ${code}`)));
    });
    return JSON.parse(line) as { models: number; before: ProcFigures; after: ProcFigures };
  } finally {
    proc.stdin!.end();
    proc.kill('SIGTERM');
  }
}

export async function invokeTarget(url: string, target: string, features: number): Promise<number> {
  const res = await fetch(`${url}/invocations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'X-Amzn-SageMaker-Target-Model': target },
    body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, features], data: new Array<number>(features).fill(0.5) }] }),
  });
  await res.arrayBuffer();
  return res.status;
}

export interface DensityFigures {
  readonly models: number;
  /** Idle, with the first half of the models served, and with all of them. */
  readonly server: { readonly idle: ProcFigures; readonly half: ProcFigures; readonly loaded: ProcFigures };
  readonly raw: { readonly models: number; readonly before: ProcFigures; readonly after: ProcFigures };
  /** Σ reserved_bytes and Σ measured_bytes over the models (repository index). */
  readonly reservedBytes: number;
  readonly measuredBytes: number;
  /** Per model: reserved ÷ measured, for the models that have both. */
  readonly reservedOverMeasured: readonly number[];
  /** Server RSS growth per model from idle ÷ raw RSS growth per model (fixed costs that come with the first models included). */
  readonly rssRatio: number;
  /** Server RSS growth per further model, between half the models and all of them, ÷ raw per model: what each model costs. */
  readonly marginalRssRatio: number;
  /** Server threads added per model from idle (fixed costs that come with the first models included). */
  readonly threadsPerModel: number;
  /** Server threads added per model between half the models and all of them: what each further model costs. */
  readonly marginalThreadsPerModel: number;
  readonly rawThreadsPerModel: number;
  readonly statuses: Readonly<Record<string, number>>;
}

/**
 * Serve the models under `root` (`names`), send each `requestsEach`
 * requests one after another, then read everything. `env`: the server's
 * settings beyond the model source (a budget large enough for all).
 */
/**
 * The process's figures once it has settled: its runtime workers start after
 * the listening line (their threads, heaps and onnxruntime environments come
 * over the next moments, later on a loaded machine), and what they add must
 * count as idle, not as the first models' cost. Sampled until three samples in
 * a row agree (threads equal, RSS within 1%), at most 15 s.
 */
async function settledFigures(pid: number): Promise<ProcFigures> {
  const deadline = Date.now() + 15_000;
  let last = await procFigures(pid);
  let agreeing = 0;
  while (agreeing < 2 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250));
    const next = await procFigures(pid);
    agreeing = next.threads === last.threads && Math.abs(next.rssKb - last.rssKb) <= last.rssKb * 0.01 ? agreeing + 1 : 0;
    last = next;
  }
  return last;
}

export async function measureDensity(
  root: string,
  names: readonly string[],
  kind: DensityKind,
  options: { readonly env?: Readonly<Record<string, string>>; readonly requestsEach?: number; readonly checkout?: string } = {},
): Promise<DensityFigures> {
  const features = FEATURES[kind];
  const raw = await rawFigures(root, features);
  const server = await startServeAt(
    {
      MME_MODEL_SOURCE: root,
      MME_CACHE_DIR: path.join(root, '..', `cache-${kind}-${Date.now()}`),
      MME_MEMORY_BUDGET_BYTES: String(16 * 1024 ** 3),
      ...options.env,
    },
    options.checkout,
  );
  try {
    const idle = await settledFigures(server.pid);
    const statuses: Record<string, number> = {};
    const serve = async (batch: readonly string[]): Promise<void> => {
      for (let round = 0; round < (options.requestsEach ?? 1); round++) {
        for (const name of batch) {
          const status = await invokeTarget(server.url, name, features);
          statuses[status] = (statuses[status] ?? 0) + 1;
        }
      }
      // Past a normalisation of the bookings (every second while models are held).
      await new Promise((r) => setTimeout(r, 1500));
    };
    const halfCount = Math.floor(names.length / 2);
    await serve(names.slice(0, halfCount));
    const half = await procFigures(server.pid);
    await serve(names.slice(halfCount));
    const loaded = await procFigures(server.pid);
    const index = (await (
      await fetch(`${server.url}/v2/repository/index`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
    ).json()) as Record<string, unknown>[];
    let reservedBytes = 0;
    let measuredBytes = 0;
    const reservedOverMeasured: number[] = [];
    for (const row of index) {
      const reserved = row['reserved_bytes'];
      const measured = row['measured_bytes'];
      if (typeof reserved === 'number') reservedBytes += reserved;
      if (typeof measured === 'number') measuredBytes += measured;
      if (typeof reserved === 'number' && typeof measured === 'number' && measured > 0) reservedOverMeasured.push(reserved / measured);
    }
    const n = names.length;
    const serverPerModel = (loaded.rssKb - idle.rssKb) / n;
    const rawPerModel = (raw.after.rssKb - raw.before.rssKb) / raw.models;
    return {
      models: n,
      server: { idle, half, loaded },
      raw,
      reservedBytes,
      measuredBytes,
      reservedOverMeasured,
      rssRatio: serverPerModel / rawPerModel,
      marginalRssRatio: (loaded.rssKb - half.rssKb) / (n - halfCount) / rawPerModel,
      threadsPerModel: (loaded.threads - idle.threads) / n,
      marginalThreadsPerModel: (loaded.threads - half.threads) / (n - halfCount),
      rawThreadsPerModel: (raw.after.threads - raw.before.threads) / raw.models,
      statuses,
    };
  } finally {
    await server.stop();
  }
}
