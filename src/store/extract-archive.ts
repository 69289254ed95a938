/**
 * @module store/extract-archive
 * Streams a `.tar.gz` model archive (a local file or any readable stream, e.g.
 * an S3 GetObject body) into an empty directory, refusing anything hostile.
 *
 * Only the tar *parser* of the `tar` package is used; every file, directory and
 * link is created here, so each decision is ours:
 * - Paths: absolute, drive-letter, backslash, control-character and `..` paths
 *   are rejected; `.` and empty segments are dropped; macOS junk (`._*`,
 *   `.DS_Store`, `__MACOSX/`) is skipped.
 * - Entry types: regular files and directories are written. Hard links, devices,
 *   FIFOs and every other type are rejected.
 * - Symbolic links (policy): allowed only when relative and pointing inside the
 *   destination. They are created after every file has been written, so no file
 *   is ever written through a link; no entry may sit beneath a link; and once
 *   created each link is resolved with realpath and must land inside the
 *   destination (this catches chains such as `s -> .` + `l -> s/..`). Dangling
 *   and circular links are rejected.
 * - Files are opened with O_EXCL|O_NOFOLLOW: duplicate entries are rejected.
 * - Limits: a file whose header size is over `maxBytes` is refused before any
 *   byte is written; written bytes are counted as they stream; the decompressed
 *   stream itself is bounded (a gzip bomb of padding or junk entries never
 *   reaches the disk but would still burn CPU), and so is its ratio to the
 *   compressed bytes read (`maxRatio`, past RATIO_GRACE_BYTES): a bomb stops
 *   after a few MiB, not at the byte limit; bytes after the end-of-archive
 *   marker are bounded too.
 * - Disk: every entry is charged in blocks from its header before it is
 *   written (store/disk-usage.ts), and the charge is checked against
 *   `storageBytes`, so 100,000 tiny files stop at the budget instead of
 *   costing 400 MB while counting as 300 KB.
 *
 * On failure the function returns only after every file handle is closed, so
 * the caller can remove `destDir` without racing a late write.
 */

import { once } from 'node:events';
import { constants as fsConstants, createReadStream, realpathSync } from 'node:fs';
import { mkdir, open, realpath, symlink } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGunzip, type Gunzip } from 'node:zlib';
import { Parser, type ReadEntry } from 'tar';
import { retryAfter, ServingError } from '../errors.js';
import { chargeEntry, chargeFile, blockBytesOf } from './disk-usage.js';
import { RATIO_GRACE_BYTES, type ExtractLimits } from './extract-limits.js';
import { errorCode, fsReason, messageOf } from './node-error.js';

export type { ExtractLimits } from './extract-limits.js';
export { DEFAULT_EXTRACT_LIMITS } from './extract-limits.js';

export interface ExtractResult {
  /** Regular files written (skipped junk and links not counted). */
  readonly files: number;
  /** File bytes written. */
  readonly bytes: number;
  /** Disk bytes charged in advance: whole blocks per file, one per directory and link. */
  readonly diskBytes: number;
  /**
   * Every directory, file and link it created (absolute paths; the
   * destination itself not included): what the tree holds, so it can be
   * measured without walking it (disk-usage.ts measureListedDiskBytes).
   */
  readonly paths: readonly string[];
}

/** Pax / GNU long-name records are small; a bigger one is an attack, not a name. */
const MAX_META_ENTRY_BYTES = 64 * 1024;
/** tar writers pad to their record size (10 KiB for GNU tar); allow far more, but not unbounded. */
const MAX_TRAILING_BYTES = 1024 * 1024;
/** Headers, padding and pax records on top of file data, per entry, for the decompressed-stream bound. */
const OVERHEAD_PER_ENTRY = 4096;
const OVERHEAD_FIXED = 64 * 1024 * 1024;
/** Fewer, larger writes: zlib's default 16 KiB chunks mean 4x the syscalls. */
const GUNZIP_CHUNK_BYTES = 64 * 1024;
const FILE_OPEN_FLAGS = fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW;
const CONFLICT_CODES = new Set(['EEXIST', 'ENOTDIR', 'EISDIR', 'ENAMETOOLONG', 'ELOOP']);
const STORAGE_CODES = new Set(['ENOSPC', 'EDQUOT']);

