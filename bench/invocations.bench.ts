/**
 * @module bench/invocations
 * POST /invocations throughput and latency of onnx-mme against honest
 * reference points, for a tiny model (16→4, overhead-bound) and an MLP
 * (256→1024→1024→16, compute-bound), batch 1, at each concurrency:
 *
 * - onnx-mme: the real server, X-Amzn-SageMaker-Target-Model routing, dynamic
 *   batching on (the default).
 * - onnx-mme-nobatch: the same server with MME_DYNAMIC_BATCHING=false.
 * - express: what people write by hand (express.json + one ORT session).
 * - bare-http: node:http, JSON.parse, fixed answer: the HTTP limit.
 * - raw-ort: session.run back to back, no HTTP: the onnxruntime limit.
 *
 * Every target runs in its own process; the load generator (autocannon) runs
 * here. Each cell runs every target `repeats` times in rotating order and
 * reports medians, so machine noise hits every target alike. The issue's
 * goals (issue 5) are checked from the same run, and a throughput-vs-
 * concurrency chart is written to bench/results/invocations.svg.
 */
import type { RunSample as Sample } from './lib/stats.js';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { mlp, tiny, writeModelDir, type ZooModel } from '../examples/models/zoo.js';
import { runLoad, type LoadResult } from './lib/autocannon-run.js';
import { startBareHttp, startExpressBaseline, startOnnxMme, startRawOrtLoop, type BatchStats, type HttpTarget, type OnnxMmeProcess, type RawOrtResult } from './lib/baselines.js';
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
}

type TargetName = 'onnx-mme' | 'onnx-mme-nobatch' | 'express' | 'bare-http' | 'raw-ort';
const TARGETS: readonly TargetName[] = ['onnx-mme', 'onnx-mme-nobatch', 'express', 'bare-http', 'raw-ort'];
type HttpTargetName = Exclude<TargetName, 'raw-ort'>;

/** Chart colours and legend names. */
const STYLE: Readonly<Record<TargetName, { readonly color: string; readonly legend: string; readonly dashed?: boolean }>> = {
  'onnx-mme': { color: '#1f5fbf', legend: 'onnx-mme (dynamic batching, default)' },
  'onnx-mme-nobatch': { color: '#7fa7e0', legend: 'onnx-mme, MME_DYNAMIC_BATCHING=false', dashed: true },
  express: { color: '#e07b00', legend: 'express + session.run (hand-written)' },
  'bare-http': { color: '#777777', legend: 'bare node:http, JSON.parse, fixed answer' },
  'raw-ort': { color: '#2e9e4f', legend: 'raw onnxruntime session.run (no HTTP)', dashed: true },
};

/** The issue's goals, from the same run. */
const GOAL_A_SHARE_OF_BARE = 0.6;
const GOAL_B_TIMES_EXPRESS = 3;
const GOAL_CONCURRENCY = 64;


interface TargetCell {
  readonly target: TargetName;
  readonly median: { readonly perSec: number; readonly p50: number; readonly p99: number };
  readonly errors: number;
  readonly non2xx: number;
  readonly runs: readonly Sample[];
}

