/**
 * @module bench/hot-model
 * Issue 35: a hot heavy model uses the cores (registry/hot-instances.ts). A
 * 64 → 2048 → 2048 → 4 MLP (a batch of 8 estimated at about 1.7 ms, so it
 * runs in the runtime workers only), with no instance_group, under
 * BENCH_HOT_CONNECTIONS (default 32) autocannon connections, served by the
 * real server twice, alternating: with MME_HOT_MODEL_MAX_INSTANCES=1 (one
 * instance, one core: what every such model got before) and with it at the
 * number of runtime workers. The default is that number, at most the CPU
 * count less one: on a 2-CPU machine it is 1, and the second arm shows what
 * growing costs there. Printed: answers a second and p50 of each, their
 * ratio, the instances added (onnx_mme_model_instances_added), and how the
 * runtime workers' CPU splits between threads, from /proc.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { configText, mlp, writeModelDir } from '../examples/models/zoo.js';
import { loadServerConfig } from '../src/config/server-config.js';
import { runLoad, type LoadResult } from './lib/autocannon-run.js';
import { startOnnxMme } from './lib/baselines.js';
import { v2Body } from './lib/payload.js';
import { namedThreadsCpuUs, threadShares } from './lib/proc-cpu.js';
import { markdownTable, num, ratio, textTable, type BenchReport, type Table } from './lib/report.js';
import { benchSettings } from './lib/settings.js';
import { median } from './lib/stats.js';

const IN = 64;

function progress(message: string): void {
  process.stderr.write(`[hot-model] ${message}\n`);
}

/** CPU µs of each runtime worker thread of `pid`, by thread id. */
const workerCpu = (pid: number): Map<number, number> => namedThreadsCpuUs(pid, 'onnx-mme-runtim');

interface Arm {
  readonly perSec: number;
  readonly p50: number;
  readonly added: number;
  /** Each worker thread's share of the workers' CPU, largest first. */
  readonly shares: readonly number[];
  readonly errors: number;
}

async function measureArm(source: string, work: string, maxInstances: number, connections: number, durationS: number): Promise<Arm> {
  const mme = await startOnnxMme(source, path.join(work, `cache-${maxInstances}`), { MME_HOT_MODEL_MAX_INSTANCES: String(maxInstances) });
  const pid = mme.pid;
  if (pid === undefined) throw new Error('hot-model: the server process has no pid');
  try {
    const t = mme.target('heavy');
    const body = v2Body(IN);
    // Loaded, placed, and (with room to) grown: growing takes half a second of saturation and a session's creation.
    await runLoad({ url: t.url, body, headers: t.headers, connections, durationS: 3, warmupS: 0 });
    const before = workerCpu(pid);
    const load: LoadResult = await runLoad({ url: t.url, body, headers: t.headers, connections, durationS, warmupS: 0 });
    const after = workerCpu(pid);
    const metrics = await (await fetch(`http://127.0.0.1:${mme.port}/metrics`)).text();
    const added = Number(/^onnx_mme_model_instances_added\{[^}]*model="heavy"[^}]*\} (\d+)/m.exec(metrics)?.[1] ?? 0);
    return { perSec: load.requestsPerSec, p50: load.p50, added, shares: threadShares(before, after).shares, errors: load.errors + load.non2xx };
  } finally {
    await mme.stop();
  }
}

export async function run(): Promise<BenchReport> {
  const settings = benchSettings();
  const connections = Number(process.env['BENCH_HOT_CONNECTIONS'] ?? 32);
  const config = loadServerConfig(process.env);
  const workers = config.runtimeWorkers;
  const work = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-bench-hot-'));
  const source = path.join(work, 'models');
  const model = mlp({ in: IN, hidden: [2048, 2048], out: 4, seed: 3 });
  await writeModelDir(source, 'heavy', {
    onnx: model.onnx,
    config: configText({
      maxBatchSize: 8,
      inputs: [{ name: 'INPUT0', dataType: 'FP32', dims: [IN] }],
      outputs: [{ name: 'OUTPUT0', dataType: 'FP32', dims: [4] }],
    }),
  });
  const arms = workers > 1 ? [1, workers] : [1];
  const runs = new Map<number, Arm[]>();
  const loads: string[] = [];
  try {
    for (let r = 0; r < settings.repeats; r++) {
      for (const max of r % 2 === 0 ? arms : [...arms].reverse()) {
        const arm = await measureArm(source, work, max, connections, settings.durationS);
        runs.set(max, [...(runs.get(max) ?? []), arm]);
      }
      loads.push(os.loadavg()[0]!.toFixed(2));
      progress(`round ${r + 1}/${settings.repeats} (load ${loads.at(-1)}): ${arms.map((a) => `max ${a}: ${num(runs.get(a)!.at(-1)!.perSec)}/s`).join(', ')}`);
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  const med = (max: number) => {
    const rs = runs.get(max)!;
    return {
      perSec: median(rs.map((x) => x.perSec)),
      p50: median(rs.map((x) => x.p50)),
      added: median(rs.map((x) => x.added)),
      second: median(rs.map((x) => x.shares[1] ?? 0)),
      spread: `${num(Math.min(...rs.map((x) => x.perSec)))}-${num(Math.max(...rs.map((x) => x.perSec)))}`,
      errors: rs.reduce((a, x) => a + x.errors, 0),
    };
  };
  const one = med(1);
  const table: Table = {
    headers: [
      'MME_HOT_MODEL_MAX_INSTANCES',
      'answers/s (min-max)',
      'p50 ms',
      'instances added',
      "second worker's share of the workers' CPU",
      'answers ÷ one instance',
      'errors',
    ],
    rows: arms.map((max) => {
      const m = med(max);
      return [String(max), `${num(m.perSec)} (${m.spread})`, num(m.p50), String(m.added), m.second.toFixed(2), ratio(m.perSec, one.perSec), String(m.errors)];
    }),
  };
  const note =
    `64→2048→2048→4 MLP, max_batch_size 8, no instance_group, ${connections} connections, ${workers} runtime workers ` +
    `(the default MME_HOT_MODEL_MAX_INSTANCES here: ${config.hotModelMaxInstances}); medians of ${settings.repeats} alternated round(s) of ` +
    `${settings.durationS} s after 3 s of warm-up; load average after each round ${loads.join(', ')}.`;
  return {
    name: 'hot-model',
    title: 'A hot heavy model: one instance against instances grown across the runtime workers',
    settings: { ...settings, connections, runtimeWorkers: workers, defaultHotModelMaxInstances: config.hotModelMaxInstances },
    text: `${textTable(table)}\n${note}`,
    markdown: `${markdownTable(table)}\n\n${note}`,
    data: { runs: Object.fromEntries(runs), loads },
  };
}
