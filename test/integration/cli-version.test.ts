/**
 * `onnx-mme --version` prints package.json's version, nothing else, and exits 0;
 * the overview names the option.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { it } from 'node:test';
import { runCli } from '../support/cli.js';

const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };

it('--version, -v and version print the package version', async () => {
  for (const arg of ['--version', '-v', 'version']) {
    const r = await runCli([arg]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `${pkg.version}\n`);
    assert.match(pkg.version, /^\d+\.\d+\.\d+/);
  }
});

it('the overview lists --version', async () => {
  const r = await runCli(['--help']);
  assert.equal(r.code, 0);
  assert.match(r.stdout, /onnx-mme --version/);
});
