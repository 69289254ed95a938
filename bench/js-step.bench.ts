/**
 * @module bench/js-step
 * What running a `backend: "js"` step in a sandboxed process of its own costs
 * (issue 36 item 4): an identity step (y = x) called back to back through the
 * server's own loader (backends/loadStep: the batch written to the step's
 * process as raw bytes, over its socket pair or, from 64 KiB, through its
 * bulk files (js-step-bulk.ts), execute() there, the output read back and checked
 * against the config), against two references measured in the same run:
 * - "thread": the same model.mjs in a worker thread, the batch copied in and
 *   the output's buffer transferred back (how steps ran before issue 36, less
 *   the checks), so the goal ratios (≤ 2× for 1×16, ≤ 1.5× for 4 MiB) are
 *   read from one run on one machine, whatever its load;
 * - "direct": model.mjs imported into this thread, execute() awaited (no hop).
 * For a 1×16 and a 1×1,048,576 FP32 tensor, one call at a time, and 8 at once
 * (BENCH_JS_CONCURRENCY), in wall time and in CPU time per call (this
 * process and the step's). The process's answer must equal the input.
 * Measured in a child process with the launcher's allocator settings
 * (lib/launcher-process.ts), as a server runs steps.
 */
import { closeSync, existsSync, openSync, readdirSync, readFileSync, readSync, writeSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { loadStep } from '../src/backends/step-backend.js';
import { parseModelConfig } from '../src/config/model-config.js';
import { createLogger } from '../src/observability/logger.js';
import type { Tensor } from '../src/protocol/tensor.js';
import { LAUNCHER_ENV } from '../test/support/launcher.js';
import { inLauncherProcess } from './lib/launcher-process.js';
import { markdownTable, num, ratio, textTable, type BenchReport, type Table } from './lib/report.js';
import { processCpuUs } from './lib/proc-cpu.js';
import { benchSettings } from './lib/settings.js';
import { median } from './lib/stats.js';

const SIZES = [16, 1 << 20];
const MODEL = `export function execute(batch) {
  const x = batch.inputs.x;
  return { y: { datatype: 'FP32', shape: x.shape, data: x.data } };
}
`;

function loadavg(): string {
  return os
    .loadavg()
    .slice(0, 2)
    .map((l) => l.toFixed(2))
    .join(', ');
}

/** The allocator settings this process runs with (the launcher's, lib/launcher-process.ts). */
function allocatorSettings(): string {
  return Object.keys(LAUNCHER_ENV)
    .map((k) => `${k}=${process.env[k] ?? '(unset)'}`)
    .join(' ');
}

function progress(message: string): void {
  process.stderr.write(`[js-step] ${message}\n`);
}

type Call = () => Promise<unknown>;

/** The worker-thread reference: model.mjs in a worker, inputs copied in, outputs transferred back (one call at a time per id). */
const THREAD_HOST = `
const { parentPort, workerData } = require('node:worker_threads');
const mod = import(workerData);
parentPort.on('message', async ({ id, batch }) => {
  const out = await (await mod).execute(batch);
  parentPort.postMessage({ id, out }, Object.values(out).map((t) => t.data.buffer));
});
`;

function threadStep(url: string): { call(batch: { inputs: Record<string, Tensor> }): Promise<unknown>; close(): Promise<number> } {
  const worker = new Worker(THREAD_HOST, { eval: true, workerData: url });
  const waiting = new Map<number, (v: unknown) => void>();
  let next = 0;
  worker.on('message', ({ id, out }: { id: number; out: unknown }) => {
    waiting.get(id)?.(out);
    waiting.delete(id);
  });
  return {
    call(batch) {
      const id = next++;
      const inputs: Record<string, Tensor> = {};
      const transfer: ArrayBuffer[] = [];
      for (const [k, t] of Object.entries(batch.inputs)) {
        const data = (t.data as Float32Array).slice();
        transfer.push(data.buffer);
        inputs[k] = { ...t, data };
      }
      return new Promise((resolve) => {
        waiting.set(id, resolve);
        worker.postMessage({ id, batch: { ...batch, inputs } }, transfer);
      });
    },
    close: () => worker.terminate(),
  };
}

/** How many distinct inputs and file regions the copies cycle through: more bytes than a cache holds, as two processes' buffers are. */
const COPY_SETS = 4;

/**
 * What moving a call's bytes between two processes costs at least when the
 * bytes are copied through the kernel (Node maps no memory two processes
 * share): the input written to a file and read into a fresh buffer, then the
 * output the same way, in this one process. Each call takes the next of
 * COPY_SETS inputs and file regions, so, as in the step's round trip, the
 * bytes come from memory rather than from a cache that kept the last call's.
 * The process column cannot go below it; the thread column copies the input
 * once and transfers the rest.
 */
function copiesCall(dir: string, x: Float32Array): { call: Call; close(): void } {
  const fd = openSync(path.join(dir, 'copies.bin'), 'w+');
  const bytes = x.byteLength;
  const inputs = Array.from({ length: COPY_SETS }, () => Buffer.from(new Uint8Array(x.buffer, x.byteOffset, bytes)));
  let turn = 0;
  const once = (from: Uint8Array, region: number): Uint8Array => {
    writeSync(fd, from, 0, bytes, region * bytes);
    const to = Buffer.allocUnsafeSlow(bytes);
    readSync(fd, to, 0, bytes, region * bytes);
    return to;
  };
  return {
    call: async () => {
      const k = turn++ % COPY_SETS;
      return once(once(inputs[k]!, k), (k + COPY_SETS / 2) % COPY_SETS);
    },
    close: () => closeSync(fd),
  };
}

/** CPU time (user + system) in µs: this process's, all its threads (the worker-thread reference included). */
function ownCpuUs(): number {
  const { user, system } = process.cpuUsage();
  return user + system;
}

/** CPU time in µs of this process's child processes that run now (the step's), from /proc. */
function childrenCpuUs(): number {
  // Without Linux's /proc the CPU columns read n/a.
  if (!existsSync(`/proc/${process.pid}/task`)) return Number.NaN;
  let total = 0;
  for (const task of readdirSync(`/proc/${process.pid}/task`)) {
    let children = '';
    try {
      children = readFileSync(`/proc/${process.pid}/task/${task}/children`, 'utf8');
    } catch {
      continue;
    }
    for (const pid of children.trim().split(/\s+/).filter(Boolean)) {
      try {
        total += processCpuUs(Number(pid));
      } catch {
        // gone meanwhile
      }
    }
  }
  return total;
}

/** What a cell costs per call: wall time and CPU time (this process + the step's), in µs. */
interface PerCall {
  readonly wall: number;
  readonly cpu: number;
}

/**
 * Medians per call over `repeats` timed rounds of about `seconds` each,
 * `concurrency` calls in flight: wall time, and CPU time of this process
 * and its children (the step's process), which a loaded machine changes
 * far less than the wall time.
 */
async function perCall(call: Call, concurrency: number, seconds: number, repeats: number): Promise<PerCall> {
  const rounds: number[] = [];
  const cpus: number[] = [];
  for (let r = 0; r <= repeats; r++) {
    let calls = 0;
    const cpu0 = ownCpuUs() + childrenCpuUs();
    const started = performance.now();
    const until = started + seconds * 1000;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (performance.now() < until) {
          await call();
          calls++;
        }
      }),
    );
    // Round 0 warms the JIT and is dropped.
    if (r > 0) {
      rounds.push(((performance.now() - started) * 1000) / calls);
      cpus.push((ownCpuUs() + childrenCpuUs() - cpu0) / calls);
    }
  }
  return { wall: median(rounds), cpu: median(cpus) };
}

