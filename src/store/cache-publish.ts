/**
 * @module store/cache-publish
 * The disk cache of extracted models and the one way entries get into it.
 *
 * Layout: `<cacheDir>/<slug>-<targetHash12>-<versionHash10>/` holding
 * `.onnx-mme-entry.json` (metadata) and `model/` (the archive's contents). The
 * metadata lives beside the content, not in it, so no archive can collide with
 * or forge it. Entries are built in `<cacheDir>/.tmp-<random>/` and renamed into
 * place, and the metadata file is written last: an entry directory either does
 * not exist or is complete, even after a crash (leftover `.tmp-*` dirs are swept
 * by `cleanCacheDir`). No fsync: the cache is rebuilt from the source if a power
 * loss ever tears it, and a valid-looking torn file would fail model loading.
 * Reading an entry's metadata and measuring it run on the calling thread
 * (store/small-io.ts says why); what writes (the temporary directory, made
 * while a download's request is in flight, the metadata file, the rename,
 * removals) and the cache directory's listing stay in the pool.
 */

import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ServingError } from '../errors.js';
import { blockBytesOf, chargeFile, measureDiskBytes, measureListedDiskBytes } from './disk-usage.js';
import { fsReason } from './node-error.js';

export const ENTRY_METADATA_FILE = '.onnx-mme-entry.json';
/**
 * The mode the cache directory is made with when missing (the operator's own is left as it is): only the server's
 * user may list it, since entry names are targets. Its entries are 0700 already (made by mkdtemp).
 */
export const CACHE_DIR_MODE = 0o700;

/** Sub-directory of an entry that holds the extracted model repository. */
export const ENTRY_CONTENT_DIR = 'model';
export const TEMP_PREFIX = '.tmp-';

const SLUG_MAX = 64;
const ENTRY_NAME = /^[A-Za-z0-9_][A-Za-z0-9._-]*-[0-9a-f]{12}-[0-9a-f]{10}$/;
const RENAME_ATTEMPTS = 3;

export interface CacheEntryMetadata {
  readonly target: string;
  readonly version: string;
  /** ISO 8601 time the entry was published. */
  readonly createdAt: string;
  /** File bytes of the model (its data, as `ls -l` adds up). */
  readonly bytes: number;
  readonly files: number;
  /**
   * What the entry takes on disk, in allocated blocks (`du`), metadata and
   * directories included: the unit of the disk cache's budget. Absent in
   * entries written before it was recorded (measured when indexed).
   */
  readonly diskBytes?: number;
}

export interface CacheEntry {
  /** The entry directory (`<cacheDir>/<name>`). */
  readonly dir: string;
  /** Where the model content lives (`<dir>/model`). */
  readonly contentDir: string;
  readonly metadata: CacheEntryMetadata;
}

export interface PublishResult extends CacheEntry {
  /** True when a complete entry for the same version was already in place. */
  readonly reused: boolean;
}

export interface FillResult {
  readonly bytes: number;
  readonly files?: number;
  /** Every directory, file and link the fill created in its directory (absolute), when it knows them: measured without a walk. */
  readonly paths?: readonly string[];
}

export interface PublishOptions {
  readonly cacheDir: string;
  /** Source-relative identity of the object (used for the name and the metadata). */
  readonly target: string;
  /** Identity of the object's content (size+mtime, ETag). */
  readonly version: string;
  /** Writes the model into `contentDir` (which exists and is empty). */
  readonly fill: (contentDir: string, signal?: AbortSignal) => Promise<FillResult>;
  readonly signal?: AbortSignal;
  /** The temporary directory, made already (stageTempDir); publishDirectory owns it from here. Omitted: made here. */
  readonly staged?: Promise<string>;
}

function shortHash(text: string, length: number): string {
  return createHash('sha256').update(text).digest('hex').slice(0, length);
}

/**
 * Readable, collision-free entry name: the slug makes `ls` useful, the target
 * hash keeps `team/b.tar.gz` and `team_b.tar.gz` apart, the version hash gives
 * each version its own directory. A leading dot is replaced so no slug can look
 * like a temp dir or be hidden.
 */
export function cacheEntryName(target: string, version: string): string {
  return `${cacheEntryPrefix(target)}${shortHash(version, 10)}`;
}

export function cacheEntryDir(cacheDir: string, target: string, version: string): string {
  return path.join(cacheDir, cacheEntryName(target, version));
}

/** The part of the entry name shared by every version of `target`. */
function cacheEntryPrefix(target: string): string {
  const slug = target
    .replace(/[^A-Za-z0-9._-]/g, '_')
    .replace(/^\./, '_')
    .slice(0, SLUG_MAX);
  return `${slug}-${shortHash(target, 12)}-`;
}

