/**
 * @module registry/package-size
 * The memory a package is predicted to need before it is loaded: the bytes of
 * its files (onnxruntime holds every initializer in memory, so the weights are
 * a floor of a CPU session's footprint) plus a fixed allowance per ONNX file
 * for the session itself (measured at about 0.7 MiB for a small CPU session).
 * The measurement after the load corrects it upwards, never downwards.
 */
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
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
 * The same prediction once the package is loaded, now exact about what was
 * loaded: only the versions served, and each session copy (one per
 * instance_group instance, plus main-thread copies) holding its own weights.
 */
export async function predictLoadedBytes(pkg: LoadedPackage): Promise<number> {
  let total = 0;
  for (const model of pkg.models.values()) {
    for (const version of model.versions.values()) {
      const bytes = await filesBytes(path.join(model.dir, String(version.version)));
      // A processing step (no session) holds its files once, whatever its instance count;
      // a session with a main-thread copy as well as its worker's holds two (runtime/session-placement.ts).
      const copies = version.sessions.reduce((n, s) => n + s.copies, 0);
      total += version.sessions.length === 0 ? bytes : (bytes + SESSION_OVERHEAD_BYTES) * copies;
    }
  }
  return total;
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
