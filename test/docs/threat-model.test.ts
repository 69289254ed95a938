/**
 * docs/security.md's threat model stays true: it covers the assets issue 36
 * names and the three deployments, every asset row names the tests from
 * outside that prove it (each a test file of ours), and every setting it
 * names is one the configuration page documents.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const page = readFileSync(path.join(repoRoot, 'docs', 'security.md'), 'utf8');
const section = /<!-- threat model: begin[^>]*-->([\s\S]*?)<!-- threat model: end -->/.exec(page)?.[1] ?? '';

/** The rows of the markdown table that follows `heading` (a bold line), as cells. */
function tableAfter(heading: string): string[][] {
  const from = section.indexOf(`**${heading}**`);
  assert.ok(from >= 0, `no '${heading}' table in the threat model`);
  const rows: string[][] = [];
  for (const line of section.slice(from).split('\n').slice(1)) {
    if (line.trim() === '') {
      if (rows.length > 0) break;
      continue;
    }
    if (!line.startsWith('|')) break;
    rows.push(
      line
        .slice(1, -1)
        .split(' | ')
        .map((c) => c.trim()),
    );
  }
  return rows.slice(2); // the header and its rule
}

it('covers SageMaker, Kubernetes and a plain host', () => {
  const deployments = tableAfter('Who can reach the server').map((r) => r[0]);
  assert.deepEqual(deployments, ['SageMaker MME', 'Kubernetes', 'A plain host']);
});

it('covers the assets of issue 36 (credentials, models, the host, other tenants’ answers), each with a threat, a protection and tests that exist', () => {
  const rows = tableAfter('Assets');
  const assets = rows.map((r) => r[0]!.toLowerCase());
  for (const wanted of ['credentials', 'models', 'the host', "other tenants' answers"]) {
    assert.ok(
      assets.some((a) => a.startsWith(`**${wanted}`)),
      `no row for ${wanted}: ${assets.join(' / ')}`,
    );
  }
  for (const row of rows) {
    assert.equal(row.length, 4, `four cells: ${row.join(' | ')}`);
    const tests = [...row[3]!.matchAll(/`(test\/[^`]+\.test\.ts)`/g)].map((m) => m[1]!);
    assert.ok(tests.length >= 1, `${row[0]} names no test`);
    assert.deepEqual(
      tests.filter((t) => !existsSync(path.join(repoRoot, t))),
      [],
      `${row[0]} names tests that do not exist`,
    );
  }
});

it('names only settings the configuration page documents', () => {
  const configuration = readFileSync(path.join(repoRoot, 'docs', 'configuration.md'), 'utf8');
  const named = new Set([...section.matchAll(/`(MME_[A-Z_]+)(?:=[^`]*)?`/g)].map((m) => m[1]!));
  assert.ok(named.size >= 8, `${named.size} settings read`);
  assert.deepEqual(
    [...named].filter((s) => !configuration.includes(`| \`${s}\``)),
    [],
  );
});
