/**
 * @module bench/memory-lru
 * Many models, a memory budget that holds few of them, skewed traffic (issue 4):
 *
 * - 1,000 generated models (~300 KB each, every file different) in an S3
 *   prefix served by s3rver in its own child process;
 * - the onnx-mme server in another child process, MME_MODEL_SOURCE=s3://…,
 *   with room for 50 models (MME_MAX_LOADED_MODELS=50 by default, or the
 *   equivalent MME_MEMORY_BUDGET_BYTES with BENCH_LRU_BUDGET=bytes);
 * - a seeded Zipf (s = 1.1) trace of 20,000 requests over the 1,000 models,
 *   replayed at concurrency 16, every answer checked.
 *
 * Reference point: an exact LRU of the same capacity replayed sequentially
 * over the same trace. Goals: zero errors; the server's memory hit ratio
 * (from its own /metrics) ≥ 0.95 × the simulation's. Reported: latency p50 and
 * p99 of hits and misses, and the server's peak RSS against its idle RSS and
 * against 50 × the per-model bytes the server counts.
 *
 * The server exposes no per-request hit/miss signal, so requests are split by
 * the simulation's verdict for their trace position (at concurrency 16 the
 * server's order of events differs slightly; its aggregate counts are exact).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { configText, packTarGz, sizedModel, writeModelDir, ZOO_MAX_BATCH_SIZE } from '../examples/models/zoo.js';
import { s3rverClient, S3RVER_CREDENTIALS } from '../test/support/s3rver.js';
import { childPort, spawnChild } from './lib/child.js';
import { simulateLru, Verdict, zipfTrace, type LruSimulation } from './lib/lru-trace.js';
import { procStatusKb, resetPeakRss, RssSampler } from './lib/proc-memory.js';
import { promSum, scrapeMetrics, type PromSample } from './lib/prom-text.js';
import { markdownTable, num, textTable, type BenchReport, type Table } from './lib/report.js';
import { latencySummary } from './lib/stats.js';
import { replayTrace, type ReplayResult } from './lib/trace-replay.js';
import { launcherEnv } from '../test/support/launcher.js';

const BUCKET = 'bench';
const MIB = 1024 * 1024;
/** What the server adds per ONNX session to a package's file bytes (src/registry/package-size.ts). */
const SESSION_ALLOWANCE_BYTES = 1 * MIB;
/** Consecutive model ids differ by this many file bytes (4 table rows), so every file is different. */
const SIZE_STEP_BYTES = 64;
const UPLOAD_CONCURRENCY = 8;
const REQUEST_TIMEOUT_MS = 120_000;
const BODY = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] }));
const EXPECTED = [2, 4, 6, 8];

interface LruSettings {
  readonly models: number;
  readonly requests: number;
  readonly concurrency: number;
  readonly capacity: number;
  readonly zipfS: number;
  readonly seed: number;
  readonly modelBytes: number;
  readonly budget: 'count' | 'bytes';
}

function envNumber(name: string, fallback: number, integer: boolean): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) {
    throw new Error(`${name} must be a positive ${integer ? 'integer' : 'number'}, got '${raw}'`);
  }
  return n;
}

function lruSettings(): LruSettings {
  const budget = (process.env['BENCH_LRU_BUDGET'] ?? 'count').trim() || 'count';
  if (budget !== 'count' && budget !== 'bytes') throw new Error(`BENCH_LRU_BUDGET must be 'count' or 'bytes', got '${budget}'`);
  const s = {
    models: envNumber('BENCH_LRU_MODELS', 1000, true),
    requests: envNumber('BENCH_LRU_REQUESTS', 20_000, true),
    concurrency: envNumber('BENCH_LRU_CONCURRENCY', 16, true),
    capacity: envNumber('BENCH_LRU_CAPACITY', 50, true),
    zipfS: envNumber('BENCH_LRU_ZIPF_S', 1.1, false),
    seed: envNumber('BENCH_LRU_SEED', 42, true),
    modelBytes: envNumber('BENCH_LRU_MODEL_BYTES', 300_000, true),
    budget,
  } as const;
  if (s.modelBytes <= (s.models * SIZE_STEP_BYTES) / 2 + 1000) {
    throw new Error(`BENCH_LRU_MODEL_BYTES=${s.modelBytes} is too small to give ${s.models} models distinct sizes ${SIZE_STEP_BYTES} bytes apart`);
  }
  return s;
}

