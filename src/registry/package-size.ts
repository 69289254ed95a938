/**
 * @module registry/package-size
 * The memory a package is predicted to need before it is loaded: the bytes of
 * its files (onnxruntime holds every initializer in memory, so the weights are
 * a floor of a CPU session's footprint) plus a fixed allowance per ONNX file
 * for the session itself. That is the load's peak reservation; once loaded,
 * a package is booked at what it was measured to hold
 * (registry/load-measurement.ts calibrates the per-session figure).
 */
import { readdirSync, statSync, type Dirent, type Stats } from 'node:fs';
import { stat } from 'node:fs/promises';
import { SMALL_IO_PATHS } from '../store/small-io.js';
import path from 'node:path';
import type { LoadFootprint } from './load-measurement.js';
import type { LoadedPackage } from './package-loader.js';

export const SESSION_OVERHEAD_BYTES = 1024 * 1024;
/** Stop walking absurd trees: prediction is a budget check, not an audit. */
const MAX_ENTRIES = 100_000;

export async function predictPackageBytes(dir: string): Promise<number> {
  return (await predictPackageFootprint(dir)).predictedBytes;
}

/** The prediction, the bytes of the files it is made from, and of each directory under `dir` (a load's sizeMemo starts from them). */
export async function predictPackageFootprint(dir: string): Promise<{ predictedBytes: number; fileBytes: number; dirBytes: ReadonlyMap<string, number> }> {
  const { bytes, sessions, dirs } = await walkBytes(dir);
  return { predictedBytes: bytes + sessions * SESSION_OVERHEAD_BYTES, fileBytes: bytes, dirBytes: dirs };
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
export function sizeMemo(walked: ReadonlyMap<string, number> = new Map()): FilesBytes {
  const known = new Map<string, Promise<number>>([...walked].map(([dir, bytes]) => [dir, Promise.resolve(bytes)]));
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

/**
 * Bytes of the regular files under `dir`, the `.onnx` files among them, and
 * the bytes under each directory walked. A directory's listing and the stats
 * of a few entries are made on the calling thread, the stats of many at once
 * in the pool (store/small-io.ts says why).
 */
async function walkBytes(dir: string): Promise<{ bytes: number; sessions: number; dirs: Map<string, number> }> {
  let sessions = 0;
  let seen = 0;
  const dirs = new Map<string, number>();
  const walk = async (current: string): Promise<number> => {
    let entries: Dirent[];
    try {
      entries = readdirSync(current, { withFileTypes: true });
    } catch {
      return 0; // unreadable: the loader reports it with a better message
    }
    // A few entries are stat'ed on the calling thread, many in the pool (store/small-io.ts).
    const statOf = entries.length <= SMALL_IO_PATHS ? (p: string): Stats => statSync(p) : stat;
    const sizes = await Promise.all(
      entries.map(async (entry): Promise<number> => {
        if (++seen > MAX_ENTRIES) return 0;
        const full = path.join(current, entry.name);
        if (entry.isDirectory()) return walk(full);
        if (!entry.isFile() && !entry.isSymbolicLink()) return 0;
        try {
          const s = await statOf(full);
          if (!s.isFile()) return 0;
          if (entry.name.endsWith('.onnx')) sessions++;
          return s.size;
        } catch {
          return 0; // a dangling link: the loader reports it if it matters
        }
      }),
    );
    const bytes = sizes.reduce((a, b) => a + b, 0);
    dirs.set(current, bytes);
    return bytes;
  };
  const bytes = await walk(dir);
  return { bytes, sessions, dirs };
}