/**
 * Extracts the gzip-compressed tar `input` into `destDir` (which must exist and
 * be empty). Throws ServingError ARCHIVE_REJECTED (hostile, over a limit, or
 * corrupt), INSUFFICIENT_STORAGE, UPSTREAM_UNAVAILABLE (the input stream failed),
 * CANCELLED/TIMEOUT (via `signal`).
 */
export async function extractArchive(
  input: NodeJS.ReadableStream | string,
  destDir: string,
  limits: ExtractLimits,
  signal?: AbortSignal,
): Promise<ExtractResult> {
  if (signal?.aborted) throw abortError(signal);
  let root: string;
  // Reads of metadata, on the calling thread (store/small-io.ts); files and directories are created in the pool.
  try {
    root = realpathSync(destDir);
  } catch (err) {
    throw new ServingError('INTERNAL', `the extraction directory is not usable (${fsReason(err)})`, { cause: err });
  }
  return new Extraction(root, limits, blockBytesOf(root)).run(input, signal);
}

type PathCheck = { readonly kind: 'ok'; readonly rel: string } | { readonly kind: 'skip' } | { readonly kind: 'reject'; readonly reason: string };

class Extraction {
  private entries = 0;
  private files = 0;
  private bytes = 0;
  /** Disk bytes charged so far (blocks), checked against limits.storageBytes. */
  private disk = 0;
  private decompressed = 0;
  private trailing = 0;
  private sawEof = false;
  private failure: ServingError | undefined;
  /** Aborted on the first failure: stops the pipeline and every waiting write. */
  private readonly halt = new AbortController();
  private readonly pending = new Set<Promise<void>>();
  private readonly dirs = new Map<string, Promise<void>>();
  /** Directories charged a block (each created one, implicit parents included). */
  private readonly chargedDirs = new Set<string>();
  /** Files and links created (absolute paths); the directories are chargedDirs. */
  private readonly created: string[] = [];
  /** Archive-relative link path → link target, created after all files. */
  private readonly links = new Map<string, string>();
  private readonly decompressedLimit: number;

  constructor(
    private readonly root: string,
    private readonly limits: ExtractLimits,
    private readonly blockBytes: number,
  ) {
    this.decompressedLimit = limits.maxBytes + limits.maxEntries * OVERHEAD_PER_ENTRY + OVERHEAD_FIXED;
    // The destination exists: files at the archive's top level need no mkdir.
    this.dirs.set(root, Promise.resolve());
  }

  async run(input: NodeJS.ReadableStream | string, signal: AbortSignal | undefined): Promise<ExtractResult> {
    const onAbort = (): void => this.fail(abortError(signal));
    signal?.addEventListener('abort', onAbort, { once: true });

    const source: NodeJS.ReadableStream = typeof input === 'string' ? createReadStream(input) : input;
    let sourceError: unknown;
    source.on('error', (err: unknown) => {
      sourceError ??= err;
    });
    const parser = new Parser({
      strict: true,
      // The input is already gunzipped: no sniffing for other compressions.
      brotli: false,
      zstd: false,
      maxMetaEntrySize: MAX_META_ENTRY_BYTES,
    });
    parser.on('entry', (entry: ReadEntry) => this.onEntry(entry));
    parser.on('ignoredEntry', (entry: ReadEntry) => this.onIgnoredEntry(entry));
    parser.on('eof', () => {
      this.sawEof = true;
    });
    parser.on('error', (err: unknown) => this.fail(corrupt(err)));

    // Its bytesWritten is the compressed input zlib has consumed so far (not merely been handed): the ratio's denominator.
    const gunzip = createGunzip({ chunkSize: GUNZIP_CHUNK_BYTES });
    try {
      await pipeline(source, gunzip, async (chunks: AsyncIterable<Buffer>) => this.feed(chunks, parser, gunzip), { signal: this.halt.signal });
      const ended = once(parser, 'end', { signal: this.halt.signal });
      parser.end();
      await ended;
    } catch (err) {
      this.fail(this.classify(err, sourceError));
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }

    await this.settle();
    if (!this.failure) {
      try {
        await this.createLinks();
      } catch (err) {
        this.fail(this.classify(err, undefined));
      }
    }
    if (this.failure) throw this.failure;
    return { files: this.files, bytes: this.bytes, diskBytes: this.disk, paths: [...this.chargedDirs, ...this.created] };
  }