const modelName = (id: number): string => `m${String(id).padStart(4, '0')}`;
const targetOf = (id: number): string => `${modelName(id)}.tar.gz`;
/** File size of model `id`: centred on modelBytes, SIZE_STEP_BYTES apart. */
const bytesOf = (s: LruSettings, id: number): number => s.modelBytes + (id - Math.floor(s.models / 2)) * SIZE_STEP_BYTES;

interface Upload {
  /** Per model: what the server predicts before loading it (files + 1 MiB), bytes. */
  readonly predictedBytes: Float64Array;
  readonly archiveBytes: number;
  readonly seconds: number;
}

/** Generate, pack and upload every model, UPLOAD_CONCURRENCY at a time. */
async function uploadModels(s: LruSettings, client: S3Client, work: string): Promise<Upload> {
  const predictedBytes = new Float64Array(s.models);
  let archiveBytes = 0;
  let next = 0;
  let done = 0;
  const started = performance.now();
  // The config every model shares (sizedModel writes the same one); its bytes count in the prediction.
  const config = configText({
    maxBatchSize: ZOO_MAX_BATCH_SIZE,
    inputs: [{ name: 'INPUT0', dataType: 'FP32', dims: [4] }],
    outputs: [{ name: 'OUTPUT0', dataType: 'FP32', dims: [4] }],
  });
  const worker = async (): Promise<void> => {
    for (let id = next++; id < s.models; id = next++) {
      const name = modelName(id);
      const model = sizedModel(bytesOf(s, id));
      if (model.config !== config) throw new Error('sizedModel config changed: update the prediction in memory-lru.bench');
      const staging = path.join(work, 'staging', name);
      const dir = await writeModelDir(staging, name, model);
      const file = path.join(work, 'staging', `${name}.tar.gz`);
      await packTarGz(dir, file);
      const body = await readFile(file);
      await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: targetOf(id), Body: body, ContentLength: body.length }));
      await rm(staging, { recursive: true, force: true });
      await rm(file, { force: true });
      predictedBytes[id] = (model.onnx?.length ?? 0) + Buffer.byteLength(config) + SESSION_ALLOWANCE_BYTES;
      archiveBytes += body.length;
      if (++done % 200 === 0) process.stderr.write(`  uploaded ${done}/${s.models}\n`);
    }
  };
  await Promise.all(Array.from({ length: UPLOAD_CONCURRENCY }, worker));
  return { predictedBytes, archiveBytes, seconds: (performance.now() - started) / 1000 };
}

function checkAnswer(status: number, body: string): string | undefined {
  if (status !== 200) return body.slice(0, 500);
  try {
    const parsed = JSON.parse(body) as { outputs?: { name?: string; data?: unknown }[] };
    const data = parsed.outputs?.find((o) => o.name === 'OUTPUT0')?.data;
    if (!Array.isArray(data) || data.length !== EXPECTED.length || data.some((v, k) => v !== EXPECTED[k])) {
      return `wrong OUTPUT0: ${JSON.stringify(data)?.slice(0, 200)}`;
    }
    return undefined;
  } catch (err) {
    return `unreadable answer (${(err as Error).message}): ${body.slice(0, 200)}`;
  }
}

interface LatencyRow {
  readonly label: string;
  readonly count: number;
  readonly p50: number;
  readonly p99: number;
  readonly mean: number;
}

function latencyRow(label: string, replay: ReplayResult, include: (i: number) => boolean): LatencyRow {
  const picked: number[] = [];
  for (let i = 0; i < replay.latencyMs.length; i++) if (replay.failed[i] === 0 && include(i)) picked.push(replay.latencyMs[i]!);
  const { p50, p99 } = latencySummary(picked);
  const mean = picked.length === 0 ? Number.NaN : picked.reduce((a, b) => a + b, 0) / picked.length;
  return { label, count: picked.length, p50, p99, mean };
}

interface ServerCounts {
  readonly memoryHits: number;
  /** Requests that did not find their model resident (they waited for a load, shared or their own). */
  readonly loadWaits: number;
  readonly loadWaitMeanS: number;
  readonly loadsFromDisk: number;
  readonly loadsFromSource: number;
  readonly evictions: number;
  readonly diskEvictions: number;
  readonly loadedModels: number;
  readonly loadedModelBytes: number;
  readonly budgetBytes: number;
  readonly loadFailures: number;
  /** The main thread's V8 heap and external (Buffer) memory at the end; worker threads' heaps are not in these. */
  readonly heapUsedBytes: number;
  readonly heapTotalBytes: number;
  readonly externalBytes: number;
}

