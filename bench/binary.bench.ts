/**
 * @module bench/binary
 * What the binary tensor extension buys for an image-sized tensor: a
 * 1×3×224×224 FP32 input through an identity model (so the model costs
 * nothing and the wire format is everything), sent to the real server's
 * /invocations as KServe v2 JSON and as SageMaker's
 * application/vnd.sagemaker-triton.binary+json with binary outputs, at
 * concurrency 8 (BENCH_BINARY_CONCURRENCY).
 *
 * Goals (issue 7): binary throughput ≥ 5× JSON; decoding a binary request
 * (JSON header + typed-array views) ≤ 2× a plain Buffer copy of the same
 * bytes, measured in this process with the server's decoder directly, on a
 * body laid out as the server's reader lays it out (aligned), with the
 * misaligned fallback (one copy) reported next to it.
 */
import type { RunSample as Sample } from './lib/stats.js';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { identity, writeModelDir } from '../examples/models/zoo.js';
import { decodeInferRequest, parseJsonBody } from '../src/protocol/v2-json-codec.js';
import { loadSample } from './lib/autocannon-run.js';
import { startOnnxMme } from './lib/baselines.js';
import { inputData } from './lib/payload.js';
import { markdownTable, num, ratio, textTable, type BenchReport, type Table } from './lib/report.js';
import { benchSettings } from './lib/settings.js';
import { median } from './lib/stats.js';

const SHAPE: readonly number[] = [1, 3, 224, 224];
const COUNT = SHAPE.reduce((a, b) => a * b, 1);
const MODEL = 'image_identity';

function progress(message: string): void {
  process.stderr.write(`[binary] ${message}\n`);
}

/** The JSON and binary request bodies for the same numbers. */
function bodies(values: readonly number[]): { json: string; binary: Buffer; headerLength: number } {
  const json = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: SHAPE, data: values }] });
  const header = Buffer.from(
    JSON.stringify({
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: SHAPE, parameters: { binary_data_size: COUNT * 4 } }],
      parameters: { binary_data_output: true },
    }),
  );
  const data = Buffer.alloc(COUNT * 4);
  values.forEach((v, i) => data.writeFloatLE(v, i * 4));
  return { json, binary: Buffer.concat([header, data]), headerLength: header.length };
}

/** Median ns per call of `fn`, over `rounds` rounds of `perRound` calls. */
function timePerCall(fn: () => unknown, rounds: number, perRound: number): number {
  for (let i = 0; i < perRound * 3; i++) fn(); // warm up the JIT
  const perCall: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < perRound; i++) fn();
    perCall.push(Number(process.hrtime.bigint() - start) / perRound);
  }
  return median(perCall);
}

/** `bytes` placed so that the byte after `headerLength` is aligned to 8 (+ `shift`). */
function placed(bytes: Buffer, headerLength: number, shift: number): Buffer {
  const pad = ((8 - (headerLength % 8)) % 8) + shift;
  const out = Buffer.from(new ArrayBuffer(bytes.length + pad), pad, bytes.length);
  bytes.copy(out);
  return out;
}

function decodeBinary(body: Buffer, headerLength: number): number {
  const json = parseJsonBody(body.subarray(0, headerLength), MODEL);
  const request = decodeInferRequest(json, MODEL, body.subarray(headerLength));
  return request.inputs.size;
}

function decodeJson(text: string): number {
  return decodeInferRequest(parseJsonBody(text, MODEL), MODEL).inputs.size;
}

