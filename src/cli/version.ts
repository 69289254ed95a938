/**
 * @module cli/version
 * What `onnx-mme --version` prints: the package's version, read from the
 * package.json that ships beside `dist/` (in the repository and in the image's
 * /opt/onnx-mme), so the CLI can never report a number the package does not
 * have; then the Node.js running it and the onnxruntime-node it loads (from
 * that package's own package.json: onnxruntime-node pins its native library to
 * its version), which is what an image's users need to know to match a bug
 * report or a release note. Nothing is loaded: onnxruntime's native library
 * is not opened to answer --version.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/** package.json three folders up from dist/src/cli/version.js. */
const PACKAGE_JSON = new URL('../../../package.json', import.meta.url);

export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(PACKAGE_JSON, 'utf8')) as { name?: unknown; version?: unknown };
  if (pkg.name !== 'onnx-mme' || typeof pkg.version !== 'string') {
    throw new Error(`${PACKAGE_JSON.pathname} is not onnx-mme's package.json`);
  }
  return pkg.version;
}

/** The installed onnxruntime-node's version, as node resolves it from here (the same copy the server loads). */
export function onnxruntimeVersion(): string {
  const file = createRequire(import.meta.url).resolve('onnxruntime-node/package.json');
  const pkg = JSON.parse(readFileSync(file, 'utf8')) as { version?: unknown };
  if (typeof pkg.version !== 'string') throw new Error('onnxruntime-node/package.json has no version');
  return pkg.version;
}

/** `onnx-mme 0.1.0` / `node v24.x.y` / `onnxruntime 1.30.0`, one per line. */
export function versionText(): string {
  return [`onnx-mme ${packageVersion()}`, `node ${process.version}`, `onnxruntime ${onnxruntimeVersion()}`].join('\n');
}
