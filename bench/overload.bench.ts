/**
 * @module bench/overload
 * Overload without collapse (issue 37), measured on real `serve` processes
 * with a retry storm from another process (bench/lib/storm-client.ts: every
 * connection sends its next request the moment any answer arrives):
 * - goodput (2xx/s) at 1,024 connections ÷ the best goodput at 16-64, for the
 *   defaults, MME_MAX_QUEUE_SIZE=16 and MME_MAX_INFLIGHT_REQUESTS=64, on the
 *   256→1024→1024→16 MLP (dynamic batching);
 * - the refusal's p50 at the client, and the share of refusals with Retry-After;
 * - server CPU per refusal against per answer (from /proc; a refusal's is
 *   (storm CPU − answers × CPU per answer at 64) ÷ refusals), and a refusal
 *   alone: the main thread's CPU per refusal beside a bare node:http server's
 *   refusing the same storm (the limit);
 * - /ping from a separate client on a new connection every 50 ms: p99 and
 *   max, during the storm and during 512 connections sending 4×1024-float bodies;
 * - neighbours (defaults): a light model (16→4, one request at a time) p50
 *   and p99 while the MLP is flooded with 128 connections ÷ alone, and the
 *   MLP's throughput with the neighbour ÷ alone; beside them the same ratios
 *   with the flood sent to another server process instead (the floor: what
 *   sharing the machine's cores alone costs the light model).
 * Every server runs twice in the same run when BENCH_BASELINE_ROOT names a
 * built checkout of the previous landed commit: `new` (this checkout) and
 * `base`, runs interleaved, medians of BENCH_REPEATS rounds with their
 * spread; the load average is printed beside each table.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { mlp, tiny, writeModelDir } from '../examples/models/zoo.js';
import { v2Body } from './lib/payload.js';
import { childPort, spawnChild } from './lib/child.js';
import { processCpuUs, threadCpuUs } from './lib/proc-cpu.js';
import { markdownTable, textTable, type BenchReport, type Table } from './lib/report.js';
import { benchParts, benchSettings } from './lib/settings.js';
import type { StormResult } from './lib/storm-client.js';
import { runStorm } from './lib/storm.js';
import { median, percentileSorted } from './lib/stats.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');
const STORM = 1024;
const LARGE = 512;
const NEIGHBOUR_FLOOD = 128;

const SETTINGS: readonly { readonly name: string; readonly env: Readonly<Record<string, string>> }[] = [
  { name: 'defaults', env: {} },
  { name: 'MME_MAX_QUEUE_SIZE=16', env: { MME_MAX_QUEUE_SIZE: '16' } },
  { name: 'MME_MAX_INFLIGHT_REQUESTS=64', env: { MME_MAX_INFLIGHT_REQUESTS: '64' } },
];

function progress(message: string): void {
  process.stderr.write(`[overload] ${message}\n`);
}

function loadavg(): string {
  return os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
}

interface Server {
  readonly label: string;
  readonly port: number;
  readonly pid: number;
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

async function startServe(label: string, root: string, source: string, env: Readonly<Record<string, string>>, logFile: string): Promise<Server> {
  const port = await freePort();
  const fd = openSync(logFile, 'a');
  const child: ChildProcess = spawn(path.join(root, 'serve'), [], {
    cwd: root,
    env: { ...process.env, ...env, SAGEMAKER_BIND_TO_PORT: String(port), MME_HOST: '127.0.0.1', MME_MODEL_SOURCE: source, MME_CACHE_DIR: `${logFile}.cache` },
    stdio: ['ignore', fd, fd],
  });
  closeSync(fd);
  const until = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${label}: serve exited (${child.exitCode}); see ${logFile}`);
    const ok = await fetch(`http://127.0.0.1:${port}/ping`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > until) throw new Error(`${label}: not ready in 60 s; see ${logFile}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    label,
    port,
    pid: child.pid!,
    stop: async () => {
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
    },
  };
}

interface StormRun {
  readonly storm: StormResult;
  readonly seconds: number;
  /** The server's CPU over the storm, all threads. */
  readonly cpuUs: number;
  /** Its main thread's (the event loop's) alone. */
  readonly mainCpuUs: number;
  readonly pingsMs: number[];
}

