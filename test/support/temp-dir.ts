/**
 * @module test/support/temp-dir
 * Fresh directories under the OS temp dir, removed when the test ends.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestContext } from 'node:test';

export async function tempDir(t: TestContext | { after(fn: () => Promise<void>): void }, prefix = 'onnx-mme-test-'): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}