export async function run(): Promise<BenchReport> {
  const settings = benchSettings();
  const concurrency = Number(process.env['BENCH_BINARY_CONCURRENCY'] ?? 8);
  const values = inputData(COUNT);
  const { json, binary, headerLength } = bodies(values);

  // ---------------------------------------------------------------- decode, in process
  progress('decode timing (in process)');
  const aligned = placed(binary, headerLength, 0);
  const misaligned = placed(binary, headerLength, 1);
  const copyNs = timePerCall(() => Buffer.from(aligned), 30, 40);
  const decodeAlignedNs = timePerCall(() => decodeBinary(aligned, headerLength), 30, 40);
  const decodeMisalignedNs = timePerCall(() => decodeBinary(misaligned, headerLength), 30, 40);
  const decodeJsonNs = timePerCall(() => decodeJson(json), 5, 2);

  // ---------------------------------------------------------------- throughput, over HTTP
  const work = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-bench-binary-'));
  const source = path.join(work, 'models');
  await writeModelDir(source, MODEL, identity('FP32', SHAPE.slice(1)));
  const mme = await startOnnxMme(source, path.join(work, 'cache'));
  const runs: Record<'json' | 'binary', Sample[]> = { json: [], binary: [] };
  let check = '';
  try {
    const target = mme.target(MODEL);
    const jsonHeaders = { ...target.headers, 'content-type': 'application/json' };
    const binaryHeaders = { ...target.headers, 'content-type': `application/vnd.sagemaker-triton.binary+json;json-header-size=${headerLength}` };

    // Both paths must return the input unchanged (identity), or the numbers mean nothing.
    const j = await fetch(target.url, { method: 'POST', headers: jsonHeaders, body: json });
    const jOut = (JSON.parse(await j.text()) as { outputs: { data: number[] }[] }).outputs[0]!.data;
    const b = await fetch(target.url, { method: 'POST', headers: binaryHeaders, body: binary });
    const bBody = Buffer.from(await b.arrayBuffer());
    const n = Number(/json-header-size=(\d+)/.exec(b.headers.get('content-type') ?? '')?.[1]);
    const bOut = bBody.subarray(n);
    const expected = Float32Array.from(values);
    if (j.status !== 200 || b.status !== 200) throw new Error(`sanity requests failed: JSON ${j.status}, binary ${b.status}`);
    if (jOut.length !== COUNT || jOut.some((v, i) => v !== expected[i])) throw new Error('JSON answer differs from the input');
    if (!bOut.equals(Buffer.from(expected.buffer))) throw new Error('binary answer differs from the input');
    check = `identity verified: JSON ${jOut.length} values, binary ${bOut.length} bytes`;

    for (let r = 0; r < settings.repeats; r++) {
      const order = r % 2 === 0 ? (['json', 'binary'] as const) : (['binary', 'json'] as const);
      for (const kind of order) {
        if (r === 0 && settings.warmupS > 0)
          await loadSample(target.url, kind === 'json' ? jsonHeaders : binaryHeaders, kind === 'json' ? json : binary, concurrency, settings.warmupS);
        runs[kind].push(
          await loadSample(target.url, kind === 'json' ? jsonHeaders : binaryHeaders, kind === 'json' ? json : binary, concurrency, settings.durationS),
        );
      }
      progress(`round ${r + 1}/${settings.repeats}: JSON ${num(runs.json[r]!.perSec)}/s, binary ${num(runs.binary[r]!.perSec)}/s`);
    }
  } finally {
    await mme.stop();
    await rm(work, { recursive: true, force: true });
  }

  const med = (kind: 'json' | 'binary') => ({
    perSec: median(runs[kind].map((s) => s.perSec)),
    p50: median(runs[kind].map((s) => s.p50)),
    p99: median(runs[kind].map((s) => s.p99)),
    errors: runs[kind].reduce((a, s) => a + s.errors, 0),
    non2xx: runs[kind].reduce((a, s) => a + s.non2xx, 0),
  });
  const jm = med('json');
  const bm = med('binary');
  const throughputRatio = bm.perSec / jm.perSec;
  const decodeRatio = decodeAlignedNs / copyNs;

  const http: Table = {
    headers: ['format', 'req/s', 'p50 ms', 'p99 ms', 'request bytes', 'errors', 'non2xx'],
    rows: [
      ['KServe v2 JSON', num(jm.perSec), num(jm.p50), num(jm.p99), String(Buffer.byteLength(json)), String(jm.errors), String(jm.non2xx)],
      ['binary+json (binary out)', num(bm.perSec), num(bm.p50), num(bm.p99), String(binary.length), String(bm.errors), String(bm.non2xx)],
    ],
  };
  const decode: Table = {
    headers: ['operation on one request body', 'µs', '× Buffer copy'],
    rows: [
      ['Buffer.from(body) (plain copy)', num(copyNs / 1000), '1.00x'],
      ['binary decode, aligned (as the server reads it)', num(decodeAlignedNs / 1000), ratio(decodeAlignedNs, copyNs)],
      ['binary decode, misaligned (copy fallback)', num(decodeMisalignedNs / 1000), ratio(decodeMisalignedNs, copyNs)],
      ['JSON decode (JSON.parse + typed arrays)', num(decodeJsonNs / 1000), ratio(decodeJsonNs, copyNs)],
    ],
  };
  const goals =
    `binary / JSON throughput: ${ratio(bm.perSec, jm.perSec)} (goal ≥ 5x: ${throughputRatio >= 5 ? 'met' : 'NOT met'}); ` +
    `binary decode / Buffer copy: ${ratio(decodeAlignedNs, copyNs)} (goal ≤ 2x: ${decodeRatio <= 2 ? 'met' : 'NOT met'}).`;
  const note =
    `1×3×224×224 FP32 identity model, /invocations, concurrency ${concurrency}, medians of ${settings.repeats} run(s) of ${settings.durationS} s. ` +
    `Binary requests ask for binary outputs (binary_data_output). ${check}.`;
  return {
    name: 'binary',
    title: 'Binary tensor extension vs JSON, 1×3×224×224 FP32',
    settings: { ...settings, concurrency, shape: SHAPE, onnxMme: mme.info },
    text: `${textTable(http)}\n\n${textTable(decode)}\n\n${goals}\n${note}`,
    markdown: `${markdownTable(http)}\n\n${markdownTable(decode)}\n\n${goals}\n\n${note}`,
    data: {
      json: { median: jm, runs: runs.json },
      binary: { median: bm, runs: runs.binary },
      decodeNs: { copy: copyNs, aligned: decodeAlignedNs, misaligned: decodeMisalignedNs, json: decodeJsonNs },
      throughputRatio,
      decodeRatio,
    },
  };
}