export function run(): Promise<BenchReport> {
  return inLauncherProcess(new URL(import.meta.url));
}

/** The measurement itself (lib/launcher-process.ts runs it in a child with the launcher's settings). */
export async function measure(): Promise<BenchReport> {
  const settings = benchSettings();
  const concurrency = (process.env['BENCH_JS_CONCURRENCY'] ?? '1,8').split(',').map(Number);
  const seconds = Math.max(0.5, settings.durationS / 3);
  const work = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-bench-js-'));
  const rows: string[][] = [];
  const data: Record<string, { direct: number; thread: number; process: number; threadCpu: number; processCpu: number; copies: number }> = {};
  try {
    for (const size of SIZES) {
      const dir = path.join(work, `identity${size}`);
      await mkdir(path.join(dir, '1'), { recursive: true });
      await writeFile(path.join(dir, '1', 'model.mjs'), MODEL);
      const configText = `backend: "js"\nmax_batch_size: 8\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ ${size} ] } ]\noutput [ { name: "y" data_type: TYPE_FP32 dims: [ ${size} ] } ]\n`;
      const config = parseModelConfig(configText, { sourceName: 'identity/config.pbtxt', directoryName: `identity${size}` });
      const step = await loadStep({
        config,
        modelDir: dir,
        versionDir: path.join(dir, '1'),
        version: 1,
        label: 'identity',
        logger: createLogger('silent'),
        allowJs: true,
      });
      const direct = (await import(pathToFileURL(path.join(dir, '1', 'model.mjs')).href)) as { execute(batch: unknown): unknown };
      const x = Float32Array.from({ length: size }, (_, i) => i % 251);
      const inputs = new Map<string, Tensor>([['x', { datatype: 'FP32', shape: [1, size], data: x }]]);
      const batch = { inputs: Object.fromEntries(inputs), outputs: ['y'], rows: 1 };
      const thread = threadStep(pathToFileURL(path.join(dir, '1', 'model.mjs')).href);
      const copies = copiesCall(dir, x);
      try {
        const viaProcess = (await step.execute(inputs, ['y'])).get('y')!.data as Float32Array;
        if (viaProcess.length !== size || viaProcess.some((v, i) => v !== x[i])) throw new Error("the step's process answered something else than the input");
        for (const conc of concurrency) {
          const d = (await perCall(async () => direct.execute(batch), conc, seconds, settings.repeats)).wall;
          const c = (await perCall(copies.call, 1, seconds, settings.repeats)).wall;
          // Interleaved: thread, process, thread, process; the medians of each.
          const t: PerCall[] = [];
          const p: PerCall[] = [];
          for (let k = 0; k < 2; k++) {
            t.push(await perCall(() => thread.call(batch), conc, seconds, settings.repeats));
            p.push(await perCall(() => step.execute(inputs, ['y']), conc, seconds, settings.repeats));
          }
          const tm = median(t.map((x) => x.wall));
          const pm = median(p.map((x) => x.wall));
          const tc = median(t.map((x) => x.cpu));
          const pc = median(p.map((x) => x.cpu));
          data[`${size}/${conc}`] = { direct: d, thread: tm, process: pm, threadCpu: tc, processCpu: pc, copies: c };
          progress(
            `1×${size} c=${conc}: direct ${num(d)} µs, thread ${num(tm)} µs, process ${num(pm)} µs (${ratio(pm, tm)} of the thread); ` +
              `CPU thread ${num(tc)} µs, process ${num(pc)} µs (${ratio(pc, tc)}); copies alone ${num(c)} µs (${ratio(c, tm)}); load ${loadavg()}`,
          );
          rows.push([
            `1×${size.toLocaleString('en-US')} FP32`,
            String(conc),
            num(d),
            num(tm),
            num(pm),
            ratio(pm, tm),
            `${num(tc)} / ${num(pc)} = ${ratio(pc, tc)}`,
            `${num(c)} = ${ratio(c, tm)}`,
            size === 16 ? '≤ 2×' : '≤ 1.5×',
            loadavg(),
          ]);
        }
      } finally {
        copies.close();
        await thread.close();
        await step.release();
      }
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  const table: Table = {
    headers: [
      'tensor',
      'in flight',
      'direct µs/call',
      'thread µs/call',
      'process µs/call',
      'process / thread',
      'CPU µs/call: thread / process',
      'copies alone µs/call ÷ thread',
      'goal',
      'loadavg (1, 5 min)',
    ],
    rows,
  };
  const note =
    `Identity js step; "direct" = model.mjs imported into this thread, execute() awaited (no hop, no checks); ` +
    `"thread" = model.mjs in a worker thread, input copied in, output transferred back (steps before issue 36, less the checks); ` +
    `"process" = the server's loadStep: the step's sandboxed process, tensors as raw bytes over a socket pair (64 KiB and more through its two bulk files), output checked against the config. ` +
    `Medians of ${settings.repeats} round(s) of ${num(seconds)} s per cell (thread and process: two interleaved runs each). ` +
    `CPU = user + system time of this process (the thread's included) and of the step's process (from /proc, 10 ms ticks) per call: what a loaded machine changes least. ` +
    `"copies alone" = the input and then the output each written to a file and read into a fresh buffer, one call at a time, in this process, cycling through ${COPY_SETS} inputs and file regions (as a round trip's bytes come from memory, not from a cache): the least a process that copies through the kernel pays (Node maps no memory shared between processes), against the thread. ` +
    `The goal column is issue 36's (process / thread). ` +
    `Measured in a process started with the launcher's settings (${allocatorSettings()}), as the server runs steps: every buffer of 64 KiB or more is a fresh mapping, so both the thread and the process pay a page fault per 4 KiB of a 4 MiB tensor.`;
  return {
    name: 'js-step',
    title: 'JS step isolation: a sandboxed process per step vs a worker thread vs calling execute() in process',
    settings: { ...settings, concurrency, seconds, allocator: allocatorSettings() },
    text: `${textTable(table)}\n${note}`,
    markdown: `${markdownTable(table)}\n\n${note}`,
    data,
  };
}
