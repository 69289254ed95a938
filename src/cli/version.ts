/**
 * @module cli/version
 * The package's version for `onnx-mme --version`, read from the package.json
 * that ships beside `dist/` (in the repository and in the image's
 * /opt/onnx-mme), so the CLI can never report a number the package does not have.
 */
import { readFileSync } from 'node:fs';

/** package.json three folders up from dist/src/cli/version.js. */
const PACKAGE_JSON = new URL('../../../package.json', import.meta.url);

export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(PACKAGE_JSON, 'utf8')) as { name?: unknown; version?: unknown };
  if (pkg.name !== 'onnx-mme' || typeof pkg.version !== 'string') {
    throw new Error(`${PACKAGE_JSON.pathname} is not onnx-mme's package.json`);
  }
  return pkg.version;
}
