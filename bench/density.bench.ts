/**
 * @module bench/density
 * Thousands of models on one instance (issue 28), each figure against its
 * limit measured in the same run:
 *
 * 1. Resident density: DENSITY_TINY tiny (16 → 4) and DENSITY_MLP ~1 MB
 *    (256 → 512 → 256 → 16) models, DENSITY_REQUESTS_EACH requests each, in
 *    the server started by `./serve` with Node told it has 16 CPUs (a 16-core
 *    machine's defaults), against the same sessions in a plain
 *    onnxruntime-node process (test/support/density-scenario.ts): RSS per
 *    model ÷ raw, threads per model (from idle, and per further model past
 *    half), reserved ÷ measured.
 * 2. Cold loads from S3 (bench/lib/s3-server.ts, s3rver in its own process):
 *    DENSITY_COLD distinct tiny models requested once each at concurrency 1
 *    and 8 on a fresh server and cache: loads/s, p50/p99 latency, and at
 *    concurrency 1 the cold request ÷ the sum of its parts done step by step
 *    in this process (HEAD, GetObject to a file, extraction, session create, one run),
 *    sampled between the cold requests (every n/50th), so both see the same
 *    load on a shared machine.
 * 3. A Zipf(1.1) trace of DENSITY_ZIPF_REQUESTS requests at concurrency 4 over
 *    DENSITY_ZIPF_MODELS tiny models with MME_MAX_LOADED_MODELS =
 *    DENSITY_ZIPF_RESIDENT: hit and miss latencies (hit or miss as an exact
 *    LRU of that size sees the trace), and for the limit the same hits
 *    replayed against a server holding every model, nothing loading.
 *
 * DENSITY_CHECKOUT runs another checkout's server (its `serve` and dist/),
 * for before/after figures. Defaults are the scale; reduce them for a quick run.
 */
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { GetObjectCommand, HeadObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import ort from 'onnxruntime-node';
import * as tar from 'tar';
import { packTarGz } from '../examples/models/zoo.js';
import {
  cpusPreload,
  FEATURES,
  invokeTarget,
  measureDensity,
  startServeAt,
  writeDensityModels,
  type DensityFigures,
} from '../test/support/density-scenario.js';
import { s3rverClient, s3rverEnv } from '../test/support/s3rver.js';
import { spawnChild } from './lib/child.js';
import { simulateLru, Verdict, zipfTrace } from './lib/lru-trace.js';
import { markdownTable, textTable, type BenchReport, type Table } from './lib/report.js';
import { latencySummary, median } from './lib/stats.js';

const BUCKET = 'density';

function count(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got '${raw}'`);
  return n;
}

const f2 = (n: number): string => (Number.isFinite(n) ? n.toFixed(2) : '-');
const f3 = (n: number): string => (Number.isFinite(n) ? n.toFixed(3) : '-');

export async function run(): Promise<BenchReport> {
  const tinyCount = count('DENSITY_TINY', 2000);
  const mlpCount = count('DENSITY_MLP', 1000);
  const requestsEach = count('DENSITY_REQUESTS_EACH', 2);
  const coldCount = count('DENSITY_COLD', 2000);
  const zipfModels = count('DENSITY_ZIPF_MODELS', 2000);
  const zipfResident = count('DENSITY_ZIPF_RESIDENT', 200);
  const zipfRequests = count('DENSITY_ZIPF_REQUESTS', 10_000);
  const checkout = process.env['DENSITY_CHECKOUT'] || undefined;
  const work = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-bench-density-'));
  const tables: Table[] = [];
  const data: Record<string, unknown> = {};
  try {
    // 1. Resident density.
    const density: [string, DensityFigures][] = [];
    for (const [kind, n] of [
      ['tiny', tinyCount],
      ['mlp', mlpCount],
    ] as const) {
      if (n === 0) continue;
      process.stderr.write(`  ${n} ${kind} models resident\n`);
      const root = path.join(work, `resident-${kind}`);
      const names = await writeDensityModels(root, kind, n);
      density.push([
        kind,
        await measureDensity(root, names, kind, { env: { NODE_OPTIONS: cpusPreload(16) }, requestsEach, ...(checkout ? { checkout } : {}) }),
      ]);
      await rm(root, { recursive: true, force: true });
    }
    if (density.length > 0) {
      tables.push({
        headers: [
          'resident models (16-CPU defaults)',
          'models',
          'server KB/model',
          'raw KB/model',
          'RSS ÷ raw (from idle)',
          'RSS ÷ raw (per further model)',
          'threads idle → all',
          'threads/model',
          'threads/further model',
          'reserved ÷ measured',
          'reserved ÷ RSS growth',
        ],
        rows: density.map(([kind, f]) => [
          kind,
          String(f.models),
          ((f.server.loaded.rssKb - f.server.idle.rssKb) / f.models).toFixed(0),
          ((f.raw.after.rssKb - f.raw.before.rssKb) / f.raw.models).toFixed(0),
          f2(f.rssRatio),
          f2(f.marginalRssRatio),
          `${f.server.idle.threads} → ${f.server.loaded.threads}`,
          f3(f.threadsPerModel),
          f3(f.marginalThreadsPerModel),
          f2(f.reservedBytes / f.measuredBytes),
          f2(f.reservedBytes / ((f.server.loaded.rssKb - f.server.idle.rssKb) * 1024)),
        ]),
      });
      data['resident'] = Object.fromEntries(density);
    }

    // 2. Cold loads from S3.
    if (coldCount > 0) {
      process.stderr.write(`  ${coldCount} cold loads from S3\n`);
      const cold = await coldLoads(work, coldCount, checkout);
      data['cold'] = cold;
      tables.push({
        headers: ['cold loads from S3 (tiny models)', 'loads', 'loads/s', 'p50 ms', 'p99 ms'],
        rows: cold.runs.map((r) => [`concurrency ${r.concurrency}`, String(r.loads), r.loadsPerS.toFixed(0), r.p50.toFixed(1), r.p99.toFixed(1)]),
      });
      tables.push({
        headers: ['cold request at concurrency 1 vs its parts', 'median ms'],
        rows: [
          ['onnx-mme: cold request → answer', cold.runs[0]!.p50.toFixed(1)],
          ['sum of parts', cold.parts.total.toFixed(1)],
          ['  HEAD', cold.parts.headMs.toFixed(1)],
          ['  GetObject → file', cold.parts.getMs.toFixed(1)],
          ['  extraction', cold.parts.extractMs.toFixed(1)],
          ['  InferenceSession.create', cold.parts.createMs.toFixed(1)],
          ['  one run', cold.parts.runMs.toFixed(2)],
          ['cold ÷ parts (goal ≤ 1.5)', f2(cold.runs[0]!.p50 / cold.parts.total)],
        ],
      });
    }

    // 3. Zipf trace.
    if (zipfModels > 0 && zipfRequests > 0) {
      process.stderr.write(`  Zipf(1.1) trace: ${zipfRequests} requests over ${zipfModels} models, ${zipfResident} resident\n`);
      const z = await zipfRun(work, zipfModels, zipfResident, zipfRequests, checkout);
      data['zipf'] = z;
      tables.push({
        headers: [`Zipf(1.1), ${zipfModels} models, ${zipfResident} resident, concurrency 4`, 'requests', 'p50 ms', 'p99 ms'],
        rows: [
          ['hits', String(z.hits.count), z.hits.p50.toFixed(2), z.hits.p99.toFixed(2)],
          ['misses', String(z.misses.count), z.misses.p50.toFixed(2), z.misses.p99.toFixed(2)],
          ['the same hits, every model resident, nothing loading', String(z.hitsAlone.count), z.hitsAlone.p50.toFixed(2), z.hitsAlone.p99.toFixed(2)],
          ['hits ÷ hits alone', '', f2(z.hits.p50 / z.hitsAlone.p50), f2(z.hits.p99 / z.hitsAlone.p99)],
          ['errors', String(z.errors), '', ''],
        ],
      });
    }
    return {
      name: 'density',
      title: 'Density: thousands of models, per-model cost, threads, cold loads',
      settings: { tinyCount, mlpCount, requestsEach, coldCount, zipfModels, zipfResident, zipfRequests, checkout: checkout ?? 'this one', cpus: 16 },
      text: tables.map(textTable).join('\n\n'),
      markdown: tables.map(markdownTable).join('\n\n'),
      data,
    };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

interface ColdRun {
  readonly concurrency: number;
  readonly loads: number;
  readonly loadsPerS: number;
  readonly p50: number;
  readonly p99: number;
  readonly errors: number;
}

async function coldLoads(
  work: string,
  n: number,
  checkout: string | undefined,
): Promise<{ runs: ColdRun[]; parts: { headMs: number; getMs: number; extractMs: number; createMs: number; runMs: number; total: number } }> {
  const s3 = await spawnChild('s3rver', new URL('./lib/s3-server.js', import.meta.url), [BUCKET]);
  const endpoint = String(s3.hello['endpoint']);
  const client = s3rverClient(endpoint);
  try {
    const root = path.join(work, 'cold-models');
    const names = await writeDensityModels(root, 'tiny', n);
    for (const name of names) {
      const file = path.join(work, 'tars', `${name}.tar.gz`);
      await packTarGz(path.join(root, name), file);
      await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: `${name}.tar.gz`, Body: await readFile(file) }));
    }
    const env = {
      MME_MODEL_SOURCE: `s3://${BUCKET}/`,
      ...s3rverEnv(endpoint),
      MME_MEMORY_BUDGET_BYTES: String(8 * 1024 ** 3),
    };
    // The parts, step by step in this process, for a sample of the same models, taken between the cold requests at concurrency 1.
    const samples: { headMs: number; getMs: number; extractMs: number; createMs: number; runMs: number }[] = [];
    const sampleEvery = Math.max(1, Math.ceil(names.length / 50));
    const sampleParts = async (name: string): Promise<void> => {
      const dir = path.join(work, 'parts', name);
      await mkdir(dir, { recursive: true });
      let t = performance.now();
      await client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: `${name}.tar.gz` }));
      const headMs = performance.now() - t;
      t = performance.now();
      const object = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: `${name}.tar.gz` }));
      await pipeline(object.Body as NodeJS.ReadableStream, createWriteStream(path.join(dir, 'm.tar.gz')));
      const getMs = performance.now() - t;
      t = performance.now();
      await tar.x({ file: path.join(dir, 'm.tar.gz'), cwd: dir });
      const extractMs = performance.now() - t;
      t = performance.now();
      const session = await ort.InferenceSession.create(path.join(dir, '1', 'model.onnx'), { intraOpNumThreads: 1 });
      const createMs = performance.now() - t;
      t = performance.now();
      await session.run({ INPUT0: new ort.Tensor('float32', new Float32Array(FEATURES.tiny), [1, FEATURES.tiny]) });
      const runMs = performance.now() - t;
      await session.release();
      samples.push({ headMs, getMs, extractMs, createMs, runMs });
    };
    const runs: ColdRun[] = [];
    for (const concurrency of [1, 8]) {
      const server = await startServeAt({ ...env, MME_CACHE_DIR: path.join(work, `cache-c${concurrency}`) }, checkout);
      try {
        const latencies: number[] = [];
        let errors = 0;
        let sampling = 0;
        let next = 0;
        const started = performance.now();
        await Promise.all(
          Array.from({ length: concurrency }, async () => {
            for (let i = next++; i < names.length; i = next++) {
              const t = performance.now();
              const status = await invokeTarget(server.url, `${names[i]!}.tar.gz`, FEATURES.tiny);
              if (status === 200) latencies.push(performance.now() - t);
              else errors++;
              if (concurrency === 1 && i % sampleEvery === 0) {
                const s = performance.now();
                await sampleParts(names[i]!);
                sampling += performance.now() - s;
              }
            }
          }),
        );
        // Loads/s counts the server's time only, not the parts sampled in between.
        const seconds = (performance.now() - started - sampling) / 1000;
        const { p50, p99 } = latencySummary(Float64Array.from(latencies).sort());
        runs.push({ concurrency, loads: latencies.length, loadsPerS: latencies.length / seconds, p50, p99, errors });
      } finally {
        await server.stop();
      }
    }
    const m = (k: keyof (typeof samples)[number]): number => median(samples.map((s) => s[k]));
    const parts = { headMs: m('headMs'), getMs: m('getMs'), extractMs: m('extractMs'), createMs: m('createMs'), runMs: m('runMs') };
    return { runs, parts: { ...parts, total: median(samples.map((s) => s.headMs + s.getMs + s.extractMs + s.createMs + s.runMs)) } };
  } finally {
    client.destroy();
    await s3.stop();
  }
}

