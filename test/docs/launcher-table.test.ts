/**
 * docs/memory-and-caching.md's table of what the launcher sets is what the
 * launcher sets: its rows are test/support/launcher.ts's settings, row for
 * row, and those are the defaults written in `serve` itself
 * (test/integration/packaging.test.ts checks a started server has them).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';
import { LAUNCHER_ENV, LAUNCHER_NODE_FLAGS } from '../support/launcher.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

function tableRows(): [string, string][] {
  const lines = readFileSync(path.join(repoRoot, 'docs', 'memory-and-caching.md'), 'utf8').split('\n');
  const heading = lines.indexOf('### What the launcher sets');
  assert.ok(heading >= 0, 'no "### What the launcher sets" section');
  const start = lines.findIndex((l, i) => i > heading && /^\|\s*setting\s*\|\s*value\s*\|/.test(l));
  assert.ok(start >= 0, 'no | setting | value | why | table');
  const rows: [string, string][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    const [setting = '', value = ''] = line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim());
    rows.push([setting.replace(/`/g, ''), value.replace(/\s*\(.*\)$/, '')]);
  }
  return rows;
}

it("lists exactly the launcher's settings with their values, and `serve` applies those defaults", () => {
  const want: [string, string][] = [
    ...Object.entries(LAUNCHER_ENV),
    ...LAUNCHER_NODE_FLAGS.map((f): [string, string] => {
      const [flag = '', value = ''] = f.split('=');
      return [flag, value];
    }),
  ];
  assert.deepEqual(tableRows(), want);
  const serve = readFileSync(path.join(repoRoot, 'serve'), 'utf8');
  for (const [k, v] of Object.entries(LAUNCHER_ENV)) assert.ok(serve.includes(`: "\${${k}:=${v}}"`), `serve defaults ${k} to ${v}`);
  for (const flag of LAUNCHER_NODE_FLAGS) assert.ok(serve.includes(flag), `serve gives node ${flag}`);
});