/** A storm against `server`, /ping probed meanwhile, and the server's CPU over it. */
async function storm(server: Server, connections: number, seconds: number, route: string, target: string, bodyFile: string): Promise<StormRun> {
  const cpu0 = processCpuUs(server.pid);
  const main0 = threadCpuUs(server.pid);
  const run = await runStorm(server.port, { connections, seconds, route, target, bodyFile, pingEveryMs: 50 });
  return { ...run, seconds, cpuUs: processCpuUs(server.pid) - cpu0, mainCpuUs: threadCpuUs(server.pid) - main0 };
}

const ok = (r: StormRun): number => Object.entries(r.storm.statuses).reduce((n, [s, c]) => (s.startsWith('2') ? n + c : n), 0);
const refused = (r: StormRun): number => (r.storm.statuses['429'] ?? 0) + (r.storm.statuses['503'] ?? 0);
const refusalP50 = (r: StormRun): number => r.storm.latencyMs['429']?.p50 ?? r.storm.latencyMs['503']?.p50 ?? Number.NaN;
function pingStats(ms: readonly number[]): { p99: number; max: number } {
  const sorted = [...ms].sort((a, b) => a - b);
  return { p99: percentileSorted(sorted, 99), max: sorted.at(-1) ?? Number.NaN };
}

/** The median and the spread (min-max) of a figure over rounds. */
function spread(xs: readonly number[], digits = 2): string {
  const finite = xs.filter(Number.isFinite);
  if (finite.length === 0) return '-';
  return `${median(finite).toFixed(digits)} (${Math.min(...finite).toFixed(digits)}-${Math.max(...finite).toFixed(digits)})`;
}

/** Figures of the rounds, per server and name: what the tables print the median and spread of. */
class RoundFigures {
  private readonly byServer = new Map<string, Record<string, number[]>>();

  add(server: string, key: string, value: number): void {
    const f = this.byServer.get(server) ?? {};
    (f[key] ??= []).push(value);
    this.byServer.set(server, f);
  }

  /** The median and spread of each figure `columns` name, for `server`'s row: [key, digits] (digits default 2). */
  spreads(server: string, columns: readonly (readonly [string, number?])[]): string[] {
    const f = this.byServer.get(server)!;
    return columns.map(([key, digits]) => spread(f[key]!, digits));
  }
}

/** The servers in the order they run in `round`: reversed every other round, so that none always runs first. */
function turnOrder<T>(servers: readonly T[], round: number): readonly T[] {
  return round % 2 === 0 ? servers : [...servers].reverse();
}

interface Roots {
  readonly label: string;
  readonly root: string;
}

/** What every table's rounds share: the checkouts compared, the model source and bodies, the work dir, and how long and how often. */
interface Run {
  readonly roots: readonly Roots[];
  readonly source: string;
  readonly bodies: Record<string, string>;
  readonly work: string;
  readonly seconds: number;
  readonly repeats: number;
}