function serverCounts(m: readonly PromSample[]): ServerCounts {
  const waitCount = promSum(m, 'onnx_mme_model_loading_wait_seconds_count');
  return {
    memoryHits: promSum(m, 'onnx_mme_model_cache_lookups_total', { result: 'memory' }),
    loadWaits: waitCount,
    loadWaitMeanS: waitCount > 0 ? promSum(m, 'onnx_mme_model_loading_wait_seconds_sum') / waitCount : Number.NaN,
    loadsFromDisk: promSum(m, 'onnx_mme_model_cache_lookups_total', { result: 'disk' }),
    loadsFromSource: promSum(m, 'onnx_mme_model_cache_lookups_total', { result: 'source' }),
    evictions: promSum(m, 'onnx_mme_model_evictions_total'),
    diskEvictions: promSum(m, 'onnx_mme_disk_cache_evictions_total'),
    loadedModels: promSum(m, 'onnx_mme_loaded_models'),
    loadedModelBytes: promSum(m, 'onnx_mme_loaded_model_bytes'),
    budgetBytes: promSum(m, 'onnx_mme_memory_budget_bytes'),
    loadFailures: promSum(m, 'onnx_mme_model_load_duration_seconds_count', { outcome: 'failure' }),
    heapUsedBytes: promSum(m, 'nodejs_heap_size_used_bytes'),
    heapTotalBytes: promSum(m, 'nodejs_heap_size_total_bytes'),
    externalBytes: promSum(m, 'nodejs_external_memory_bytes'),
  };
}

interface MemoryFigures {
  readonly idleKb: number;
  readonly endKb: number;
  readonly sampledPeakKb: number;
  readonly samples: number;
  /** VmHWM since just before the replay (undefined when clear_refs was refused: then it covers the whole process life). */
  readonly hwmKb: number;
  readonly hwmReset: boolean;
  /** VmRSS after every tenth of the replay: a plateau means churn reuses memory, a climb means it does not. */
  readonly timeline: readonly { readonly requests: number; readonly rssKb: number }[];
  /** The main thread's V8 heap used / total when idle, bytes (from /metrics). */
  readonly idleHeapUsedBytes: number;
  readonly idleHeapTotalBytes: number;
  /** VmRSS 1.5 s after unloading every resident model at the end. */
  readonly afterUnloadKb: number;
  readonly unloaded: number;
}

const mib = (bytes: number): string => num(bytes / MIB);

