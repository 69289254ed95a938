/**
 * @module cli/package-input
 * A model package named on the command line, as a directory the loader can
 * read: a directory is used in place; a `.tar.gz`/`.tgz` file is extracted
 * into a fresh temporary directory by the server's own safe extractor
 * (store/extract-archive.ts, with the server's MME_ARCHIVE_MAX_* limits), so
 * a tarball the server would reject is rejected here for the same reason.
 */
import { mkdtemp, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ExtractLimits } from '../store/extract-limits.js';
import { extractArchive } from '../store/extract-archive.js';
import { archiveStem } from '../store/target-path.js';
import { UsageError } from './cli-support.js';

export interface PackageInput {
  /** Directory holding the package (for an archive: its extraction). */
  readonly dir: string;
  /** As the server names a target in messages: the file or directory name. */
  readonly label: string;
  /** The name a root-level model without `name:` gets: the base name without .tar.gz/.tgz (the server's rule for targets). */
  readonly fallbackName: string;
  readonly kind: 'directory' | 'archive';
  /** Compressed size of an archive. */
  readonly archiveBytes: number | undefined;
  /** Remove the temporary extraction (a no-op for a directory). */
  cleanup(): Promise<void>;
}

export function archiveBaseName(file: string): string {
  return archiveStem(path.basename(file));
}

/**
 * Open `input`. Throws UsageError when it does not exist or is neither a
 * directory nor a file; a corrupt or hostile archive throws the extractor's
 * ServingError (ARCHIVE_REJECTED), which the caller reports as a package problem.
 */
export async function openPackage(input: string, limits: ExtractLimits): Promise<PackageInput> {
  const full = path.resolve(input);
  let info;
  try {
    info = await stat(full);
  } catch {
    throw new UsageError(`${input}: no such file or directory`);
  }
  const label = path.basename(full);
  if (info.isDirectory()) {
    return { dir: full, label, fallbackName: label, kind: 'directory', archiveBytes: undefined, cleanup: async () => undefined };
  }
  if (!info.isFile()) throw new UsageError(`${input}: not a directory or a .tar.gz file`);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-cli-'));
  const cleanup = (): Promise<void> => rm(dir, { recursive: true, force: true });
  try {
    await extractArchive(full, dir, limits);
  } catch (err) {
    await cleanup();
    throw err;
  }
  return { dir, label, fallbackName: archiveBaseName(full), kind: 'archive', archiveBytes: info.size, cleanup };
}