async function settingCells(setup: Run): Promise<Table[]> {
  const { roots, source, bodies, work, seconds, repeats } = setup;
  const rows: string[][] = [];
  const storms: Table = {
    rows,
    headers: [
      'setting',
      'server',
      'goodput 16',
      'goodput 64',
      'goodput 1024',
      '1024 ÷ best',
      'refusal p50 ms',
      'refusals',
      'Retry-After',
      'µs CPU/answer',
      'CPU per 2xx 1024 ÷ 64',
      'µs CPU/refusal',
      'refusal ÷ answer CPU',
      '/ping p99 ms',
      '/ping max ms',
      'large: /ping p99',
      'large: /ping max',
      'load',
    ],
  };
  for (const setting of SETTINGS) {
    const servers = await Promise.all(roots.map((r, i) => startServe(r.label, r.root, source, setting.env, path.join(work, `${setting.name}-${i}.log`))));
    const figures = new RoundFigures();
    for (const s of servers) await storm(s, 16, 1, '/invocations', 'mlp', bodies['mlp']!);
    for (let round = 0; round < repeats; round++) {
      for (const s of turnOrder(servers, round)) {
        progress(`${setting.name} ${s.label} round ${round + 1}/${repeats} (load ${loadavg()})`);
        const at16 = await storm(s, 16, seconds, '/invocations', 'mlp', bodies['mlp']!);
        const at64 = await storm(s, 64, seconds, '/invocations', 'mlp', bodies['mlp']!);
        const at1024 = await storm(s, STORM, seconds, '/invocations', 'mlp', bodies['mlp']!);
        const large = await storm(s, LARGE, seconds, '/invocations', 'wide', bodies['wide']!);
        const best = Math.max(ok(at16), ok(at64)) / seconds;
        const perAnswer = at64.cpuUs / Math.max(1, ok(at64) + refused(at64));
        const perRefusal = refused(at1024) > 0 ? Math.max(0, at1024.cpuUs - ok(at1024) * perAnswer) / refused(at1024) : Number.NaN;
        figures.add(s.label, 'g16', ok(at16) / seconds);
        figures.add(s.label, 'g64', ok(at64) / seconds);
        figures.add(s.label, 'g1024', ok(at1024) / seconds);
        figures.add(s.label, 'ratio', ok(at1024) / seconds / best);
        figures.add(s.label, 'refusalP50', refusalP50(at1024));
        figures.add(s.label, 'refused', refused(at1024));
        figures.add(s.label, 'retryAfter', refused(at1024) > 0 ? at1024.storm.retryAfter / refused(at1024) : Number.NaN);
        figures.add(s.label, 'cpuAnswer', perAnswer);
        // What a good answer costs under the storm, its share of the refusals included, against at 64: steadier than goodput here.
        figures.add(s.label, 'cpuGrowth', at1024.cpuUs / Math.max(1, ok(at1024)) / (at64.cpuUs / Math.max(1, ok(at64))));
        figures.add(s.label, 'cpuRefusal', perRefusal);
        figures.add(s.label, 'cpuRatio', perRefusal / perAnswer);
        figures.add(s.label, 'pingP99', pingStats(at1024.pingsMs).p99);
        figures.add(s.label, 'pingMax', pingStats(at1024.pingsMs).max);
        figures.add(s.label, 'largeP99', pingStats(large.pingsMs).p99);
        figures.add(s.label, 'largeMax', pingStats(large.pingsMs).max);
        figures.add(s.label, 'load', os.loadavg()[0]!);
      }
    }
    for (const s of servers) await s.stop();
    for (const r of roots) {
      rows.push([
        setting.name,
        r.label,
        ...figures.spreads(r.label, [
          ['g16', 0],
          ['g64', 0],
          ['g1024', 0],
          ['ratio'],
          ['refusalP50', 1],
          ['refused', 0],
          ['retryAfter'],
          ['cpuAnswer', 0],
          ['cpuGrowth'],
          ['cpuRefusal', 0],
          ['cpuRatio'],
          ['pingP99', 0],
          ['pingMax', 0],
          ['largeP99', 0],
          ['largeMax', 0],
          ['load', 1],
        ]),
      ]);
    }
  }
  return [storms];
}

/**
 * What one refusal costs the server, alone: MME_MAX_INFLIGHT_REQUESTS=1 (and,
 * on this checkout, no holding, so every retry is refused and read again at
 * once) under 256 connections; CPU per refusal = (CPU − answers × CPU per
 * answer at one connection) ÷ refusals, of the whole process and of its main
 * thread. The process's figure includes what the admitted request's run
 * costs beside the refusals (with one request in flight the server is quiet,
 * so the MLP runs on its main-thread copy, whose second intra-op thread spins
 * between runs); the main thread's is the refusals' own. Beside them the
 * limit: a bare node:http server answering the same storm with a fixed 429
 * (bench/lib/bare-http-server.ts `refuse`), its whole process's CPU per
 * refusal (its GC threads included, so the limit is if anything generous).
 */