  private async feed(chunks: AsyncIterable<Buffer>, parser: Parser, gunzip: Gunzip): Promise<void> {
    for await (const chunk of chunks) {
      this.decompressed += chunk.length;
      // At least one byte: the first output can come before zlib reports consuming anything.
      const compressed = Math.max(1, gunzip.bytesWritten);
      if (this.sawEof) {
        // Past the end-of-archive marker the parser would only buffer; count and drop.
        this.trailing += chunk.length;
        if (this.trailing > MAX_TRAILING_BYTES) {
          this.stop(corrupt(`more than ${MAX_TRAILING_BYTES} bytes follow the end of the tar archive`));
        }
        continue;
      }
      const maxRatio = this.limits.maxRatio ?? 0;
      if (maxRatio > 0 && this.decompressed > RATIO_GRACE_BYTES && this.decompressed > compressed * maxRatio) {
        this.stop(
          new ServingError(
            'ARCHIVE_REJECTED',
            `model archive expands more than ${maxRatio}:1 (${compressed} compressed bytes gave ` +
              `${this.decompressed} bytes of tar data): a compression bomb, or a model of ` +
              `zeros that needs a higher MME_ARCHIVE_MAX_RATIO`,
            { details: { compressedBytes: compressed, decompressedBytes: this.decompressed, limitRatio: maxRatio } },
          ),
        );
      }
      if (this.decompressed > this.decompressedLimit) {
        this.stop(
          new ServingError(
            'ARCHIVE_REJECTED',
            `model archive expands to more than ${this.decompressedLimit} bytes of tar data ` + `(file data limit ${this.limits.maxBytes} bytes)`,
            { details: { limitBytes: this.limits.maxBytes } },
          ),
        );
      }
      if (!parser.write(chunk)) await once(parser, 'drain', { signal: this.halt.signal });
      if (this.failure) throw this.failure;
    }
  }

  /** Records `err` (unless an earlier failure exists) and throws the recorded failure. */
  private stop(err: ServingError): never {
    this.fail(err);
    throw this.failure ?? err;
  }

  /** Records the first failure only: later errors are usually its consequences. */
  private fail(err: ServingError): void {
    if (this.failure) return;
    this.failure = err;
    this.halt.abort(err);
  }

  private classify(err: unknown, sourceError: unknown): ServingError {
    if (this.failure) return this.failure;
    if (err instanceof ServingError) return err;
    const code = errorCode(err);
    if (code !== undefined && STORAGE_CODES.has(code)) return insufficientStorage(err);
    // Before the source check: on Node.js 24, pipeline() destroys the source with gunzip's error,
    // so the source emits zlib's own error too. No source (file, S3 body) fails with a Z_ code.
    if (code?.startsWith('Z_') || isTarError(err)) return corrupt(err);
    if (sourceError !== undefined && err === sourceError) {
      // Its source stopped mid-read (a local volume's I/O error; an S3 body is retried by remote-fetch first).
      return new ServingError('UPSTREAM_UNAVAILABLE', `reading the model archive failed: ${messageOf(err)}`, {
        cause: err,
        details: retryAfter(),
      });
    }
    return new ServingError('INTERNAL', `extracting the model archive failed: ${fsReason(err)}`, { cause: err });
  }

