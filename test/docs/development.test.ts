/**
 * docs/development.md's claims about the checks hold: its rule table is
 * exactly the rules eslint.config.js turns on, and the three test tiers
 * (test:unit, test:integration, test:docs) together hold every test file, so
 * running them is running `npm test`.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, it } from 'node:test';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const page = readFileSync(path.join(repoRoot, 'docs', 'development.md'), 'utf8');
const TIERS = ['unit', 'integration', 'docs'] as const;

type Severity = 'off' | 'warn' | 'error' | 0 | 1 | 2;
type FlatConfig = { rules?: Record<string, Severity | [Severity, ...unknown[]]> };

/** Rules some block of the flat config turns on (a later block may turn one off again). */
async function enabledRules(): Promise<string[]> {
  const mod = (await import(pathToFileURL(path.join(repoRoot, 'eslint.config.js')).href)) as { default: FlatConfig[] };
  const level = new Map<string, Severity>();
  for (const block of mod.default) {
    for (const [rule, setting] of Object.entries(block.rules ?? {})) level.set(rule, Array.isArray(setting) ? setting[0] : setting);
  }
  return [...level]
    .filter(([, s]) => s !== 'off' && s !== 0)
    .map(([rule]) => rule)
    .sort();
}

function documentedRules(): string[] {
  const section = page.slice(page.indexOf('### The rules, and why each'));
  return [...section.matchAll(/^\| `((?:@typescript-eslint\/)?[a-z-]+)`/gm)].map((m) => m[1]!).sort();
}

function testFiles(dir: string): string[] {
  return readdirSync(path.join(repoRoot, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? testFiles(path.join(dir, e.name)) : /\.test\.ts$/.test(e.name) ? [path.join(dir, e.name)] : [],
  );
}

describe('docs/development.md', () => {
  it('lists exactly the lint rules eslint.config.js turns on', async () => {
    const documented = documentedRules();
    assert.ok(documented.length >= 5, 'the rule table is found');
    assert.deepEqual(documented, await enabledRules());
  });

  it('the test tiers hold every test file, and npm test runs them all', () => {
    const scripts = (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    for (const tier of TIERS) {
      assert.match(scripts[`test:${tier}`] ?? '', new RegExp(`^npm run build && node --test .* 'dist/test/${tier}/\\*\\*/\\*\\.test\\.js'$`), `test:${tier}`);
      assert.ok(page.includes(`npm run test:${tier}`), `docs/development.md names test:${tier}`);
    }
    // A glob, not a directory: Node 24's runner loads a directory argument as a module and runs nothing.
    assert.match(scripts['test'] ?? '', / 'dist\/test\/\*\*\/\*\.test\.js'$/);
    const outside = testFiles('test').filter((f) => !TIERS.some((tier) => f.startsWith(path.join('test', tier) + path.sep)));
    assert.deepEqual(outside, [], 'test files outside test/unit, test/integration and test/docs run in npm test but in no tier');
    assert.ok(testFiles('test').length > 100);
  });
});
