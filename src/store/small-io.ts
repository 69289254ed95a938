/**
 * @module store/small-io
 * Which file-system calls of a model's load run on the calling thread, and why.
 *
 * A call through node's thread pool (fs/promises, callbacks) is a round trip:
 * the main thread hands it to a pool thread, which wakes, makes the system
 * call and wakes the main thread back. On the 2-core bench VM that round trip
 * is 100-175 µs for a `stat` that takes 2-5 µs on the calling thread, and
 * 230-300 µs for an open and close that take 4 µs. A cold request for a small
 * model from S3 made about 40 of them one after another (the temporary
 * directory, the extraction's directories and files, the entry's metadata, the
 * rename, the package's layout and its model file): about 5 ms of a 14 ms
 * request whose GET, extraction, session creation and run take 8.6 ms.
 *
 * So on the disk cache and on model directories, metadata calls (mkdir, stat,
 * lstat, statfs, realpath, rename, a model directory's readdir) and reads and
 * writes of at most SMALL_IO_BYTES are made on the calling thread, an
 * extraction's first SMALL_IO_CREATIONS files and directories too. Larger file
 * data, recursive removals, listings of unbounded directories (the cache's, a
 * repository's) and a new entry's temporary directory stay
 * in the pool: the last is made while the download's request is in flight, so
 * its creation overlaps that wait (store/cache-publish.ts).
 *
 * The trade: while such a call runs, nothing else on the main thread does. A
 * stat or a read of a small file takes microseconds; creating a file or a
 * directory took 40-400 µs on the bench VM's virtual disk (busy: up to 1 ms),
 * so a small model's extraction (a version directory and two files) holds the
 * event loop about as long as one turn of requests. On a network file system
 * every call is a network round trip that holds it, which is why MME_CACHE_DIR
 * belongs on local disk (docs/configuration.md).
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { readFile } from 'node:fs/promises';

/** Reads and writes up to this size are made on the calling thread (about 50 µs of copying from the page cache). */
export const SMALL_IO_BYTES = 256 * 1024;

/** Lists of at most this many paths are stat'ed on the calling thread (2-8 µs each); longer ones in the pool. */
export const SMALL_IO_PATHS = 64;

/**
 * An extraction creates at most this many files and directories on the calling thread, the rest in the pool: a
 * model package holds a handful, and an archive of thousands of tiny files (up to MME_ARCHIVE_MAX_ENTRIES) must not
 * hold the event loop for thousands of creations.
 */
export const SMALL_IO_CREATIONS = 16;

/** The whole file: on the calling thread when it holds at most SMALL_IO_BYTES, else (or when it grew meanwhile) through the pool. */
export async function readModelFile(file: string): Promise<Buffer> {
  const fd = openSync(file, 'r');
  try {
    const size = fstatSync(fd).size;
    const whole = size <= SMALL_IO_BYTES ? readUpTo(fd, size) : undefined;
    if (whole !== undefined) return whole;
  } finally {
    closeSync(fd);
  }
  return readFile(file);
}

/** The file's bytes if it holds at most `size` (read one byte past it, so a file that grew since fstat is noticed), else undefined. */
function readUpTo(fd: number, size: number): Buffer | undefined {
  const buffer = Buffer.allocUnsafe(size + 1);
  let filled = 0;
  for (;;) {
    const n = readSync(fd, buffer, filled, buffer.length - filled, null);
    if (n === 0) return buffer.subarray(0, filled);
    filled += n;
    if (filled === buffer.length) return undefined;
  }
}
