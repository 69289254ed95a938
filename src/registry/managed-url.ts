/**
 * @module registry/managed-url
 * Which directories a SageMaker `POST /models` `url` may name, checked on the
 * real path (fs.realpath), not the text: a symlink into /proc is as refused
 * as /proc itself. SageMaker always sends `/opt/ml/models/<hash>/model`; the
 * same container also loads local directories (docs/sagemaker.md), so any
 * directory inside MME_MODEL_URL_ROOTS is allowed (SageMaker's default:
 * /opt/ml/models) except the filesystem root, the kernel's and the OS's own
 * trees, and the server's cache. A url outside the roots gets one answer,
 * decided before the filesystem is asked anything about it (and again on its
 * real path, for links out of a root): whether something is there, a file, a
 * directory or a system tree, is nobody's business outside the roots, so
 * the answer cannot serve as an existence oracle. Before the loader walks it, the
 * directory's entries are counted (readdir only, links not followed) up to the
 * archive entry limit, and its symbolic links checked: a tree bigger than any
 * model package, or a link to where the url itself could not lead (a system
 * directory, outside the roots, the cache), is refused with a 400 in
 * bounded, deterministic work instead of a walk of the whole filesystem.
 *
 * Messages name the model, never the url or any host path (the caller knows
 * what it sent); a link is named by its path inside the url.
 */
