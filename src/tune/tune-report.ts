/**
 * @module tune/tune-report
 * What `onnx-mme tune` writes to its output directory: config.pbtxt (the
 * recommendation), config.diff (against the user's config, both printed the
 * same way so only real changes show), report.md (the recommendation, its
 * measured gain, every candidate, how the search went), pareto.svg
 * (throughput vs p99 of every candidate, the Pareto front joined, the
 * chosen point ringed), memory.svg (memory against throughput per
 * candidate) and tune.json (the same figures for scripts).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { renderXyChart, type XyPoint } from '../perf/xy-chart.js';
import { unifiedDiff } from './line-diff.js';
import type { TunePoint, TuneResult } from './tune-run.js';
import { describeSetting, sameSetting } from './tune-space.js';

const MiB = 2 ** 20;
const fmt = (v: number | undefined, digits = 1): string => (v === undefined || !Number.isFinite(v) ? '-' : v.toFixed(digits));

export function objectiveText(r: Pick<TuneResult, 'objective'>): string {
  return r.objective.kind === 'throughput' ? 'highest throughput (any latency)' : `highest throughput with p99 latency ≤ ${r.objective.p99Ms} ms`;
}

/** The figures compared: the confirmation pair when there is one, else the search's own measurements. */
export function comparison(r: TuneResult): { user: TunePoint; recommended: TunePoint; confirmed: boolean } {
  const user = r.confirmation?.user ?? r.points.find((p) => p.phase === 'default')!;
  if (r.keptUserConfig !== undefined) return { user, recommended: user, confirmed: r.confirmation !== undefined };
  const recommended = r.confirmation?.recommended ?? r.points.find((p) => p.phase !== 'confirm' && sameSetting(p.setting, r.recommended))!;
  return { user, recommended, confirmed: r.confirmation !== undefined };
}

/** The gain at the objective: of the confirmation means when there was a confirmation, else of the search figures. */
function gainPct(r: TuneResult, c: ReturnType<typeof comparison>): number | undefined {
  if (r.keptUserConfig !== undefined) return c.user.score > 0 ? 0 : undefined;
  const conf = r.confirmation;
  if (conf !== undefined) return conf.userMeanRps > 0 ? (conf.recommendedMeanRps / conf.userMeanRps - 1) * 100 : undefined;
  return c.user.score > 0 ? (c.recommended.score / c.user.score - 1) * 100 : undefined;
}

/** Points not beaten on both throughput (higher) and p99 (lower) by another, in p99 order. */
export function paretoFront(points: readonly { x: number; y: number }[]): { x: number; y: number }[] {
  const sorted = [...points].filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y)).sort((a, b) => a.x - b.x || b.y - a.y);
  const front: { x: number; y: number }[] = [];
  for (const p of sorted) if (front.length === 0 || p.y > front[front.length - 1]!.y) front.push(p);
  return front;
}

function pointJson(p: TunePoint): Record<string, unknown> {
  return {
    id: p.id,
    phase: p.phase,
    dimension: p.dimension ?? null,
    setting: p.setting,
    error: p.error ?? null,
    throughput_rps: Number(p.score.toFixed(3)),
    concurrency: p.at?.concurrency ?? null,
    p50_ms: p.at && Number.isFinite(p.at.p50Ms) ? Number(p.at.p50Ms.toFixed(4)) : null,
    p99_ms: p.at && Number.isFinite(p.at.p99Ms) ? Number(p.at.p99Ms.toFixed(4)) : null,
    model_bytes: p.modelBytes ?? null,
    rss_bytes: p.rssBytes,
    load_ms: Math.round(p.loadMs),
    duration_ms: Math.round(p.durationMs),
    steps: p.steps,
    warnings: p.warnings,
    config: p.configText,
  };
}

type Comparison = ReturnType<typeof comparison>;

