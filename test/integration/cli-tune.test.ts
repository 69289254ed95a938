/**
 * `onnx-mme tune` as a user runs it, on a small generated model with a short
 * budget: it writes a config the server loads and answers with, whose
 * measured throughput at the objective is at least the package's own
 * config's in the same run; a latency objective no config can meet is
 * reported as such (exit 1, the user's config unchanged); the package is
 * byte-for-byte untouched (hashed before and after); and an output
 * directory inside the package is refused.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { cp, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { configText, tiny, writeModelDir } from '../../examples/models/zoo.js';
import { runCli } from '../support/cli.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer } from '../support/test-server.js';

const ctx = new Cleanups();
after(() => ctx.run());

/** Hash of every file's relative path, mode and bytes under `dir`. */
async function hashTree(dir: string): Promise<string> {
  const hash = createHash('sha256');
  const walk = async (d: string): Promise<void> => {
    for (const e of (await readdir(d, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = path.join(d, e.name);
      const s = await stat(p);
      hash.update(`${path.relative(dir, p)}\0${s.mode}\0`);
      if (e.isDirectory()) await walk(p);
      else hash.update(await readFile(p));
    }
  };
  await walk(dir);
  return hash.digest('hex');
}

interface PointJson {
  id: string;
  phase: string;
  throughput_rps: number;
  p99_ms: number | null;
  concurrency: number | null;
  steps: { concurrency: number; throughputRps: number; p99Ms: number; errors: number }[];
  config: string;
  setting: { intraOpThreads?: number } & Record<string, unknown>;
}

const FAST = ['--window-s', '0.15', '--concurrency', '1:16:x4', '--min-gain-pct', '5'];

describe('onnx-mme tune', () => {
  let work = '';
  let pkg = '';
  let pkgHash = '';

  before(async () => {
    work = await tempDir(ctx, 'onnx-mme-cli-tune-');
    const model = tiny();
    // The user's config: their own name and a comment-free layout, max_batch_size 8, no dynamic_batching.
    pkg = await writeModelDir(work, 'tiny', {
      ...model,
      config: configText({
        name: 'tiny',
        maxBatchSize: 8,
        inputs: [{ name: 'INPUT0', dataType: 'FP32', dims: [16] }],
        outputs: [{ name: 'OUTPUT0', dataType: 'FP32', dims: [4] }],
      }),
    });
    pkgHash = await hashTree(pkg);
  });

  it("recommends a loadable config measured at least as fast as the package's own in the same run, and leaves the package untouched", async () => {
    const out = path.join(work, 'out');
    const r = await runCli(['tune', pkg, '--budget-s', '16', ...FAST, '-o', out], { env: { MME_LOG_LEVEL: 'warn' } });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(await hashTree(pkg), pkgHash, 'the package is byte-for-byte as before');
    for (const f of ['config.pbtxt', 'config.diff', 'report.md', 'pareto.svg', 'memory.svg', 'tune.json'])
      assert.ok((await stat(path.join(out, f))).size > 0, f);
    const result = JSON.parse(await readFile(path.join(out, 'tune.json'), 'utf8')) as {
      default: PointJson;
      recommended: PointJson;
      points: PointJson[];
      elapsed_s: number;
      kept_user_config: string | null;
    };
    assert.ok(result.recommended.throughput_rps > 0);
    assert.ok(
      result.recommended.throughput_rps >= result.default.throughput_rps,
      `recommended ${result.recommended.throughput_rps} >= default ${result.default.throughput_rps}`,
    );
    // Beyond the default, unless this (shared, loaded) machine made one candidate cost the whole budget; then the report says so.
    const dims = (JSON.parse(await readFile(path.join(out, 'tune.json'), 'utf8')) as { dimensions: { outcome: string }[] }).dimensions;
    assert.ok(result.points.length >= 2 || dims.every((d) => /budget ran out/.test(d.outcome)), JSON.stringify(dims));
    assert.ok(result.points.some((p) => p.phase === 'default'));
    // No candidate is measured that the server would run exactly as one already measured (intra-op threads 1 is this
    // server's default where there are at most 8 cores: MME_INTRA_OP_THREADS is max(1, cores / workers)).
    const serverThreads = Math.max(1, Math.floor(os.availableParallelism() / Math.min(8, os.availableParallelism())));
    const effect = (p: PointJson) => JSON.stringify(Object.entries({ ...p.setting, intraOpThreads: p.setting.intraOpThreads ?? serverThreads }).sort());
    const measured = result.points.filter((p) => p.phase !== 'confirm').map(effect);
    assert.equal(new Set(measured).size, measured.length, `a configuration measured twice: ${measured.join(' | ')}`);
    // The budget bounds the run (the confirmation may overrun it by a candidate at most).
    assert.ok(result.elapsed_s < 16 * 1.6, `elapsed ${result.elapsed_s} s`);
    assert.match(r.stdout, /tune: (recommended|keep your config)/);
    assert.match(r.stderr, /tune: c0 default: instances 1, max_batch_size 8/);

    // The recommendation keeps the user's name and tensors, and is what tune.json says it measured.
    const recommended = await readFile(path.join(out, 'config.pbtxt'), 'utf8');
    assert.match(recommended, /^name: "tiny"$/m);
    assert.match(recommended, /name: "INPUT0"/);
    const report = await readFile(path.join(out, 'report.md'), 'utf8');
    assert.match(report, /## Recommendation/);
    assert.match(report, /\| yours \| [\d.]+ \|/);
    assert.match(report, /!\[.*\]\(pareto\.svg\)/);
    assert.match(await readFile(path.join(out, 'pareto.svg'), 'utf8'), /^<svg [\s\S]*<\/svg>\n$/);

    // Loadable: the package with the recommended config validates and serves.
    const tuned = path.join(work, 'tuned-repo', 'tiny');
    await cp(pkg, tuned, { recursive: true });
    await writeFile(path.join(tuned, 'config.pbtxt'), recommended);
    const v = await runCli(['validate', tuned]);
    assert.equal(v.code, 0, v.stdout + v.stderr);
    const server = await startTestServer({
      modelSource: path.join(work, 'tuned-repo'),
      cacheDir: path.join(work, 'tuned-cache'),
      env: { MME_LOG_LEVEL: 'warn' },
    });
    ctx.after(() => server.close());
    const answer = await request(`${server.url}/v2/models/tiny/infer`, {
      method: 'POST',
      json: {
        inputs: [
          input(
            'INPUT0',
            'FP32',
            [1, 16],
            Array.from({ length: 16 }, (_, i) => i / 16),
          ),
        ],
      },
    });
    assert.equal(answer.status, 200, answer.text);
    assert.deepEqual(answer.body.outputs[0].shape, [1, 4]);
  });

  it("respects a latency objective: one no config can meet is reported, exit 1, the user's config unchanged", async () => {
    const out = path.join(work, 'out-latency');
    const r = await runCli(['tune', pkg, '--objective', 'latency-p99-ms=0.0001', '--budget-s', '5', ...FAST, '-o', out], { env: { MME_LOG_LEVEL: 'warn' } });
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /no measured config met the objective \(highest throughput with p99 latency ≤ 0\.0001 ms\)/);
    const result = JSON.parse(await readFile(path.join(out, 'tune.json'), 'utf8')) as { recommended: PointJson; default: PointJson; points: PointJson[] };
    assert.equal(result.recommended.throughput_rps, 0);
    // Every sweep stopped at its first step: its p99 was over the objective.
    for (const p of result.points) assert.ok(p.steps.length <= 1, JSON.stringify(p.steps));
    assert.equal(await readFile(path.join(out, 'config.diff'), 'utf8'), '# no change: your config is the recommendation\n');
    assert.equal(await hashTree(pkg), pkgHash);
  });

  it('refuses bad usage with exit 2, an output inside the package included', async () => {
    for (const args of [
      ['tune'],
      ['tune', pkg],
      ['tune', pkg, '-o', path.join(pkg, 'out')],
      ['tune', pkg, '-o', pkg],
      ['tune', pkg, '-o', path.join(work, 'x'), '--objective', 'latency'],
      ['tune', path.join(work, 'missing'), '-o', path.join(work, 'y')],
    ]) {
      const r = await runCli(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /Run 'onnx-mme tune --help'/);
    }
    assert.equal(await hashTree(pkg), pkgHash);
  });
});