/** True when `name` is an entry of `target` (any version). The hash suffix has no dashes, so prefixes cannot alias. */
export function isEntryOfTarget(name: string, target: string): boolean {
  const prefix = cacheEntryPrefix(target);
  return name.startsWith(prefix) && /^[0-9a-f]{10}$/.test(name.slice(prefix.length));
}

/** The metadata of a complete entry directory, or undefined if it is missing, unreadable or malformed. */
export async function readCacheEntry(entryDir: string): Promise<CacheEntryMetadata | undefined> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path.join(entryDir, ENTRY_METADATA_FILE), 'utf8'));
  } catch {
    return undefined;
  }
  if (!isMetadata(parsed)) return undefined;
  try {
    if (!statSync(path.join(entryDir, ENTRY_CONTENT_DIR)).isDirectory()) return undefined;
  } catch {
    return undefined;
  }
  return parsed;
}

/** The complete entry for exactly this target and version, if the cache holds one. */
export async function findCacheEntry(cacheDir: string, target: string, version: string): Promise<CacheEntry | undefined> {
  const dir = cacheEntryDir(cacheDir, target, version);
  const metadata = await readCacheEntry(dir);
  if (!metadata || metadata.target !== target || metadata.version !== version) return undefined;
  return { dir, contentDir: path.join(dir, ENTRY_CONTENT_DIR), metadata };
}

/**
 * Builds a cache entry in a temp dir with `fill`, writes its metadata, and
 * renames it into place. On any failure the temp dir is removed before the
 * error propagates. If a complete entry for the same version appeared meanwhile
 * (another publisher), it is kept and the new copy discarded.
 */
export async function publishDirectory(options: PublishOptions): Promise<PublishResult> {
  const { cacheDir, target, version, fill, signal } = options;
  const finalDir = cacheEntryDir(cacheDir, target, version);
  let tempDir: string | undefined;
  try {
    const temp = await (options.staged ?? stageTempDir(cacheDir));
    tempDir = temp;
    const contentDir = path.join(temp, ENTRY_CONTENT_DIR);
    const filled = await fill(contentDir, signal);
    if (signal?.aborted) throw signal.reason;
    const base = { target, version, createdAt: new Date().toISOString(), bytes: filled.bytes, files: filled.files ?? 0 };
    // Measured, not estimated: what the filesystem really allocated for the tree (the metadata file is one block more).
    const draft = `${JSON.stringify({ ...base, diskBytes: Number.MAX_SAFE_INTEGER })}\n`;
    const treeBytes = await (filled.paths === undefined ? measureDiskBytes(temp) : measureListedDiskBytes([temp, contentDir, ...filled.paths]));
    const metadata: CacheEntryMetadata = { ...base, diskBytes: treeBytes + chargeFile(Buffer.byteLength(draft), blockBytesOf(temp)) };
    await writeFile(path.join(temp, ENTRY_METADATA_FILE), `${JSON.stringify(metadata)}\n`, { flag: 'wx' });

    for (let attempt = 1; ; attempt++) {
      try {
        await rename(temp, finalDir);
        tempDir = undefined;
        return { dir: finalDir, contentDir: path.join(finalDir, ENTRY_CONTENT_DIR), metadata, reused: false };
      } catch (err) {
        const code = errorCode(err);
        if ((code !== 'ENOTEMPTY' && code !== 'EEXIST') || attempt >= RENAME_ATTEMPTS) throw err;
      }
      const existing = await findCacheEntry(cacheDir, target, version);
      if (existing) return { ...existing, reused: true };
      // Not a complete entry of ours (cannot normally happen): move it aside
      // under a temp name so a crash right here still leaves only sweepable junk.
      const aside = await mkdtemp(path.join(cacheDir, TEMP_PREFIX));
      await rename(finalDir, path.join(aside, 'old')).catch(() => undefined);
      await rm(aside, { recursive: true, force: true });
    }
  } catch (err) {
    throw publishError(err, target);
  } finally {
    if (tempDir !== undefined) await rm(tempDir, { recursive: true, force: true, maxRetries: 3 });
  }
}

/**
 * A new entry's temporary directory, its content directory made inside
 * (`<cacheDir>/.tmp-<random>/model/`). It names nothing, so it can be made
 * before the entry's identity is known: while the object's GET is in flight,
 * so that its two creations overlap the network's wait. A crash leaves only a `.tmp-*` directory, swept at
 * start (cleanCacheDir). Whoever holds it passes it to publishDirectory, or to
 * discardTempDir.
 */
