/**
 * examples/grafana/onnx-mme-dashboard.json: valid JSON, and every metric
 * name in every query (panel targets and template variables) is one the
 * server exports (its own registry, process metrics included; histogram
 * `_bucket`/`_sum`/`_count` series count as their histogram).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { createMetrics } from '../../../src/observability/metrics.js';

function repoFile(rel: string): string {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); path.dirname(dir) !== dir; dir = path.dirname(dir)) {
    try {
      return readFileSync(path.join(dir, rel), 'utf8');
    } catch {
      // keep looking upwards
    }
  }
  throw new Error(`${rel} not found`);
}

/** PromQL function and keyword names that look like identifiers but are not metrics. */
const PROMQL_WORDS = new Set([
  'sum',
  'by',
  'rate',
  'histogram_quantile',
  'label_values',
  'without',
  'avg',
  'max',
  'min',
  'count',
  'le',
  'on',
  'ignoring',
  'increase',
  'irate',
]);

function metricNames(expr: string): string[] {
  // label_values(metric{...}, label): the second argument is a label name.
  const noStrings = expr
    .replace(/label_values\(([^,]*),\s*\w+\s*\)/g, 'label_values($1)')
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\[[^\]]*\]/g, '');
  const noLabelSets = noStrings.replace(/\{[^}]*\}/g, '').replace(/\b(by|without|on|ignoring)\s*\([^)]*\)/g, '');
  return [...noLabelSets.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)].map((m) => m[0]).filter((w) => !PROMQL_WORDS.has(w) && !/^\d/.test(w));
}

test('every query of the Grafana dashboard names a metric the server exports', async () => {
  const dashboard = JSON.parse(repoFile('examples/grafana/onnx-mme-dashboard.json')) as {
    panels: { title: string; targets: { expr: string }[] }[];
    templating: { list: { query?: unknown }[] };
  };
  const exported = new Set((await createMetrics({ collectProcessMetrics: true }).registry.getMetricsAsJSON()).map((m) => m.name));
  const known = (name: string): boolean => exported.has(name) || exported.has(name.replace(/_(bucket|sum|count)$/, ''));
  const exprs = [
    ...dashboard.panels.flatMap((p) => p.targets.map((t) => ({ where: p.title, expr: t.expr }))),
    ...dashboard.templating.list
      .filter((v) => typeof v.query === 'string' && (v.query as string).includes('('))
      .map((v) => ({ where: 'variable', expr: v.query as string })),
  ];
  assert.ok(exprs.length >= 20);
  const used = new Set<string>();
  for (const { where, expr } of exprs) {
    const names = metricNames(expr);
    assert.ok(names.length > 0, `${where}: no metric in ${expr}`);
    for (const n of names) {
      assert.ok(known(n), `${where}: ${n} is not exported`);
      used.add(n);
    }
  }
  assert.ok(used.has('nv_inference_request_success') && used.has('onnx_mme_request_duration_seconds_bucket'));
});

test('the per-target panels filter by the target label', () => {
  const text = repoFile('examples/grafana/onnx-mme-dashboard.json');
  assert.match(text, /target=~\\"\$target\\"/);
});
