/**
 * @module bench/run-all
 * `npm run bench`: runs every `*.bench.js` module next to this file (sorted
 * by name) in sequence, prints the combined report, and writes it to
 * bench/results/latest.{json,md} with the machine it ran on. BENCH_ONLY=name
 * (comma-separated) runs a subset. Speed goals live here, never in unit tests.
 */
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { BenchModule, BenchReport } from './lib/report.js';

const here = path.dirname(fileURLToPath(import.meta.url));
/** bench/results in the repository, whether running from dist/bench or bench. */
const repoRoot = path.basename(path.dirname(here)) === 'dist' ? path.resolve(here, '..', '..') : path.resolve(here, '..');
const resultsDir = path.join(repoRoot, 'bench', 'results');

async function benchModules(): Promise<string[]> {
  const only = (process.env['BENCH_ONLY'] ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const files = (await readdir(here)).filter((f) => f.endsWith('.bench.js')).sort();
  return only.length === 0 ? files : files.filter((f) => only.includes(f.replace(/\.bench\.js$/, '')));
}

interface Machine {
  readonly date: string;
  readonly node: string;
  readonly platform: string;
  readonly cpuModel: string;
  readonly cpuCount: number;
  readonly availableParallelism: number;
  readonly totalMemGiB: number;
}

function machine(): Machine {
  const cpus = os.cpus();
  return {
    date: new Date().toISOString(),
    node: process.version,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
    cpuCount: cpus.length,
    availableParallelism: os.availableParallelism(),
    totalMemGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
  };
}

async function main(): Promise<void> {
  const files = await benchModules();
  if (files.length === 0) throw new Error(`no *.bench.js modules to run in ${here}`);
  const started = Date.now();
  const reports: BenchReport[] = [];
  for (const file of files) {
    process.stderr.write(`running ${file}\n`);
    const mod = (await import(pathToFileURL(path.join(here, file)).href)) as BenchModule;
    reports.push(await mod.run());
  }
  const meta = { ...machine(), elapsedS: Math.round((Date.now() - started) / 1000) };

  const header = `onnx-mme bench, ${meta.date}: node ${meta.node}, ${meta.cpuCount} × ${meta.cpuModel}, ${meta.platform}`;
  const text = [header, ...reports.map((r) => `\n== ${r.title} ==\n${r.text}`)].join('\n');
  process.stdout.write(`${text}\n`);

  const md = [
    '# onnx-mme bench: latest run',
    '',
    `- date: ${meta.date}`,
    `- node: ${meta.node}`,
    `- CPU: ${meta.cpuCount} × ${meta.cpuModel}`,
    `- platform: ${meta.platform}, ${meta.totalMemGiB} GiB RAM`,
    `- elapsed: ${meta.elapsedS} s`,
    '',
    'Numbers depend on the machine; compare ratios, not absolute values, across machines. See bench/README.md.',
    ...reports.flatMap((r) => ['', `## ${r.title}`, '', '```json', JSON.stringify(r.settings, null, 2), '```', '', r.markdown]),
    '',
  ].join('\n');
  await mkdir(resultsDir, { recursive: true });
  await writeFile(
    path.join(resultsDir, 'latest.json'),
    `${JSON.stringify({ meta, reports: reports.map(({ text: _t, markdown: _m, ...rest }) => rest) }, null, 2)}\n`,
  );
  await writeFile(path.join(resultsDir, 'latest.md'), md);
  process.stderr.write(`wrote ${path.relative(process.cwd(), path.join(resultsDir, 'latest.json'))} and latest.md\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
