/**
 * @module bench/invocations
 * POST /invocations throughput and latency of onnx-mme against honest
 * reference points, for a tiny model (16→4, overhead-bound) and an MLP
 * (256→1024→1024→16, compute-bound), batch 1, at each concurrency:
 *
 * - onnx-mme: the real server with the settings it ships with (dynamic
 *   batching on, its default logging, into a file as a container's log
 *   driver would take it), X-Amzn-SageMaker-Target-Model routing.
 * - onnx-mme-log: the same with MME_ACCESS_LOG set the other way from its
 *   default (what the access line costs, or saves).
 * - onnx-mme-nobatch: the same server with MME_DYNAMIC_BATCHING=false.
 * - For the tiny model, the same weights three ways (issue 30): `max_batch_size:
 *   64` (the rows above), `max_batch_size: 0` with dims [1,16] (mbs0, mbs0-log,
 *   mbs0-nobatch), and no config.pbtxt at all (auto: auto-complete).
 * - express: what people write by hand (express.json + one ORT session).
 * - bare-http: node:http, JSON.parse, fixed answer: the HTTP limit.
 * - raw-ort: session.run back to back, no HTTP: the onnxruntime limit.
 *
 * Every target runs in its own process; the load generator (autocannon) runs
 * here. Each cell runs every target `repeats` times in rotating order and
 * reports medians, so machine noise hits every target alike. Besides req/s and
 * latency, each HTTP target's server CPU time per request (user + system of
 * its process over the run ÷ requests answered) and, for onnx-mme, the log
 * bytes it wrote per request. The goals (issues 5 and 30) are checked from the
 * same run, and a throughput-vs-concurrency chart is written to
 * bench/results/invocations.svg.
 */
import type { RunSample as Sample } from './lib/stats.js';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadServerConfig } from '../src/config/server-config.js';
import { configText, mlp, tiny, writeModelDir, type ZooModel } from '../examples/models/zoo.js';
import { runLoad, type LoadResult } from './lib/autocannon-run.js';
import {
  startBareHttp,
  startExpressBaseline,
  startOnnxMme,
  startRawOrtLoop,
  type BatchStats,
  type HttpTarget,
  type OnnxMmeProcess,
  type RawOrtResult,
} from './lib/baselines.js';
import { v2Body } from './lib/payload.js';
import { markdownTable, num, ratio, textTable, type BenchReport, type Table } from './lib/report.js';
import { resultsDir } from './lib/results-dir.js';
import { benchSettings } from './lib/settings.js';
import { median } from './lib/stats.js';
import { lineChartSvg, type ChartMark, type ChartSeries } from './lib/svg-chart.js';

interface BenchModel {
  readonly name: string;
  readonly label: string;
  readonly features: number;
  readonly model: ZooModel;
  /** The same weights under other configs, served by the same servers (model directory names). */
  readonly variants?: { readonly mbs0: string; readonly auto: string };
}

type ServerName = 'onnx-mme' | 'onnx-mme-log' | 'onnx-mme-nobatch';
type TargetName = 'onnx-mme' | 'onnx-mme-log' | 'onnx-mme-nobatch' | 'mbs0' | 'mbs0-log' | 'mbs0-nobatch' | 'auto' | 'express' | 'bare-http' | 'raw-ort';
const ALL_TARGETS: readonly TargetName[] = [
  'onnx-mme',
  'onnx-mme-log',
  'onnx-mme-nobatch',
  'mbs0',
  'mbs0-log',
  'mbs0-nobatch',
  'auto',
  'express',
  'bare-http',
  'raw-ort',
];
/** The targets without the config variants (models that have none). */
const PLAIN_TARGETS: readonly TargetName[] = ['onnx-mme', 'onnx-mme-nobatch', 'express', 'bare-http', 'raw-ort'];
type HttpTargetName = Exclude<TargetName, 'raw-ort'>;

