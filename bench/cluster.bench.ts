/**
 * @module bench/cluster
 * A fleet behind HAProxy (the Debian package; examples/haproxy/haproxy.cfg
 * with its balance line swapped per row), as docs/scaling-out.md recommends:
 *
 * - 3 and 4 `serve` instances on loopback, one S3-compatible server (s3rver)
 *   holding `models` generated models (~1 MiB each), each instance with room
 *   for a third of them (MME_MAX_LOADED_MODELS);
 * - a seeded Zipf (s = 1.1) trace over the models, replayed through HAProxy at
 *   a fixed concurrency, every answer checked;
 * - per balance algorithm: round robin, consistent hashing on the target
 *   header, and the recipe's bounded-load consistent hashing
 *   (hash-balance-factor). Reported: model loads against the distinct models
 *   requested, hit ratio (1 - loads / requests), the busiest instance's share
 *   of requests, and each instance's RSS (from /proc) at the end.
 *
 * Then a rolling restart of 3 instances behind HAProxy retrying connection
 * failures only (its default; a Kubernetes Service retries nothing): failed
 * requests with MME_DRAIN_SECONDS=0 (the listener closes at SIGTERM, as
 * before the drain existed) against the default drain.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { packTarGz, sizedModel, writeModelDir } from '../examples/models/zoo.js';
import { drive, freePort, loadsOf, startHaproxy, startInstance, type Balance, type Instance, type Outcome } from '../test/support/haproxy-fleet.js';
import { s3rverEnv, startLoopbackS3, type LoopbackS3 } from '../test/support/s3rver.js';
import { zipfTrace } from './lib/lru-trace.js';
import { procStatusKb } from './lib/proc-memory.js';
import { markdownTable, num, textTable, type BenchReport, type Table } from './lib/report.js';

const MIB = 1024 * 1024;
const BODY = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] }));

function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  const n = raw === undefined ? fallback : Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got '${raw}'`);
  return n;
}

const settings = {
  models: envInt('BENCH_CLUSTER_MODELS', 60),
  requests: envInt('BENCH_CLUSTER_REQUESTS', 1500),
  concurrency: envInt('BENCH_CLUSTER_CONCURRENCY', 8),
  zipfS: 1.1,
  seed: 31,
  modelBytes: MIB,
  /** Per instance: a third of the models. */
  maxLoadedModels: 0,
  instanceCounts: [3, 4],
  balances: ['roundrobin', 'consistent', 'recipe'] as Balance[],
  restartSeconds: 'each instance in turn: SIGTERM, exit, start, UP in HAProxy',
};
settings.maxLoadedModels = Math.max(1, Math.floor(settings.models / 3));

const LABEL: Record<Balance, string> = { roundrobin: 'round robin', consistent: 'consistent hash', recipe: 'bounded-load consistent hash (factor 150)' };

interface Row {
  readonly instances: number;
  readonly balance: Balance;
  readonly requests: number;
  readonly failed: number;
  readonly distinct: number;
  readonly loads: number;
  readonly perInstance: { requests: number; loads: number; rssMiB: number }[];
}

function instanceEnv(root: string, s3: LoopbackS3, name: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    MME_MODEL_SOURCE: 's3://models/cluster/',
    MME_CACHE_DIR: path.join(root, `cache-${name}`),
    ...s3rverEnv(s3.endpoint),
    MME_RUNTIME_WORKERS: '1',
    MME_INTRA_OP_THREADS: '1',
    MME_MAX_LOADED_MODELS: String(settings.maxLoadedModels),
    MME_LOG_LEVEL: 'info',
    ...extra,
  };
}

async function startFleet(root: string, s3: LoopbackS3, count: number, tag: string, extra: Record<string, string> = {}): Promise<Instance[]> {
  const out: Instance[] = [];
  for (let i = 1; i <= count; i++) out.push(await startInstance(`mme${i}`, await freePort(), instanceEnv(root, s3, `${tag}-${i}`, extra)));
  return out;
}

function requestsOf(inst: Instance): number {
  return inst.lines.reduce((n, lines) => n + lines.filter((l) => l['msg'] === 'request' && l['path'] === '/invocations').length, 0);
}

async function traceRow(root: string, s3: LoopbackS3, trace: Int32Array, count: number, balance: Balance): Promise<Row> {
  const tag = `${count}-${balance}`;
  const instances = await startFleet(root, s3, count, tag);
  const lb = await startHaproxy(root, { port: await freePort(), servers: instances, statsSocket: path.join(root, `${tag}.sock`), retries: 'recipe', balance });
  try {
    await lb.waitFor(
      instances.map((i) => i.name),
      true,
      30_000,
    );
    const outcome = await drive({
      url: lb.url,
      concurrency: settings.concurrency,
      target: (i) => `m${trace[i]}.tar.gz`,
      body: BODY,
      count: trace.length,
      timeoutMs: 120_000,
    });
    const perInstance = [];
    for (const inst of instances) {
      const kb = await procStatusKb(inst.process.proc.pid!);
      perInstance.push({ requests: requestsOf(inst), loads: loadsOf(inst), rssMiB: (kb['VmRSS'] ?? 0) / 1024 });
    }
    return {
      instances: count,
      balance,
      requests: outcome.sent,
      failed: outcome.failures.length,
      distinct: new Set(trace).size,
      loads: perInstance.reduce((n, p) => n + p.loads, 0),
      perInstance,
    };
  } finally {
    await lb.stop();
    for (const inst of instances) await inst.process.kill();
  }
}

