/**
 * The layering rules hold: the core never imports express, only runtime/
 * touches onnxruntime, only store/ touches archives and S3.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';
import { findViolations } from '../support/check-imports.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

it('src/ follows the import directions', async () => {
  assert.deepEqual(await findViolations(repoRoot), []);
});