/** Which onnx-mme server and which model directory serve a target (undefined: a baseline). */
function onnxMmeRoute(t: TargetName, m: BenchModel): { readonly server: ServerName; readonly model: string } | undefined {
  const mbs0 = m.variants?.mbs0 ?? m.name;
  switch (t) {
    case 'onnx-mme':
    case 'onnx-mme-log':
    case 'onnx-mme-nobatch':
      return { server: t, model: m.name };
    case 'mbs0':
      return { server: 'onnx-mme', model: mbs0 };
    case 'mbs0-log':
      return { server: 'onnx-mme-log', model: mbs0 };
    case 'mbs0-nobatch':
      return { server: 'onnx-mme-nobatch', model: mbs0 };
    case 'auto':
      return { server: 'onnx-mme', model: m.variants?.auto ?? m.name };
    default:
      return undefined;
  }
}

/** Chart colours and legend names. */
const STYLE: Readonly<Record<TargetName, { readonly color: string; readonly legend: string; readonly dashed?: boolean }>> = {
  'onnx-mme': { color: '#1f5fbf', legend: 'onnx-mme (defaults: dynamic batching, default logging)' },
  'onnx-mme-log': { color: '#9e3fbf', legend: 'onnx-mme, MME_ACCESS_LOG the other way', dashed: true },
  'onnx-mme-nobatch': { color: '#7fa7e0', legend: 'onnx-mme, MME_DYNAMIC_BATCHING=false', dashed: true },
  mbs0: { color: '#0b8a8a', legend: 'onnx-mme, max_batch_size: 0 (defaults)' },
  'mbs0-log': { color: '#5fc4c4', legend: 'onnx-mme, max_batch_size: 0, MME_ACCESS_LOG the other way', dashed: true },
  'mbs0-nobatch': { color: '#9fdede', legend: 'onnx-mme, max_batch_size: 0, MME_DYNAMIC_BATCHING=false', dashed: true },
  auto: { color: '#b8860b', legend: 'onnx-mme, no config.pbtxt (auto-complete)' },
  express: { color: '#e07b00', legend: 'express + session.run (hand-written)' },
  'bare-http': { color: '#777777', legend: 'bare node:http, JSON.parse, fixed answer' },
  'raw-ort': { color: '#2e9e4f', legend: 'raw onnxruntime session.run (no HTTP)', dashed: true },
};

/** The issues' goals, from the same run. */
const GOAL_A_SHARE_OF_BARE = 0.6;
const GOAL_B_TIMES_EXPRESS = 3;
const GOAL_CONCURRENCY = 64;
/** Issue 30: max_batch_size 0 and auto-complete against bare node:http; mbs 0's CPU per request against mbs 64's. */
const GOAL_MBS0_SHARE_OF_BARE = 0.4;
const GOAL_AUTO_SHARE_OF_BARE = 0.5;
const GOAL_MBS0_CPU_TIMES_BATCHED = 2;

/** A measured run: the load sample plus what the server spent on it. */
interface Run extends Sample {
  /** Server CPU µs per answered request (NaN for raw-ort). */
  readonly cpuUsPerRequest: number;
  /** Log bytes the server wrote per answered request (onnx-mme only, else NaN). */
  readonly logBytesPerRequest: number;
}

interface TargetCell {
  readonly target: TargetName;
  readonly median: {
    readonly perSec: number;
    readonly p50: number;
    readonly p99: number;
    readonly cpuUsPerRequest: number;
    readonly logBytesPerRequest: number;
  };
  readonly errors: number;
  readonly non2xx: number;
  readonly runs: readonly Run[];
}

interface Cell {
  readonly model: string;
  readonly concurrency: number;
  readonly targets: Readonly<Partial<Record<TargetName, TargetCell>>>;
  /** Average rows per model execution over the cell (warm-ups included), per onnx-mme server. */
  readonly averageBatch: { readonly batching: number; readonly nobatch: number };
  readonly ratios: {
    readonly oursOverExpress: number;
    readonly oursOverBareHttp: number;
    readonly oursOverRawOrt: number;
    readonly batchingOnOverOff: number;
    readonly p50OursOverExpress: number;
  };
}

