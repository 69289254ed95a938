/**
 * `npm ci` keeps onnxruntime-node's CUDA download off without npm warnings
 * (docs/configuration.md, "Installing onnxruntime-node and the CUDA download"):
 * package.json denies the install script, no project config npm does not
 * know, .ci/run exports the variable the script honours, and the script
 * really exits at once on it.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { allowScripts?: Record<string, boolean> };

/** The environment without npm's or onnxruntime's install settings from the runner. */
function plainEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^(npm_|ONNXRUNTIME_NODE_INSTALL)/i.test(k)) env[k] = v;
  return env;
}

it("package.json denies onnxruntime-node's install script (npm's allowScripts policy)", () => {
  assert.equal(pkg.allowScripts?.['onnxruntime-node'], false);
});

it('npm warns about no project config (no unknown .npmrc keys)', () => {
  const r = spawnSync('npm', ['config', 'get', 'loglevel'], { cwd: repoRoot, env: plainEnv(), encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.doesNotMatch(r.stderr, /Unknown (project|env|user) config/);
  if (existsSync(path.join(repoRoot, '.npmrc'))) {
    assert.doesNotMatch(readFileSync(path.join(repoRoot, '.npmrc'), 'utf8'), /^\s*onnxruntime-node-install/m);
  }
});

it('npm has no install script left unreviewed, where it knows allowScripts', (t) => {
  const r = spawnSync('npm', ['install-scripts', 'ls'], { cwd: repoRoot, env: plainEnv(), encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0 && /Unknown command|not a valid command/i.test(`${r.stdout}${r.stderr}`)) {
    t.skip('this npm predates allowScripts (ONNXRUNTIME_NODE_INSTALL=skip covers it)');
    return;
  }
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /No packages with unreviewed install scripts/);
});

it('.ci/run exports ONNXRUNTIME_NODE_INSTALL=skip before npm ci', () => {
  const ci = readFileSync(path.join(repoRoot, '.ci', 'run'), 'utf8');
  const exported = ci.indexOf('export ONNXRUNTIME_NODE_INSTALL=skip');
  assert.ok(exported >= 0);
  assert.ok(exported < ci.indexOf('npm ci'));
});

it("onnxruntime-node's install script exits at once, offline, on ONNXRUNTIME_NODE_INSTALL=skip", () => {
  const script = path.join(repoRoot, 'node_modules', 'onnxruntime-node', 'script', 'install.js');
  const r = spawnSync(process.execPath, [script], {
    cwd: path.dirname(script),
    env: { ...plainEnv(), ONNXRUNTIME_NODE_INSTALL: 'skip' },
    encoding: 'utf8',
    timeout: 30_000,
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout + r.stderr, '');
});
