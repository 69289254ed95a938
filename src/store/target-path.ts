/**
 * @module store/target-path
 * Validation of client-supplied targets (the relative path in
 * X-Amzn-SageMaker-Target-Model or a load request). A target is joined onto the
 * model source root and used to name cache entries, so anything that could
 * climb out of the root, mean different things on different platforms, or hide
 * in logs is refused here, before any file system access.
 */

import { ServingError } from '../errors.js';

export const MAX_TARGET_LENGTH = 1024;
/** Linux NAME_MAX; a longer segment could never exist, so say so up front. */
const MAX_SEGMENT_BYTES = 255;
/**
 * Control, format (zero-width, bidi overrides), surrogate, private-use,
 * unassigned and line/paragraph separator code points: none belongs in a file
 * name and several can make a log line lie about the name.
 */
export const NON_PRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}]/u;

/** Recently checked valid targets: every request names one, and clients repeat the same few. Bounded. */
const CHECKED_LIMIT = 1024;
const checked = new Map<string, string>();

/**
 * Returns the canonical form of `raw` (leading `./` removed) or throws
 * ServingError INVALID_TARGET naming the target and the reason.
 */
export function normalizeTarget(raw: string): string {
  const known = checked.get(raw);
  if (known !== undefined) return known;
  const target = checkTarget(raw);
  if (checked.size >= CHECKED_LIMIT) checked.clear();
  checked.set(raw, target);
  return target;
}

function checkTarget(raw: string): string {
  const reject = (reason: string): never => {
    throw new ServingError('INVALID_TARGET', `invalid target ${quoteTarget(raw)}: ${reason}`, {
      model: String(raw).slice(0, 200),
    });
  };

  if (typeof raw !== 'string' || raw.length === 0) return reject('it is empty');
  if (raw.length > MAX_TARGET_LENGTH) {
    return reject(`it is ${raw.length} characters long, over the limit of ${MAX_TARGET_LENGTH}`);
  }
  if (raw.includes('\0')) return reject('it contains a NUL character');
  if (NON_PRINTABLE.test(raw)) return reject('it contains a non-printable character');
  if (raw.includes('\\')) return reject('it contains a backslash; use "/" between segments');
  if (raw.startsWith('/')) return reject('it is an absolute path; give a path relative to the model source');
  if (/^[A-Za-z]:/.test(raw)) return reject('it starts with a drive letter; give a relative path');

  let target = raw;
  while (target.startsWith('./')) target = target.slice(2);
  if (target.length === 0) return reject('it names the model source root itself');

  for (const segment of target.split('/')) {
    if (segment === '') return reject('it contains an empty path segment');
    if (segment === '..') return reject('it contains a ".." segment');
    if (segment === '.') return reject('it contains a "." segment');
    if (Buffer.byteLength(segment, 'utf8') > MAX_SEGMENT_BYTES) {
      return reject(`a path segment is longer than ${MAX_SEGMENT_BYTES} bytes`);
    }
  }
  return target;
}

/** JSON quoting shows control characters as escapes; long targets are cut for the log line. */
function quoteTarget(raw: unknown): string {
  const text = typeof raw === 'string' ? raw : String(raw);
  const shown = text.length > 200 ? `${text.slice(0, 200)}…` : text;
  return JSON.stringify(shown);
}

/**
 * The archive names a target may end in, in the order a target without one is
 * looked up (`x` → `x.tar.gz`, then `x.tgz`). Case-sensitive, like the file
 * names and S3 keys they are matched against. The one home of this rule: the
 * sources, the registry (a model addressed with or without its suffix) and the
 * command line (pack, push, validate) all ask here.
 */
export const ARCHIVE_SUFFIXES = ['.tar.gz', '.tgz'] as const;

/** The archive suffix `name` ends in (with something before it), or undefined. */
export function archiveSuffixOf(name: string): string | undefined {
  return ARCHIVE_SUFFIXES.find((suffix) => name.endsWith(suffix) && name.length > suffix.length);
}

export function isArchiveName(name: string): boolean {
  return archiveSuffixOf(name) !== undefined;
}

/** `team/b.tar.gz` → `team/b`: the same model addressed without its suffix (a name without one is returned as it is). */
export function archiveStem(name: string): string {
  const suffix = archiveSuffixOf(name);
  return suffix === undefined ? name : name.slice(0, -suffix.length);
}

/** The names a target is looked up under in a source: itself when it is an archive name, else itself with each suffix. */
export function archiveCandidates(target: string): string[] {
  return isArchiveName(target) ? [target] : ARCHIVE_SUFFIXES.map((suffix) => `${target}${suffix}`);
}
