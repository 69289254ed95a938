/**
 * @module store/local-source
 * A model source backed by a local directory (MME_MODEL_SOURCE=/models or
 * file:///models). Entries are `.tar.gz`/`.tgz` archives, extracted once into
 * the disk cache, or plain model directories, used in place.
 *
 * Trust: the root and everything in it belong to the operator; the target comes
 * from clients. So the target is validated and its resolved real path must stay
 * inside the root, while links *inside* an operator's model directory are not
 * policed. Archives are treated as hostile (see extract-archive).
 */

import { readdir, realpath, stat } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Logger } from 'pino';
import { retryAfter, ServingError } from '../errors.js';
import { DiskCache } from './disk-cache.js';
import { PinnedFlights, type PinnedResult } from './pinned-flights.js';
import { extractArchive } from './extract-archive.js';
import type { ExtractLimits } from './extract-limits.js';
import { targetNotFound, type LocalModel, type ModelSource, type SourceEntry } from './model-source.js';
import { archiveCandidates, isArchiveName, normalizeTarget } from './target-path.js';
import { errorCode, messageOf } from './node-error.js';
import { cancelled } from './abort.js';

/** How deep list() looks for archives and model directories (path segments of a target). */
export const MAX_LIST_DEPTH = 4;

/** Reported after each extraction (not on cache reuse): for metrics and tests. */
export interface ExtractionEvent {
  /** Source-relative path of the archive that was extracted. */
  readonly archive: string;
  readonly version: string;
  readonly dir: string;
  readonly files: number;
  readonly bytes: number;
  readonly durationMs: number;
}

export interface LocalModelSourceOptions {
  /** Directory path or `file://` URL. */
  readonly root: string;
  readonly cacheDir: string;
  /** The disk cache (with its byte budget); default: one over `cacheDir` with the default budget. */
  readonly cache?: DiskCache;
  readonly limits: ExtractLimits;
  readonly logger?: Logger;
  readonly onExtract?: (event: ExtractionEvent) => void;
}

interface WalkContext {
  readonly realRoot: string;
  readonly cached: (rel: string, version: string) => boolean;
  readonly description: string;
  /** The real path of the cache dir, never listed. */
  readonly skip: string;
  readonly out: SourceEntry[];
}

type Resolved = { readonly kind: 'directory'; readonly realPath: string } | { readonly kind: 'archive'; readonly realPath: string; readonly rel: string };

export class LocalModelSource implements ModelSource {
  readonly description: string;
  /** The root is a host path: client-facing messages say this instead (the operator finds the root in the startup log). */
  readonly publicDescription = 'the model source';
  private readonly root: string;
  private readonly cacheDir: string;
  private readonly limits: ExtractLimits;
  private readonly logger: Logger | undefined;
  private readonly onExtract: ((event: ExtractionEvent) => void) | undefined;
  readonly cache: DiskCache;
  /** In-flight archive localizations keyed by the archive's source-relative path. */
  private readonly flights: PinnedFlights;
  private realRootPromise: Promise<string> | undefined;

  constructor(options: LocalModelSourceOptions) {
    this.root = path.resolve(options.root.startsWith('file:') ? fileURLToPath(options.root) : options.root);
    this.cacheDir = path.resolve(options.cacheDir);
    this.cache = options.cache ?? new DiskCache({ dir: this.cacheDir, logger: options.logger });
    this.flights = new PinnedFlights(this.cache);
    this.limits = options.limits;
    this.logger = options.logger;
    this.onExtract = options.onExtract;
    this.description = pathToFileURL(this.root).href;
  }

  async localize(rawTarget: string, signal?: AbortSignal): Promise<LocalModel> {
    const target = normalizeTarget(rawTarget);
    if (signal?.aborted) throw cancelled(target, signal);
    const resolved = await this.resolve(target);
    if (resolved.kind === 'directory') {
      return { target, dir: resolved.realPath, version: await directoryVersion(resolved.realPath), release: () => undefined };
    }
    return this.flights.run(resolved.rel, target, signal, () => this.localizeArchive(resolved.rel, resolved.realPath, target));
  }

  async canonicalTarget(rawTarget: string): Promise<string> {
    const target = normalizeTarget(rawTarget);
    const resolved = await this.resolve(target);
    return resolved.kind === 'directory' ? target : resolved.rel;
  }

  async currentVersion(rawTarget: string): Promise<string | undefined> {
    const target = normalizeTarget(rawTarget);
    let resolved: Resolved;
    try {
      resolved = await this.resolve(target);
    } catch (err) {
      if (!(err instanceof ServingError) || err.code !== 'MODEL_NOT_FOUND') throw err;
      const names = archiveCandidates(target);
      for (const rel of names) await this.cache.retireOthers(rel, undefined);
      return undefined;
    }
    if (resolved.kind === 'directory') return directoryVersion(resolved.realPath);
    try {
      return archiveVersion(await stat(resolved.realPath));
    } catch {
      return undefined;
    }
  }

