/**
 * @module registry/package-size
 * The memory a package is predicted to need before it is loaded: the bytes of
 * its files (onnxruntime holds every initializer in memory, so the weights are
 * a floor of a CPU session's footprint) plus a fixed allowance per ONNX file
 * for the session itself. That is the load's peak reservation; once loaded,
 * a package is booked at what it was measured to hold
 * (registry/load-measurement.ts calibrates the per-session figure).
 */
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import type { LoadFootprint } from './load-measurement.js';
import type { LoadedPackage } from './package-loader.js';

export const SESSION_OVERHEAD_BYTES = 1024 * 1024;
/** Stop walking absurd trees: prediction is a budget check, not an audit. */
const MAX_ENTRIES = 100_000;

export async function predictPackageBytes(dir: string): Promise<number> {
  return (await predictPackageFootprint(dir)).predictedBytes;
}

/** The prediction, and the bytes of the files it is made from. */
export async function predictPackageFootprint(dir: string): Promise<{ predictedBytes: number; fileBytes: number }> {
  const { bytes, sessions } = await walkBytes(dir);
  return { predictedBytes: bytes + sessions * SESSION_OVERHEAD_BYTES, fileBytes: bytes };
}

/**
 * What a loaded package holds, exact about what was loaded: only the
 * versions served, and each session copy (one per instance_group instance,
 * plus a main-thread copy while it exists) holding its own weights. A
 * processing step (no session) holds its files once, whatever its instance count.
 */
export async function loadedFootprint(pkg: LoadedPackage, sizeOf: FilesBytes = filesBytes): Promise<LoadFootprint> {
  let fileBytes = 0;
  let sessions = 0;
  for (const model of pkg.models.values()) {
    for (const version of model.versions.values()) {
      const bytes = await sizeOf(path.join(model.dir, String(version.version)));
      const copies = version.sessions.reduce((n, s) => n + s.copies, 0);
      fileBytes += version.sessions.length === 0 ? bytes : bytes * copies;
      sessions += copies;
    }
  }
  return { fileBytes, sessions };
}

/** The prediction once loaded, with the fixed per-session allowance (GPU packages, whose measurement is the driver's). */
export async function predictLoadedBytes(pkg: LoadedPackage): Promise<number> {
  const f = await loadedFootprint(pkg);
  return f.fileBytes + f.sessions * SESSION_OVERHEAD_BYTES;
}

/** How a load reads a version directory's file bytes (filesBytes, or a load's memo of it: sizeMemo). */
export type FilesBytes = (dir: string) => Promise<number>;

/**
 * filesBytes, each directory walked once: one load asks for a version's bytes
 * to place its session and to book it, and an extracted cache entry does not
 * change while it is loaded.
 */
export function sizeMemo(): FilesBytes {
  const known = new Map<string, Promise<number>>();
  return (dir) => {
    let bytes = known.get(dir);
    if (bytes === undefined) known.set(dir, (bytes = filesBytes(dir)));
    return bytes;
  };
}

/** Bytes of the regular files under `dir` (a version directory: the model file and any external data). */
export async function filesBytes(dir: string): Promise<number> {
  return (await walkBytes(dir)).bytes;
}

async function walkBytes(dir: string): Promise<{ bytes: number; sessions: number }> {
  let bytes = 0;
  let sessions = 0;
  let seen = 0;
  const walk = async (current: string): Promise<void> => {
    let entries;
    try {
      entries = await readdir(current, { withFileTypes: true });
    } catch {
      return; // unreadable: the loader reports it with a better message
    }
    for (const entry of entries) {
      if (++seen > MAX_ENTRIES) return;
      const full = path.join(current, entry.name);
      if (entry.isDirectory()) {
        await walk(full);
      } else if (entry.isFile() || entry.isSymbolicLink()) {
        try {
          const s = await stat(full);
          if (!s.isFile()) continue;
          bytes += s.size;
          if (entry.name.endsWith('.onnx')) sessions++;
        } catch {
          // a dangling link: the loader reports it if it matters
        }
      }
    }
  };
  await walk(dir);
  return { bytes, sessions };
}