interface LatencyFigures {
  count: number;
  p50: number;
  p99: number;
}

/**
 * The trace against a server holding `resident` models, then, for the
 * limit, its hits alone against a server holding every model the trace
 * uses, loaded before the replay: the same requests, the same concurrency,
 * nothing loading. Hits during loads ÷ hits alone is what the loads cost
 * the hits on top of the CPU the two share.
 */
async function zipfRun(
  work: string,
  models: number,
  resident: number,
  requests: number,
  checkout: string | undefined,
): Promise<{ hits: LatencyFigures; misses: LatencyFigures; hitsAlone: LatencyFigures; errors: number; hitRatio: number }> {
  const root = path.join(work, 'zipf-models');
  const names = await writeDensityModels(root, 'tiny', models);
  const trace = zipfTrace({ models, requests, s: 1.1, seed: 28 });
  const sim = simulateLru(trace, resident);
  const summary = (xs: number[]): LatencyFigures => ({ count: xs.length, ...latencySummary(Float64Array.from(xs).sort()) });
  const replay = async (url: string, indices: readonly number[], record: (i: number, ms: number) => void): Promise<number> => {
    let errors = 0;
    let next = 0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let n = next++; n < indices.length; n = next++) {
          const i = indices[n]!;
          const t = performance.now();
          const status = await invokeTarget(url, names[trace[i]!]!, FEATURES.tiny);
          if (status !== 200) errors++;
          else record(i, performance.now() - t);
        }
      }),
    );
    return errors;
  };
  const start = (maxLoaded: number, cache: string) =>
    startServeAt(
      {
        MME_MODEL_SOURCE: root,
        MME_CACHE_DIR: path.join(work, cache),
        MME_MAX_LOADED_MODELS: String(maxLoaded),
        MME_MEMORY_BUDGET_BYTES: String(8 * 1024 ** 3),
      },
      checkout,
    );
  const all = Array.from(trace.keys());
  const hits: number[] = [];
  const misses: number[] = [];
  let errors: number;
  let server = await start(resident, 'zipf-cache');
  try {
    errors = await replay(server.url, all, (i, ms) => (sim.verdicts[i] === Verdict.Hit ? hits : misses).push(ms));
  } finally {
    await server.stop();
  }
  const hitsAlone: number[] = [];
  server = await start(models, 'zipf-cache-all');
  try {
    const firstOfEach = [...new Map(all.map((i) => [trace[i]!, i])).values()];
    errors += await replay(server.url, firstOfEach, () => undefined);
    const hitIndices = all.filter((i) => sim.verdicts[i] === Verdict.Hit);
    errors += await replay(server.url, hitIndices, (_i, ms) => hitsAlone.push(ms));
  } finally {
    await server.stop();
  }
  return { hits: summary(hits), misses: summary(misses), hitsAlone: summary(hitsAlone), errors, hitRatio: sim.hitRatio };
}
