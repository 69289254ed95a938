/**
 * @module bench/ensemble
 * What an ensemble costs, measured three ways in one run on a three-step
 * pipeline of small models (dense 16→32 → 32→32 → 32→4, max_batch_size 32):
 *
 * - (i) `ensemble`: one POST /invocations to the ensemble target; the server
 *   runs the steps, each through its model's dynamic batcher.
 * - (ii) `client-chain`: the same three models as three targets of the same
 *   server, chained by the client (POST, parse, POST the output, ...): what
 *   users do without ensembles.
 * - (iii) `in-process`: the three steps' onnxruntime sessions run one after
 *   the other in this process (no HTTP, no JSON, no scheduler): the floor.
 *
 * plus `single`: one request to the first step's model alone, the price of
 * one trip through the server.
 *
 * Both HTTP clients are the same keep-alive node:http loop here, parsing
 * every answer, at concurrency c. Goals (the issue's):
 * - c=1: p50(i) ≤ p50(single) + p50(iii) + 0.2 ms (the pipeline itself costs almost nothing);
 * - c=32: throughput(i) ≥ 2.5 × throughput(ii).
 *
 * BENCH_ONLY=ensemble runs only this module; BENCH_DURATION_S, BENCH_WARMUP_S
 * and BENCH_REPEATS apply (concurrencies are fixed at 1 and 32, what the goals name).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import * as ort from 'onnxruntime-node';
import { configText, tiny, writeModelDir, writeRepository, type DenseModel } from '../examples/models/zoo.js';
import { startOnnxMme } from './lib/baselines.js';
import { invocationsClient } from './lib/invocations-client.js';
import { inputData } from './lib/payload.js';
import { markdownTable, num, textTable, type BenchReport, type Table } from './lib/report.js';
import { benchSettings } from './lib/settings.js';
import { latencySummary, median, SampleBuffer } from './lib/stats.js';

const MBS = 32;
const WIDTHS = [16, 32, 32, 4] as const;
const STEPS = ['s1', 's2', 's3'] as const;
const CONCURRENCY = [1, 32] as const;

interface Sample {
  readonly perSec: number;
  readonly p50: number;
  readonly p99: number;
  readonly errors: number;
}

type Way = 'ensemble' | 'client-chain' | 'in-process' | 'single';

function progress(message: string): void {
  process.stderr.write(`[ensemble] ${message}\n`);
}

function stepModels(): DenseModel[] {
  return STEPS.map((_, i) => tiny({ in: WIDTHS[i]!, out: WIDTHS[i + 1]!, seed: 21 + i }));
}

function stepConfig(name: string, i: number): string {
  return `name: "${name}"\n${configText({
    maxBatchSize: MBS,
    inputs: [{ name: 'INPUT0', dataType: 'FP32', dims: [WIDTHS[i]!] }],
    outputs: [{ name: 'OUTPUT0', dataType: 'FP32', dims: [WIDTHS[i + 1]!] }],
  })}`;
}

function ensembleConfig(): string {
  const steps = STEPS.map((s, i) => {
    const from = i === 0 ? 'INPUT' : `t${i}`;
    const to = i === STEPS.length - 1 ? 'OUTPUT' : `t${i + 1}`;
    return `{ model_name: "${s}" model_version: -1 input_map { key: "INPUT0" value: "${from}" } output_map { key: "OUTPUT0" value: "${to}" } }`;
  });
  return [
    'name: "chain"',
    'platform: "ensemble"',
    `max_batch_size: ${MBS}`,
    `input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ ${WIDTHS[0]} ] } ]`,
    `output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ ${WIDTHS[3]} ] } ]`,
    `ensemble_scheduling { step [ ${steps.join(', ')} ] }`,
    '',
  ].join('\n');
}

function body(name: string, data: readonly number[]): string {
  return JSON.stringify({ inputs: [{ name, datatype: 'FP32', shape: [1, data.length], data }] });
}

/** `concurrency` loops calling `one` back to back for `durationS`; per-call latency in ms. */
async function drive(concurrency: number, durationS: number, one: () => Promise<void>): Promise<Sample> {
  const samples = new SampleBuffer();
  let errors = 0;
  let done = 0;
  const start = performance.now();
  const end = start + durationS * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        try {
          await one();
          samples.push(performance.now() - t0);
          done++;
        } catch {
          errors++;
        }
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  return { perSec: done / seconds, ...latencySummary(samples.values()), errors };
}