  async list(): Promise<readonly SourceEntry[]> {
    await this.cache.open();
    const realRoot = await this.realRoot();
    // A cache dir inside the root must not show up as models.
    const skip = await realpath(this.cacheDir).catch(() => this.cacheDir);
    return listModelTree(realRoot, { skip, cached: (rel, version) => this.cache.has(rel, version), description: this.publicDescription });
  }

  private realRoot(): Promise<string> {
    this.realRootPromise ??= realpath(this.root).catch((err: unknown) => {
      this.realRootPromise = undefined; // the volume may be mounted later: retry next time
      throw unreadable(errorCode(err) === 'EACCES', `${this.publicDescription} is not accessible (${errorCode(err) ?? messageOf(err)})`, { cause: err });
    });
    return this.realRootPromise;
  }

  /**
   * Finds what `target` names: a directory, or an archive file (for a target
   * without an archive suffix: the directory, then `.tar.gz`, then `.tgz`).
   */
  private async resolve(target: string): Promise<Resolved> {
    const realRoot = await this.realRoot();
    const candidates = isArchiveName(target) ? [target] : [target, ...archiveCandidates(target)];
    for (const rel of candidates) {
      let realPath: string;
      let stats: Stats;
      try {
        realPath = await realpath(path.join(realRoot, rel));
        stats = await stat(realPath);
      } catch (err) {
        const code = errorCode(err);
        if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP') continue;
        throw unreadable(
          code === 'EACCES' || code === 'EPERM',
          `model '${target}': cannot read ${rel} in ${this.publicDescription} (${errorCode(err) ?? messageOf(err)})`,
          {
            model: target,
            cause: err,
          },
        );
      }
      if (!isInside(realRoot, realPath)) {
        const message = `model '${target}' resolves outside ${this.publicDescription}`;
        throw new ServingError('INVALID_TARGET', message, { model: target });
      }
      if (stats.isDirectory()) return { kind: 'directory', realPath };
      if (stats.isFile() && isArchiveName(rel)) return { kind: 'archive', realPath, rel };
      if (rel === target) {
        throw new ServingError('INVALID_TARGET', `model '${target}' in ${this.publicDescription} is neither a .tar.gz/.tgz archive nor a model directory`, {
          model: target,
        });
      }
    }
    throw targetNotFound(target, 'local directory');
  }

  private async localizeArchive(rel: string, archivePath: string, target: string): Promise<PinnedResult> {
    let stats: Stats;
    try {
      stats = await stat(archivePath);
    } catch (err) {
      throw targetNotFound(target, 'local directory', { cause: err });
    }
    const version = archiveVersion(stats);
    const cached = await this.cache.lookup(rel, version);
    if (cached) return { pin: cached, version };

    const startedAt = performance.now();
    this.logger?.info({ model: target, archive: rel, version, bytes: stats.size }, 'extracting model archive');
    let published;
    try {
      published = await this.cache.publish({
        target: rel,
        model: target,
        version,
        expectedBytes: stats.size,
        fill: (contentDir, storageBytes) => extractArchive(archivePath, contentDir, { ...this.limits, storageBytes }),
      });
    } catch (err) {
      throw withTarget(err, target);
    }
    const durationMs = performance.now() - startedAt;
    if (!published.reused) {
      const { files, bytes } = published.metadata;
      this.logger?.info({ model: target, archive: rel, version, files, bytes, durationMs }, 'extracted model archive');
      this.onExtract?.({ archive: rel, version, dir: published.pin.entry.contentDir, files, bytes, durationMs });
    }
    // Older versions go as soon as no loaded model uses them.
    await this.cache.retireOthers(rel, published.pin.entry.dir);
    return { pin: published.pin, version };
  }
}

export interface ModelTreeOptions {
  /** A directory not to look into (the disk cache inside the root); a real path. */
  readonly skip?: string;
  /** Whether the disk cache holds this version of an archive; never, when omitted. */
  readonly cached?: (rel: string, version: string) => boolean;
  /** How messages name the root (never a host path); "the model source" when omitted. */
  readonly description?: string;
}

/**
 * The targets under a local directory, as a local source lists them: archives
 * and model directories (a directory that looks like a model or a repository
 * is one target; others are looked into, MAX_LIST_DEPTH deep), sorted. Also
 * what `onnx-mme validate <source dir>` validates.
 */
export async function listModelTree(root: string, options: ModelTreeOptions = {}): Promise<SourceEntry[]> {
  const realRoot = await realpath(root);
  const found: SourceEntry[] = [];
  const context: WalkContext = {
    realRoot,
    skip: options.skip ?? '',
    out: found,
    cached: options.cached ?? (() => false),
    description: options.description ?? 'the model source',
  };
  await walk(context, realRoot, '', 1);
  return found.sort((a, b) => (a.target < b.target ? -1 : a.target > b.target ? 1 : 0));
}

