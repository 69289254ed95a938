/**
 * The disk cache's byte budget on a real directory: LRU eviction of entries no
 * one holds, pinned entries kept, 507 for what cannot fit (leaving nothing
 * behind), superseded versions removed when released, and reuse and trimming
 * across a restart. The budget counts blocks (what `du` says), so budgets here
 * are multiples of what one small entry takes on this filesystem (`unit`).
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { createMetrics } from '../../../src/observability/metrics.js';
import { DiskCache } from '../../../src/store/disk-cache.js';
import { extractArchive } from '../../../src/store/extract-archive.js';
import { isServingError } from '../../support/serving-error.js';
import { tgz } from '../../support/raw-tar.js';
import { tempDir } from '../../support/temp-dir.js';

const cleanups: (() => Promise<void>)[] = [];
const ctx = { after: (fn: () => Promise<void>) => cleanups.push(fn) };
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

/** Writes `bytes` bytes as the model's content, the way an extraction would. */
function fillWith(bytes: number) {
  return async (contentDir: string, storageBytes: number) => {
    if (bytes > storageBytes) throw new Error(`test fill of ${bytes} bytes exceeds the ${storageBytes} bytes available`);
    await mkdir(path.join(contentDir, 'm', '1'), { recursive: true });
    await writeFile(path.join(contentDir, 'm', '1', 'model.onnx'), Buffer.alloc(bytes, 7));
    return { bytes, files: 1 };
  };
}

async function entryNames(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((n) => !n.startsWith('.'));
}

/** Disk bytes of one fillWith(1000) entry, measured on the test's filesystem. */
let unitBytes: number | undefined;
async function unit(): Promise<number> {
  if (unitBytes === undefined) {
    const cache = new DiskCache({ dir: await tempDir(ctx), maxBytes: 1 << 30 });
    const { pin } = await cache.publish({ target: 'probe', version: '1', fill: fillWith(1000) });
    unitBytes = cache.usedBytes;
    pin.release();
  }
  return unitBytes;
}