export async function run(): Promise<BenchReport> {
  const settings = benchSettings();
  const models = stepModels();
  const input = inputData(WIDTHS[0]);
  const work = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-bench-ensemble-'));
  const source = path.join(work, 'models');
  const results: { way: Way; concurrency: number; runs: Sample[] }[] = [];
  let serverInfo: Readonly<Record<string, unknown>> = {};
  let maxDiff = 0;
  try {
    // Three single-model targets, and one package holding the same three models plus the ensemble.
    for (const [i, s] of STEPS.entries()) await writeModelDir(source, s, { onnx: models[i]!.onnx, config: stepConfig(s, i) });
    await writeRepository(path.join(source, 'chain'), {
      ...Object.fromEntries(STEPS.map((s, i) => [s, { onnx: models[i]!.onnx, config: stepConfig(s, i) }])),
      chain: { config: ensembleConfig(), versions: [1] },
    });
    const sessions = await Promise.all(models.map((m) => ort.InferenceSession.create(m.onnx)));
    const mme = await startOnnxMme(source, path.join(work, 'cache'));
    serverInfo = mme.info;
    const c32 = invocationsClient(mme.port, 32);
    try {
      const viaEnsemble = async (): Promise<number[]> => (await c32.post('chain', body('INPUT', input))).outputs[0]!.data;
      const viaChain = async (): Promise<number[]> => {
        let x: readonly number[] = input;
        for (const s of STEPS) x = (await c32.post(s, body('INPUT0', x))).outputs[0]!.data;
        return [...x];
      };
      const inProcess = async (): Promise<Float32Array> => {
        let t: ort.Tensor = new ort.Tensor('float32', Float32Array.from(input), [1, WIDTHS[0]]);
        for (const s of sessions) t = (await s.run({ INPUT0: t }))['OUTPUT0'] as ort.Tensor;
        return t.data as Float32Array;
      };
      // The three ways must compute the same thing (and this loads every target).
      const [a, b, c] = [await viaEnsemble(), await viaChain(), await inProcess()];
      maxDiff = Math.max(...a.map((v, i) => Math.max(Math.abs(v - b[i]!), Math.abs(v - c[i]!))));
      if (!(maxDiff <= 1e-4)) throw new Error(`the three ways disagree (max |diff| ${maxDiff})`);
      await c32.post('s1', body('INPUT0', input));

      const ways: Record<Way, () => Promise<unknown>> = {
        ensemble: viaEnsemble,
        'client-chain': viaChain,
        'in-process': inProcess,
        single: () => c32.post('s1', body('INPUT0', input)),
      };
      for (const concurrency of CONCURRENCY) {
        const cellWays: Way[] = concurrency === 1 ? ['single', 'ensemble', 'client-chain', 'in-process'] : ['ensemble', 'client-chain'];
        const cell = new Map<Way, Sample[]>(cellWays.map((w) => [w, []]));
        for (let r = 0; r < settings.repeats; r++) {
          // Rotating order, so noise on a shared machine lands on every way alike.
          for (let k = 0; k < cellWays.length; k++) {
            const way = cellWays[(k + r) % cellWays.length]!;
            const one = async (): Promise<void> => void (await ways[way]());
            if (r === 0 && settings.warmupS > 0) await drive(concurrency, settings.warmupS, one);
            progress(`c=${concurrency} ${way} run ${r + 1}/${settings.repeats}`);
            cell.get(way)!.push(await drive(concurrency, settings.durationS, one));
          }
        }
        for (const [way, runs] of cell) results.push({ way, concurrency, runs });
      }
    } finally {
      c32.close();
      await mme.stop();
      await Promise.all(sessions.map((s) => s.release()));
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }

  const med = (way: Way, c: number, key: 'perSec' | 'p50' | 'p99'): number =>
    median(results.find((r) => r.way === way && r.concurrency === c)?.runs.map((s) => s[key]) ?? []);
  const errors = results.reduce((n, r) => n + r.runs.reduce((a, s) => a + s.errors, 0), 0);
  const latencyBound = med('single', 1, 'p50') + med('in-process', 1, 'p50') + 0.2;
  const throughputRatio = med('ensemble', 32, 'perSec') / med('client-chain', 32, 'perSec');
  const goals = {
    c1: { ensembleP50Ms: med('ensemble', 1, 'p50'), boundMs: latencyBound, met: med('ensemble', 1, 'p50') <= latencyBound },
    c32: { ratio: throughputRatio, goal: 2.5, met: throughputRatio >= 2.5 },
  };

  const table: Table = {
    headers: ['way', 'c', 'pipelines/s', 'p50 ms', 'p99 ms', 'errors'],
    rows: results.map((r) => [
      r.way,
      String(r.concurrency),
      num(med(r.way, r.concurrency, 'perSec')),
      num(med(r.way, r.concurrency, 'p50')),
      num(med(r.way, r.concurrency, 'p99')),
      String(r.runs.reduce((a, s) => a + s.errors, 0)),
    ]),
  };
  const goalTable: Table = {
    headers: ['goal', 'measured', 'target', 'met'],
    rows: [
      [
        'c=1: p50(ensemble) ≤ p50(single) + p50(in-process) + 0.2 ms',
        `${num(goals.c1.ensembleP50Ms)} ms`,
        `≤ ${num(latencyBound)} ms`,
        goals.c1.met ? 'yes' : 'NO',
      ],
      ['c=32: throughput(ensemble) / throughput(client-chain)', `${num(throughputRatio)}×`, '≥ 2.5×', goals.c32.met ? 'yes' : 'NO'],
    ],
  };
  const note = `three dense steps ${WIDTHS.join('→')}, max_batch_size ${MBS}, batch 1 per request; ${errors} errors; outputs of the three ways agree within ${maxDiff.toExponential(1)}`;
  return {
    name: 'ensemble',
    title: 'ensemble: three steps through the server vs chained by the client vs in-process',
    settings: { durationS: settings.durationS, warmupS: settings.warmupS, repeats: settings.repeats, concurrency: CONCURRENCY, server: serverInfo },
    text: `${textTable(table)}\n\n${textTable(goalTable)}\n${note}`,
    markdown: `${markdownTable(table)}\n\n${markdownTable(goalTable)}\n\n${note}`,
    data: { results, goals, maxDiff },
  };
}