async function walk(ctx: WalkContext, absDir: string, relDir: string, depth: number): Promise<void> {
  const { realRoot, skip, out } = ctx;
  let dirents;
  try {
    dirents = await readdir(absDir, { withFileTypes: true });
  } catch (err) {
    if (relDir === '') {
      const message = `cannot list ${ctx.description} (${errorCode(err) ?? messageOf(err)})`;
      throw unreadable(false, message, { cause: err });
    }
    return; // an unreadable sub-directory hides only itself
  }
  for (const dirent of dirents) {
    if (dirent.name.startsWith('.')) continue; // hidden: .git, a cache dir inside the root, ...
    const rel = relDir === '' ? dirent.name : `${relDir}/${dirent.name}`;
    if (!isValidTarget(rel)) continue;
    const abs = path.join(absDir, dirent.name);
    let stats: Stats;
    let real = abs;
    try {
      if (dirent.isSymbolicLink()) real = await realpath(abs);
      if (!isInside(realRoot, real)) continue;
      stats = await stat(abs);
    } catch {
      continue;
    }
    if (stats.isFile() && isArchiveName(dirent.name)) {
      out.push({ target: rel, sizeBytes: stats.size, lastModified: stats.mtime, cached: ctx.cached(rel, archiveVersion(stats)) });
    } else if (stats.isDirectory() && real !== skip) {
      if (await looksLikeModel(abs)) {
        out.push({ target: rel, sizeBytes: undefined, lastModified: stats.mtime, cached: true });
      } else if (depth < MAX_LIST_DEPTH) {
        await walk(ctx, abs, rel, depth + 1);
      }
    }
  }
}

/**
 * size+mtime is what we can know without reading the file; a replaced archive
 * virtually always changes one of them.
 */
function archiveVersion(stats: Stats): string {
  return `${stats.size}-${stats.mtimeMs}`;
}

/**
 * A Triton model (`config.pbtxt` at top), a repository (a child with
 * `config.pbtxt`), or a bare versioned model (`<digits>/model.onnx`).
 */
async function looksLikeModel(dir: string): Promise<boolean> {
  if (await isFile(path.join(dir, 'config.pbtxt'))) return true;
  let dirents;
  try {
    dirents = await readdir(dir, { withFileTypes: true });
  } catch {
    return false;
  }
  for (const dirent of dirents) {
    if (!dirent.isDirectory() && !dirent.isSymbolicLink()) continue;
    const child = path.join(dir, dirent.name);
    if (await isFile(path.join(child, 'config.pbtxt'))) return true;
    if (/^\d+$/.test(dirent.name) && (await isFile(path.join(child, 'model.onnx')))) return true;
  }
  return false;
}

/**
 * Version of an in-place directory: the newest mtime of its config.pbtxt files
 * (top level and one level down), else the directory's own mtime. Cheap, and
 * editing a config, the usual way to change a model directory, bumps it.
 */
async function directoryVersion(dir: string): Promise<string> {
  const times: number[] = [];
  const configs = [path.join(dir, 'config.pbtxt')];
  try {
    for (const dirent of await readdir(dir, { withFileTypes: true })) {
      if (dirent.isDirectory() || dirent.isSymbolicLink()) configs.push(path.join(dir, dirent.name, 'config.pbtxt'));
    }
  } catch {
    // unreadable: fall back to the directory's own mtime below
  }
  for (const file of configs) {
    try {
      times.push((await stat(file)).mtimeMs);
    } catch {
      // no config here
    }
  }
  const newest = times.length > 0 ? Math.max(...times) : (await stat(dir)).mtimeMs;
  return `dir-${newest}`;
}

async function isFile(file: string): Promise<boolean> {
  try {
    return (await stat(file)).isFile();
  } catch {
    return false;
  }
}

function isValidTarget(rel: string): boolean {
  try {
    return normalizeTarget(rel) === rel;
  } catch {
    return false;
  }
}

function isInside(root: string, candidate: string): boolean {
  return candidate === root || candidate.startsWith(root.endsWith(path.sep) ? root : root + path.sep);
}

/**
 * The directory could not be read: denied (ACCESS_DENIED, a retry will not help), or failed (UPSTREAM_UNAVAILABLE: a
 * volume not mounted yet, an I/O error; nothing says when it comes back, so the smallest Retry-After).
 */
function unreadable(denied: boolean, message: string, options: { model?: string; cause: unknown }): ServingError {
  return denied
    ? new ServingError('ACCESS_DENIED', message, options)
    : new ServingError('UPSTREAM_UNAVAILABLE', message, { ...options, details: retryAfter() });
}

/** Extraction errors do not know the target: prefix it so logs and clients see which model failed. */
function withTarget(err: unknown, target: string): ServingError {
  if (err instanceof ServingError) {
    if (err.message.startsWith(`model '${target}'`)) return err;
    return new ServingError(err.code, `model '${target}': ${err.message}`, {
      model: target,
      cause: err,
      ...(err.details === undefined ? {} : { details: err.details }),
    });
  }
  return new ServingError('INTERNAL', `model '${target}': ${messageOf(err)}`, { model: target, cause: err });
}
