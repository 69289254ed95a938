/**
 * @module perf/perf-report
 * A run as people read it: a table for the terminal, one JSON object per
 * step (`--json`: the field names scripts rely on), CSV for
 * spreadsheets, and the throughput-vs-latency chart. Missing values (no
 * successful answer, no server split) are null in JSON and empty in CSV,
 * never NaN.
 */
import type { PerfRun, PerfStep } from './perf-run.js';
import { renderXyChart } from './xy-chart.js';

const finite = (v: number | undefined): number | null => (v === undefined || !Number.isFinite(v) ? null : Number(v.toFixed(4)));

/** The `--json` object of a step. */
export function stepJson(step: PerfStep): Record<string, unknown> {
  return {
    mode: step.mode,
    concurrency: finite(step.concurrency),
    rate_rps: step.rateRps ?? null,
    throughput_rps: finite(step.throughputRps),
    p50_ms: finite(step.latency.p50Ms),
    p90_ms: finite(step.latency.p90Ms),
    p95_ms: finite(step.latency.p95Ms),
    p99_ms: finite(step.latency.p99Ms),
    mean_ms: finite(step.latency.meanMs),
    max_ms: finite(step.latency.maxMs),
    requests: step.requests,
    errors: step.errors,
    errors_by_status: step.errorsByStatus,
    requests_sent: step.requestsSent,
    dropped: step.dropped,
    stable: step.stable,
    windows: step.windows,
    measured_s: Number((step.measuredMs / 1000).toFixed(3)),
    client_cpu_pct: finite(step.clientCpuPct),
    client_event_loop_pct: finite(step.clientEventLoopPct),
    client_saturated: step.clientSaturated,
    server:
      step.server === undefined
        ? null
        : {
            source: step.server.source,
            requests: step.server.requests,
            queue_ms: finite(step.server.queueMs),
            compute_input_ms: finite(step.server.computeInputMs),
            compute_infer_ms: finite(step.server.computeInferMs),
            compute_output_ms: finite(step.server.computeOutputMs),
            batch_size: finite(step.server.batchSize),
          },
  };
}

export function runJson(run: PerfRun): string {
  return `${JSON.stringify(run.steps.map(stepJson), null, 2)}\n`;
}

const CSV_COLUMNS = [
  'mode',
  'concurrency',
  'rate_rps',
  'throughput_rps',
  'p50_ms',
  'p90_ms',
  'p95_ms',
  'p99_ms',
  'mean_ms',
  'requests',
  'errors',
  'errors_by_status',
  'requests_sent',
  'dropped',
  'stable',
  'client_cpu_pct',
  'client_event_loop_pct',
  'server_queue_ms',
  'server_compute_input_ms',
  'server_compute_infer_ms',
  'server_compute_output_ms',
  'server_batch_size',
] as const;

