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

/**
 * Cleanups of a whole test file, whose before/after hooks get no
 * TestContext: pass it where tempDir (and the fixtures) take one, and call
 * run() in the file's `after`; they run last registered first, so a server
 * stops before the directory under it goes.
 */
export class Cleanups {
  private readonly fns: (() => Promise<void> | void)[] = [];

  after(fn: () => Promise<void> | void): void {
    this.fns.push(fn);
  }

  async run(): Promise<void> {
    for (const fn of this.fns.splice(0).reverse()) await fn();
  }
}
