/**
 * docs/errors.md against the code: the code table lists every ErrorCode with
 * the status error-response.ts maps it to, and the `details` table names
 * every key a ServingError's details can carry (found in src/).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';
import { ERROR_CODES } from '../../src/errors.js';
import { httpStatusOf, kserveStatusOf } from '../../src/http/error-response.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const page = readFileSync(path.join(repoRoot, 'docs', 'errors.md'), 'utf8');

/** Rows of the table whose header row starts with `| <first> |`, as cell lists. */
function table(markdown: string, first: string): string[][] {
  const lines = markdown.split('\n');
  const start = lines.findIndex((l) => new RegExp(`^\\|\\s*${first}\\s*\\|`).test(l));
  assert.ok(start >= 0, `docs/errors.md has no table starting | ${first} |`);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(
      line
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim()),
    );
  }
  return rows;
}

it('lists every error code once, with its HTTP status', () => {
  const rows = table(page, 'Code');
  const documented = rows.map((r) => r[0]!.replace(/`/g, ''));
  assert.deepEqual([...documented].sort(), [...ERROR_CODES].sort());
  for (const r of rows) assert.equal(Number(r[1]), httpStatusOf(r[0]!.replace(/`/g, '') as (typeof ERROR_CODES)[number]), `${r[0]}: status`);
});

it('says which codes the KServe v2 routes answer with another status, and which', () => {
  const differ = ERROR_CODES.filter((c) => kserveStatusOf(c) !== httpStatusOf(c));
  assert.deepEqual(differ, ['OVERLOADED', 'TIMEOUT'], 'the paragraph below the table names these two');
  const paragraph = page.slice(page.indexOf('**The KServe v2 routes**'));
  const statuses = new Set(differ.map((c) => kserveStatusOf(c)));
  assert.ok(
    paragraph.startsWith('**The KServe v2 routes** (`/v2/...`) answer `OVERLOADED` and `TIMEOUT` with\n**503**'),
    'docs/errors.md has the KServe v2 paragraph',
  );
  assert.deepEqual([...statuses], [503]);
});

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : [],
  );
}

it('documents every key of every `details` object in src/', () => {
  const keys = new Set<string>();
  for (const file of sources(path.join(repoRoot, 'src'))) {
    for (const m of readFileSync(file, 'utf8').matchAll(/details:\s*\{([^}]*)\}/g)) {
      for (const k of m[1]!.matchAll(/(?:^|,)\s*([A-Za-z_]\w*)\s*(?=:|,|$)/g)) keys.add(k[1]!);
    }
  }
  assert.ok(keys.has('needBytes') && keys.has('uris'), `the scan found ${[...keys].join(', ')}`);
  const documented = new Set(table(page, 'Key').map((r) => r[0]!.replace(/`/g, '')));
  assert.deepEqual([...keys].filter((k) => !documented.has(k)).sort(), []);
  assert.deepEqual([...documented].filter((k) => !keys.has(k)).sort(), [], 'documented keys no code sets');
});
