/**
 * @module store/small-io
 * Which file-system calls of a model's load run on the calling thread, and why.
 *
 * A call through node's thread pool (fs/promises, callbacks) is a round trip:
 * the main thread hands it to a pool thread, which wakes, makes the system
 * call and wakes the main thread back. On the 2-core bench VM that round trip
 * is 100-175 µs for a `stat` that takes 2-8 µs on the calling thread, and
 * 230-300 µs for an open and close that take 4 µs. A cold request for a small
 * model from S3 made about 45 of them one after another: about 5 ms of a 14 ms
 * request whose GET, extraction, session creation and run take 8.6 ms.
 *
 * So calls that only read, on the disk cache and on model directories, are
 * made on the calling thread: stat, lstat, statfs, realpath, a model
 * directory's listing, and reads of files of at most SMALL_IO_BYTES (a model's
 * config, a small model's file). They are answered from the kernel's caches in
 * microseconds; a model's files were just written, or are read once per load.
 *
 * What writes stays in the pool: creating a file or a directory took 40-400 µs
 * on the bench VM's virtual disk (busy: up to 1 ms), and on the calling thread
 * that is time no other request is served (made there, a /ping beside
 * back-to-back cold loads took 0.8-1.3 ms at the median instead of 0.5, and
 * 11-12 ms at p99 instead of 6: bench/README.md).
 * Larger reads and listings of unbounded directories (the cache's, a
 * repository's) stay in the pool too. On a network file system even a stat is
 * a network round trip, which is why MME_CACHE_DIR belongs on local disk
 * (docs/configuration.md).
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { readFile } from 'node:fs/promises';

/** Files up to this size are read on the calling thread (about 50 µs of copying from the page cache). */
export const SMALL_IO_BYTES = 256 * 1024;

/** Lists of at most this many paths are stat'ed on the calling thread (2-8 µs each); longer ones in the pool. */
export const SMALL_IO_PATHS = 64;

/**
 * The rest of a load after the event loop's next turn. With its reads on the calling thread, and a small model's
 * session created there too (runtime/session-placement.ts), a load could run from its files to its warm-up without a
 * break; its steps yield between them (the prediction, each session's creation, the package, the warm-up), so other
 * requests are served between the pieces.
 */
export function yieldTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

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
