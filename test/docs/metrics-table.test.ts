/**
 * docs/metrics-and-logs.md's metric table is the registry the server builds
 * (createMetrics() and the admission area's createAdmissionMetrics(), as
 * server.ts composes them), row for row: every metric once, with its type
 * and its labels.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';
import { createAdmissionMetrics } from '../../src/observability/admission-metrics.js';
import { createMetrics } from '../../src/observability/metrics.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const page = readFileSync(path.join(repoRoot, 'docs', 'metrics-and-logs.md'), 'utf8');

function rows(): { name: string; type: string; labels: string[]; meaning: string }[] {
  const lines = page.split('\n');
  const start = lines.findIndex((l) => /^\|\s*Metric\s*\|\s*Type\s*\|\s*Labels\s*\|\s*Meaning\s*\|/.test(l));
  assert.ok(start >= 0, 'no | Metric | Type | Labels | Meaning | table');
  const out = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    const cells = line
      .split(/(?<!\\)\|/)
      .slice(1, -1)
      .map((c) => c.trim());
    out.push({
      name: cells[0]!.replace(/`/g, ''),
      type: cells[1]!,
      labels: cells[2]!
        .split(',')
        .map((l) => l.trim())
        .filter((l) => l !== ''),
      meaning: cells[3] ?? '',
    });
  }
  return out;
}

it('lists every metric with its type and labels, and nothing else', async () => {
  const { registry } = createMetrics();
  createAdmissionMetrics(registry, () => ({ requestsInFlight: 0, queued: 0, heldConnections: 0 }));
  const types = new Map((await registry.getMetricsAsJSON()).map((m) => [m.name, String(m.type)]));
  const declared = registry.getMetricsAsArray().map((m) => ({
    name: (m as unknown as { name: string }).name,
    labels: [...((m as unknown as { labelNames?: readonly string[] }).labelNames ?? [])].sort(),
  }));
  const documented = rows();
  assert.deepEqual(documented.map((r) => r.name).sort(), declared.map((d) => d.name).sort());
  for (const d of declared) {
    const row = documented.find((r) => r.name === d.name)!;
    assert.equal(row.type, types.get(d.name), `${d.name}: type`);
    assert.deepEqual([...row.labels].sort(), d.labels, `${d.name}: labels`);
    assert.ok(row.meaning.length > 10, `${d.name}: meaning`);
  }
});