  private onIgnoredEntry(entry: ReadEntry): void {
    entry.resume();
    if (this.failure || !this.countEntry(entry)) return;
    const reason = entry.meta ? `extended header is larger than ${MAX_META_ENTRY_BYTES} bytes` : `unsupported entry type '${String(entry.type)}'`;
    this.fail(rejected(entry.path, reason));
  }

  private onEntry(entry: ReadEntry): void {
    if (this.failure || !this.countEntry(entry)) {
      entry.resume();
      return;
    }
    const check = checkEntryPath(entry.path);
    if (check.kind !== 'ok') {
      entry.resume();
      if (check.kind === 'reject') this.fail(rejected(entry.path, check.reason));
      return;
    }
    const rel = check.rel;
    const under = this.linkAbove(rel);
    if (under !== undefined) {
      entry.resume();
      const reason = under === rel ? 'the path is also a symbolic link' : `the path lies beneath symbolic link '${under}'`;
      this.fail(rejected(entry.path, reason));
      return;
    }
    const abs = path.join(this.root, rel);

    switch (entry.type) {
      case 'File':
      case 'OldFile':
      case 'ContiguousFile':
        this.track(entry.path, this.writeFile(entry, abs));
        return;
      case 'Directory':
        entry.resume();
        this.track(entry.path, this.ensureDir(abs));
        return;
      case 'SymbolicLink': {
        entry.resume();
        const reason = checkLinkTarget(rel, entry.linkpath);
        if (reason !== undefined) {
          this.fail(rejected(entry.path, reason));
        } else if (this.links.has(rel)) {
          this.fail(rejected(entry.path, 'the archive holds this symbolic link twice'));
        } else {
          this.links.set(rel, entry.linkpath ?? '');
        }
        return;
      }
      case 'Link':
        entry.resume();
        this.fail(rejected(entry.path, 'hard links are not allowed'));
        return;
      case 'CharacterDevice':
      case 'BlockDevice':
        entry.resume();
        this.fail(rejected(entry.path, 'device files are not allowed'));
        return;
      case 'FIFO':
        entry.resume();
        this.fail(rejected(entry.path, 'FIFOs are not allowed'));
        return;
      default:
        entry.resume();
        this.fail(rejected(entry.path, `unsupported entry type '${String(entry.type)}'`));
    }
  }

  private countEntry(entry: ReadEntry): boolean {
    this.entries += 1;
    if (this.entries <= this.limits.maxEntries) return true;
    this.fail(
      new ServingError('ARCHIVE_REJECTED', `model archive holds more than ${this.limits.maxEntries} entries (stopped at '${entry.path}')`, {
        details: { entry: entry.path, limitEntries: this.limits.maxEntries },
      }),
    );
    return false;
  }

  /** The declared link at `rel` or at one of its ancestors, if any. */
  private linkAbove(rel: string): string | undefined {
    let prefix = '';
    for (const segment of rel.split('/')) {
      prefix = prefix === '' ? segment : `${prefix}/${segment}`;
      if (this.links.has(prefix)) return prefix;
    }
    return undefined;
  }

  private track(entryPath: string, work: Promise<void>): void {
    const tracked = work.catch((err: unknown) => this.fail(this.entryError(entryPath, err)));
    this.pending.add(tracked);
    void tracked.finally(() => this.pending.delete(tracked));
  }

  private async settle(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }

  private entryError(entryPath: string, err: unknown): ServingError {
    if (err instanceof ServingError) return err;
    if (this.failure) return this.failure;
    const code = errorCode(err);
    if (code !== undefined && STORAGE_CODES.has(code)) return insufficientStorage(err);
    if (code !== undefined && CONFLICT_CODES.has(code)) {
      return rejected(entryPath, `it conflicts with an earlier entry or is unusable (${code})`);
    }
    return new ServingError('INTERNAL', `extracting archive entry '${printable(entryPath)}' failed: ${fsReason(err)}`, {
      cause: err,
    });
  }