function csvCell(v: unknown): string {
  if (v === null || v === undefined) return '';
  const s = String(v);
  return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function runCsv(run: PerfRun): string {
  const rows = run.steps.map((step) => {
    const j = stepJson(step);
    const server = (j['server'] ?? {}) as Record<string, unknown>;
    const errors = Object.entries(step.errorsByStatus)
      .map(([k, v]) => `${k}:${v}`)
      .join(' ');
    const cells: Record<(typeof CSV_COLUMNS)[number], unknown> = {
      mode: j['mode'],
      concurrency: j['concurrency'],
      rate_rps: j['rate_rps'],
      throughput_rps: j['throughput_rps'],
      p50_ms: j['p50_ms'],
      p90_ms: j['p90_ms'],
      p95_ms: j['p95_ms'],
      p99_ms: j['p99_ms'],
      mean_ms: j['mean_ms'],
      requests: j['requests'],
      errors: j['errors'],
      errors_by_status: errors,
      requests_sent: j['requests_sent'],
      dropped: j['dropped'],
      stable: j['stable'],
      client_cpu_pct: j['client_cpu_pct'],
      client_event_loop_pct: j['client_event_loop_pct'],
      server_queue_ms: server['queue_ms'],
      server_compute_input_ms: server['compute_input_ms'],
      server_compute_infer_ms: server['compute_infer_ms'],
      server_compute_output_ms: server['compute_output_ms'],
      server_batch_size: server['batch_size'],
    };
    return CSV_COLUMNS.map((c) => csvCell(cells[c])).join(',');
  });
  return `${[CSV_COLUMNS.join(','), ...rows].join('\n')}\n`;
}

const ms = (v: number): string => (Number.isFinite(v) ? (v < 10 ? v.toFixed(2) : v.toFixed(1)) : '-');

/** The stdout table: one row per step, server split columns when the target gave them. */
export function runTable(run: PerfRun): string {
  const withServer = run.steps.some((s) => s.server !== undefined);
  const rate = run.steps.some((s) => s.mode === 'rate');
  const head = [
    rate ? 'rate/s' : 'conc',
    ...(rate ? ['in-flight'] : []),
    'req/s',
    'p50 ms',
    'p90 ms',
    'p95 ms',
    'p99 ms',
    'requests',
    'errors',
    'client cpu',
    ...(withServer ? ['queue', 'in', 'infer', 'out', 'batch'] : []),
  ];
  const rows = run.steps.map((s) => {
    const errors =
      s.errors === 0
        ? '0'
        : Object.entries(s.errorsByStatus)
            .map(([k, v]) => `${k}:${v}`)
            .join(' ');
    const server = s.server;
    return [
      rate ? String(s.rateRps) : String(s.concurrency),
      ...(rate ? [s.concurrency.toFixed(1)] : []),
      s.throughputRps.toFixed(1),
      ms(s.latency.p50Ms),
      ms(s.latency.p90Ms),
      ms(s.latency.p95Ms),
      ms(s.latency.p99Ms),
      String(s.requests),
      errors,
      `${s.clientCpuPct.toFixed(0)}%${s.clientSaturated ? '!' : ''}${s.stable ? '' : ' ~'}`,
      ...(withServer && server
        ? [
            ms(server.queueMs),
            ms(server.computeInputMs),
            ms(server.computeInferMs),
            ms(server.computeOutputMs),
            Number.isFinite(server.batchSize) ? server.batchSize.toFixed(2) : '-',
          ]
        : withServer
          ? ['-', '-', '-', '-', '-']
          : []),
    ];
  });
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]): string => cells.map((c, i) => c.padStart(widths[i]!)).join('  ');
  const out = [`${run.target}`, `model ${run.model}`, '', line(head), ...rows.map(line)];
  const notes: string[] = [];
  if (withServer)
    notes.push(
      `server split (ms per request, from ${run.steps.find((s) => s.server)?.server?.source === 'stats' ? 'the statistics route' : '/metrics'}): queue, compute input, compute infer, compute output; batch = rows per model execution.`,
    );
  if (run.steps.some((s) => !s.stable))
    notes.push('~ : the last two windows did not agree within the tolerance before the step time ran out; the figures are those two windows.');
  if (run.steps.some((s) => s.clientSaturated)) notes.push('! : the load generator itself was saturated; the server may do better than shown.');
  for (const [status, body] of Object.entries(run.errorSamples)) notes.push(`first ${status} answer: ${body}`);
  notes.push(`${run.requestsSent} inference requests sent in all.`);
  return `${[...out, '', ...notes].join('\n')}\n`;
}

export function runChart(run: PerfRun, subtitle: string): string {
  const labelOf = (s: PerfStep): string => (s.mode === 'rate' ? `${s.rateRps}/s` : `c=${s.concurrency}`);
  const ok = run.steps.filter((s) => s.latency.count > 0);
  return renderXyChart({
    title: `${run.model}: throughput vs latency`,
    subtitle,
    xLabel: 'latency (ms)',
    yLabel: 'throughput (successful req/s)',
    logX: true,
    series: [
      { name: 'p50', color: '#1f77b4', line: true, points: ok.map((s) => ({ x: s.latency.p50Ms, y: s.throughputRps, label: labelOf(s) })) },
      { name: 'p99', color: '#d62728', line: true, dashed: true, points: ok.map((s) => ({ x: s.latency.p99Ms, y: s.throughputRps })) },
    ],
  });
}