async function refusalCostCells(setup: Run): Promise<Table> {
  const { roots, source, bodies, work, seconds, repeats } = setup;
  const rows: string[][] = [];
  const table: Table = {
    rows,
    headers: [
      'server',
      'refusals/s',
      'answers/s',
      'µs CPU/refusal',
      'main thread µs/refusal',
      'bare node:http µs/refusal',
      'main thread ÷ bare',
      'µs CPU/answer (1 conn)',
      'load',
    ],
  };
  const servers = await Promise.all(
    roots.map((r, i) =>
      startServe(
        r.label,
        r.root,
        source,
        { MME_MAX_INFLIGHT_REQUESTS: '1', ...(r.label === 'new' ? { MME_HOLD_REFUSED_CONNECTIONS: 'false' } : {}) },
        path.join(work, `refusal-${i}.log`),
      ),
    ),
  );
  const bareChild = await spawnChild('bare-refusal', new URL('./lib/bare-http-server.js', import.meta.url), ['refuse']);
  const bare: Server = { label: 'bare', port: childPort(bareChild), pid: bareChild.pid!, stop: () => bareChild.stop() };
  const figures = new RoundFigures();
  for (const s of servers) await storm(s, 1, 1, '/invocations', 'mlp', bodies['mlp']!);
  for (let round = 0; round < repeats; round++) {
    const limit = await storm(bare, 256, seconds, '/invocations', 'mlp', bodies['mlp']!);
    const barePerRefusal = limit.cpuUs / Math.max(1, refused(limit));
    for (const s of turnOrder(servers, round)) {
      progress(`refusal cost ${s.label} round ${round + 1}/${repeats} (load ${loadavg()})`);
      const one = await storm(s, 1, seconds, '/invocations', 'mlp', bodies['mlp']!);
      const perAnswer = one.cpuUs / Math.max(1, ok(one));
      const mainPerAnswer = one.mainCpuUs / Math.max(1, ok(one));
      const flood = await storm(s, 256, seconds, '/invocations', 'mlp', bodies['mlp']!);
      const mainPerRefusal = Math.max(0, flood.mainCpuUs - ok(flood) * mainPerAnswer) / Math.max(1, refused(flood));
      figures.add(s.label, 'rps', refused(flood) / seconds);
      figures.add(s.label, 'aps', ok(flood) / seconds);
      figures.add(s.label, 'cpu', Math.max(0, flood.cpuUs - ok(flood) * perAnswer) / Math.max(1, refused(flood)));
      figures.add(s.label, 'main', mainPerRefusal);
      figures.add(s.label, 'bare', barePerRefusal);
      figures.add(s.label, 'mainBare', mainPerRefusal / barePerRefusal);
      figures.add(s.label, 'answer', perAnswer);
      figures.add(s.label, 'load', os.loadavg()[0]!);
    }
  }
  for (const s of [...servers, bare]) await s.stop();
  for (const r of roots) {
    rows.push([r.label, ...figures.spreads(r.label, [['rps', 0], ['aps', 0], ['cpu', 1], ['main', 1], ['bare', 1], ['mainBare'], ['answer', 0], ['load', 1]])]);
  }
  return table;
}

async function neighbourCells(setup: Run): Promise<Table> {
  const { roots, source, bodies, work, seconds, repeats } = setup;
  const rows: string[][] = [];
  const table: Table = {
    rows,
    headers: [
      'server',
      'light p50 ms alone',
      'with flood',
      'p50 ratio',
      'p50 ratio, flood in another process',
      'light p99 alone',
      'with flood',
      'p99 ratio',
      'p99 ratio, flood in another process',
      'heavy req/s alone',
      'with light',
      'heavy ratio',
      'heavy refusals',
      'load',
    ],
  };
  const servers = await Promise.all(roots.map((r, i) => startServe(r.label, r.root, source, {}, path.join(work, `neighbour-${i}.log`))));
  // The control: the same flood against a second process of this checkout, so the light model shares only the machine's
  // cores with it (no event loop, worker or queue in common). What the light model loses there is the machine's floor.
  const apart = await startServe('apart', repo, source, {}, path.join(work, 'neighbour-apart.log'));
  await storm(apart, 16, 1, '/invocations', 'mlp', bodies['mlp']!);
  const figures = new RoundFigures();
  for (const s of servers) {
    await storm(s, 1, 1, '/invocations', 'light', bodies['light']!);
    await storm(s, 16, 1, '/invocations', 'mlp', bodies['mlp']!);
  }
  for (let round = 0; round < repeats; round++) {
    for (const s of turnOrder(servers, round)) {
      progress(`neighbours ${s.label} round ${round + 1}/${repeats} (load ${loadavg()})`);
      const lightAlone = await storm(s, 1, seconds, '/invocations', 'light', bodies['light']!);
      const heavyAlone = await storm(s, NEIGHBOUR_FLOOD, seconds, '/invocations', 'mlp', bodies['mlp']!);
      const [light, heavy] = await Promise.all([
        storm(s, 1, seconds, '/invocations', 'light', bodies['light']!),
        storm(s, NEIGHBOUR_FLOOD, seconds, '/invocations', 'mlp', bodies['mlp']!),
      ]);
      const [lightBesideApart] = await Promise.all([
        storm(s, 1, seconds, '/invocations', 'light', bodies['light']!),
        storm(apart, NEIGHBOUR_FLOOD, seconds, '/invocations', 'mlp', bodies['mlp']!),
      ]);
      const p = (r: StormRun, q: 'p50' | 'p99'): number => r.storm.latencyMs['200']?.[q] ?? Number.NaN;
      figures.add(s.label, 'lp50a', p(lightAlone, 'p50'));
      figures.add(s.label, 'lp50', p(light, 'p50'));
      figures.add(s.label, 'r50', p(light, 'p50') / p(lightAlone, 'p50'));
      figures.add(s.label, 'lp99a', p(lightAlone, 'p99'));
      figures.add(s.label, 'lp99', p(light, 'p99'));
      figures.add(s.label, 'r99', p(light, 'p99') / p(lightAlone, 'p99'));
      figures.add(s.label, 'ha', ok(heavyAlone) / seconds);
      figures.add(s.label, 'h', ok(heavy) / seconds);
      figures.add(s.label, 'hr', ok(heavy) / ok(heavyAlone));
      figures.add(s.label, 'floor50', p(lightBesideApart, 'p50') / p(lightAlone, 'p50'));
      figures.add(s.label, 'floor99', p(lightBesideApart, 'p99') / p(lightAlone, 'p99'));
      figures.add(s.label, 'hrefused', refused(heavy));
      figures.add(s.label, 'load', os.loadavg()[0]!);
    }
  }
  for (const s of [...servers, apart]) await s.stop();
  for (const r of roots) {
    rows.push([
      r.label,
      ...figures.spreads(r.label, [
        ['lp50a'],
        ['lp50'],
        ['r50'],
        ['floor50'],
        ['lp99a'],
        ['lp99'],
        ['r99'],
        ['floor99'],
        ['ha', 0],
        ['h', 0],
        ['hr'],
        ['hrefused', 0],
        ['load', 1],
      ]),
    ]);
  }
  return table;
}

