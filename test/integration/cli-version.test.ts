/**
 * `onnx-mme --version` prints the package version from package.json, the
 * Node.js running it and the installed onnxruntime-node's version, and exits
 * 0; the overview names the option. docker/ci-image-test.sh runs the same
 * command inside the image.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { it } from 'node:test';
import { runCli } from '../support/cli.js';

const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
const ort = createRequire(import.meta.url)('onnxruntime-node/package.json') as { version: string };
const lock = JSON.parse(readFileSync(new URL('../../../package-lock.json', import.meta.url), 'utf8')) as {
  packages: Record<string, { version?: string }>;
};

it('--version, -v and version print the package, Node.js and onnxruntime versions', async () => {
  for (const arg of ['--version', '-v', 'version']) {
    const r = await runCli([arg]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `onnx-mme ${pkg.version}\nnode ${process.version}\nonnxruntime ${ort.version}\n`);
    assert.match(pkg.version, /^\d+\.\d+\.\d+/);
    // The installed onnxruntime-node is the lockfile's.
    assert.equal(ort.version, lock.packages['node_modules/onnxruntime-node']?.version);
  }
});

it('the overview lists --version', async () => {
  const r = await runCli(['--help']);
  assert.equal(r.code, 0);
  assert.match(r.stdout, /onnx-mme --version/);
});