async function rollingRestart(root: string, s3: LoopbackS3, trace: Int32Array, drainSeconds: string | undefined): Promise<Outcome> {
  const tag = `restart-${drainSeconds ?? 'default'}`;
  const extra: Record<string, string> = drainSeconds === undefined ? {} : { MME_DRAIN_SECONDS: drainSeconds };
  const instances = await startFleet(root, s3, 3, tag, extra);
  const lb = await startHaproxy(root, { port: await freePort(), servers: instances, statsSocket: path.join(root, `${tag}.sock`), retries: 'conn-failure' });
  try {
    await lb.waitFor(
      instances.map((i) => i.name),
      true,
      30_000,
    );
    // Warm: every model of the trace loaded once where it hashes.
    await drive({ url: lb.url, concurrency: settings.concurrency, target: (i) => `m${trace[i]}.tar.gz`, body: BODY, count: Math.min(trace.length, 1000) });
    let done = false;
    const traffic = drive({
      url: lb.url,
      concurrency: settings.concurrency,
      target: (i) => `m${trace[i % trace.length]}.tar.gz`,
      body: BODY,
      stop: () => done,
      timeoutMs: 120_000,
    });
    try {
      for (const inst of instances) {
        const exited = inst.process.exited;
        inst.process.proc.kill('SIGTERM');
        await exited;
        await startInstance(inst.name, inst.port, instanceEnv(root, s3, `${tag}-${inst.name}`, extra), inst);
        await lb.waitFor([inst.name], true, 30_000);
      }
    } finally {
      done = true;
    }
    return await traffic;
  } finally {
    await lb.stop();
    for (const inst of instances) await inst.process.kill();
  }
}

export async function run(): Promise<BenchReport> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-cluster-bench-'));
  const s3 = await startLoopbackS3(['models']);
  try {
    const model = sizedModel(settings.modelBytes);
    await writeModelDir(path.join(root, 'work'), 'sized', model);
    await packTarGz(path.join(root, 'work'), path.join(root, 'sized.tar.gz'));
    const archive = await readFile(path.join(root, 'sized.tar.gz'));
    for (let i = 0; i < settings.models; i++) await s3.upload(`cluster/m${i}.tar.gz`, archive);
    const trace = zipfTrace({ models: settings.models, requests: settings.requests, s: settings.zipfS, seed: settings.seed });

    const rows: Row[] = [];
    for (const count of settings.instanceCounts) {
      for (const balance of settings.balances) {
        process.stderr.write(`cluster: ${count} instances, ${balance}\n`);
        rows.push(await traceRow(root, s3, trace, count, balance));
      }
    }
    process.stderr.write('cluster: rolling restart, MME_DRAIN_SECONDS=0\n');
    const noDrain = await rollingRestart(root, s3, trace, '0');
    process.stderr.write('cluster: rolling restart, default drain\n');
    const withDrain = await rollingRestart(root, s3, trace, undefined);

    const table: Table = {
      headers: [
        'instances',
        'balance',
        'requests',
        'failed',
        'distinct models',
        'loads',
        'loads / distinct',
        'hit ratio',
        'busiest share',
        'requests per instance',
        'RSS per instance MiB',
        'RSS sum MiB',
      ],
      rows: rows.map((r) => [
        String(r.instances),
        LABEL[r.balance],
        String(r.requests),
        String(r.failed),
        String(r.distinct),
        String(r.loads),
        `${(r.loads / r.distinct).toFixed(2)}x`,
        (1 - r.loads / r.requests).toFixed(3),
        `${((100 * Math.max(...r.perInstance.map((p) => p.requests))) / r.requests).toFixed(0)}%`,
        r.perInstance.map((p) => p.requests).join(' / '),
        r.perInstance.map((p) => Math.round(p.rssMiB)).join(' / '),
        num(r.perInstance.reduce((n, p) => n + p.rssMiB, 0)),
      ]),
    };
    const restart: Table = {
      headers: ['rolling restart of 3, HAProxy retrying connection failures only', 'requests', 'failed', 'failures'],
      rows: [
        ['MME_DRAIN_SECONDS=0 (listener closed at SIGTERM)', String(noDrain.sent), String(noDrain.failures.length), summarize(noDrain)],
        ['default drain (5 s)', String(withDrain.sent), String(withDrain.failures.length), summarize(withDrain)],
      ],
      align: ['l', 'r', 'r', 'l'],
    };
    return {
      name: 'cluster',
      title: 'Fleet behind HAProxy: model loads, hit ratio, memory and request share per balance algorithm; rolling restart without L7 retries',
      settings,
      text: `${textTable(table)}\n\n${textTable(restart)}`,
      markdown: `${markdownTable(table)}\n\n${markdownTable(restart)}`,
      data: {
        rows,
        restart: { noDrain: { sent: noDrain.sent, failures: noDrain.failures }, withDrain: { sent: withDrain.sent, failures: withDrain.failures } },
      },
    };
  } finally {
    await s3.close();
    await rm(root, { recursive: true, force: true });
  }
}

/** Failures grouped by status and the start of their message, e.g. `503 SHUTTING_DOWN x3`. */
function summarize(outcome: Outcome): string {
  const groups = new Map<string, number>();
  for (const f of outcome.failures) {
    const code = /"code":"([A-Z_]+)"/.exec(f.detail)?.[1] ?? f.detail.slice(0, 40);
    const key = `${f.status || 'no answer'} ${code}`;
    groups.set(key, (groups.get(key) ?? 0) + 1);
  }
  return [...groups].map(([k, n]) => `${k} x${n}`).join(', ') || '-';
}