export async function run(): Promise<BenchReport> {
  const settings = benchSettings();
  const seconds = Math.max(3, settings.durationS);
  const repeats = settings.repeats;
  const work = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-overload-'));
  try {
    const source = path.join(work, 'models');
    await writeModelDir(source, 'mlp', mlp({ in: 256, hidden: [1024, 1024], out: 16 }));
    await writeModelDir(source, 'light', tiny({ in: 16, out: 4 }));
    await writeModelDir(source, 'wide', tiny({ in: 1024, out: 4 }));
    const bodies: Record<string, string> = {};
    for (const [name, text] of Object.entries({ mlp: v2Body(256), light: v2Body(16), wide: wideBody() })) {
      bodies[name] = path.join(work, `${name}.json`);
      await writeFile(bodies[name]!, text);
    }
    const roots: Roots[] = [{ label: 'new', root: repo }];
    const baseline = process.env['BENCH_BASELINE_ROOT'];
    if (baseline !== undefined && baseline !== '') roots.push({ label: 'base', root: path.resolve(baseline) });
    const parts = benchParts('BENCH_OVERLOAD_PARTS', PARTS);
    const tables: Record<string, Table> = {};
    const setup: Run = { roots, source, bodies, work, seconds, repeats };
    if (parts.has('storms')) tables['storms'] = (await settingCells(setup))[0]!;
    if (parts.has('neighbours')) tables['neighbours'] = await neighbourCells(setup);
    if (parts.has('refusals')) tables['refusalCost'] = await refusalCostCells(setup);
    const shown = Object.values(tables);
    const note = `${seconds} s per run, ${repeats} rounds interleaved (median (min-max)); load average at the end: ${loadavg()}; ${os.cpus().length} CPUs`;
    return {
      name: 'overload',
      title: 'Overload: retry storms, refusal cost, health and neighbours',
      settings: { seconds, repeats, storm: STORM, large: LARGE, neighbourFlood: NEIGHBOUR_FLOOD, baseline: baseline ?? null, parts: [...parts] },
      text: [note, ...shown.map(textTable)].join('\n\n'),
      markdown: [note, ...shown.map(markdownTable)].join('\n\n'),
      data: Object.fromEntries(Object.entries(tables).map(([k, t]) => [k, t.rows])),
    };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

const PARTS = ['storms', 'neighbours', 'refusals'] as const;

/** 4×1024 FP32 values in one v2 JSON body (the large-body flood). */
function wideBody(): string {
  const data = Array.from({ length: 4 * 1024 }, (_, i) => ((i * 7919) % 1000) / 1000);
  return JSON.stringify({ inputs: [{ name: 'INPUT0', shape: [4, 1024], datatype: 'FP32', data }] });
}
