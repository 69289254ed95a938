/**
 * @module bench/invocations
 * POST /invocations throughput and latency of onnx-mme against honest
 * reference points, for a tiny model (16→4, overhead-bound) and an MLP
 * (256→1024→1024→16, compute-bound), batch 1, at each concurrency:
 *
 * - onnx-mme: the real server, X-Amzn-SageMaker-Target-Model routing.
 * - express: what people write by hand (express.json + one ORT session).
 * - bare-http: node:http, JSON.parse, fixed answer: the HTTP limit.
 * - raw-ort: session.run back to back, no HTTP: the onnxruntime limit.
 *
 * Every target runs in its own process; the load generator (autocannon) runs
 * here. Each cell runs every target `repeats` times in rotating order and
 * reports medians, so machine noise hits every target alike.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { mlp, tiny, writeModelDir, type ZooModel } from '../examples/models/zoo.js';
import { runLoad, type LoadResult } from './lib/autocannon-run.js';
import { startBareHttp, startExpressBaseline, startOnnxMme, startRawOrtLoop, type HttpTarget, type RawOrtResult } from './lib/baselines.js';
import { v2Body } from './lib/payload.js';
import { markdownTable, num, ratio, textTable, type BenchReport, type Table } from './lib/report.js';
import { benchSettings } from './lib/settings.js';
import { median } from './lib/stats.js';

interface BenchModel {
  readonly name: string;
  readonly label: string;
  readonly features: number;
  readonly model: ZooModel;
}

type TargetName = 'onnx-mme' | 'express' | 'bare-http' | 'raw-ort';
const TARGETS: readonly TargetName[] = ['onnx-mme', 'express', 'bare-http', 'raw-ort'];

/** One measured run, HTTP or raw loop, in common terms. */
interface Sample {
  readonly perSec: number;
  readonly p50: number;
  readonly p99: number;
  readonly errors: number;
  readonly non2xx: number;
}

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
  readonly ratios: { readonly oursOverExpress: number; readonly oursOverBareHttp: number; readonly oursOverRawOrt: number; readonly p50OursOverExpress: number };
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

/** One request to each HTTP target; onnx-mme and express must agree on the numbers. */
async function sanityCheck(ours: HttpTarget, express: HttpTarget, bare: HttpTarget, body: string): Promise<number> {
  const post = async (t: HttpTarget): Promise<{ outputs?: { data?: number[] }[] }> => {
    const res = await fetch(t.url, { method: 'POST', headers: { 'content-type': 'application/json', ...t.headers }, body });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${t.name} answered ${res.status}: ${text.slice(0, 500)}`);
    return JSON.parse(text) as { outputs?: { data?: number[] }[] };
  };
  const [a, b] = [await post(ours), await post(express)];
  await post(bare);
  const x = a.outputs?.[0]?.data ?? [];
  const y = b.outputs?.[0]?.data ?? [];
  if (x.length === 0 || x.length !== y.length) throw new Error(`onnx-mme and express outputs differ in length (${x.length} vs ${y.length})`);
  const maxDiff = Math.max(...x.map((v, i) => Math.abs(v - (y[i] ?? Number.NaN))));
  if (!(maxDiff <= 1e-3)) throw new Error(`onnx-mme and express outputs differ (max |diff| ${maxDiff})`);
  return maxDiff;
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
  try {
    for (const m of models) await writeModelDir(source, m.name, m.model);
    const mme = await startOnnxMme(source, path.join(work, 'cache'));
    oursInfo = mme.info;
    const bare = await startBareHttp();
    try {
      for (const m of models) {
        const modelFile = path.join(source, m.name, '1', 'model.onnx');
        const express = await startExpressBaseline(modelFile);
        const raw = await startRawOrtLoop(modelFile, m.features);
        const ours = mme.target(m.name);
        const body = v2Body(m.features);
        try {
          checks[m.name] = await sanityCheck(ours, express, bare, body);
          const http: Record<Exclude<TargetName, 'raw-ort'>, HttpTarget> = { 'onnx-mme': ours, express, 'bare-http': bare };
          for (const concurrency of settings.concurrency) {
            const runs: Record<TargetName, Sample[]> = { 'onnx-mme': [], express: [], 'bare-http': [], 'raw-ort': [] };
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
              progress(
                `${m.name} c=${concurrency} round ${r + 1}/${settings.repeats}: ` +
                  TARGETS.map((t) => `${t} ${num(runs[t][r]!.perSec)}/s`).join(', '),
              );
            }
            const targets = Object.fromEntries(TARGETS.map((t) => [t, summarize(t, runs[t])])) as Record<TargetName, TargetCell>;
            const ourMed = targets['onnx-mme'].median;
            cells.push({
              model: m.name,
              concurrency,
              targets,
              ratios: {
                oursOverExpress: ourMed.perSec / targets.express.median.perSec,
                oursOverBareHttp: ourMed.perSec / targets['bare-http'].median.perSec,
                oursOverRawOrt: ourMed.perSec / targets['raw-ort'].median.perSec,
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
      await mme.stop();
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
    headers: ['model', 'conc', 'onnx-mme req/s', 'ours/express', 'ours/bare-http', 'ours/raw-ort', 'p50 ours/express'],
    align: ['l', 'r', 'r', 'r', 'r', 'r', 'r'],
    rows: cells.map((c) => {
      const o = c.targets['onnx-mme'].median;
      return [
        label(c.model),
        String(c.concurrency),
        num(o.perSec),
        ratio(o.perSec, c.targets.express.median.perSec),
        ratio(o.perSec, c.targets['bare-http'].median.perSec),
        ratio(o.perSec, c.targets['raw-ort'].median.perSec),
        ratio(o.p50, c.targets.express.median.p50),
      ];
    }),
  };
  const note =
    `Medians of ${settings.repeats} run(s) of ${settings.durationS} s per target (first run of each cell after a ${settings.warmupS} s warm-up, discarded). ` +
    'raw-ort counts session.run calls/s, not HTTP requests. Throughput ratios: higher is better for onnx-mme; p50 ratio: lower is better.';
  return {
    name: 'invocations',
    title: 'POST /invocations, KServe v2 JSON, batch 1',
    settings: {
      ...settings,
      onnxMme: oursInfo,
      baselines: 'express and raw-ort: one InferenceSession with default SessionOptions; bare-http: JSON.parse + fixed answer',
      loadGenerator: 'autocannon 9 in the parent process, loopback; each target in its own child process',
    },
    text: `Results (medians)\n${textTable(results)}\n\nRatios (throughput: onnx-mme / reference)\n${textTable(ratios)}\n\n${note}`,
    markdown: `### Results (medians)\n\n${markdownTable(results)}\n\n### Ratios (throughput: onnx-mme / reference)\n\n${markdownTable(ratios)}\n\n${note}`,
    data: { models: models.map((m) => ({ name: m.name, label: m.label, features: m.features })), outputCheckMaxAbsDiff: checks, cells },
  };
}