  private ensureDir(abs: string): Promise<void> {
    let made = this.dirs.get(abs);
    if (!made) {
      try {
        this.chargeDirs(abs);
      } catch (err) {
        return Promise.reject(err);
      }
      made = mkdir(abs, { recursive: true, mode: 0o755 }).then(() => undefined);
      this.dirs.set(abs, made);
    }
    return made;
  }

  /** A block for `abs` and for each parent below the root that mkdir -p will create with it. */
  private chargeDirs(abs: string): void {
    for (let dir = abs; dir !== this.root && isInside(this.root, dir); dir = path.dirname(dir)) {
      if (this.chargedDirs.has(dir)) break;
      this.chargedDirs.add(dir);
      this.charge(chargeEntry(this.blockBytes));
    }
  }

  /** Adds `bytes` to the disk charge; past the room the cache can give, INSUFFICIENT_STORAGE before anything is written. */
  private charge(bytes: number): void {
    this.disk += bytes;
    if (this.limits.storageBytes !== undefined && this.disk > this.limits.storageBytes) {
      throw noRoom(this.limits.storageBytes);
    }
  }

  private async writeFile(entry: ReadEntry, abs: string): Promise<void> {
    const declared = entry.size ?? 0;
    if (declared > this.limits.maxBytes) {
      entry.resume();
      throw rejected(entry.path, `the file is ${declared} bytes, over the limit of ${this.limits.maxBytes} bytes`);
    }
    if (this.bytes + declared > this.limits.maxBytes) {
      entry.resume();
      throw totalTooLarge(entry.path, this.limits.maxBytes);
    }
    try {
      this.charge(chargeFile(declared, this.blockBytes));
    } catch (err) {
      entry.resume();
      throw err;
    }
    await this.ensureDir(path.dirname(abs));
    const mode = (entry.mode ?? 0o644) & 0o111 ? 0o755 : 0o644;
    const handle = await open(abs, FILE_OPEN_FLAGS, mode);
    this.created.push(abs);
    try {
      await new Promise<void>((resolve, reject) => {
        const stop = (): void => reject(this.failure ?? abortError(undefined));
        if (this.halt.signal.aborted) return stop();
        this.halt.signal.addEventListener('abort', stop, { once: true });
        let written = 0;
        // One write in flight at a time: pausing the entry pauses the parser,
        // which pauses the pipeline, so memory stays bounded on any disk speed.
        entry.on('data', (chunk: Buffer) => {
          written += chunk.length;
          this.bytes += chunk.length;
          if (written > this.limits.maxBytes) {
            entry.pause();
            reject(rejected(entry.path, `the file exceeds the limit of ${this.limits.maxBytes} bytes`));
            return;
          }
          if (this.bytes > this.limits.maxBytes) {
            entry.pause();
            reject(totalTooLarge(entry.path, this.limits.maxBytes));
            return;
          }
          entry.pause();
          handle.write(chunk).then(() => {
            if (!this.failure) entry.resume();
          }, reject);
        });
        entry.on('end', () => {
          this.halt.signal.removeEventListener('abort', stop);
          resolve();
        });
      });
      this.files += 1;
    } finally {
      await handle.close();
    }
  }

  private async createLinks(): Promise<void> {
    for (const [rel, target] of this.links) {
      const abs = path.join(this.root, rel);
      try {
        this.charge(chargeEntry(this.blockBytes));
        await this.ensureDir(path.dirname(abs));
        await symlink(target, abs);
        this.created.push(abs);
      } catch (err) {
        throw this.entryError(rel, err);
      }
    }
    for (const rel of this.links.keys()) {
      let resolved: string;
      try {
        resolved = await realpath(path.join(this.root, rel));
      } catch (err) {
        throw rejected(rel, `the symbolic link is dangling or circular (${errorCode(err) ?? messageOf(err)})`);
      }
      if (!isInside(this.root, resolved)) {
        throw rejected(rel, 'the symbolic link resolves outside the extraction directory');
      }
    }
  }
}