describe('DiskCache', () => {
  it('evicts the least recently used entries no one holds when a new model needs room', async () => {
    const dir = await tempDir(ctx);
    const metrics = createMetrics();
    const u = await unit();
    const cache = new DiskCache({ dir, maxBytes: 3 * u, metrics });
    const a = await cache.publish({ target: 'a', version: '1', fill: fillWith(1000) });
    const b = await cache.publish({ target: 'b', version: '1', fill: fillWith(1000) });
    a.pin.release();
    b.pin.release();
    // Use `a` again: `b` is now the least recently used.
    const again = await cache.lookup('a', '1');
    assert.ok(again);
    again.release();
    const c = await cache.publish({ target: 'c', version: '1', expectedBytes: 1000, fill: fillWith(1000) });
    assert.equal(cache.usedBytes, 3 * u);
    const d = await cache.publish({ target: 'd', version: '1', expectedBytes: 1000, fill: fillWith(1000) });
    await cache.settled();
    assert.equal(cache.has('b', '1'), false, 'b (least recently used) was evicted');
    assert.equal(cache.has('a', '1'), true);
    assert.equal(cache.usedBytes, 3 * u);
    assert.equal((await entryNames(dir)).length, 3);
    assert.equal(await cache.lookup('b', '1'), undefined);
    assert.match(await metrics.registry.metrics(), /onnx_mme_disk_cache_evictions_total 1/);
    c.pin.release();
    d.pin.release();
  });

  it('never evicts a held entry: a model that cannot fit beside them is 507 and leaves nothing', async () => {
    const dir = await tempDir(ctx);
    const u = await unit();
    const cache = new DiskCache({ dir, maxBytes: 2.5 * u });
    const a = await cache.publish({ target: 'a', version: '1', fill: fillWith(1000) });
    const b = await cache.publish({ target: 'b', version: '1', fill: fillWith(1000) });
    await assert.rejects(
      cache.publish({ target: 'c', version: '1', expectedBytes: u, fill: fillWith(1000) }),
      isServingError('INSUFFICIENT_STORAGE', new RegExp(`model 'c'.*${2 * u} of the ${2.5 * u}-byte budget .*held by models in use`)),
    );
    assert.equal((await entryNames(dir)).length, 2);
    assert.ok(existsSync(a.pin.entry.contentDir) && existsSync(b.pin.entry.contentDir));
    // Once `a` is let go, `c` fits.
    a.pin.release();
    const c = await cache.publish({ target: 'c', version: '1', expectedBytes: u, fill: fillWith(1000) });
    assert.equal(cache.has('a', '1'), false);
    b.pin.release();
    c.pin.release();
  });

  it('an archive larger than the whole budget is 507 naming the sizes, before anything is written', async () => {
    const dir = await tempDir(ctx);
    const cache = new DiskCache({ dir, maxBytes: 1000 });
    let filled = false;
    await assert.rejects(
      cache.publish({ target: 'huge.tar.gz', version: '1', expectedBytes: 5000, fill: async () => ((filled = true), { bytes: 0 }) }),
      isServingError('INSUFFICIENT_STORAGE', /model 'huge\.tar\.gz'.*5000 bytes, more than the whole disk cache budget of 1000 bytes/),
    );
    assert.equal(filled, false);
    assert.deepEqual(await readdir(dir), []);
  });

  it('a temporary directory staged before the entry is known (a download in flight) becomes the entry, or is removed', async () => {
    const dir = await tempDir(ctx);
    const cache = new DiskCache({ dir, maxBytes: 1 << 30 });
    await cache.open();
    const staged = cache.stage();
    const stagedDir = await staged;
    assert.equal(path.dirname(stagedDir), dir);
    assert.ok(path.basename(stagedDir).startsWith('.tmp-'));
    let filledInto: string | undefined;
    const { pin } = await cache.publish({
      target: 'a',
      version: '1',
      staged,
      fill: async (contentDir, storageBytes) => ((filledInto = contentDir), fillWith(1000)(contentDir, storageBytes)),
    });
    assert.equal(filledInto, path.join(stagedDir, 'model'), 'filled in the staged directory');
    assert.deepEqual(await readdir(dir), await entryNames(dir), 'renamed into place: no temporary directory left');
    assert.ok(existsSync(path.join(pin.entry.contentDir, 'm', '1', 'model.onnx')));
    pin.release();
    // Refused for room: the staged directory goes with the refusal; discarded unused: it goes too.
    const small = new DiskCache({ dir: await tempDir(ctx), maxBytes: 1000 });
    await small.open();
    await assert.rejects(
      small.publish({ target: 'huge', version: '1', expectedBytes: 5000, staged: small.stage(), fill: fillWith(1) }),
      isServingError('INSUFFICIENT_STORAGE', /model 'huge'/),
    );
    assert.deepEqual(await readdir(small.dir), []);
    await small.discard(small.stage());
    assert.deepEqual(await readdir(small.dir), []);
  });

  it('an archive that expands past the room left is stopped mid-extraction with 507, nothing cached', async () => {
    const dir = await tempDir(ctx);
    const cache = new DiskCache({ dir, maxBytes: 4096 });
    const archive = tgz([
      { name: 'm/config.pbtxt', body: 'name: "m"' },
      { name: 'm/1/model.onnx', body: Buffer.alloc(3000, 1) },
      { name: 'm/1/weights.bin', body: Buffer.alloc(3000, 2) },
    ]);
    const source = path.join(await tempDir(ctx), 'm.tar.gz');
    await writeFile(source, archive);
    await assert.rejects(
      cache.publish({
        target: 'm.tar.gz',
        version: '1',
        expectedBytes: archive.length,
        fill: (contentDir, storageBytes) => extractArchive(source, contentDir, { maxBytes: 1 << 30, maxEntries: 100, storageBytes }),
      }),
      isServingError(
        'INSUFFICIENT_STORAGE',
        /model 'm\.tar\.gz'.*more than the \d+ bytes of disk \(counted in blocks, as du does\) the disk cache can give it \(budget 4096 bytes/,
      ),
    );
    assert.deepEqual(await readdir(dir), [], 'no temporary directory and no entry left');
  });

  it('a superseded version is removed when its last holder releases it, not before', async () => {
    const dir = await tempDir(ctx);
    const cache = new DiskCache({ dir, maxBytes: 1_000_000 });
    const v1 = await cache.publish({ target: 't', version: 'v1', fill: fillWith(100) });
    const v2 = await cache.publish({ target: 't', version: 'v2', fill: fillWith(100) });
    await cache.retireOthers('t', v2.pin.entry.dir);
    assert.ok(existsSync(v1.pin.entry.contentDir), 'still held: a request in flight may read it');
    assert.equal(await cache.lookup('t', 'v1'), undefined, 'but no one new gets it');
    v1.pin.release();
    await cache.settled();
    assert.equal(existsSync(v1.pin.entry.dir), false);
    assert.deepEqual(await entryNames(dir), [path.basename(v2.pin.entry.dir)]);
    v2.pin.release();
  });

  it('a restart reuses complete entries, sweeps temporary ones and trims to a smaller budget, oldest first', async () => {
    const dir = await tempDir(ctx);
    const u = await unit();
    // A fake wall clock a minute apart per use: distinct mtimes (the LRU order on disk) without sleeping.
    let nowMs = Date.UTC(2026, 0, 1);
    const first = new DiskCache({ dir, maxBytes: 10 * u, nowMs: () => nowMs });
    for (const t of ['old', 'mid', 'new']) {
      const { pin } = await first.publish({ target: t, version: '1', fill: fillWith(1000) });
      pin.release();
      nowMs += 60_000;
    }
    await first.settled();
    await mkdir(path.join(dir, '.tmp-crashed', 'model'), { recursive: true });
    const second = new DiskCache({ dir, maxBytes: 2 * u });
    await second.open();
    await second.settled();
    assert.equal(second.has('old', '1'), false, 'the least recently used entry was trimmed');
    assert.equal(second.has('mid', '1'), true);
    assert.equal(second.has('new', '1'), true);
    assert.equal(existsSync(path.join(dir, '.tmp-crashed')), false);
    const pin = await second.lookup('new', '1');
    assert.ok(pin, 'reused without a new extraction');
    pin.release();
  });

  it('the default budget is a share of the volume', async () => {
    const dir = await tempDir(ctx);
    const cache = new DiskCache({ dir });
    await cache.open();
    assert.ok(Number.isFinite(cache.maxBytes) && cache.maxBytes > 0, `budget ${cache.maxBytes}`);
  });
});
