/**
 * @module bench/js-step
 * What running a `backend: "js"` step in a worker thread of its own costs
 * (issue 19 item 4): an identity step (y = x) called back to back through the
 * server's own loader (backends/loadStep: the batch copied into the worker,
 * execute() there, the output moved back and checked against the config),
 * against the limit, the same model.mjs imported into this thread and its
 * execute() awaited directly (no hop, no checks: what the step cost before it
 * was isolated, minus the output checks). For a 1×16 and a 1×1,048,576 FP32
 * tensor, one call at a time, and 8 at once (BENCH_JS_CONCURRENCY).
 *
 * No goal in the issue beyond "state the cost": the figures are reported,
 * and the worker's answer must equal the direct one.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadStep } from '../src/backends/step-backend.js';
import { parseModelConfig } from '../src/config/model-config.js';
import { createLogger } from '../src/observability/logger.js';
import type { Tensor } from '../src/protocol/tensor.js';
import { markdownTable, num, ratio, textTable, type BenchReport, type Table } from './lib/report.js';
import { benchSettings } from './lib/settings.js';
import { median } from './lib/stats.js';

const SIZES = [16, 1 << 20];
const MODEL = `export function execute(batch) {
  const x = batch.inputs.x;
  return { y: { datatype: 'FP32', shape: x.shape, data: x.data } };
}
`;

function progress(message: string): void {
  process.stderr.write(`[js-step] ${message}\n`);
}

type Call = () => Promise<unknown>;

/** Median µs per call over `repeats` timed rounds of about `seconds` each, `concurrency` calls in flight. */
async function perCallUs(call: Call, concurrency: number, seconds: number, repeats: number): Promise<number> {
  const rounds: number[] = [];
  for (let r = 0; r <= repeats; r++) {
    let calls = 0;
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
    if (r > 0) rounds.push(((performance.now() - started) * 1000) / calls);
  }
  return median(rounds);
}

export async function run(): Promise<BenchReport> {
  const settings = benchSettings();
  const concurrency = (process.env['BENCH_JS_CONCURRENCY'] ?? '1,8').split(',').map(Number);
  const seconds = Math.max(0.5, settings.durationS / 3);
  const work = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-bench-js-'));
  const rows: string[][] = [];
  const data: Record<string, { direct: number; worker: number }> = {};
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
      try {
        const viaWorker = (await step.execute(inputs, ['y'])).get('y')!.data as Float32Array;
        if (viaWorker.length !== size || viaWorker.some((v, i) => v !== x[i])) throw new Error('the worker answered something else than the input');
        for (const conc of concurrency) {
          const d = await perCallUs(async () => direct.execute(batch), conc, seconds, settings.repeats);
          const w = await perCallUs(() => step.execute(inputs, ['y']), conc, seconds, settings.repeats);
          data[`${size}/${conc}`] = { direct: d, worker: w };
          progress(`1×${size} c=${conc}: direct ${num(d)} µs, worker ${num(w)} µs`);
          rows.push([`1×${size.toLocaleString('en-US')} FP32`, String(conc), num(d), num(w), num(w - d), ratio(w, d)]);
        }
      } finally {
        await step.release();
      }
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  const table: Table = {
    headers: ['tensor', 'in flight', 'direct µs/call', 'worker µs/call', 'added µs', 'worker / direct'],
    rows,
  };
  const note =
    `Identity js step; "direct" = model.mjs imported into this thread, execute() awaited (no hop, no checks); ` +
    `"worker" = the server's loadStep: copy into the step's worker, execute() there, output buffer transferred back, checked against the config. ` +
    `Medians of ${settings.repeats} round(s) of ${num(seconds)} s per cell.`;
  return {
    name: 'js-step',
    title: 'JS step isolation: a worker thread per step vs calling execute() in process',
    settings: { ...settings, concurrency, seconds },
    text: `${textTable(table)}\n${note}`,
    markdown: `${markdownTable(table)}\n\n${note}`,
    data,
  };
}