export async function run(): Promise<BenchReport> {
  const s = lruSettings();
  const phases: Record<string, number> = {};
  const work = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-bench-lru-'));
  const s3 = await spawnChild('s3rver', new URL('./lib/s3-server.js', import.meta.url), [BUCKET]);
  const endpoint = String(s3.hello['endpoint']);
  const client = s3rverClient(endpoint);
  try {
    process.stderr.write(`  generating and uploading ${s.models} models (~${Math.round(s.modelBytes / 1000)} KB each)\n`);
    const upload = await uploadModels(s, client, work);
    phases['upload'] = upload.seconds;

    const trace = zipfTrace({ models: s.models, requests: s.requests, s: s.zipfS, seed: s.seed });
    const sim = simulateLru(trace, s.capacity);
    const meanPredicted = upload.predictedBytes.reduce((a, b) => a + b, 0) / s.models;
    const byteBudget = Math.round(s.capacity * meanPredicted);

    const serverEnv: Record<string, string> = {
      MME_MODEL_SOURCE: `s3://${BUCKET}/`,
      AWS_ENDPOINT_URL_S3: endpoint,
      AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
      AWS_REGION: 'us-east-1',
      MME_CACHE_DIR: path.join(work, 'cache'),
      // The replay unloads through the v2 repository API between phases.
      MME_MODEL_CONTROL: 'explicit',
      MME_MODEL_URL_ROOTS: work,
      // The settings the launcher (./serve, the images) gives the server process before node starts.
      ...launcherEnv(process.env['NODE_OPTIONS']),
      ...(s.budget === 'count' ? { MME_MAX_LOADED_MODELS: String(s.capacity) } : { MME_MEMORY_BUDGET_BYTES: String(byteBudget) }),
    };
    const serverStarted = performance.now();
    const server = await spawnChild('onnx-mme (memory-lru)', new URL('./lib/onnx-mme-server.js', import.meta.url), [], serverEnv);
    let replay: ReplayResult;
    let memory: MemoryFigures;
    let counts: ServerCounts;
    try {
      phases['serverStart'] = (performance.now() - serverStarted) / 1000;
      const pid = server.pid;
      if (pid === undefined) throw new Error('no pid for the server child');
      const port = childPort(server);
      // Settle: the first requests of a process allocate once (HTTP parser, JIT).
      await fetch(`http://127.0.0.1:${port}/ping`);
      await new Promise((r) => setTimeout(r, 1000));
      const idleMetrics = await scrapeMetrics(port);
      const idleKb = (await procStatusKb(pid))['VmRSS'] ?? 0;
      const hwmReset = await resetPeakRss(pid);
      const sampler = new RssSampler(pid, 20);
      const timeline: { requests: number; rssKb: number }[] = [];
      sampler.start();
      process.stderr.write(`  replaying ${s.requests} requests (Zipf s=${s.zipfS} over ${s.models} models, concurrency ${s.concurrency})\n`);
      try {
        replay = await replayTrace({
          port,
          length: trace.length,
          concurrency: s.concurrency,
          timeoutMs: REQUEST_TIMEOUT_MS,
          request: (i) => ({ path: '/invocations', headers: { 'X-Amzn-SageMaker-Target-Model': targetOf(trace[i]!) }, body: BODY }),
          check: (_i, status, body) => checkAnswer(status, body),
          progressEvery: Math.max(100, Math.ceil(s.requests / 10)),
          onProgress: (done) => {
            process.stderr.write(`  ${done}/${s.requests} requests\n`);
            procStatusKb(pid).then(
              (st) => timeline.push({ requests: done, rssKb: st['VmRSS'] ?? 0 }),
              () => undefined,
            );
          },
        });
      } finally {
        sampler.stop();
      }
      phases['replay'] = replay.seconds;
      const after = await procStatusKb(pid);
      counts = serverCounts(await scrapeMetrics(port));
      // Then unload every resident model (the v2 repository API) and read RSS once the server has given memory back.
      const index = (await (await fetch(`http://127.0.0.1:${port}/v2/repository/index`, { method: 'POST', body: JSON.stringify({ ready: true }) })).json()) as {
        name: string;
      }[];
      for (const m of index)
        await (await fetch(`http://127.0.0.1:${port}/v2/repository/models/${encodeURIComponent(m.name)}/unload`, { method: 'POST' })).arrayBuffer();
      await new Promise((r) => setTimeout(r, 1500));
      const afterUnloadKb = (await procStatusKb(pid))['VmRSS'] ?? 0;
      memory = {
        idleKb,
        endKb: after['VmRSS'] ?? 0,
        sampledPeakKb: Math.max(sampler.peakKb, after['VmRSS'] ?? 0),
        samples: sampler.samples,
        hwmKb: after['VmHWM'] ?? 0,
        hwmReset,
        timeline,
        idleHeapUsedBytes: promSum(idleMetrics, 'nodejs_heap_size_used_bytes'),
        idleHeapTotalBytes: promSum(idleMetrics, 'nodejs_heap_size_total_bytes'),
        afterUnloadKb,
        unloaded: index.length,
      };
    } finally {
      await server.stop();
    }
    return report(s, upload, sim, replay, memory, counts, byteBudget, meanPredicted, phases);
  } finally {
    client.destroy();
    await s3.stop();
    await rm(work, { recursive: true, force: true });
  }
}

