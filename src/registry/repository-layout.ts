/**
 * @module registry/repository-layout
 * Reads a Triton-layout directory: either one model (config.pbtxt and/or
 * numeric version dirs at its root) or a repository of model directories, and
 * picks the entry model. Pure filesystem reading; no sessions are created here.
 */
import { closeSync, fstatSync, openSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { checkConfigSize, DEFAULT_CONFIG_MAX_BYTES, parseModelConfigDraft } from '../config/model-config-parse.js';
import { ServingError } from '../errors.js';

export interface ModelDirectory {
  /** Directory name (the Triton model name unless config.pbtxt says otherwise). */
  readonly name: string;
  readonly dir: string;
  /** config.pbtxt text, undefined when absent (auto-complete applies). */
  readonly configText: string | undefined;
  /** Numeric version directories, ascending. */
  readonly versions: readonly number[];
}

export interface ScanOptions {
  /** MME_CONFIG_MAX_BYTES: a larger config.pbtxt is refused before it is read. DEFAULT_CONFIG_MAX_BYTES when omitted. */
  readonly configMaxBytes?: number;
}

export interface RepositoryLayout {
  readonly root: string;
  readonly models: readonly ModelDirectory[];
  /** True when the root itself is one model directory. */
  readonly singleModel: boolean;
}

const VERSION_DIR = /^[1-9]\d*$/;
/** Files that tar tools add and that are never models. */
const IGNORED = new Set(['__MACOSX', '.DS_Store']);

/** On the calling thread, as the reads below: a model directory's metadata and config are small (store/small-io.ts says why). */
async function isDir(p: string): Promise<boolean> {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The text of `<dir>/config.pbtxt`, undefined when there is none; over
 * `maxBytes` it is refused from its size (fstat of the open file, so the size
 * checked is the size read), not read.
 */
async function readConfig(dir: string, name: string, maxBytes: number): Promise<string | undefined> {
  let fd;
  try {
    fd = openSync(path.join(dir, 'config.pbtxt'), 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  try {
    checkConfigSize(fstatSync(fd).size, maxBytes, `${name}/config.pbtxt`);
    return readFileSync(fd, 'utf8');
  } finally {
    closeSync(fd);
  }
}

async function versionsIn(dir: string): Promise<number[]> {
  const entries = readdirSync(dir, { withFileTypes: true });
  return entries
    .filter((e) => (e.isDirectory() || e.isSymbolicLink()) && VERSION_DIR.test(e.name))
    .map((e) => Number(e.name))
    .sort((a, b) => a - b);
}

/** A directory is a model directory when it has config.pbtxt or a numeric version dir. */
async function readModelDir(dir: string, name: string, maxBytes: number): Promise<ModelDirectory | undefined> {
  // Both at once: each is a few trips to libuv's pool, on every cold load.
  const [configText, versions] = await Promise.all([readConfig(dir, name, maxBytes), versionsIn(dir)]);
  if (configText === undefined && versions.length === 0) return undefined;
  return { name, dir, configText, versions };
}

/**
 * Model directories read at once by subModels. A source root of 2,000 models
 * (the default model's choice at start-up) took 1.6 s read one by one, each
 * directory a few trips to libuv's pool; its 4 threads are kept for loads.
 */
const SCAN_CONCURRENCY = 16;

async function subModels(root: string, maxBytes: number): Promise<ModelDirectory[]> {
  const entries = (await readdir(root, { withFileTypes: true }))
    .filter((e) => !IGNORED.has(e.name) && !e.name.startsWith('.') && (e.isDirectory() || e.isSymbolicLink()))
    .sort((a, b) => a.name.localeCompare(b.name));
  const found: (ModelDirectory | undefined)[] = new Array(entries.length);
  const failed: { index: number; err: unknown }[] = [];
  let next = 0;
  const reader = async (): Promise<void> => {
    for (let i = next++; i < entries.length; i = next++) {
      const e = entries[i]!;
      const dir = path.join(root, e.name);
      try {
        // The entry's type says a directory without a stat (Node lstats where the file system gives none); a link is followed.
        if (!e.isDirectory() && !(await isDir(dir))) continue;
        found[i] = await readModelDir(dir, e.name, maxBytes);
      } catch (err) {
        failed.push({ index: i, err });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(SCAN_CONCURRENCY, entries.length) }, reader));
  // The error of the first directory by name, as reading them one by one would report.
  if (failed.length > 0) throw failed.reduce((a, b) => (b.index < a.index ? b : a)).err;
  return found.filter((m): m is ModelDirectory => m !== undefined);
}

/**
 * The name of the one model `dir` itself is, when its config.pbtxt names it
 * after the directory (Triton's rule, for a SageMaker `url` that is one model
 * directory); undefined otherwise (the caller's naming applies). Never throws:
 * a config that cannot be read is reported by the load.
 */
export async function flatModelName(dir: string, options: ScanOptions = {}): Promise<string | undefined> {
  const name = path.basename(dir);
  const text = await readConfig(dir, name, options.configMaxBytes ?? DEFAULT_CONFIG_MAX_BYTES).catch(() => undefined);
  if (text === undefined) return undefined;
  try {
    return (await parseModelConfigDraft(text, { sourceName: `${name}/config.pbtxt` })).name === name ? name : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Scan `root`. `fallbackName` names a root-level single model that has no
 * config name (e.g. the archive name without `.tar.gz`). Its errors do not
 * name the model: the caller that knows it does (errors.ts, withModel).
 */
export async function scanRepository(root: string, fallbackName: string, options: ScanOptions = {}): Promise<RepositoryLayout> {
  if (!(await isDir(root))) {
    // Never `root` itself: it is a host path (the cache, the source root, a SageMaker url).
    throw new ServingError('MODEL_NOT_FOUND', 'the model directory does not exist or is not a directory');
  }
  const maxBytes = options.configMaxBytes ?? DEFAULT_CONFIG_MAX_BYTES;
  const single = await readModelDir(root, fallbackName, maxBytes);
  if (single) return { root, models: [single], singleModel: true };
  let models = await subModels(root, maxBytes);
  if (models.length === 0) {
    // A tarball made with `tar -czf x.tar.gz repo/` wraps the repository in one more directory.
    const entries = (await readdir(root, { withFileTypes: true })).filter((e) => !IGNORED.has(e.name) && !e.name.startsWith('.'));
    const only = entries[0];
    if (entries.length === 1 && only && (await isDir(path.join(root, only.name)))) {
      return scanRepository(path.join(root, only.name), only.name, options);
    }
  }
  if (models.length === 0) {
    throw new ServingError(
      'INVALID_MODEL',
      'no model found in the package; expected Triton layout <model>/config.pbtxt and <model>/<version>/model.onnx (or config.pbtxt at the archive root)',
    );
  }
  models = models.sort((a, b) => a.name.localeCompare(b.name));
  return { root, models, singleModel: false };
}

const ENSEMBLE_PLATFORM = /platform\s*:\s*["']ensemble["']/;

/**
 * The model a request without further qualification runs: `preferred` when
 * given, else the single ensemble, else the single model.
 */
export function chooseEntryModel(layout: RepositoryLayout, preferred?: string): ModelDirectory {
  const names = layout.models.map((m) => m.name);
  if (preferred !== undefined) {
    const m = layout.models.find((x) => x.name === preferred);
    if (!m) {
      throw new ServingError('MODEL_NOT_FOUND', `the package has no model named '${preferred}' (it has: ${names.join(', ')})`);
    }
    return m;
  }
  if (layout.models.length === 1) return layout.models[0]!;
  const ensembles = layout.models.filter((m) => m.configText !== undefined && ENSEMBLE_PLATFORM.test(m.configText));
  if (ensembles.length === 1) return ensembles[0]!;
  const why =
    ensembles.length > 1
      ? `it has ${ensembles.length} ensembles (${ensembles.map((e) => e.name).join(', ')})`
      : `it has ${names.length} models (${names.join(', ')}) and no ensemble`;
  throw new ServingError(
    'INVALID_MODEL',
    `cannot choose the entry model: ${why}; package one model per archive, add exactly one ensemble (platform: "ensemble") that wires them, or set MME_DEFAULT_MODEL for the default model`,
  );
}
