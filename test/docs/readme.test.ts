/**
 * README.md stays an entry point: at most 20 KB, shows the two commands, and
 * its map of docs/ names every page there (a page nobody can find from the
 * README is a page nobody reads).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const readmePath = path.join(repoRoot, 'README.md');
const readme = readFileSync(readmePath, 'utf8');

it('is at most 20 KB', () => {
  const size = statSync(readmePath).size;
  assert.ok(size <= 20 * 1024, `README.md is ${size} bytes; move detail into docs/ (one page per concern)`);
});

it('shows the two commands', () => {
  assert.match(readme, /^npm ci && npm start$/m);
  assert.match(readme, /^npm ci && npm test$/m);
});

it('maps every page of docs/', () => {
  const pages = readdirSync(path.join(repoRoot, 'docs')).filter((f) => f.endsWith('.md'));
  assert.ok(pages.length >= 10);
  const missing = pages.filter((p) => !readme.includes(`](docs/${p})`));
  assert.deepEqual(missing, [], "add a row to the README's Documentation table");
});
