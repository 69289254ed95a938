/**
 * @module bench/grpc
 * The gRPC listener against the HTTP routes, on the same server process and
 * the same models, in one run: KServe v2 gRPC ModelInfer (raw_input_contents,
 * as tritonclient.grpc sends it; one channel, N calls in flight) vs KServe v2
 * HTTP with binary tensors (Inference-Header-Content-Length, binary outputs)
 * vs KServe v2 HTTP JSON, for
 *  - mlp 256→1024→1024→16 (batch 1): per-request overhead next to ~1.3 M multiply-adds;
 *  - a 1×3×224×224 FP32 image through an identity model: the wire format is everything;
 * at 1 and 64 concurrent streams (BENCH_GRPC_CONCURRENCY). HTTP load comes
 * from autocannon and gRPC load from @grpc/grpc-js, both in this process;
 * the server runs in its own child process. Every format's answer is first
 * checked to be the same numbers.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { credentials, loadPackageDefinition, Metadata, type Client, type ServiceError } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { identity, mlp, writeModelDir } from '../examples/models/zoo.js';
import { LOADER_OPTIONS, protoDir } from '../src/grpc/protos.js';
import { loadSample } from './lib/autocannon-run.js';
import { startOnnxMme } from './lib/baselines.js';
import { inputData } from './lib/payload.js';
import { markdownTable, num, ratio, textTable, type BenchReport, type Table } from './lib/report.js';
import { benchSettings } from './lib/settings.js';
import { latencySummary, median, SampleBuffer, type RunSample as Sample } from './lib/stats.js';

const FORMATS = ['grpc', 'http-binary', 'http-json'] as const;
type Format = (typeof FORMATS)[number];

interface Case {
  readonly model: string;
  readonly label: string;
  readonly shape: readonly number[];
}

const CASES: readonly Case[] = [
  { model: 'mlp', label: 'mlp 256→1024→1024→16, batch 1', shape: [1, 256] },
  { model: 'image', label: 'image 1×3×224×224 FP32 (identity)', shape: [1, 3, 224, 224] },
];

function progress(message: string): void {
  process.stderr.write(`[grpc] ${message}\n`);
}

interface Bodies {
  readonly json: string;
  readonly binary: Buffer;
  readonly headerLength: number;
  readonly grpc: Record<string, unknown>;
  readonly values: Float32Array;
}

function bodiesFor(c: Case): Bodies {
  const count = c.shape.reduce((a, b) => a * b, 1);
  const values = Float32Array.from(inputData(count));
  const json = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: c.shape, data: Array.from(values) }] });
  const header = Buffer.from(
    JSON.stringify({
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: c.shape, parameters: { binary_data_size: count * 4 } }],
      parameters: { binary_data_output: true },
    }),
  );
  const raw = Buffer.from(values.buffer, values.byteOffset, values.byteLength);
  const grpc = { model_name: c.model, model_version: '', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: c.shape }], raw_input_contents: [raw] };
  return { json, binary: Buffer.concat([header, raw]), headerLength: header.length, grpc, values };
}

type Infer = (request: unknown, metadata: Metadata, callback: (err: ServiceError | null, res: any) => void) => void;

/** `streams` closed loops of ModelInfer on one channel for `durationS`. */
async function grpcLoad(client: Client & { ModelInfer: Infer }, request: unknown, streams: number, durationS: number): Promise<Sample> {
  const latencies = new SampleBuffer();
  let ok = 0;
  let errors = 0;
  const started = performance.now();
  const end = started + durationS * 1000;
  const loop = async (): Promise<void> => {
    while (performance.now() < end) {
      const t0 = performance.now();
      const err = await new Promise<ServiceError | null>((resolve) => client.ModelInfer(request, new Metadata(), (e) => resolve(e)));
      if (err) errors++;
      else {
        ok++;
        latencies.push(performance.now() - t0);
      }
    }
  };
  await Promise.all(Array.from({ length: streams }, loop));
  const seconds = (performance.now() - started) / 1000;
  const { p50, p99 } = latencySummary(latencies.values());
  return { perSec: ok / seconds, p50, p99, errors, non2xx: 0 };
}

function sameNumbers(a: Float32Array, b: Float32Array): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