export async function stageTempDir(cacheDir: string): Promise<string> {
  const temp = await makeTempDir(cacheDir);
  try {
    await mkdir(path.join(temp, ENTRY_CONTENT_DIR));
  } catch (err) {
    await rm(temp, { recursive: true, force: true, maxRetries: 3 });
    throw err;
  }
  return temp;
}

/** A staged temporary directory that will not be published, removed (one that could not be made needs nothing); never rejects. */
export async function discardTempDir(staged: Promise<string>): Promise<void> {
  const dir = await staged.catch(() => undefined);
  if (dir !== undefined) await rm(dir, { recursive: true, force: true, maxRetries: 3 }).catch(() => undefined);
}

/**
 * A new `.tmp-*` directory in `cacheDir`; the cache directory is made only when
 * missing (it exists from the cache's start on: one file-system round trip
 * less on every download, and one removed behind the server's back is
 * recreated).
 */
async function makeTempDir(cacheDir: string): Promise<string> {
  try {
    return await mkdtemp(path.join(cacheDir, TEMP_PREFIX));
  } catch (err) {
    if (errorCode(err) !== 'ENOENT') throw err;
    await mkdir(cacheDir, { recursive: true, mode: CACHE_DIR_MODE });
    return mkdtemp(path.join(cacheDir, TEMP_PREFIX));
  }
}

/** Removes every entry of `target` except `keepDir`; returns the removed directories. */
export async function removeOtherVersions(cacheDir: string, target: string, keepDir: string): Promise<string[]> {
  const keep = path.basename(keepDir);
  const removed: string[] = [];
  for (const name of await readdir(cacheDir)) {
    if (name === keep || !isEntryOfTarget(name, target)) continue;
    const dir = path.join(cacheDir, name);
    await rm(dir, { recursive: true, force: true, maxRetries: 3 });
    removed.push(dir);
  }
  return removed;
}

export interface CleanResult {
  /** Directories removed: temp leftovers and incomplete or inconsistent entries. */
  readonly removed: readonly string[];
  /** Complete entries kept for reuse. */
  readonly kept: readonly string[];
}

/**
 * Startup sweep: removes `.tmp-*` leftovers and entry-named directories without
 * valid metadata (or whose metadata belongs elsewhere). Anything that does not
 * look like ours is left alone, so pointing MME_CACHE_DIR at a shared directory
 * by mistake deletes nothing of someone else's. Run before serving: it does not
 * coordinate with publishes in progress.
 */
export async function cleanCacheDir(cacheDir: string): Promise<CleanResult> {
  await mkdir(cacheDir, { recursive: true, mode: CACHE_DIR_MODE });
  const removed: string[] = [];
  const kept: string[] = [];
  for (const dirent of await readdir(cacheDir, { withFileTypes: true })) {
    const full = path.join(cacheDir, dirent.name);
    if (dirent.name.startsWith(TEMP_PREFIX)) {
      await rm(full, { recursive: true, force: true, maxRetries: 3 });
      removed.push(full);
      continue;
    }
    if (!ENTRY_NAME.test(dirent.name)) continue;
    const metadata = dirent.isDirectory() ? await readCacheEntry(full) : undefined;
    if (metadata && cacheEntryName(metadata.target, metadata.version) === dirent.name) {
      kept.push(full);
    } else {
      await rm(full, { recursive: true, force: true, maxRetries: 3 });
      removed.push(full);
    }
  }
  return { removed, kept };
}

function isMetadata(value: unknown): value is CacheEntryMetadata {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return (
    typeof v.target === 'string' &&
    typeof v.version === 'string' &&
    typeof v.createdAt === 'string' &&
    typeof v.bytes === 'number' &&
    typeof v.files === 'number' &&
    (v.diskBytes === undefined || (typeof v.diskBytes === 'number' && Number.isSafeInteger(v.diskBytes) && v.diskBytes >= 0))
  );
}

function publishError(err: unknown, target: string): ServingError {
  if (err instanceof ServingError) return err;
  const code = errorCode(err);
  const message = fsReason(err);
  if (code === 'ENOSPC' || code === 'EDQUOT') {
    return new ServingError('INSUFFICIENT_STORAGE', `model '${target}': the model cache disk is full: ${message}`, {
      model: target,
      cause: err,
    });
  }
  if (err instanceof Error && err.name === 'TimeoutError') {
    return new ServingError('TIMEOUT', `model '${target}': caching timed out`, { model: target, cause: err });
  }
  if (err instanceof Error && err.name === 'AbortError') {
    return new ServingError('CANCELLED', `model '${target}': caching was cancelled`, { model: target, cause: err });
  }
  return new ServingError('INTERNAL', `model '${target}': writing the model cache entry failed: ${message}`, {
    model: target,
    cause: err,
  });
}

function errorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  const code = (err as { code: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}
