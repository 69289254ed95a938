/**
 * @module store/startup-checks
 * Fail fast on the storage an operator configured: a cache directory that
 * cannot be created or written, and a local model source that does not exist
 * or cannot be read, stop start-up naming the setting and the path (the
 * operator's own, in the operator's log: no client sees it). Without these
 * the server would start, answer /ping 200, and give the first request a 503
 * that says neither.
 */
import { constants } from 'node:fs';
import { access, mkdir, opendir } from 'node:fs/promises';
import { StartupError } from '../errors.js';
import { CACHE_DIR_MODE } from './cache-publish.js';
import { errorCode, messageOf } from './node-error.js';

const WHY: Readonly<Record<string, string>> = {
  ENOENT: 'does not exist',
  ENOTDIR: 'is not a directory',
  EACCES: 'cannot be read by this process (permission denied)',
  EPERM: 'cannot be read by this process (operation not permitted)',
  ELOOP: 'is a loop of symbolic links',
};

/** Creates the cache directory if needed (CACHE_DIR_MODE) and checks this process may write in it. */
export async function checkCacheDir(dir: string): Promise<void> {
  try {
    await mkdir(dir, { recursive: true, mode: CACHE_DIR_MODE });
    await access(dir, constants.W_OK | constants.X_OK);
  } catch (err) {
    const code = errorCode(err);
    const why =
      code === 'EACCES' || code === 'EPERM' || code === 'EROFS' ? `is not writable by this process (${code})` : `cannot be created (${code ?? messageOf(err)})`;
    throw new StartupError('MME_CACHE_DIR', `the cache directory ${dir} ${why}: set MME_CACHE_DIR to a writable directory`, { cause: err });
  }
}

/**
 * A local source must be a readable directory. `optional` (MME_MODEL_SOURCE unset on a SageMaker
 * multi-model endpoint): an absent one returns false, for the caller to say so, instead of failing.
 */
export async function checkLocalSource(root: string, optional: boolean): Promise<boolean> {
  try {
    const dir = await opendir(root);
    await dir.close();
    return true;
  } catch (err) {
    const code = errorCode(err);
    if (optional && (code === 'ENOENT' || code === 'ENOTDIR')) return false;
    const why = (code !== undefined && WHY[code]) || `cannot be read (${code ?? messageOf(err)})`;
    throw new StartupError(
      'MME_MODEL_SOURCE',
      `the model source ${root} ${why}: set MME_MODEL_SOURCE to a directory of models (or s3://bucket/prefix/)${code === 'ENOENT' ? ', or create it' : ''}`,
      { cause: err },
    );
  }
}