interface Goal {
  readonly id: string;
  readonly what: string;
  readonly measured: number;
  readonly target: number;
  /** 'min': measured ≥ target passes; 'max': measured ≤ target passes. */
  readonly kind: 'min' | 'max';
  readonly met: boolean | undefined;
}

function fromLoad(r: LoadResult): Run {
  const answered = r.ok + r.non2xx;
  return {
    perSec: r.requestsPerSec,
    p50: r.p50,
    p99: r.p99,
    errors: r.errors,
    non2xx: r.non2xx,
    cpuUsPerRequest: answered > 0 ? r.serverCpuUs / answered : Number.NaN,
    logBytesPerRequest: answered > 0 ? r.logBytes / answered : Number.NaN,
  };
}

function fromRaw(r: RawOrtResult): Run {
  return { perSec: r.runsPerSec, p50: r.p50, p99: r.p99, errors: 0, non2xx: 0, cpuUsPerRequest: Number.NaN, logBytesPerRequest: Number.NaN };
}

function summarize(target: TargetName, runs: readonly Run[]): TargetCell {
  return {
    target,
    median: {
      perSec: median(runs.map((r) => r.perSec)),
      p50: median(runs.map((r) => r.p50)),
      p99: median(runs.map((r) => r.p99)),
      cpuUsPerRequest: median(runs.map((r) => r.cpuUsPerRequest)),
      logBytesPerRequest: median(runs.map((r) => r.logBytesPerRequest)),
    },
    errors: runs.reduce((a, r) => a + r.errors, 0),
    non2xx: runs.reduce((a, r) => a + r.non2xx, 0),
    runs,
  };
}

function progress(message: string): void {
  process.stderr.write(`[invocations] ${message}\n`);
}