/** Writes every output file; `met` is false when no measured config met the objective (the command then exits 1). */
export async function writeTuneOutput(r: TuneResult, outDir: string, modelLabel: string): Promise<{ files: string[]; summary: string; met: boolean }> {
  await mkdir(outDir, { recursive: true });
  const c = comparison(r);
  const gain = gainPct(r, c);
  const diff = unifiedDiff(r.userText, r.recommendedText, 'config.pbtxt (yours)', 'config.pbtxt (recommended)');
  const files: Record<string, string> = {};
  files['config.pbtxt'] = r.recommendedText;
  files['config.diff'] = diff === '' ? '# no change: your config is the recommendation\n' : diff;
  const measured = r.points.filter((p) => p.phase !== 'confirm' && p.error === undefined && p.at !== undefined);
  // Ringed where the chosen setting sits among the candidates (its search measurement), so the mark is on the front drawn.
  const chosen = measured.find((p) => sameSetting(p.setting, r.recommended)) ?? c.recommended;
  files['pareto.svg'] = paretoChart(r, measured, chosen, modelLabel);
  files['memory.svg'] = memoryChart(measured, chosen, modelLabel);
  files['report.md'] = [...reportHeader(r, modelLabel), ...recommendationSection(r, c, gain, diff), ...searchSection(r), ...chartsSection()].join('\n');
  files['tune.json'] = tuneJson(r, c, gain);
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(outDir, name), text);
  const met = c.recommended.at !== undefined;
  const written = Object.keys(files).map((f) => path.join(outDir, f));
  return { files: Object.keys(files), summary: summaryText(r, c, gain, met, written), met };
}

/** Throughput against p99 of every candidate measured, the Pareto front joined, the chosen point ringed. */
function paretoChart(r: TuneResult, measured: readonly TunePoint[], chosen: TunePoint, modelLabel: string): string {
  const xy = (p: TunePoint): XyPoint => ({ x: p.at!.p99Ms, y: p.at!.throughputRps, label: p.id });
  return renderXyChart({
    title: `${modelLabel}: candidates, throughput vs p99 (objective: ${r.objective.kind === 'throughput' ? 'throughput' : `p99 ≤ ${r.objective.p99Ms} ms`})`,
    subtitle: r.machine,
    xLabel: 'p99 latency at the scored concurrency (ms)',
    yLabel: 'throughput (req/s)',
    logX: true,
    series: [
      { name: 'candidates', color: '#7f7f7f', line: false, points: measured.map(xy) },
      { name: 'Pareto front', color: '#1f77b4', line: true, points: paretoFront(measured.map(xy)) },
      ...(r.objective.kind === 'latency'
        ? [
            {
              name: `p99 objective ${r.objective.p99Ms} ms`,
              color: '#d62728',
              line: true,
              dashed: true,
              points: [
                { x: r.objective.p99Ms, y: 0 },
                { x: r.objective.p99Ms, y: Math.max(1, ...measured.map((p) => p.score)) },
              ],
            },
          ]
        : []),
    ],
    ...(chosen.at
      ? {
          highlight: {
            x: chosen.at.p99Ms,
            y: chosen.at.throughputRps,
            label: `chosen (${chosen.id})${sameSetting(chosen.setting, r.userSetting) ? ' = yours' : ''}`,
            color: '#2ca02c',
          },
        }
      : {}),
  });
}

/** Model memory against throughput at the objective, per candidate whose memory was read. */
function memoryChart(measured: readonly TunePoint[], chosen: TunePoint, modelLabel: string): string {
  const withMemory = measured.filter((p) => p.modelBytes !== undefined);
  return renderXyChart({
    title: `${modelLabel}: memory per candidate`,
    subtitle: 'model memory as the server counts it (onnx_mme_loaded_model_bytes), against throughput at the objective',
    xLabel: 'model memory (MiB)',
    yLabel: 'throughput (req/s)',
    series: [{ name: 'candidates', color: '#9467bd', line: false, points: withMemory.map((p) => ({ x: p.modelBytes! / MiB, y: p.score, label: p.id })) }],
    ...(chosen.modelBytes !== undefined && chosen.at ? { highlight: { x: chosen.modelBytes / MiB, y: chosen.score, label: 'chosen', color: '#2ca02c' } } : {}),
  });
}