import type { Dirent } from 'node:fs';
import { readdir, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { ServingError } from '../errors.js';
import { NON_PRINTABLE } from '../store/target-path.js';

/** Linux PATH_MAX: no longer path can be opened. */
export const MAX_URL_LENGTH = 4096;

/** Trees that never hold a model directory: the kernel's (proc, sys, dev, run) and the OS's own. */
export const SYSTEM_ROOTS: readonly string[] = Object.freeze([
  '/proc',
  '/sys',
  '/dev',
  '/run',
  '/var/run',
  '/boot',
  '/etc',
  '/bin',
  '/sbin',
  '/lib',
  '/lib32',
  '/lib64',
  '/libx32',
  '/usr/bin',
  '/usr/sbin',
  '/usr/lib',
  '/usr/lib32',
  '/usr/lib64',
  '/usr/libexec',
  '/usr/include',
]);

/** Directories refused themselves (their subdirectories are allowed: /usr/local/models, /var/models). */
const SYSTEM_DIRS: ReadonlySet<string> = new Set(['/', '/usr', '/var']);

export interface ManagedUrlLimits {
  /** Most entries (files, directories, links) a url's tree may hold: the archive limit, MME_ARCHIVE_MAX_ENTRIES. */
  readonly maxEntries: number;
  /** The server's cache directory: never a url (its entries belong to self-managed targets and are evicted). */
  readonly cacheDir?: string;
  /** MME_MODEL_URL_ROOTS: when set, the url's real path must lie in one of them (e.g. /opt/ml/models, as Triton requires). */
  readonly roots?: readonly string[];
}

export interface ManagedUrl {
  /** The url as given, made absolute: what GET /models reports as modelUrl. */
  readonly url: string;
  /** Its real path: what is loaded (a link swapped later does not redirect the load). */
  readonly dir: string;
}

function isUnder(root: string, p: string): boolean {
  return p === root || p.startsWith(root.endsWith('/') ? root : `${root}/`);
}

/** The system tree `p` lies in (or is), or undefined. */
export function systemRootOf(p: string): string | undefined {
  if (SYSTEM_DIRS.has(p)) return p;
  return SYSTEM_ROOTS.find((root) => isUnder(root, p));
}

function refuse(modelName: string, problem: string): ServingError {
  return new ServingError('INVALID_REQUEST', `model '${modelName}': url ${problem}`, { model: modelName });
}

/** The one answer for anything outside the roots, whatever is there. */
function outsideRoots(modelName: string): ServingError {
  // Not named: they are host paths; the operator set them.
  return refuse(modelName, 'lies outside the directories MME_MODEL_URL_ROOTS allows');
}

/** Each root as configured and as its real path (a root that is itself a link is matched either way). */
async function rootForms(roots: readonly string[]): Promise<string[]> {
  const real = await Promise.all(roots.map((r) => realpath(r).catch(() => r)));
  return [...new Set([...roots, ...real])];
}

/** The text checks, before the filesystem is touched. */
function lexical(modelName: string, url: string): string {
  if (url.length > MAX_URL_LENGTH) throw refuse(modelName, `is ${url.length} characters long, over the limit of ${MAX_URL_LENGTH}`);
  if (NON_PRINTABLE.test(url)) throw refuse(modelName, 'contains a control or non-printable character');
  if (!path.isAbsolute(url)) throw refuse(modelName, 'must be an absolute path to the extracted model directory');
  if (url.split('/').includes('..')) throw refuse(modelName, "must not contain '..'");
  return path.resolve(url);
}

function systemRefusal(modelName: string, root: string, via: string): ServingError {
  return refuse(modelName, `${via} ${root === '/' ? 'the filesystem root' : `the system directory ${root}`}, which never holds a model`);
}

/**
 * The url checked and resolved, or the error to answer with: 400
 * INVALID_REQUEST (not absolute, `..`, outside the roots whatever is there;
 * inside them: a system directory or a link into one,
 * the cache, not a directory), 404 MODEL_NOT_FOUND (nothing there), 403
 * ACCESS_DENIED (unreadable), 400 INVALID_MODEL (more entries than a package
 * may hold, a link inside it into a system directory).
 */
export async function resolveManagedUrl(modelName: string, url: string, limits: ManagedUrlLimits): Promise<ManagedUrl> {
  const absolute = lexical(modelName, url);
  const roots = limits.roots === undefined ? undefined : await rootForms(limits.roots);
  const dir = await realPathInRoots(modelName, absolute, roots);
  const cache = limits.cacheDir === undefined ? undefined : await realpath(limits.cacheDir).catch(() => path.resolve(limits.cacheDir!));
  if (cache !== undefined && isUnder(cache, dir)) {
    throw refuse(modelName, "lies inside the server's cache directory (MME_CACHE_DIR), which holds only what the server extracted");
  }
  let isDirectory: boolean;
  try {
    isDirectory = (await stat(dir)).isDirectory();
  } catch (err) {
    throw fsRefusal(modelName, err);
  }
  if (!isDirectory) throw refuse(modelName, 'is not a directory (it must be the directory SageMaker extracted the model archive into)');
  await checkTree(modelName, dir, { maxEntries: limits.maxEntries, roots, cache });
  return { url: absolute, dir };
}

/**
 * The real path of `absolute` inside the roots: outside them (by its
 * text, then by its real path) the one refusal, before anything about what
 * is there is looked at; inside, a system tree or nothing there is said.
 * `allowed`: the roots' forms (rootForms); undefined: no roots set.
 */
async function realPathInRoots(modelName: string, absolute: string, allowed: readonly string[] | undefined): Promise<string> {
  if (allowed !== undefined && !allowed.some((r) => isUnder(r, absolute))) throw outsideRoots(modelName);
  const lexicalRoot = systemRootOf(absolute);
  if (lexicalRoot !== undefined) throw systemRefusal(modelName, lexicalRoot, 'is');
  let dir: string;
  try {
    dir = await realpath(absolute);
  } catch (err) {
    throw fsRefusal(modelName, err);
  }
  if (allowed !== undefined && !allowed.some((r) => isUnder(r, dir))) throw outsideRoots(modelName);
  const realRoot = systemRootOf(dir);
  if (realRoot !== undefined) throw systemRefusal(modelName, realRoot, 'resolves (through a symbolic link) into');
  return dir;
}

/**
 * ModelMesh's modelPath: the package directory it names (model-mesh's puller
 * may hand over the model file itself: then its directory), checked against
 * the roots exactly as a POST /models url is, before anything is looked at.
 */
export async function modelPathDir(modelName: string, modelPath: string, limits: ManagedUrlLimits): Promise<string> {
  const absolute = lexical(modelName, modelPath);
  const real = await realPathInRoots(modelName, absolute, limits.roots === undefined ? undefined : await rootForms(limits.roots));
  let isDirectory: boolean;
  try {
    isDirectory = (await stat(real)).isDirectory();
  } catch (err) {
    throw fsRefusal(modelName, err);
  }
  return isDirectory ? absolute : path.dirname(absolute);
}

function errno(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

function fsRefusal(modelName: string, err: unknown): ServingError {
  const code = errno(err);
  if (code === 'ENOENT' || code === 'ENOTDIR') {
    return new ServingError('MODEL_NOT_FOUND', `model '${modelName}': nothing exists at url`, { model: modelName });
  }
  if (code === 'EACCES' || code === 'EPERM') {
    return new ServingError('ACCESS_DENIED', `model '${modelName}': url cannot be read (${code})`, { model: modelName });
  }
  return refuse(modelName, `cannot be resolved (${code ?? 'error'})`);
}

/** Where the links of a package may lead: inside the roots (the real paths of MME_MODEL_URL_ROOTS, when set), never into the cache. */
interface TreeLimits {
  readonly maxEntries: number;
  readonly roots: readonly string[] | undefined;
  readonly cache: string | undefined;
}

/** Why a link's real target may not be read as part of a package, or undefined when it may. */
function linkRefusal(target: string, limits: TreeLimits): string | undefined {
  const system = systemRootOf(target);
  if (system !== undefined) return `links into ${system === '/' ? 'the filesystem root' : `the system directory ${system}`}`;
  if (limits.roots !== undefined && !limits.roots.some((r) => isUnder(r, target))) return 'links outside the directories MME_MODEL_URL_ROOTS allows';
  if (limits.cache !== undefined && isUnder(limits.cache, target)) return "links into the server's cache directory (MME_CACHE_DIR)";
  return undefined;
}

/**
 * Count the tree's entries breadth-first, with readdir only (one call per
 * directory), and check each symbolic link's real target: the loader reads
 * through links, so a link may not lead where the url itself could not
 * (a system tree, outside the roots, the cache). A link to a directory that
 * may be read is walked too (its own links checked the same way). Stops at
 * the first entry over `maxEntries` (a link cycle included): the work is
 * bounded by the limit, whatever the tree, and the answer is the same for
 * the same tree.
 */
async function checkTree(modelName: string, root: string, limits: TreeLimits): Promise<void> {
  let seen = 0;
  const queue: string[] = [''];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    let entries: Dirent[];
    try {
      entries = await readdir(path.join(root, next), { withFileTypes: true });
    } catch {
      continue; // unreadable: the load reports it, naming the file within the package, if it matters
    }
    for (const entry of entries) {
      if (++seen > limits.maxEntries) {
        throw new ServingError(
          'INVALID_MODEL',
          `model '${modelName}': the url holds more than ${limits.maxEntries} entries (MME_ARCHIVE_MAX_ENTRIES), more than a model package may; give the directory the model archive was extracted into`,
          { model: modelName },
        );
      }
      const rel = next === '' ? entry.name : `${next}/${entry.name}`;
      if (entry.isDirectory()) {
        queue.push(rel);
      } else if (entry.isSymbolicLink()) {
        const target = await realpath(path.join(root, rel)).catch(() => undefined); // dangling: the load reports it if it matters
        if (target === undefined) continue;
        const why = linkRefusal(target, limits);
        if (why !== undefined)
          throw new ServingError('INVALID_MODEL', `model '${modelName}': '${rel.slice(0, 200)}' in the package ${why}`, { model: modelName });
        if ((await stat(target).catch(() => undefined))?.isDirectory()) queue.push(rel);
      }
    }
  }
}