export async function run(): Promise<BenchReport> {
  const settings = benchSettings();
  const concurrency = (process.env['BENCH_GRPC_CONCURRENCY'] ?? '1,64').split(',').map((s) => Number(s.trim()));
  const work = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-bench-grpc-'));
  const source = path.join(work, 'models');
  const model = mlp();
  await writeModelDir(source, 'mlp', model);
  await writeModelDir(source, 'image', identity('FP32', [3, 224, 224]));
  const mme = await startOnnxMme(source, path.join(work, 'cache'), { MME_GRPC_PORT: '0' });
  const grpcPort = Number(mme.info['grpcPort']);
  const dir = protoDir();
  const pkgs = loadPackageDefinition(loadSync(path.join(dir, 'grpc_service.proto'), { ...LOADER_OPTIONS, includeDirs: [dir] })) as any;
  const client = new pkgs.inference.GRPCInferenceService(`127.0.0.1:${grpcPort}`, credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1,
    'grpc.max_send_message_length': -1,
  }) as Client & { ModelInfer: Infer };
  const results: Record<string, Record<Format, Sample[]>> = {};
  const checks: string[] = [];
  try {
    for (const c of CASES) {
      const bodies = bodiesFor(c);
      const url = `http://127.0.0.1:${mme.port}/v2/models/${c.model}/infer`;
      const jsonHeaders = { 'content-type': 'application/json' };
      const binaryHeaders = { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(bodies.headerLength) };
      // Same numbers back from every format, or the comparison means nothing.
      const viaJson = Float32Array.from(
        ((await (await fetch(url, { method: 'POST', headers: jsonHeaders, body: bodies.json })).json()) as { outputs: { data: number[] }[] }).outputs[0]!.data,
      );
      const b = await fetch(url, { method: 'POST', headers: binaryHeaders, body: bodies.binary });
      const bBody = Buffer.from(await b.arrayBuffer());
      const bRaw = bBody.subarray(Number(b.headers.get('inference-header-content-length')));
      const viaBinary = new Float32Array(new Uint8Array(bRaw).buffer);
      const g = await new Promise<any>((resolve, reject) => client.ModelInfer(bodies.grpc, new Metadata(), (e, r) => (e ? reject(e) : resolve(r))));
      const gRaw = (g.raw_output_contents as Buffer[])[0]!;
      const viaGrpc = new Float32Array(new Uint8Array(gRaw).buffer);
      if (!sameNumbers(viaJson, viaBinary) || !sameNumbers(viaJson, viaGrpc)) throw new Error(`${c.model}: the formats' answers differ`);
      checks.push(`${c.model}: ${viaGrpc.length} output values equal over all three formats`);
      for (const streams of concurrency) {
        const cell = (results[`${c.model}@${streams}`] = { grpc: [], 'http-binary': [], 'http-json': [] } as Record<Format, Sample[]>);
        for (let r = 0; r < settings.repeats; r++) {
          // Rotate the order so no format always runs first (warm caches, thermal drift).
          const order = FORMATS.map((_, i) => FORMATS[(i + r) % FORMATS.length]!);
          for (const f of order) {
            const once = (s: number): Promise<Sample> =>
              f === 'grpc'
                ? grpcLoad(client, bodies.grpc, streams, s)
                : f === 'http-binary'
                  ? loadSample(url, binaryHeaders, bodies.binary, streams, s)
                  : loadSample(url, jsonHeaders, bodies.json, streams, s);
            if (r === 0 && settings.warmupS > 0) await once(settings.warmupS);
            cell[f].push(await once(settings.durationS));
          }
          progress(`${c.model} ×${streams} round ${r + 1}/${settings.repeats}: ${FORMATS.map((f) => `${f} ${num(cell[f][r]!.perSec)}/s`).join(', ')}`);
        }
      }
    }
  } finally {
    client.close();
    await mme.stop();
    await rm(work, { recursive: true, force: true });
  }

  const med = (samples: Sample[]) => ({
    perSec: median(samples.map((s) => s.perSec)),
    p50: median(samples.map((s) => s.p50)),
    p99: median(samples.map((s) => s.p99)),
    errors: samples.reduce((a, s) => a + s.errors + s.non2xx, 0),
  });
  const rows: string[][] = [];
  const summary: Record<string, unknown> = {};
  for (const c of CASES) {
    for (const streams of concurrency) {
      const cell = results[`${c.model}@${streams}`]!;
      const g = med(cell.grpc);
      const b = med(cell['http-binary']);
      const j = med(cell['http-json']);
      summary[`${c.model}@${streams}`] = { grpc: g, httpBinary: b, httpJson: j, grpcOverBinary: g.perSec / b.perSec, grpcOverJson: g.perSec / j.perSec };
      rows.push([
        c.model,
        String(streams),
        num(g.perSec),
        num(b.perSec),
        num(j.perSec),
        ratio(g.perSec, b.perSec),
        ratio(g.perSec, j.perSec),
        num(g.p50),
        num(b.p50),
        num(j.p50),
        String(g.errors + b.errors + j.errors),
      ]);
    }
  }
  const table: Table = {
    headers: [
      'model',
      'streams',
      'gRPC req/s',
      'HTTP binary req/s',
      'HTTP JSON req/s',
      'gRPC / binary',
      'gRPC / JSON',
      'gRPC p50 ms',
      'binary p50 ms',
      'JSON p50 ms',
      'errors',
    ],
    rows,
  };
  const note =
    `${CASES.map((c) => c.label).join('; ')}. /v2/models/{m}/infer for HTTP (binary: Inference-Header-Content-Length, binary outputs), ` +
    `ModelInfer with raw_input_contents for gRPC (one channel). Medians of ${settings.repeats} run(s) of ${settings.durationS} s per format and cell. ${checks.join('; ')}.`;
  return {
    name: 'grpc',
    title: 'KServe v2 gRPC vs HTTP binary vs HTTP JSON',
    settings: { ...settings, concurrency, onnxMme: mme.info },
    text: `${textTable(table)}\n\n${note}`,
    markdown: `${markdownTable(table)}\n\n${note}`,
    data: { summary, runs: results },
  };
}