/** Lexical checks on an archive path; `rel` is the cleaned, relative form. */
function checkEntryPath(raw: string): PathCheck {
  if (raw.includes('\0')) return { kind: 'reject', reason: 'the path contains a NUL character' };
  if (/\p{Cc}/u.test(raw)) return { kind: 'reject', reason: 'the path contains a control character' };
  if (raw.includes('\\')) return { kind: 'reject', reason: 'the path contains a backslash' };
  if (raw.startsWith('/') || /^[A-Za-z]:/.test(raw)) {
    return { kind: 'reject', reason: 'the path is absolute' };
  }
  const segments = raw.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) return { kind: 'reject', reason: 'the path contains a ".." segment' };
  if (segments.length === 0) return { kind: 'skip' }; // the archive root itself, e.g. `./`
  const base = segments[segments.length - 1] ?? '';
  if (segments[0] === '__MACOSX' || segments.includes('.DS_Store') || base.startsWith('._')) {
    return { kind: 'skip' };
  }
  return { kind: 'ok', rel: segments.join('/') };
}

/** Returns why the link target is refused, or undefined when it is lexically inside the archive. */
function checkLinkTarget(rel: string, linkpath: string | undefined): string | undefined {
  if (!linkpath) return 'the symbolic link has no target';
  if (linkpath.includes('\0') || /\p{Cc}/u.test(linkpath)) {
    return 'the symbolic link target contains a control character';
  }
  if (linkpath.includes('\\')) return 'the symbolic link target contains a backslash';
  if (linkpath.startsWith('/') || /^[A-Za-z]:/.test(linkpath)) {
    return `the symbolic link points to the absolute path '${linkpath}'`;
  }
  const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(rel), linkpath));
  if (resolved === '..' || resolved.startsWith('../')) {
    return `the symbolic link target '${linkpath}' points outside the archive`;
  }
  return undefined;
}

function isInside(root: string, candidate: string): boolean {
  return candidate === root || candidate.startsWith(root.endsWith(path.sep) ? root : root + path.sep);
}

function rejected(entryPath: string, reason: string): ServingError {
  return new ServingError('ARCHIVE_REJECTED', `archive entry '${printable(entryPath)}' rejected: ${reason}`, {
    details: { entry: printable(entryPath), reason },
  });
}

function totalTooLarge(entryPath: string, limit: number): ServingError {
  return new ServingError('ARCHIVE_REJECTED', `model archive expands to more than ${limit} bytes (limit reached at entry '${printable(entryPath)}')`, {
    details: { entry: printable(entryPath), limitBytes: limit },
  });
}

function noRoom(limit: number): ServingError {
  return new ServingError('INSUFFICIENT_STORAGE', `the model takes more than the ${limit} bytes of disk (in blocks) the disk cache can give it`, {
    details: { storageLimitBytes: limit },
  });
}

function corrupt(err: unknown): ServingError {
  return new ServingError('ARCHIVE_REJECTED', `model archive is corrupt: ${messageOf(err)}`, {
    cause: err instanceof Error ? err : undefined,
  });
}

function insufficientStorage(err: unknown): ServingError {
  const message = `not enough disk space to extract the model archive (${fsReason(err)})`;
  return new ServingError('INSUFFICIENT_STORAGE', message, { cause: err });
}

function abortError(signal: AbortSignal | undefined): ServingError {
  const reason: unknown = signal?.reason;
  if (reason instanceof ServingError) return reason;
  if (reason instanceof Error && reason.name === 'TimeoutError') {
    return new ServingError('TIMEOUT', 'archive extraction timed out', { cause: reason });
  }
  return new ServingError('CANCELLED', 'archive extraction was cancelled', { cause: reason });
}

function isTarError(err: unknown): boolean {
  return typeof err === 'object' && err !== null && 'tarCode' in err;
}

/** Entry paths come from the archive: escape control characters before they reach a log line. */
function printable(text: string): string {
  const escaped = JSON.stringify(text.length > 300 ? `${text.slice(0, 300)}…` : text);
  return escaped.slice(1, -1);
}