function report(
  s: LruSettings,
  upload: Upload,
  sim: LruSimulation,
  replay: ReplayResult,
  memory: MemoryFigures,
  c: ServerCounts,
  byteBudget: number,
  meanPredicted: number,
  phases: Record<string, number>,
): BenchReport {
  const served = c.memoryHits + c.loadWaits;
  const serverRatio = served > 0 ? c.memoryHits / served : Number.NaN;
  const vsSim = serverRatio / sim.hitRatio;
  const loads = c.loadsFromSource + c.loadsFromDisk;
  const ok = replay.latencyMs.length - replay.errors;
  const statusCounts: Record<string, number> = {};
  for (const st of replay.status) statusCounts[String(st)] = (statusCounts[String(st)] ?? 0) + 1;

  const hitTable: Table = {
    headers: ['hit ratio', 'exact LRU (sequential)', 'onnx-mme (/metrics)'],
    rows: [
      ['requests', String(s.requests), `${served} counted, ${ok} answered right`],
      ['memory hits', String(sim.hits), String(c.memoryHits)],
      ['misses', String(sim.coldMisses + sim.capacityMisses), `${c.loadWaits} requests waited for a load`],
      ['  joined a load already under way', '', String(c.loadWaits - c.loadsFromSource - c.loadsFromDisk)],
      ['  first touch (from S3)', String(sim.coldMisses), `${c.loadsFromSource} loads from S3`],
      ['  reload (from disk cache)', String(sim.capacityMisses), `${c.loadsFromDisk} loads from disk`],
      ['evictions from memory', String(sim.evictions), String(c.evictions)],
      ['hit ratio', sim.hitRatio.toFixed(4), serverRatio.toFixed(4)],
      [`onnx-mme / LRU (goal ≥ 0.95): ${vsSim >= 0.95 ? 'met' : 'NOT met'}`, '', `${vsSim.toFixed(3)}x`],
      [
        'loads (misses that did the work)',
        String(sim.coldMisses + sim.capacityMisses),
        `${loads} (${(loads / (sim.coldMisses + sim.capacityMisses)).toFixed(3)}x the LRU's)`,
      ],
      ['hit ratio counting joiners of a shared load as hits', '', served > 0 ? ((served - loads) / served).toFixed(4) : 'n/a'],
      [`errors (goal 0): ${replay.errors === 0 ? 'met' : 'NOT met'}`, '', String(replay.errors)],
    ],
  };

  const rows = [
    latencyRow('all requests', replay, () => true),
    latencyRow('hits (LRU verdict)', replay, (i) => sim.verdicts[i] === Verdict.Hit),
    latencyRow('misses (LRU verdict)', replay, (i) => sim.verdicts[i] !== Verdict.Hit),
    latencyRow('  first touch: S3 download', replay, (i) => sim.verdicts[i] === Verdict.ColdMiss),
    latencyRow('  reload from disk cache', replay, (i) => sim.verdicts[i] === Verdict.CapacityMiss),
  ];
  const latencyTable: Table = {
    headers: ['latency, ms', 'requests', 'p50', 'p99', 'mean'],
    rows: [
      ...rows.map((r) => [r.label, String(r.count), num(r.p50), num(r.p99), num(r.mean)]),
      ['server: mean wait of requests that waited for a load', String(c.loadWaits), '', '', num(c.loadWaitMeanS * 1000)],
      ['throughput (req/s, whole replay)', '', '', '', num(s.requests / replay.seconds)],
    ],
  };

  const counted = c.loadedModels > 0 ? c.loadedModelBytes / c.loadedModels : Number.NaN;
  const capacityBytes = s.capacity * meanPredicted;
  const peakKb = Math.max(memory.sampledPeakKb, memory.hwmReset ? memory.hwmKb : 0);
  const memoryTable: Table = {
    headers: ['server memory', 'MiB', 'note'],
    rows: [
      [
        'idle RSS (started, no model loaded)',
        mib(memory.idleKb * 1024),
        `main-thread V8 heap used / total ${mib(memory.idleHeapUsedBytes)} / ${mib(memory.idleHeapTotalBytes)} MiB`,
      ],
      ['peak RSS, sampled every 20 ms', mib(memory.sampledPeakKb * 1024), `${memory.samples} samples`],
      ['peak RSS, VmHWM', mib(memory.hwmKb * 1024), memory.hwmReset ? 'reset just before the replay' : 'whole process life (clear_refs refused)'],
      ['RSS at the end', mib(memory.endKb * 1024), `${c.loadedModels} models resident`],
      [
        '  main-thread V8 heap used / total at the end',
        `${mib(c.heapUsedBytes)} / ${mib(c.heapTotalBytes)}`,
        `external ${mib(c.externalBytes)} MiB; workers' heaps not in /metrics`,
      ],
      ['peak − idle', mib((peakKb - memory.idleKb) * 1024), ''],
      [`${s.capacity} × predicted per model (files + 1 MiB)`, mib(capacityBytes), `${num(meanPredicted / 1024)} KiB each`],
      ['server-counted bytes at the end', mib(c.loadedModelBytes), `${num(counted / 1024)} KiB per resident model`],
      ['(peak − idle) / (capacity × predicted)', (((peakKb - memory.idleKb) * 1024) / capacityBytes).toFixed(2), ''],
      [
        s.budget === 'count' ? `byte budget equivalent (MME_MEMORY_BUDGET_BYTES)` : 'MME_MEMORY_BUDGET_BYTES (this run)',
        mib(byteBudget),
        `${byteBudget} = ${s.capacity} × mean prediction`,
      ],
      [
        'peak RSS / (idle + byte budget)',
        ((peakKb * 1024) / (memory.idleKb * 1024 + byteBudget)).toFixed(2),
        'the promise: ≤ 1 + 64 MiB / (idle + budget) (docs/memory-and-caching.md)',
      ],
      ['RSS after unloading every model', mib(memory.afterUnloadKb * 1024), `${memory.unloaded} models unloaded, read 1.5 s later`],
      ['after-unload RSS / idle', (memory.afterUnloadKb / memory.idleKb).toFixed(2), 'the promise: ≤ 1.1 (+ 8 MiB)'],
      [
        'memory budget the server ran with',
        mib(c.budgetBytes),
        s.budget === 'count' ? `count cap MME_MAX_LOADED_MODELS=${s.capacity} binds first` : 'byte budget, no count cap',
      ],
    ],
  };

  const errorLines = Object.entries(replay.errorKinds).map(([kind, { count, first }]) => `  ${kind}: ${count} (first: ${first})`);
  const notes = [
    `Hits and misses per request follow the sequential LRU simulation's verdict for the trace position (the server exposes no per-request signal); the server's own totals are in the first table.`,
    `RSS (MiB) after n requests: ${memory.timeline.map((t) => `${t.requests}: ${(t.rssKb / 1024).toFixed(0)}`).join(', ')}`,
    `phases (s): upload ${phases['upload']?.toFixed(1)}, server start ${phases['serverStart']?.toFixed(1)}, replay ${phases['replay']?.toFixed(1)}; ${(upload.archiveBytes / MIB).toFixed(0)} MiB of archives; HTTP statuses ${JSON.stringify(statusCounts)}; load failures ${c.loadFailures}; disk-cache evictions ${c.diskEvictions}`,
    ...(errorLines.length > 0 ? ['errors:', ...errorLines] : []),
  ];

  return {
    name: 'memory-lru',
    title: `Memory LRU: ${s.models} models from S3, room for ${s.capacity}, Zipf s=${s.zipfS}, ${s.requests} requests at concurrency ${s.concurrency}`,
    settings: {
      ...s,
      modelFileBytes: `${bytesOf(s, 0)}..${bytesOf(s, s.models - 1)}`,
      budgetEnv: s.budget === 'count' ? { MME_MAX_LOADED_MODELS: s.capacity } : { MME_MEMORY_BUDGET_BYTES: byteBudget },
      revalidateSeconds: process.env['MME_REVALIDATE_SECONDS'] ?? '60 (server default)',
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      rssSampleMs: 20,
    },
    text: [textTable(hitTable), textTable(latencyTable), textTable(memoryTable), notes.join('\n')].join('\n\n'),
    markdown: [
      markdownTable(hitTable),
      markdownTable(latencyTable),
      markdownTable(memoryTable),
      notes.map((n) => (n.startsWith('  ') ? `- ${n.trim()}` : n)).join('\n\n'),
    ].join('\n\n'),
    data: {
      simulation: {
        hits: sim.hits,
        coldMisses: sim.coldMisses,
        capacityMisses: sim.capacityMisses,
        evictions: sim.evictions,
        distinct: sim.distinct,
        hitRatio: sim.hitRatio,
      },
      server: { ...c, hitRatio: serverRatio, vsSimulation: vsSim },
      latency: rows,
      errors: replay.errors,
      errorKinds: replay.errorKinds,
      statusCounts,
      memory: { ...memory, meanPredictedBytes: meanPredicted, byteBudget },
      upload: { archiveBytes: upload.archiveBytes, seconds: upload.seconds },
      phases,
      replaySeconds: replay.seconds,
    },
  };
}
