/**
 * @module bench/instance-overlap
 * The experiment behind `instance_group { count: N }` (docs/batching-and-performance.md, "Dynamic
 * batching and concurrency"): does onnxruntime-node 1.30 overlap concurrent
 * `run()` calls on one session, and what actually runs N batches at once?
 *
 * Usage: `npm run build && node dist/bench/instance-overlap.js`
 * (INSTANCE_OVERLAP_RUNS: runs per measurement, default 200; INSTANCE_OVERLAP_BATCH: rows per run,
 * default 256, so that one run takes a few ms and thread hand-offs do not dominate;
 * INSTANCE_OVERLAP_REPEATS: measurements per scenario, taken in rotation, median reported, default 5).
 *
 * Scenarios, all on the same MLP (256→1024→1024→16), each measured as the wall
 * time of RUNS runs:
 * - main thread, one session, runs one after another: the unit of work;
 * - main thread, one session, 4 `run()` calls kept in flight, while a 1 ms
 *   interval counts how often the event loop got a turn;
 * - the server's RuntimePool (2 workers): one session, 2 callers (one instance);
 * - the server's RuntimePool: two sessions on two workers, 2 callers (two instances);
 * - the server's RuntimePool: one session with 2 intra-op threads, 2 callers.
 * Speed-up is against the first scenario; 1.0 means no overlap. "CPU time /
 * wall time" is the process's CPU time (all threads) over the wall time: about
 * 1 when runs take turns, about 2 when two really run at once, whatever the
 * throughput (two vCPUs that share one core's vector units overlap without
 * getting faster).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import * as ort from 'onnxruntime-node';
import { mlp, writeModelDir } from '../examples/models/zoo.js';
import { RuntimePool, type PooledSession } from '../src/runtime/runtime-pool.js';
import type { CreateSessionOptions } from '../src/runtime/worker-protocol.js';
import { median } from './lib/stats.js';

const RUNS = Number(process.env['INSTANCE_OVERLAP_RUNS'] ?? 200);
const ROWS = Number(process.env['INSTANCE_OVERLAP_BATCH'] ?? 256);
const REPEATS = Number(process.env['INSTANCE_OVERLAP_REPEATS'] ?? 5);
const FEATURES = 256;

interface Scenario {
  readonly name: string;
  /** One measurement: seconds for RUNS runs, plus a remark. */
  measure(): Promise<{ seconds: number; note?: string }>;
  close(): Promise<void>;
}

function input(): Float32Array {
  return Float32Array.from({ length: ROWS * FEATURES }, (_, i) => Math.sin(i) * 0.5);
}

/** `callers` async loops sharing RUNS calls of `one(caller)`; wall seconds. */
async function timed(callers: number, one: (caller: number) => Promise<unknown>): Promise<number> {
  let left = RUNS;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: callers }, async (_, caller) => {
      while (left > 0) {
        left--;
        await one(caller);
      }
    }),
  );
  return (performance.now() - t0) / 1000;
}

async function mainThread(file: string): Promise<Scenario[]> {
  const session = await ort.InferenceSession.create(file, { intraOpNumThreads: 1 });
  const feeds = { INPUT0: new ort.Tensor('float32', input(), [ROWS, FEATURES]) };
  await session.run(feeds); // warm-up
  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await session.release();
  };
  return [
    { name: 'main thread, 1 session, sequential', measure: async () => ({ seconds: await timed(1, () => session.run(feeds)) }), close },
    {
      name: 'main thread, 1 session, 4 run() in flight',
      measure: async () => {
        let ticks = 0;
        const timer = setInterval(() => ticks++, 1);
        const seconds = await timed(4, () => session.run(feeds));
        clearInterval(timer);
        return { seconds, note: `1 ms timer fired ${ticks} times in ${Math.round(seconds * 1000)} ms` };
      },
      close,
    },
  ];
}

async function pooled(file: string, name: string, sessions: number, intraOpThreads: number): Promise<Scenario> {
  const pool = new RuntimePool(2);
  const options: CreateSessionOptions = { providers: ['cpu'], deviceId: 0, graphOptimizationLevel: 'all', intraOpThreads, interOpThreads: 1 };
  const created: PooledSession[] = [];
  // RuntimePool puts each new session on the worker holding the fewest, so two sessions land on two workers.
  for (let i = 0; i < sessions; i++) created.push(await pool.createSession(file, options));
  const feeds = new Map([['INPUT0', { datatype: 'FP32' as const, shape: [ROWS, FEATURES], data: input() }]]);
  for (const s of created) await s.run(feeds, ['OUTPUT0']); // warm-up
  return {
    name,
    // Caller i always uses session i mod n: with two sessions, each caller has its own, as each instance has one batch.
    measure: async () => ({ seconds: await timed(2, (caller) => created[caller % created.length]!.run(feeds, ['OUTPUT0'])) }),
    close: async () => {
      await Promise.allSettled(created.map((s) => s.release()));
      await pool.close();
    },
  };
}

async function main(): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-overlap-'));
  const scenarios: Scenario[] = [];
  try {
    await writeModelDir(dir, 'mlp', mlp());
    const file = path.join(dir, 'mlp', '1', 'model.onnx');
    scenarios.push(
      ...(await mainThread(file)),
      await pooled(file, 'pool, 1 session, 2 callers', 1, 1),
      await pooled(file, 'pool, 2 sessions on 2 workers, 2 callers', 2, 1),
      await pooled(file, 'pool, 1 session × 2 intra-op threads, 2 callers', 1, 2),
    );
    const seconds = scenarios.map(() => [] as number[]);
    const busy = scenarios.map(() => [] as number[]);
    const notes = scenarios.map(() => '');
    for (let r = 0; r < REPEATS; r++) {
      // Rotating order, so machine noise lands on every scenario alike.
      for (let k = 0; k < scenarios.length; k++) {
        const i = (k + r) % scenarios.length;
        const cpu0 = process.cpuUsage();
        const m = await scenarios[i]!.measure();
        const cpu = process.cpuUsage(cpu0);
        seconds[i]!.push(m.seconds);
        // CPU time of every thread of the process over wall time: about 1 when runs take turns, about 2 when two overlap.
        busy[i]!.push((cpu.user + cpu.system) / 1e6 / m.seconds);
        if (m.note) notes[i] = m.note;
      }
    }
    const perSec = seconds.map((s) => RUNS / median(s));
    const base = perSec[0]!;
    process.stdout.write(
      `instance overlap: ${RUNS} runs of MLP 256→1024→1024→16 at batch ${ROWS}, median of ${REPEATS}; node ${process.version}, ` +
        `onnxruntime-node ${ort.env.versions.common}, ${os.availableParallelism()} CPUs (${os.cpus()[0]?.model.trim() ?? '?'})\n\n`,
    );
    process.stdout.write('| scenario | runs/s | speed-up | CPU time / wall time | note |\n|---|---|---|---|---|\n');
    scenarios.forEach((s, i) => {
      process.stdout.write(`| ${s.name} | ${perSec[i]!.toFixed(0)} | ${(perSec[i]! / base).toFixed(2)}× | ${median(busy[i]!).toFixed(2)} | ${notes[i]} |\n`);
    });
  } finally {
    for (const s of scenarios) await s.close();
    await rm(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`instance-overlap failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
