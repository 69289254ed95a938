/**
 * docs/configuration.md's environment table is the server's SETTINGS, row for
 * row: the same variables with the same aliases, the same defaults, and no
 * row for a variable the server does not read.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';
import { SETTINGS } from '../../src/config/server-config.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const page = readFileSync(path.join(repoRoot, 'docs', 'configuration.md'), 'utf8');

interface Row {
  readonly names: string[];
  readonly defaultText: string;
  readonly meaning: string;
}

/** The rows of the first table whose header is `| Variable | Default | Meaning |`. */
function envTable(markdown: string): Row[] {
  const lines = markdown.split('\n');
  const start = lines.findIndex((l) => /^\|\s*Variable\s*\|\s*Default\s*\|\s*Meaning\s*\|/.test(l));
  assert.ok(start >= 0, 'docs/configuration.md has no | Variable | Default | Meaning | table');
  const rows: Row[] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    const cells = line
      .split(/(?<!\\)\|/)
      .slice(1, -1)
      .map((c) => c.trim());
    assert.equal(cells.length, 3, `not three cells: ${line}`);
    rows.push({
      names: [...cells[0]!.matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((m) => m[1]!),
      defaultText: cells[1]!.replace(/`/g, ''),
      meaning: cells[2]!,
    });
  }
  return rows;
}

const rows = envTable(page);

it('has one row per setting, naming its variable and aliases in order', () => {
  const documented = rows.map((r) => r.names.join(', ')).sort();
  const declared = SETTINGS.map((s) => s.env.join(', ')).sort();
  assert.deepEqual(documented, declared);
});

it("shows each setting's default as the code declares it, and says what it means", () => {
  for (const s of SETTINGS) {
    const row = rows.find((r) => r.names[0] === s.env[0])!;
    assert.equal(row.defaultText, s.defaultText.replace(/`/g, ''), `${s.env[0]}: default`);
    assert.ok(row.meaning.length >= 10, `${s.env[0]}: no meaning given`);
  }
});
