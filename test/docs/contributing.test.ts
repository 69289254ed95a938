/**
 * CONTRIBUTING.md stays true: every file and folder its "where to change
 * what" names exists, every `npm run` script it gives is one of package.json's,
 * every test file it names is a test of ours, and the README's map links it.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const page = readFileSync(path.join(repoRoot, 'CONTRIBUTING.md'), 'utf8');

it('names only paths that exist', () => {
  const named = [...page.matchAll(/`((?:src|test|docs|bench)\/[^`\s]*)`/g)].map((m) => m[1]!);
  assert.ok(named.length >= 20, `${named.length} paths read`);
  assert.deepEqual(
    named.filter((p) => !existsSync(path.join(repoRoot, p))),
    [],
  );
});

it("gives only package.json's scripts and our own test files", () => {
  const scripts = (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  const runs = [...page.matchAll(/npm run ([a-z]+(?::[a-z]+)?)/g)].map((m) => m[1]!);
  assert.ok(runs.length >= 5);
  assert.deepEqual(
    runs.filter((s) => scripts[s] === undefined),
    [],
  );
  const tests = [...page.matchAll(/dist\/(test\/[a-z/-]+)\.test\.js/g)].map((m) => `${m[1]!}.test.ts`);
  assert.ok(tests.length >= 1);
  assert.deepEqual(
    tests.filter((t) => !existsSync(path.join(repoRoot, t))),
    [],
  );
});

it("is linked from the README's map", () => {
  assert.match(readFileSync(path.join(repoRoot, 'README.md'), 'utf8'), /\]\(CONTRIBUTING\.md\)/);
});