/** report.md's title and run facts: objective, machine, time spent. */
function reportHeader(r: TuneResult, modelLabel: string): string[] {
  return [
    `# onnx-mme tune: ${modelLabel}`,
    '',
    `- Objective: ${objectiveText(r)}`,
    `- Machine: ${r.machine}`,
    `- Time: ${(r.elapsedMs / 1000).toFixed(0)} s of a ${(r.budgetMs / 1000).toFixed(0)} s budget; ${r.points.filter((p) => p.phase !== 'confirm').length} configs measured${r.confirmation ? ` + ${2 * r.confirmation.rounds} confirmation runs` : ''}`,
    '',
  ];
}

/** report.md's recommendation: what to use, the figures compared, the gain, the diff and how to apply it. */
function recommendationSection(r: TuneResult, c: Comparison, gain: number | undefined, diff: string): string[] {
  const lines: string[] = [];
  lines.push('## Recommendation', '');
  if (r.keptUserConfig !== undefined) {
    lines.push(`Keep your config (${describeSetting(r.userSetting)}): ${r.keptUserConfig}.`, '');
  } else {
    lines.push(`**${describeSetting(r.recommended)}** (yours: ${describeSetting(r.userSetting)}).`, '');
  }
  const row = (title: string, p: TunePoint): string =>
    `| ${title} | ${fmt(p.score)} | ${p.at?.concurrency ?? '-'} | ${fmt(p.at?.p50Ms, 2)} | ${fmt(p.at?.p99Ms, 2)} | ${p.modelBytes === undefined ? '-' : fmt(p.modelBytes / MiB)} |`;
  const conf = r.confirmation;
  lines.push(
    conf !== undefined
      ? `Measured again at the end of the run, alternately, ${conf.rounds} round${conf.rounds === 1 ? '' : 's'}: means ${fmt(conf.userMeanRps)} req/s (yours) and ${fmt(conf.recommendedMeanRps)} req/s (best candidate); the pair closest to those means:`
      : `Measured during the search${r.keptUserConfig === undefined ? ' (no time was left to measure both again)' : ''}:`,
    '',
  );
  lines.push('| config | throughput (req/s) | at concurrency | p50 (ms) | p99 (ms) | model memory (MiB) |', '|---|---:|---:|---:|---:|---:|');
  lines.push(row('yours', c.user), row('recommended', c.recommended), '');
  if (gain !== undefined) lines.push(`Gain at the objective: **${gain >= 0 ? '+' : ''}${gain.toFixed(1)}%** throughput.`, '');
  else lines.push('No measured config met the objective at any concurrency swept; see the candidates below (their p99 per step is in tune.json).', '');
  lines.push('The change (`config.diff`):', '', '```diff', diff === '' ? '# no change' : diff.trimEnd(), '```', '');
  lines.push(
    "To use it: replace `config.pbtxt` in your package with this directory's `config.pbtxt` (your config with the knobs above changed, printed in canonical text format: comments in yours are not kept; to keep them, apply the lines of `config.diff` by hand), then `onnx-mme validate` and `onnx-mme pack` as usual.",
    '',
  );
  return lines;
}