interface Cell {
  readonly model: string;
  readonly concurrency: number;
  readonly targets: Readonly<Record<TargetName, TargetCell>>;
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

function fromLoad(r: LoadResult): Sample {
  return { perSec: r.requestsPerSec, p50: r.p50, p99: r.p99, errors: r.errors, non2xx: r.non2xx };
}

function fromRaw(r: RawOrtResult): Sample {
  return { perSec: r.runsPerSec, p50: r.p50, p99: r.p99, errors: 0, non2xx: 0 };
}

function summarize(target: TargetName, runs: readonly Sample[]): TargetCell {
  return {
    target,
    median: { perSec: median(runs.map((r) => r.perSec)), p50: median(runs.map((r) => r.p50)), p99: median(runs.map((r) => r.p99)) },
    errors: runs.reduce((a, r) => a + r.errors, 0),
    non2xx: runs.reduce((a, r) => a + r.non2xx, 0),
    runs,
  };
}

function progress(message: string): void {
  process.stderr.write(`[invocations] ${message}\n`);
}

/** One request to each HTTP target; the onnx-mme servers and express must agree on the numbers. */
async function sanityCheck(targets: Readonly<Record<HttpTargetName, HttpTarget>>, body: string): Promise<number> {
  const post = async (t: HttpTarget): Promise<{ outputs?: { data?: number[] }[] }> => {
    const res = await fetch(t.url, { method: 'POST', headers: { 'content-type': 'application/json', ...t.headers }, body });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${t.name} answered ${res.status}: ${text.slice(0, 500)}`);
    return JSON.parse(text) as { outputs?: { data?: number[] }[] };
  };
  const reference = (await post(targets.express)).outputs?.[0]?.data ?? [];
  await post(targets['bare-http']);
  let maxDiff = 0;
  for (const name of ['onnx-mme', 'onnx-mme-nobatch'] as const) {
    const x = (await post(targets[name])).outputs?.[0]?.data ?? [];
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
  return [
    goal('a', `tiny, ${GOAL_CONCURRENCY} connections: onnx-mme req/s ÷ bare-http req/s`, tiny64?.ratios.oursOverBareHttp, GOAL_A_SHARE_OF_BARE, 'min'),
    goal('b', `mlp, ${GOAL_CONCURRENCY} connections: onnx-mme req/s ÷ express req/s`, mlp64?.ratios.oursOverExpress, GOAL_B_TIMES_EXPRESS, 'min'),
    goal('c', 'tiny, 1 connection: onnx-mme p50 ÷ express p50', cell('tiny', 1)?.ratios.p50OursOverExpress, 1, 'max'),
    goal('c', 'mlp, 1 connection: onnx-mme p50 ÷ express p50', cell('mlp', 1)?.ratios.p50OursOverExpress, 1, 'max'),
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
        marks.push({ x: GOAL_CONCURRENCY, y: top.targets['bare-http'].median.perSec * GOAL_A_SHARE_OF_BARE, label: `goal (a) ${GOAL_A_SHARE_OF_BARE * 100}% of bare`, color: '#b00020' });
      }
      if (top && m.name === 'mlp') {
        marks.push({ x: GOAL_CONCURRENCY, y: top.targets.express.median.perSec * GOAL_B_TIMES_EXPRESS, label: `goal (b) ${GOAL_B_TIMES_EXPRESS}× express`, color: '#b00020' });
      }
      return {
        title: m.label,
        series: TARGETS.map(
          (t): ChartSeries => ({
            name: STYLE[t].legend,
            color: STYLE[t].color,
            ...(STYLE[t].dashed ? { dashed: true } : {}),
            values: concurrency.map((c) => at(m.name, c)?.targets[t].median.perSec ?? Number.NaN),
          }),
        ),
        marks,
      };
    }),
    notes: ['Each point: median of the runs of that cell; every target measured in the same run, rotating order. Red marks: the issue\'s goals at 64 connections.'],
  });
}

export async function run(): Promise<BenchReport> {
  const settings = benchSettings();
  const models: BenchModel[] = [
    { name: 'tiny', label: 'tiny 16→4', features: 16, model: tiny({ in: 16, out: 4 }) },
    { name: 'mlp', label: 'mlp 256→1024→1024→16', features: 256, model: mlp({ in: 256, hidden: [1024, 1024], out: 16 }) },
  ];
  const work = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-bench-'));
  const source = path.join(work, 'models');
  const cells: Cell[] = [];
  const checks: Record<string, number> = {};
  let oursInfo: Readonly<Record<string, unknown>> = {};
  let noBatchInfo: Readonly<Record<string, unknown>> = {};
  try {
    for (const m of models) await writeModelDir(source, m.name, m.model);
    const servers: Record<'onnx-mme' | 'onnx-mme-nobatch', OnnxMmeProcess> = {
      'onnx-mme': await startOnnxMme(source, path.join(work, 'cache'), { MME_DYNAMIC_BATCHING: 'true' }),
      'onnx-mme-nobatch': await startOnnxMme(source, path.join(work, 'cache-nobatch'), { MME_DYNAMIC_BATCHING: 'false' }, 'onnx-mme-nobatch'),
    };
    oursInfo = servers['onnx-mme'].info;
    noBatchInfo = servers['onnx-mme-nobatch'].info;
    const bare = await startBareHttp();
    try {
      for (const m of models) {
        const modelFile = path.join(source, m.name, '1', 'model.onnx');
        const express = await startExpressBaseline(modelFile);
        const raw = await startRawOrtLoop(modelFile, m.features);
        const body = v2Body(m.features);
        const http: Record<HttpTargetName, HttpTarget> = {
          'onnx-mme': servers['onnx-mme'].target(m.name),
          'onnx-mme-nobatch': servers['onnx-mme-nobatch'].target(m.name),
          express,
          'bare-http': bare,
        };
        try {
          checks[m.name] = await sanityCheck(http, body);
          for (const concurrency of settings.concurrency) {
            const runs: Record<TargetName, Sample[]> = { 'onnx-mme': [], 'onnx-mme-nobatch': [], express: [], 'bare-http': [], 'raw-ort': [] };
            const statsBefore = { on: await servers['onnx-mme'].stats(), off: await servers['onnx-mme-nobatch'].stats() };
            for (let r = 0; r < settings.repeats; r++) {
              const warmupS = r === 0 ? settings.warmupS : 0;
              // Rotate the order each round so no target always runs first or last.
              const order = TARGETS.map((_, i) => TARGETS[(i + r) % TARGETS.length]!);
              for (const t of order) {
                const sample =
                  t === 'raw-ort'
                    ? fromRaw(await raw.measure({ concurrency, durationS: settings.durationS, warmupS }))
                    : fromLoad(await runLoad({ url: http[t].url, headers: http[t].headers, body, connections: concurrency, durationS: settings.durationS, warmupS }));
                runs[t].push(sample);
              }
              progress(`${m.name} c=${concurrency} round ${r + 1}/${settings.repeats}: ` + TARGETS.map((t) => `${t} ${num(runs[t][r]!.perSec)}/s`).join(', '));
            }
            const statsAfter = { on: await servers['onnx-mme'].stats(), off: await servers['onnx-mme-nobatch'].stats() };
            const targets = Object.fromEntries(TARGETS.map((t) => [t, summarize(t, runs[t])])) as Record<TargetName, TargetCell>;
            const ourMed = targets['onnx-mme'].median;
            cells.push({
              model: m.name,
              concurrency,
              targets,
              averageBatch: { batching: averageBatch(statsBefore.on, statsAfter.on, m.name), nobatch: averageBatch(statsBefore.off, statsAfter.off, m.name) },
              ratios: {
                oursOverExpress: ourMed.perSec / targets.express.median.perSec,
                oursOverBareHttp: ourMed.perSec / targets['bare-http'].median.perSec,
                oursOverRawOrt: ourMed.perSec / targets['raw-ort'].median.perSec,
                batchingOnOverOff: ourMed.perSec / targets['onnx-mme-nobatch'].median.perSec,
                p50OursOverExpress: ourMed.p50 / targets.express.median.p50,
              },
            });
          }
        } finally {
          await express.stop();
          await raw.stop();
        }
      }
    } finally {
      await servers['onnx-mme'].stop();
      await servers['onnx-mme-nobatch'].stop();
      await bare.stop();
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }

  const label = (name: string): string => models.find((m) => m.name === name)?.label ?? name;
  const results: Table = {
    headers: ['model', 'conc', 'target', 'req/s', 'p50 ms', 'p99 ms', 'errors', 'non2xx'],
    align: ['l', 'r', 'l', 'r', 'r', 'r', 'r', 'r'],
    rows: cells.flatMap((c) =>
      TARGETS.map((t) => {
        const x = c.targets[t];
        return [label(c.model), String(c.concurrency), t, num(x.median.perSec), num(x.median.p50), num(x.median.p99), String(x.errors), String(x.non2xx)];
      }),
    ),
  };
  const ratios: Table = {
    headers: ['model', 'conc', 'onnx-mme req/s', 'ours/express', 'ours/bare-http', 'ours/raw-ort', 'batching on/off', 'p50 ours/express', 'rows/run on', 'rows/run off'],
    align: ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
    rows: cells.map((c) => {
      const o = c.targets['onnx-mme'].median;
      return [
        label(c.model),
        String(c.concurrency),
        num(o.perSec),
        ratio(o.perSec, c.targets.express.median.perSec),
        ratio(o.perSec, c.targets['bare-http'].median.perSec),
        ratio(o.perSec, c.targets['raw-ort'].median.perSec),
        ratio(o.perSec, c.targets['onnx-mme-nobatch'].median.perSec),
        ratio(o.p50, c.targets.express.median.p50),
        num(c.averageBatch.batching),
        num(c.averageBatch.nobatch),
      ];
    }),
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
    '"ours" is onnx-mme with dynamic batching (the default); "rows/run": average rows per model execution in that cell (nv_inference_count / nv_inference_exec_count). ' +
    `Chart: ${chartFile}.`;
  return {
    name: 'invocations',
    title: 'POST /invocations, KServe v2 JSON, batch 1',
    settings: {
      ...settings,
      onnxMme: oursInfo,
      onnxMmeNoBatch: noBatchInfo,
      baselines: 'express and raw-ort: one InferenceSession with default SessionOptions; bare-http: JSON.parse + fixed answer',
      loadGenerator: 'autocannon 9 in the parent process, loopback; each target in its own child process',
    },
    text: `Results (medians)\n${textTable(results)}\n\nRatios (throughput: onnx-mme / reference)\n${textTable(ratios)}\n\nGoals (issue 5)\n${textTable(goalTable)}\n\n${note}`,
    markdown: `### Results (medians)\n\n${markdownTable(results)}\n\n### Ratios (throughput: onnx-mme / reference)\n\n${markdownTable(ratios)}\n\n### Goals (issue 5)\n\n${markdownTable(goalTable)}\n\n${note}`,
    data: { models: models.map((m) => ({ name: m.name, label: m.label, features: m.features })), outputCheckMaxAbsDiff: checks, cells, goals, chart: chartFile },
  };
}
