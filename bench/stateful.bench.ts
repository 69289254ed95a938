/**
 * @module bench/stateful
 * Interleaved streams through a stateful model, three ways in one run:
 *
 * - `oldest`: `sequence_batching { oldest { max_candidate_sequences: 64 } }`
 *   with implicit state: the server keeps each stream's state and batches
 *   the oldest ready requests across streams.
 * - `direct`: `sequence_batching { direct { } }`, the same state: each stream
 *   owns one of max_batch_size slots; a batch is the slots with a request ready.
 * - `client-state`: the same ONNX file on a stateless config (STATE an input,
 *   STATE_OUT an output, dynamic batching): the client sends its state with
 *   every chunk and keeps the one it gets back (what users do without a
 *   sequence batcher).
 *
 * The model is a small recurrent cell on 512-sample chunks (h' = tanh(x·W +
 * h·U), y = h'·v; 512→64, state 64 floats), max_batch_size 64. STREAMS
 * concurrent streams each send their next chunk when the previous answer
 * arrives (keep-alive node:http, every answer parsed), for BENCH_DURATION_S,
 * BENCH_REPEATS times in rotating order. Before measuring, one stream's
 * answers through oldest and direct are checked against client-state.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { buildModel, node, tensor, valueInfo } from '../examples/models/onnx-builder.js';
import { seededRandom, writeModelDir } from '../examples/models/zoo.js';
import { startOnnxMme } from './lib/baselines.js';
import { invocationsClient, type V2Answer } from './lib/invocations-client.js';
import { markdownTable, num, ratio, textTable, type BenchReport, type Table } from './lib/report.js';
import { benchSettings } from './lib/settings.js';
import { latencySummary, median, SampleBuffer } from './lib/stats.js';

const CHUNK = 512;
const HIDDEN = 64;
const MBS = 64;
const STREAMS = Number(process.env['BENCH_STREAMS'] ?? 64);

type Way = 'oldest' | 'direct' | 'client-state';
const WAYS: readonly Way[] = ['oldest', 'direct', 'client-state'];

interface Sample {
  readonly perSec: number;
  readonly p50: number;
  readonly p99: number;
  readonly errors: number;
}

function progress(message: string): void {
  process.stderr.write(`[stateful] ${message}\n`);
}

function recurrentCell(): Uint8Array {
  const rand = seededRandom(77);
  const w = (n: number, scale: number): Float32Array => Float32Array.from({ length: n }, () => (rand() - 0.5) * scale);
  return buildModel({
    inputs: [valueInfo('INPUT', 'FP32', ['batch', CHUNK]), valueInfo('STATE', 'FP32', ['batch', HIDDEN])],
    outputs: [valueInfo('OUTPUT', 'FP32', ['batch', 1]), valueInfo('STATE_OUT', 'FP32', ['batch', HIDDEN])],
    initializers: [
      tensor('W', 'FP32', [CHUNK, HIDDEN], w(CHUNK * HIDDEN, 0.2)),
      tensor('U', 'FP32', [HIDDEN, HIDDEN], w(HIDDEN * HIDDEN, 0.4)),
      tensor('V', 'FP32', [HIDDEN, 1], w(HIDDEN, 1)),
    ],
    nodes: [
      node('MatMul', ['INPUT', 'W'], ['XW']),
      node('MatMul', ['STATE', 'U'], ['HU']),
      node('Add', ['XW', 'HU'], ['PRE']),
      node('Tanh', ['PRE'], ['STATE_OUT']),
      node('MatMul', ['STATE_OUT', 'V'], ['OUTPUT']),
    ],
    docString: 'recurrent cell: h = tanh(x W + h U), y = h V',
  });
}

function statefulConfig(strategy: string): string {
  return [
    'platform: "onnxruntime_onnx"',
    `max_batch_size: ${MBS}`,
    `input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ ${CHUNK} ] } ]`,
    'output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]',
    'sequence_batching {',
    `  ${strategy}`,
    '  max_sequence_idle_microseconds: 60000000',
    `  state [ { input_name: "STATE" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ ${HIDDEN} ]`,
    `    initial_state: { name: "zeros" data_type: TYPE_FP32 dims: [ ${HIDDEN} ] zero_data: true } } ]`,
    '}',
    '',
  ].join('\n');
}

const STATELESS_CONFIG = [
  'platform: "onnxruntime_onnx"',
  `max_batch_size: ${MBS}`,
  `input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ ${CHUNK} ] }, { name: "STATE" data_type: TYPE_FP32 dims: [ ${HIDDEN} ] } ]`,
  `output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1 ] }, { name: "STATE_OUT" data_type: TYPE_FP32 dims: [ ${HIDDEN} ] } ]`,
  '',
].join('\n');

/** The chunks of stream s as JSON text (made once: the client's cost stays out of the comparison as far as it can). */
function chunkTexts(s: number, count: number): string[] {
  const rand = seededRandom(1000 + s);
  return Array.from({ length: count }, () => JSON.stringify(Array.from({ length: CHUNK }, () => Math.round((rand() - 0.5) * 2000) / 1000)));
}

/** One stream: its sequence id, its chunks, and where it is. */
class Stream {
  private k = 0;
  private started = false;
  private state: number[] = new Array<number>(HIDDEN).fill(0);

  constructor(
    private readonly id: number,
    private readonly chunks: readonly string[],
  ) {}