/** One request to each HTTP target; the onnx-mme servers and express must agree on the numbers. */
async function sanityCheck(targets: Readonly<Partial<Record<HttpTargetName, HttpTarget>>>, body: string): Promise<number> {
  const post = async (t: HttpTarget): Promise<{ outputs?: { data?: number[] }[] }> => {
    const res = await fetch(t.url, { method: 'POST', headers: { 'content-type': 'application/json', ...t.headers }, body });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${t.name} answered ${res.status}: ${text.slice(0, 500)}`);
    return JSON.parse(text) as { outputs?: { data?: number[] }[] };
  };
  const reference = (await post(targets.express!)).outputs?.[0]?.data ?? [];
  await post(targets['bare-http']!);
  let maxDiff = 0;
  for (const [name, target] of Object.entries(targets)) {
    if (name === 'express' || name === 'bare-http' || target === undefined) continue;
    const x = (await post(target)).outputs?.[0]?.data ?? [];
    if (x.length === 0 || x.length !== reference.length) throw new Error(`${name} and express outputs differ in length (${x.length} vs ${reference.length})`);
    const diff = Math.max(...x.map((v, i) => Math.abs(v - (reference[i] ?? Number.NaN))));
    if (!(diff <= 1e-3)) throw new Error(`${name} and express outputs differ (max |diff| ${diff})`);
    maxDiff = Math.max(maxDiff, diff);
  }
  return maxDiff;
}

/** Rows / executions of `model` between two stats readings. */
function averageBatch(before: BatchStats, after: BatchStats, model: string): number {
  const a = after[model];
  const b = before[model] ?? { rows: 0, executions: 0 };
  if (!a) return Number.NaN;
  const executions = a.executions - b.executions;
  return executions > 0 ? (a.rows - b.rows) / executions : Number.NaN;
}

function evaluateGoals(cells: readonly Cell[]): Goal[] {
  const cell = (model: string, concurrency: number): Cell | undefined => cells.find((c) => c.model === model && c.concurrency === concurrency);
  const goal = (id: string, what: string, measured: number | undefined, target: number, kind: 'min' | 'max'): Goal => {
    const m = measured ?? Number.NaN;
    return { id, what, measured: m, target, kind, met: Number.isFinite(m) ? (kind === 'min' ? m >= target : m <= target) : undefined };
  };
  const tiny64 = cell('tiny', GOAL_CONCURRENCY);
  const mlp64 = cell('mlp', GOAL_CONCURRENCY);
  const perSec = (c: Cell | undefined, t: TargetName): number | undefined => c?.targets[t]?.median.perSec;
  const cpu = (c: Cell | undefined, t: TargetName): number | undefined => c?.targets[t]?.median.cpuUsPerRequest;
  const over = (a: number | undefined, b: number | undefined): number | undefined => (a === undefined || b === undefined ? undefined : a / b);
  const at = `tiny, ${GOAL_CONCURRENCY} connections`;
  return [
    goal('a', `${at}: onnx-mme req/s ÷ bare-http req/s`, tiny64?.ratios.oursOverBareHttp, GOAL_A_SHARE_OF_BARE, 'min'),
    goal('b', `mlp, ${GOAL_CONCURRENCY} connections: onnx-mme req/s ÷ express req/s`, mlp64?.ratios.oursOverExpress, GOAL_B_TIMES_EXPRESS, 'min'),
    goal('c', 'tiny, 1 connection: onnx-mme p50 ÷ express p50', cell('tiny', 1)?.ratios.p50OursOverExpress, 1, 'max'),
    goal('c', 'mlp, 1 connection: onnx-mme p50 ÷ express p50', cell('mlp', 1)?.ratios.p50OursOverExpress, 1, 'max'),
    goal('d', `${at}, max_batch_size 0: req/s ÷ bare-http req/s`, over(perSec(tiny64, 'mbs0'), perSec(tiny64, 'bare-http')), GOAL_MBS0_SHARE_OF_BARE, 'min'),
    goal('e', `${at}, no config.pbtxt: req/s ÷ bare-http req/s`, over(perSec(tiny64, 'auto'), perSec(tiny64, 'bare-http')), GOAL_AUTO_SHARE_OF_BARE, 'min'),
    goal(
      'f',
      `${at}: server CPU/request, max_batch_size 0 ÷ max_batch_size 64`,
      over(cpu(tiny64, 'mbs0'), cpu(tiny64, 'onnx-mme')),
      GOAL_MBS0_CPU_TIMES_BATCHED,
      'max',
    ),
    goal(
      'g',
      `${at}, max_batch_size 0: server CPU/request, defaults ÷ MME_DYNAMIC_BATCHING=false`,
      over(cpu(tiny64, 'mbs0'), cpu(tiny64, 'mbs0-nobatch')),
      1,
      'max',
    ),
  ];
}

function goalRow(g: Goal): string[] {
  const verdict =
    g.met === undefined
      ? 'n/a (cell not measured)'
      : g.met
        ? 'met'
        : `NOT met: ${g.kind === 'min' ? `${((1 - g.measured / g.target) * 100).toFixed(0)}% short` : `${((g.measured / g.target - 1) * 100).toFixed(0)}% over`}`;
  return [g.id, g.what, Number.isFinite(g.measured) ? `${g.measured.toFixed(2)}x` : 'n/a', `${g.kind === 'min' ? '≥' : '≤'} ${g.target.toFixed(2)}x`, verdict];
}

function chart(cells: readonly Cell[], models: readonly BenchModel[], concurrency: readonly number[], subtitle: string): string {
  const at = (model: string, c: number): Cell | undefined => cells.find((x) => x.model === model && x.concurrency === c);
  return lineChartSvg({
    title: 'POST /invocations, KServe v2 JSON, batch 1: throughput vs concurrency',
    subtitle,
    xLabel: 'concurrent connections (raw-ort: concurrent session.run loops)',
    yLabel: 'requests/s (median, log scale)',
    xValues: concurrency,
    panels: models.map((m) => {
      const top = at(m.name, GOAL_CONCURRENCY);
      const marks: ChartMark[] = [];
      if (top && m.name === 'tiny') {
        marks.push({
          x: GOAL_CONCURRENCY,
          y: top.targets['bare-http']!.median.perSec * GOAL_A_SHARE_OF_BARE,
          label: `goal (a) ${GOAL_A_SHARE_OF_BARE * 100}% of bare`,
          color: '#b00020',
        });
      }
      if (top && m.name === 'mlp') {
        marks.push({
          x: GOAL_CONCURRENCY,
          y: top.targets.express!.median.perSec * GOAL_B_TIMES_EXPRESS,
          label: `goal (b) ${GOAL_B_TIMES_EXPRESS}× express`,
          color: '#b00020',
        });
      }
      return {
        title: m.label,
        series: (m.variants ? ALL_TARGETS : PLAIN_TARGETS).map((t): ChartSeries => ({
          name: STYLE[t].legend,
          color: STYLE[t].color,
          ...(STYLE[t].dashed ? { dashed: true } : {}),
          values: concurrency.map((c) => at(m.name, c)?.targets[t]?.median.perSec ?? Number.NaN),
        })),
        marks,
      };
    }),
    notes: [
      "Each point: median of the runs of that cell; every target measured in the same run, rotating order. Red marks: the issue's goals at 64 connections.",
    ],
  });
}

export async function run(): Promise<BenchReport> {
  const settings = benchSettings();
  const tinyModel = tiny({ in: 16, out: 4 });
  const tensors = (dims: number[], out: number[]) => ({
    inputs: [{ name: 'INPUT0', dataType: 'FP32' as const, dims }],
    outputs: [{ name: 'OUTPUT0', dataType: 'FP32' as const, dims: out }],
  });
  const models: BenchModel[] = [
    {
      name: 'tiny',
      label: 'tiny 16→4',
      features: 16,
      // The same weights three ways (issue 30): batching (max_batch_size 64), no batch dimension, no config at all.
      model: { onnx: tinyModel.onnx, config: configText({ maxBatchSize: 64, ...tensors([16], [4]) }) },
      variants: { mbs0: 'tiny-mbs0', auto: 'tiny-auto' },
    },
    { name: 'mlp', label: 'mlp 256→1024→1024→16', features: 256, model: mlp({ in: 256, hidden: [1024, 1024], out: 16 }) },
  ];
  const work = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-bench-'));
  const source = path.join(work, 'models');
  const cells: Cell[] = [];
  const checks: Record<string, number> = {};
  const info: Partial<Record<ServerName, Readonly<Record<string, unknown>>>> = {};
  // The access line the other way from the server's default: its cost (or saving) is measured beside the defaults.
  const accessLogDefault = loadServerConfig({ MME_MODEL_SOURCE: source }).accessLog;
  const otherAccessLog = String(!accessLogDefault);
  try {
    for (const m of models) await writeModelDir(source, m.name, m.model);
    await writeModelDir(source, 'tiny-mbs0', { onnx: tinyModel.onnx, config: configText({ maxBatchSize: 0, ...tensors([1, 16], [1, 4]) }) });
    await writeModelDir(source, 'tiny-auto', { onnx: tinyModel.onnx });
    // Every server logs as it ships, into a file (as a container's log driver would take its stdout).
    const start = (name: ServerName, env: Record<string, string>): Promise<OnnxMmeProcess> =>
      startOnnxMme(source, path.join(work, `cache-${name}`), env, name, path.join(work, `${name}.log`));
    const servers: Record<ServerName, OnnxMmeProcess> = {
      'onnx-mme': await start('onnx-mme', {}),
      'onnx-mme-log': await start('onnx-mme-log', { MME_ACCESS_LOG: otherAccessLog }),
      'onnx-mme-nobatch': await start('onnx-mme-nobatch', { MME_DYNAMIC_BATCHING: 'false' }),
    };
    for (const [name, server] of Object.entries(servers)) info[name as ServerName] = server.info;
    const bare = await startBareHttp();
    try {
      for (const m of models) {
        const modelFile = path.join(source, m.name, '1', 'model.onnx');
        const express = await startExpressBaseline(modelFile);
        const raw = await startRawOrtLoop(modelFile, m.features);
        const body = v2Body(m.features);
        const targetNames = m.variants ? ALL_TARGETS : PLAIN_TARGETS;
        const http: Partial<Record<HttpTargetName, HttpTarget & { readonly logFile?: string | undefined }>> = { express, 'bare-http': bare };
        for (const t of targetNames) {
          const route = onnxMmeRoute(t, m);
          if (route) http[t as HttpTargetName] = { ...servers[route.server].target(route.model), logFile: servers[route.server].logFile };
        }
        try {
          checks[m.name] = await sanityCheck(http, body);
          for (const concurrency of settings.concurrency) {
            const runs: Partial<Record<TargetName, Run[]>> = {};
            const statsOf = async (): Promise<Record<ServerName, BatchStats>> => ({
              'onnx-mme': await servers['onnx-mme'].stats(),
              'onnx-mme-log': await servers['onnx-mme-log'].stats(),
              'onnx-mme-nobatch': await servers['onnx-mme-nobatch'].stats(),
            });
            const statsBefore = await statsOf();
            for (let r = 0; r < settings.repeats; r++) {
              const warmupS = r === 0 ? settings.warmupS : 0;
              // Rotate the order each round so no target always runs first or last.
              const order = targetNames.map((_, i) => targetNames[(i + r) % targetNames.length]!);
              for (const t of order) {
                const target = t === 'raw-ort' ? undefined : http[t];
                const sample = target
                  ? fromLoad(
                      await runLoad({
                        url: target.url,
                        headers: target.headers,
                        body,
                        connections: concurrency,
                        durationS: settings.durationS,
                        warmupS,
                        ...(target.pid === undefined ? {} : { pid: target.pid }),
                        ...(target.logFile === undefined ? {} : { logFile: target.logFile }),
                      }),
                    )
                  : fromRaw(await raw.measure({ concurrency, durationS: settings.durationS, warmupS }));
                (runs[t] ??= []).push(sample);
              }
              progress(
                `${m.name} c=${concurrency} round ${r + 1}/${settings.repeats}: ` +
                  targetNames
                    .map(
                      (t) =>
                        `${t} ${num(runs[t]![r]!.perSec)}/s${Number.isFinite(runs[t]![r]!.cpuUsPerRequest) ? ` ${runs[t]![r]!.cpuUsPerRequest.toFixed(0)}µs` : ''}`,
                    )
                    .join(', '),
              );
            }
            const statsAfter = await statsOf();
            const targets = Object.fromEntries(targetNames.map((t) => [t, summarize(t, runs[t] ?? [])])) as Partial<Record<TargetName, TargetCell>>;
            const med = (t: TargetName): TargetCell['median'] => targets[t]!.median;
            const ourMed = med('onnx-mme');
            cells.push({
              model: m.name,
              concurrency,
              targets,
              averageBatch: {
                batching: averageBatch(statsBefore['onnx-mme'], statsAfter['onnx-mme'], m.name),
                nobatch: averageBatch(statsBefore['onnx-mme-nobatch'], statsAfter['onnx-mme-nobatch'], m.name),
              },
              ratios: {
                oursOverExpress: ourMed.perSec / med('express').perSec,
                oursOverBareHttp: ourMed.perSec / med('bare-http').perSec,
                oursOverRawOrt: ourMed.perSec / med('raw-ort').perSec,
                batchingOnOverOff: ourMed.perSec / med('onnx-mme-nobatch').perSec,
                p50OursOverExpress: ourMed.p50 / med('express').p50,
              },
            });
          }
        } finally {
          await express.stop();
          await raw.stop();
        }
      }
    } finally {
      for (const server of Object.values(servers)) await server.stop();
      await bare.stop();
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }

  const label = (name: string): string => models.find((m) => m.name === name)?.label ?? name;
  const presentTargets = (c: Cell): TargetName[] => ALL_TARGETS.filter((t) => c.targets[t] !== undefined);
  const fixed = (n: number, digits: number): string => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');
  const results: Table = {
    headers: ['model', 'conc', 'target', 'req/s', 'p50 ms', 'p99 ms', 'server CPU µs/req', 'log B/req', 'errors', 'non2xx'],
    align: ['l', 'r', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
    rows: cells.flatMap((c) =>
      presentTargets(c).map((t) => {
        const x = c.targets[t]!;
        return [
          label(c.model),
          String(c.concurrency),
          t,
          num(x.median.perSec),
          num(x.median.p50),
          num(x.median.p99),
          fixed(x.median.cpuUsPerRequest, 1),
          fixed(x.median.logBytesPerRequest, 0),
          String(x.errors),
          String(x.non2xx),
        ];
      }),
    ),
  };
  const ratios: Table = {
    headers: [
      'model',
      'conc',
      'onnx-mme req/s',
      'ours/express',
      'ours/bare-http',
      'ours/raw-ort',
      'batching on/off',
      'p50 ours/express',
      'rows/run on',
      'rows/run off',
    ],
    align: ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
    rows: cells.map((c) => {
      const o = c.targets['onnx-mme']!.median;
      const ref = (t: TargetName): TargetCell['median'] => c.targets[t]!.median;
      return [
        label(c.model),
        String(c.concurrency),
        num(o.perSec),
        ratio(o.perSec, ref('express').perSec),
        ratio(o.perSec, ref('bare-http').perSec),
        ratio(o.perSec, ref('raw-ort').perSec),
        ratio(o.perSec, ref('onnx-mme-nobatch').perSec),
        ratio(o.p50, ref('express').p50),
        num(c.averageBatch.batching),
        num(c.averageBatch.nobatch),
      ];
    }),
  };
  // Issue 30's table: the same weights served three ways, with the settings a user ships and one setting changed.
  const SETTING: Partial<Record<TargetName, readonly [string, string]>> = {
    'onnx-mme': ['`max_batch_size: 64`', 'defaults'],
    'onnx-mme-log': ['`max_batch_size: 64`', `\`MME_ACCESS_LOG=${otherAccessLog}\``],
    'onnx-mme-nobatch': ['`max_batch_size: 64`', '`MME_DYNAMIC_BATCHING=false`'],
    mbs0: ['`max_batch_size: 0` (dims `[1,16]`)', 'defaults'],
    'mbs0-log': ['`max_batch_size: 0`', `\`MME_ACCESS_LOG=${otherAccessLog}\``],
    'mbs0-nobatch': ['`max_batch_size: 0`', '`MME_DYNAMIC_BATCHING=false`'],
    auto: ['no config.pbtxt (auto-complete)', 'defaults'],
    'bare-http': ['bare `node:http` (JSON.parse, fixed answer)', ''],
  };
  const sameWeights: Table = {
    headers: [
      'conc',
      'the same weights, served as',
      'setting',
      'server CPU per request',
      '÷ bare-http CPU',
      'log bytes/request',
      'req/s per round',
      'req/s ÷ bare-http',
    ],
    align: ['r', 'l', 'l', 'r', 'r', 'r', 'l', 'r'],
    rows: cells
      .filter((c) => c.model === 'tiny')
      .flatMap((c) =>
        presentTargets(c)
          .filter((t) => SETTING[t] !== undefined)
          .map((t) => {
            const x = c.targets[t]!;
            const bareCell = c.targets['bare-http']!.median;
            return [
              String(c.concurrency),
              SETTING[t]![0],
              SETTING[t]![1],
              `${fixed(x.median.cpuUsPerRequest, 1)} µs`,
              ratio(x.median.cpuUsPerRequest, bareCell.cpuUsPerRequest),
              fixed(x.median.logBytesPerRequest, 0),
              x.runs.map((r) => `${(r.perSec / 1000).toFixed(1)}k`).join(' '),
              ratio(x.median.perSec, bareCell.perSec),
            ];
          }),
      ),
  };
  const goals = evaluateGoals(cells);
  const goalTable: Table = {
    headers: ['goal', 'what (same run, medians)', 'measured', 'target', 'verdict'],
    align: ['l', 'l', 'r', 'r', 'l'],
    rows: goals.map(goalRow),
  };

  const dir = resultsDir();
  const chartFile = path.join(dir, 'invocations.svg');
  const subtitle = `${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${os.cpus().length} × ${os.cpus()[0]?.model.trim() ?? 'unknown CPU'}; medians of ${settings.repeats} × ${settings.durationS} s`;
  await mkdir(dir, { recursive: true });
  await writeFile(chartFile, chart(cells, models, settings.concurrency, subtitle));
  progress(`wrote ${path.relative(process.cwd(), chartFile)}`);

  const note =
    `Medians of ${settings.repeats} run(s) of ${settings.durationS} s per target (first run of each cell after a ${settings.warmupS} s warm-up, discarded). ` +
    'raw-ort counts session.run calls/s, not HTTP requests. Throughput ratios: higher is better for onnx-mme; p50 ratio: lower is better. ' +
    '"ours" is onnx-mme with the settings it ships (dynamic batching, default logging into a file); "rows/run": average rows per model execution in that cell (nv_inference_count / nv_inference_exec_count). ' +
    'Server CPU per request: user + system time of the server process (all threads, /proc/<pid>/stat) over the measured run ÷ requests answered; log B/req: bytes its log file grew by ÷ requests answered. ' +
    `Chart: ${chartFile}.`;
  const sections: [string, Table][] = [
    ['Results (medians)', results],
    ['Ratios (throughput: onnx-mme / reference)', ratios],
    ['The same weights three ways (tiny 16→4; CPU per request is steadier than req/s on a shared machine)', sameWeights],
    ['Goals (issues 5 and 30)', goalTable],
  ];
  return {
    name: 'invocations',
    title: 'POST /invocations, KServe v2 JSON, batch 1',
    settings: {
      ...settings,
      onnxMme: info['onnx-mme'] ?? {},
      onnxMmeAccessLogOtherWay: { ...(info['onnx-mme-log'] ?? {}), MME_ACCESS_LOG: otherAccessLog },
      onnxMmeNoBatch: info['onnx-mme-nobatch'] ?? {},
      logging: 'each onnx-mme server logs at its default level through its own buffered destination into a file, as a container log driver takes stdout',
      baselines: 'express and raw-ort: one InferenceSession with default SessionOptions; bare-http: JSON.parse + fixed answer',
      loadGenerator: 'autocannon 9 in the parent process, loopback; each target in its own child process',
    },
    text: `${sections.map(([title, table]) => `${title}\n${textTable(table)}`).join('\n\n')}\n\n${note}`,
    markdown: `${sections.map(([title, table]) => `### ${title}\n\n${markdownTable(table)}`).join('\n\n')}\n\n${note}`,
    data: {
      models: models.map((m) => ({ name: m.name, label: m.label, features: m.features })),
      outputCheckMaxAbsDiff: checks,
      cells,
      goals,
      chart: chartFile,
    },
  };
}
