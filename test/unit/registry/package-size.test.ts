/**
 * The walk behind a load's prediction (registry/package-size.ts): the bytes
 * of every regular file, the `.onnx` files among them, and the bytes under
 * each directory walked, which seed the load's memo of version-directory
 * sizes, so placement and the booking walk nothing again.
 */
import assert from 'node:assert/strict';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { predictPackageFootprint, SESSION_OVERHEAD_BYTES, sizeMemo } from '../../../src/registry/package-size.js';
import { tempDir } from '../../support/temp-dir.js';

const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

async function tree(): Promise<string> {
  const root = await tempDir({ after: (fn: () => Promise<void>) => cleanups.push(fn) });
  await mkdir(path.join(root, 'a', '1'), { recursive: true });
  await mkdir(path.join(root, 'a', '2'), { recursive: true });
  await mkdir(path.join(root, 'b', '1'), { recursive: true });
  await writeFile(path.join(root, 'a', 'config.pbtxt'), 'x'.repeat(10));
  await writeFile(path.join(root, 'a', '1', 'model.onnx'), Buffer.alloc(1000));
  await writeFile(path.join(root, 'a', '2', 'model.onnx'), Buffer.alloc(2000));
  await writeFile(path.join(root, 'a', '2', 'weights.bin'), Buffer.alloc(300));
  await writeFile(path.join(root, 'b', '1', 'model.onnx'), Buffer.alloc(4000));
  await symlink(path.join(root, 'a', '1', 'model.onnx'), path.join(root, 'b', 'linked.onnx'));
  await symlink(path.join(root, 'nowhere'), path.join(root, 'b', 'dangling'));
  return root;
}

describe('package size', () => {
  it('counts every regular file (links followed, dangling ones nothing), the .onnx sessions, and each directory', async () => {
    const root = await tree();
    const f = await predictPackageFootprint(root);
    assert.equal(f.fileBytes, 10 + 1000 + 2000 + 300 + 4000 + 1000);
    assert.equal(f.predictedBytes, f.fileBytes + 4 * SESSION_OVERHEAD_BYTES);
    assert.equal(f.dirBytes.get(path.join(root, 'a', '2')), 2300);
    assert.equal(f.dirBytes.get(path.join(root, 'a')), 3310);
    assert.equal(f.dirBytes.get(path.join(root, 'b')), 5000);
    assert.equal(f.dirBytes.get(root), f.fileBytes);
  });

  it("a load's memo answers from the prediction's walk, and walks only what it has not seen", async () => {
    const root = await tree();
    const f = await predictPackageFootprint(root);
    // Grow a file after the walk: the memo still answers what the walk saw (an extracted entry does not change while
    // it is loaded), and a directory the walk did not cover is walked now.
    await writeFile(path.join(root, 'a', '2', 'weights.bin'), Buffer.alloc(900));
    const sizeOf = sizeMemo(f.dirBytes);
    assert.equal(await sizeOf(path.join(root, 'a', '2')), 2300);
    assert.equal(await sizeMemo()(path.join(root, 'a', '2')), 2900);
  });
});