  /** Send the next chunk the way `way` does (the last one with sequence_end); returns OUTPUT. */
  async next(way: Way, post: (target: string, body: string) => Promise<V2Answer>, last = false): Promise<number> {
    const x = this.chunks[this.k++ % this.chunks.length]!;
    if (way === 'client-state') {
      const body = `{"inputs":[{"name":"INPUT","datatype":"FP32","shape":[1,${CHUNK}],"data":${x}},{"name":"STATE","datatype":"FP32","shape":[1,${HIDDEN}],"data":${JSON.stringify(this.state)}}]}`;
      const a = await post('cell_stateless', body);
      this.state = a.outputs.find((o) => o.name === 'STATE_OUT')!.data;
      return a.outputs.find((o) => o.name === 'OUTPUT')!.data[0]!;
    }
    const params = `{"sequence_id":${this.id}${this.started ? '' : ',"sequence_start":true'}${last ? ',"sequence_end":true' : ''}}`;
    this.started = true;
    const a = await post(`cell_${way}`, `{"inputs":[{"name":"INPUT","datatype":"FP32","shape":[1,${CHUNK}],"data":${x}}],"parameters":${params}}`);
    return a.outputs[0]!.data[0]!;
  }
}

async function drive(streams: readonly Stream[], way: Way, durationS: number, post: (target: string, body: string) => Promise<V2Answer>): Promise<Sample> {
  const samples = new SampleBuffer();
  let errors = 0;
  let done = 0;
  const start = performance.now();
  const end = start + durationS * 1000;
  await Promise.all(
    streams.map(async (s) => {
      while (performance.now() < end) {
        const t0 = performance.now();
        try {
          await s.next(way, post);
          samples.push(performance.now() - t0);
          done++;
        } catch {
          errors++;
        }
      }
      // End the sequence (not counted), so its slot is free for the next run's streams.
      if (way !== 'client-state') await s.next(way, post, true).catch(() => undefined);
    }),
  );
  return { perSec: done / ((performance.now() - start) / 1000), ...latencySummary(samples.values()), errors };
}

export async function run(): Promise<BenchReport> {
  const settings = benchSettings();
  const work = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-bench-stateful-'));
  const source = path.join(work, 'models');
  const onnx = recurrentCell();
  const cell = new Map<Way, Sample[]>(WAYS.map((w) => [w, []]));
  let serverInfo: Readonly<Record<string, unknown>> = {};
  let maxDiff = 0;
  let firstStream = 0;
  try {
    await writeModelDir(source, 'cell_oldest', { onnx, config: statefulConfig(`oldest { max_candidate_sequences: ${MBS} }`) });
    await writeModelDir(source, 'cell_direct', { onnx, config: statefulConfig('direct { }') });
    await writeModelDir(source, 'cell_stateless', { onnx, config: STATELESS_CONFIG });
    const mme = await startOnnxMme(source, path.join(work, 'cache'));
    serverInfo = mme.info;
    const c = invocationsClient(mme.port, STREAMS);
    try {
      // The three ways compute the same stream (this also loads every model).
      const texts = chunkTexts(0, 8);
      const check = WAYS.map((w, i) => ({ w, s: new Stream(900_000 + i, texts) }));
      const outs = new Map<Way, number[]>();
      for (const { w, s } of check) {
        const o: number[] = [];
        for (let k = 0; k < texts.length; k++) o.push(await s.next(w, c.post));
        outs.set(w, o);
      }
      const ref = outs.get('client-state')!;
      maxDiff = Math.max(...WAYS.flatMap((w) => outs.get(w)!.map((v, k) => Math.abs(v - ref[k]!))));
      if (!(maxDiff <= 1e-4)) throw new Error(`the three ways disagree (max |diff| ${maxDiff})`);

      const streamTexts = Array.from({ length: STREAMS }, (_, s) => chunkTexts(s, 16));
      for (let r = 0; r < settings.repeats; r++) {
        for (let k = 0; k < WAYS.length; k++) {
          const way = WAYS[(k + r) % WAYS.length]!;
          // Fresh sequences for every run; ids never repeat within the server's life.
          const fresh = (): Stream[] => streamTexts.map((t, s) => new Stream(1 + (firstStream += 1) * 1000 + s, t));
          if (r === 0 && settings.warmupS > 0) await drive(fresh(), way, settings.warmupS, c.post);
          progress(`${way} run ${r + 1}/${settings.repeats}`);
          cell.get(way)!.push(await drive(fresh(), way, settings.durationS, c.post));
        }
      }
    } finally {
      c.close();
      await mme.stop();
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  const med = (way: Way, key: 'perSec' | 'p50' | 'p99'): number => median(cell.get(way)!.map((s) => s[key]));
  const errors = [...cell.values()].flat().reduce((a, s) => a + s.errors, 0);
  const table: Table = {
    headers: ['way', 'chunks/s', 'p50 ms', 'p99 ms', 'vs client-state (chunks/s)', 'errors'],
    rows: WAYS.map((w) => [
      w,
      num(med(w, 'perSec')),
      num(med(w, 'p50')),
      num(med(w, 'p99')),
      ratio(med(w, 'perSec'), med('client-state', 'perSec')),
      String(cell.get(w)!.reduce((a, s) => a + s.errors, 0)),
    ]),
  };
  const note = `${STREAMS} concurrent streams of ${CHUNK}-sample chunks, recurrent cell ${CHUNK}→${HIDDEN} (state ${HIDDEN} floats), max_batch_size ${MBS}; medians of ${settings.repeats} runs of ${settings.durationS} s; ${errors} errors; the three ways agree within ${maxDiff.toExponential(1)}`;
  return {
    name: 'stateful',
    title: 'stateful: interleaved streams, sequence batcher (oldest, direct) vs the client carrying the state',
    settings: { durationS: settings.durationS, warmupS: settings.warmupS, repeats: settings.repeats, streams: STREAMS, server: serverInfo },
    text: `${textTable(table)}\n${note}`,
    markdown: `${markdownTable(table)}\n\n${note}`,
    data: { results: Object.fromEntries(cell), maxDiff },
  };
}
