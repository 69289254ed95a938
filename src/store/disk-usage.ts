/**
 * @module store/disk-usage
 * What a model costs on disk, counted as `du` counts it: allocated blocks, not
 * file lengths. A 100-byte file takes a whole block (4 KiB on ext4, xfs and
 * tmpfs), and so does every directory; counted in data bytes, 100,000 tiny
 * files would pass as 300 KB while they hold 400 MB of the volume.
 *
 * Two figures, one unit:
 * - while an archive streams, each entry is charged in advance from its header
 *   (`chargeFile`, `ENTRY_BLOCKS`): the extraction stops before the disk fills;
 * - once an entry is complete its tree is measured (the sum of st_blocks × 512
 *   over every file, directory and link: `measureListedDiskBytes` from the
 *   list an extraction made of them, else `measureDiskBytes`, a walk): the
 *   number the disk cache's budget, eviction and metric use from then on.
 */
import { lstatSync, statfsSync } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import { SMALL_IO_PATHS } from './small-io.js';

/** The block every filesystem the cache is put on in practice allocates in. */
export const DEFAULT_BLOCK_BYTES = 4096;
/** Directory walks stat this many entries at once (bounded: a 10k-file model must not open 10k handles). */
const STAT_CONCURRENCY = 32;

/** The allocation unit of the filesystem holding `dir` (statfs's f_bsize), DEFAULT_BLOCK_BYTES if unknown; on the calling thread (store/small-io.ts). */
export function blockBytesOf(dir: string): number {
  try {
    const bsize = Number(statfsSync(dir).bsize);
    return Number.isSafeInteger(bsize) && bsize >= 512 && bsize <= 1024 * 1024 ? bsize : DEFAULT_BLOCK_BYTES;
  } catch {
    return DEFAULT_BLOCK_BYTES;
  }
}

/**
 * The advance charge for a regular file of `size` bytes: its data rounded up
 * to whole blocks, and at least one block (an empty file holds no data block,
 * but an inode; counting a block keeps a junk-file archive from looking free).
 */
export function chargeFile(size: number, blockBytes: number): number {
  return Math.max(1, Math.ceil(size / blockBytes)) * blockBytes;
}

/** The advance charge for a directory or a symbolic link: one block. */
export function chargeEntry(blockBytes: number): number {
  return blockBytes;
}

/**
 * Bytes allocated on disk for exactly `paths` (links are not followed), as
 * `du` counts them: for a tree whose every entry is known (an extraction
 * lists what it created), measured with no walk. A short list is read on the
 * calling thread (store/small-io.ts); a longer one in the pool, STAT_CONCURRENCY
 * at a time. Entries that vanish count as nothing.
 */
export async function measureListedDiskBytes(paths: readonly string[]): Promise<number> {
  let total = 0;
  if (paths.length <= SMALL_IO_PATHS) {
    for (const p of paths) total += blocksNow(p);
    return total * 512;
  }
  for (let i = 0; i < paths.length; i += STAT_CONCURRENCY) {
    const sizes = await Promise.all(
      paths.slice(i, i + STAT_CONCURRENCY).map((p) =>
        lstat(p).then(
          (s) => s.blocks * 512,
          () => 0,
        ),
      ),
    );
    for (const bytes of sizes) total += bytes;
  }
  return total;
}

function blocksNow(p: string): number {
  try {
    return lstatSync(p).blocks;
  } catch {
    return 0;
  }
}

/**
 * Bytes allocated on disk for `root` and everything beneath it (links are not
 * followed), as `du -s --block-size=1` reports. Entries that vanish during the
 * walk count as nothing.
 */
export async function measureDiskBytes(root: string): Promise<number> {
  let total = 0;
  const dirs: string[] = [];
  const visit = async (p: string): Promise<void> => {
    let s;
    try {
      s = await lstat(p);
    } catch {
      return;
    }
    total += s.blocks * 512;
    if (s.isDirectory()) dirs.push(p);
  };
  await visit(root);
  while (dirs.length > 0) {
    const dir = dirs.pop()!;
    let names: string[];
    try {
      names = await readdir(dir);
    } catch {
      continue;
    }
    for (let i = 0; i < names.length; i += STAT_CONCURRENCY) {
      await Promise.all(names.slice(i, i + STAT_CONCURRENCY).map((n) => visit(path.join(dir, n))));
    }
  }
  return total;
}