/** report.md's search: how each knob's walk ended, and every candidate measured. */
function searchSection(r: TuneResult): string[] {
  const lines: string[] = [];
  lines.push('## Search', '');
  lines.push('One knob at a time, from the best setting so far; the walk along a knob stops at the first value that does not pay.', '');
  for (const d of r.dimensions) lines.push(`- ${d.dimension}: ${d.outcome}`);
  lines.push('', '## Candidates', '');
  lines.push(
    '| id | phase | knob varied | setting | throughput at objective (req/s) | concurrency | p50 (ms) | p99 (ms) | model memory (MiB) | process RSS (MiB) | load (ms) | note |',
    '|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|',
  );
  for (const p of r.points) {
    const note = p.error ?? (p.at === undefined ? 'no step met the objective' : p.warnings.length > 0 ? 'client saturated at some step' : '');
    lines.push(
      `| ${p.id} | ${p.phase} | ${p.dimension ?? ''} | ${describeSetting(p.setting)} | ${fmt(p.score)} | ${p.at?.concurrency ?? '-'} | ${fmt(p.at?.p50Ms, 2)} | ${fmt(p.at?.p99Ms, 2)} | ${p.modelBytes === undefined ? '-' : fmt(p.modelBytes / MiB)} | ${fmt(p.rssBytes / MiB, 0)} | ${Math.round(p.loadMs)} | ${note.replace(/\|/g, '\\|').replace(/\n/g, ' ')} |`,
    );
  }
  return lines;
}

/** report.md's charts and the caveat on where the numbers come from. */
function chartsSection(): string[] {
  return [
    '',
    '## Charts',
    '',
    '![throughput vs p99 of every candidate, Pareto front, chosen point](pareto.svg)',
    '',
    '![memory per candidate](memory.svg)',
    '',
    "Numbers are from this machine, under this run's load generator (in this process, on its own thread); other machines, other request shapes or concurrency will differ. Re-run `onnx-mme perf` against a server with the recommended config to see its whole curve.",
    '',
  ];
}

/** tune.json: the report's figures for scripts. */
function tuneJson(r: TuneResult, c: Comparison, gain: number | undefined): string {
  return `${JSON.stringify(
    {
      objective: r.objective,
      confirmed: c.confirmed,
      confirmation_rounds: r.confirmation?.rounds ?? 0,
      confirmation_means_rps: r.confirmation
        ? { default: Number(r.confirmation.userMeanRps.toFixed(3)), recommended: Number(r.confirmation.recommendedMeanRps.toFixed(3)) }
        : null,
      kept_user_config: r.keptUserConfig ?? null,
      gain_pct: gain === undefined ? null : Number(gain.toFixed(2)),
      default: pointJson(c.user),
      recommended: pointJson(c.recommended),
      recommended_setting: r.recommended,
      user_setting: r.userSetting,
      dimensions: r.dimensions,
      elapsed_s: Number((r.elapsedMs / 1000).toFixed(2)),
      budget_s: r.budgetMs / 1000,
      machine: r.machine,
      points: r.points.map(pointJson),
    },
    null,
    2,
  )}\n`;
}

/** The lines the command prints: whether the objective was met, the recommendation, the gain, the files written. */
function summaryText(r: TuneResult, c: Comparison, gain: number | undefined, met: boolean, written: readonly string[]): string {
  const lowest = r.points
    .flatMap((p) => p.steps.filter((s) => s.errors === 0 && Number.isFinite(s.p99Ms)))
    .reduce((m, s) => Math.min(m, s.p99Ms), Number.POSITIVE_INFINITY);
  return [
    ...(met
      ? []
      : [
          `tune: no measured config met the objective (${objectiveText(r)}); the lowest p99 measured was ${fmt(lowest, 2)} ms; your config is written unchanged`,
        ]),
    r.keptUserConfig !== undefined ? `tune: keep your config: ${r.keptUserConfig}` : `tune: recommended: ${describeSetting(r.recommended)}`,
    `tune: yours ${fmt(c.user.score)} req/s, recommended ${fmt(c.recommended.score)} req/s${gain === undefined ? '' : ` (${gain >= 0 ? '+' : ''}${gain.toFixed(1)}%)`} at the objective (${objectiveText(r)})${c.confirmed ? ', measured back to back' : ''}`,
    `tune: wrote ${written.join(', ')}`,
  ].join('\n');
}
