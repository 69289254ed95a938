/**
 * @module bench/response-cache
 * What the response cache buys and costs (issue 5 item 5), on the bench's
 * 256→1024→1024→16 MLP: the same server serves the model twice, once with
 * `response_cache { enable: true }` and once without, and the same body is
 * sent over and over, so every request to the cached copy after the first is
 * a hit. At 1 and 64 connections (BENCH_CACHE_CONCURRENCY), rotating order,
 * medians of the bench's repeats.
 *
 * The cost of a miss (hashing the request into its key and keeping the
 * answer) is timed in this process with the server's own ResponseCache, for
 * the MLP's 256-float input and for a 1×3×224×224 image.
 *
 * No goal in the issue beyond "answered without running the model": the
 * figures are reported, and a hit must return exactly the uncached answer.
 */
import { appendFile, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { mlp, writeModelDir } from '../examples/models/zoo.js';
import type { Tensor } from '../src/protocol/tensor.js';
import { ResponseCache } from '../src/service/response-cache.js';
import { runLoad, type LoadResult } from './lib/autocannon-run.js';
import { startOnnxMme } from './lib/baselines.js';
import { inputData, v2Body } from './lib/payload.js';
import { markdownTable, num, ratio, textTable, type BenchReport, type Table } from './lib/report.js';
import { benchSettings } from './lib/settings.js';
import { median } from './lib/stats.js';

const KINDS = ['uncached', 'cached'] as const;
type Kind = (typeof KINDS)[number];

function progress(message: string): void {
  process.stderr.write(`[response-cache] ${message}\n`);
}

/** Median ns of one key + insert for `input`, each with a different first element (every one a miss). */
function missNs(input: Float32Array): number {
  const cache = new ResponseCache(256 * 2 ** 20);
  const pkg = {};
  const output: ReadonlyMap<string, Tensor> = new Map([['OUTPUT0', { datatype: 'FP32', shape: [1, 16], data: new Float32Array(16) }]]);
  const perCall: number[] = [];
  let n = 0;
  for (let round = 0; round < 25; round++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < 40; i++) {
      input[0] = n++;
      const inputs = new Map<string, Tensor>([['INPUT0', { datatype: 'FP32', shape: [1, input.length], data: input }]]);
      cache.set(cache.keyOf(pkg, 'm', '1', inputs, ['OUTPUT0']), output);
    }
    if (round > 4) perCall.push(Number(process.hrtime.bigint() - start) / 40); // the first rounds warm the JIT
  }
  return median(perCall);
}

export async function run(): Promise<BenchReport> {
  const settings = benchSettings();
  const concurrency = (process.env['BENCH_CACHE_CONCURRENCY'] ?? '1,64').split(',').map(Number);
  const work = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-bench-cache-'));
  const source = path.join(work, 'models');
  const model = mlp({ in: 256, hidden: [1024, 1024], out: 16 });
  await writeModelDir(source, 'uncached', model);
  await writeModelDir(source, 'cached', model);
  await appendFile(path.join(source, 'cached', 'config.pbtxt'), 'response_cache { enable: true }\n');
  const mme = await startOnnxMme(source, path.join(work, 'cache'), { MME_RESPONSE_CACHE_BYTES: String(64 * 2 ** 20) });
  const body = v2Body(256);
  const runs = new Map<string, LoadResult[]>();
  let check = '';
  try {
    // A hit must be the uncached answer, byte for byte, or the numbers mean nothing.
    const answer = async (kind: Kind) => {
      const t = mme.target(kind);
      const r = await fetch(t.url, { method: 'POST', headers: { 'content-type': 'application/json', ...t.headers }, body });
      if (r.status !== 200) throw new Error(`${kind}: status ${r.status}`);
      return (JSON.parse(await r.text()) as { outputs: unknown }).outputs;
    };
    const plain = JSON.stringify(await answer('uncached'));
    for (let i = 0; i < 2; i++) if (JSON.stringify(await answer('cached')) !== plain) throw new Error('a cached answer differs from the uncached one');
    check = 'the cached answer equals the uncached one';

    for (const conc of concurrency) {
      for (let r = 0; r < settings.repeats; r++) {
        for (const kind of r % 2 === 0 ? KINDS : [...KINDS].reverse()) {
          const t = mme.target(kind);
          const out = await runLoad({
            url: t.url,
            body,
            headers: t.headers,
            connections: conc,
            durationS: settings.durationS,
            warmupS: r === 0 ? settings.warmupS : 0,
          });
          const key = `${kind}/${conc}`;
          runs.set(key, [...(runs.get(key) ?? []), out]);
        }
        progress(`c=${conc} round ${r + 1}/${settings.repeats}: ${KINDS.map((k) => `${k} ${num(runs.get(`${k}/${conc}`)![r]!.requestsPerSec)}/s`).join(', ')}`);
      }
    }
  } finally {
    await mme.stop();
    await rm(work, { recursive: true, force: true });
  }

  const med = (kind: Kind, conc: number) => {
    const rs = runs.get(`${kind}/${conc}`)!;
    return { perSec: median(rs.map((x) => x.requestsPerSec)), p50: median(rs.map((x) => x.p50)), errors: rs.reduce((a, x) => a + x.errors + x.non2xx, 0) };
  };
  const table: Table = {
    headers: ['conc', 'uncached req/s', 'p50 ms', 'cached (hits) req/s', 'p50 ms', 'throughput cached / uncached', 'p50 cached / uncached', 'errors'],
    rows: concurrency.map((c) => {
      const u = med('uncached', c);
      const h = med('cached', c);
      return [String(c), num(u.perSec), num(u.p50), num(h.perSec), num(h.p50), ratio(h.perSec, u.perSec), ratio(h.p50, u.p50), String(u.errors + h.errors)];
    }),
  };
  const small = missNs(Float32Array.from(inputData(256)));
  const image = missNs(new Float32Array(3 * 224 * 224));
  const misses: Table = {
    headers: ['a miss: key (SHA-256) + insert', 'µs'],
    rows: [
      ['256 FP32 (the MLP input, 1 KiB)', num(small / 1000)],
      ['1×3×224×224 FP32 (588 KiB)', num(image / 1000)],
    ],
  };
  const note =
    `MLP 256→1024→1024→16, one server serving it with and without response_cache, the same body every request (all hits after the first), ` +
    `medians of ${settings.repeats} run(s) of ${settings.durationS} s; ${check}. Miss cost timed in process with the server's ResponseCache.`;
  return {
    name: 'response-cache',
    title: 'Response cache: hits vs running the model, and the cost of a miss',
    settings: { ...settings, concurrency, onnxMme: mme.info },
    text: `${textTable(table)}\n\n${textTable(misses)}\n${note}`,
    markdown: `${markdownTable(table)}\n\n${markdownTable(misses)}\n\n${note}`,
    data: { runs: Object.fromEntries(runs), missNs: { small, image } },
  };
}
