/**
 * @module examples/demo/build-demo-repository
 * Generates the demo model source that `npm start` serves:
 *
 * - `add_sub.tar.gz`: one Triton model directory (`add_sub/…`) in a tarball;
 * - `mlp.tar.gz`: the 256→1024→1024→16 MLP, `config.pbtxt` at the archive root;
 * - `pipeline.tar.gz`: a repository with the two-step ensemble
 *   (`preprocess` → `classifier`, ensemble `pipeline`);
 * - `tiny/`: a plain directory model, `config.pbtxt` at its root;
 * - `autocomplete/1/model.onnx`: no config.pbtxt, to show auto-complete.
 *
 * Usage: `node dist/examples/demo/build-demo-repository.js [outDir] [--force]`.
 * Idempotent: a stamp file records a hash of the settings and of the generator
 * code, and nothing is rebuilt while it matches and every output exists.
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { addSub, mlp, packTarGz, tiny, writeEnsembleRepository, writeModelDir } from '../models/zoo.js';

/** What the demo contains; part of the stamp hash, so editing it forces a rebuild. */
export const DEMO_SETTINGS = Object.freeze({
  addSub: { dtype: 'FP32', dims: 16 },
  mlp: { in: 256, hidden: [1024, 1024], out: 16, seed: 1 },
  pipeline: { name: 'pipeline', factor: 2, features: 4, classes: 3, seed: 11 },
  tiny: { in: 16, out: 4, seed: 7 },
} as const);

/** Outputs, relative to outDir. */
export const DEMO_OUTPUTS: readonly string[] = Object.freeze(['add_sub.tar.gz', 'mlp.tar.gz', 'pipeline.tar.gz', 'tiny', 'autocomplete']);

// A dotfile, so model sources that list archives and directories ignore it.
const STAMP_FILE = '.demo-stamp.json';

export interface DemoBuildOptions {
  /** Rebuild even when the stamp matches. */
  readonly force?: boolean;
  /** Progress lines; defaults to console.log. */
  readonly log?: (line: string) => void;
}

export interface DemoBuildResult {
  readonly outDir: string;
  /** True when everything was up to date and nothing was written. */
  readonly skipped: boolean;
  /** Absolute paths written by this run. */
  readonly written: readonly string[];
}

interface Stamp {
  readonly hash: string;
  readonly outputs: readonly string[];
}

/**
 * Hash of the settings and the generator code. The code is hashed too because
 * a change to how a model is generated must invalidate old outputs as surely
 * as a change to its size.
 */
async function settingsHash(): Promise<string> {
  const hash = createHash('sha256').update(JSON.stringify({ DEMO_SETTINGS, DEMO_OUTPUTS }));
  const here = fileURLToPath(import.meta.url);
  const sources = [here, fileURLToPath(new URL('../models/zoo.js', import.meta.url)), fileURLToPath(new URL('../models/onnx-builder.js', import.meta.url))];
  for (const file of sources) {
    // Run from source via a TS loader the siblings are .ts; hash what exists.
    const content = await readFile(file).catch(() => readFile(file.replace(/\.js$/, '.ts')).catch(() => Buffer.alloc(0)));
    hash.update(path.basename(file)).update(content);
  }
  return hash.digest('hex');
}

async function exists(p: string): Promise<boolean> {
  return stat(p).then(
    () => true,
    () => false,
  );
}

async function readStamp(outDir: string): Promise<Stamp | undefined> {
  try {
    const parsed: unknown = JSON.parse(await readFile(path.join(outDir, STAMP_FILE), 'utf8'));
    if (typeof parsed === 'object' && parsed !== null && 'hash' in parsed && typeof parsed.hash === 'string') {
      return parsed as Stamp;
    }
  } catch {
    // Missing or corrupt: rebuild.
  }
  return undefined;
}

async function upToDate(outDir: string, hash: string): Promise<boolean> {
  const stamp = await readStamp(outDir);
  if (stamp?.hash !== hash) return false;
  for (const output of DEMO_OUTPUTS) if (!(await exists(path.join(outDir, output)))) return false;
  return true;
}

/** Build every output into `staging`, each under its final name. */
async function buildInto(staging: string): Promise<void> {
  const work = path.join(staging, '.work');

  const addSubDir = await writeModelDir(work, 'add_sub', addSub(DEMO_SETTINGS.addSub.dtype, DEMO_SETTINGS.addSub.dims));
  await packTarGz(addSubDir, path.join(staging, 'add_sub.tar.gz'), { prefix: 'add_sub' });

  const mlpDir = await writeModelDir(work, 'mlp', mlp(DEMO_SETTINGS.mlp));
  await packTarGz(mlpDir, path.join(staging, 'mlp.tar.gz'));

  const pipelineRoot = path.join(work, 'pipeline-repository');
  await writeEnsembleRepository(pipelineRoot, DEMO_SETTINGS.pipeline);
  await packTarGz(pipelineRoot, path.join(staging, 'pipeline.tar.gz'));

  await writeModelDir(staging, 'tiny', tiny(DEMO_SETTINGS.tiny));
  // Same graph as add_sub, but no config.pbtxt: the server must derive it.
  await writeModelDir(staging, 'autocomplete', { onnx: addSub(DEMO_SETTINGS.addSub.dtype, DEMO_SETTINGS.addSub.dims).onnx });

  await rm(work, { recursive: true, force: true });
}

async function describe(p: string): Promise<string> {
  const s = await stat(p);
  return s.isDirectory() ? `${p}/` : `${p} (${(s.size / 1024).toFixed(1)} KiB)`;
}

/** Generate the demo model source in `outDir` unless it is already up to date. */
export async function buildDemoRepository(outDir: string, options: DemoBuildOptions = {}): Promise<DemoBuildResult> {
  const log = options.log ?? ((line: string) => console.log(line));
  const root = path.resolve(outDir);
  const hash = await settingsHash();
  if (options.force !== true && (await upToDate(root, hash))) {
    log(`demo repository up to date: ${root}`);
    return { outDir: root, skipped: true, written: [] };
  }

  await mkdir(root, { recursive: true });
  // Stage inside outDir so the final renames stay on one filesystem; the
  // stamp is written last, so an interrupted build is redone next time.
  const staging = path.join(root, `.staging-${process.pid}`);
  await rm(staging, { recursive: true, force: true });
  await rm(path.join(root, STAMP_FILE), { force: true });
  const written: string[] = [];
  try {
    await buildInto(staging);
    for (const output of DEMO_OUTPUTS) {
      const target = path.join(root, output);
      await rm(target, { recursive: true, force: true });
      await rename(path.join(staging, output), target);
      written.push(target);
      log(`wrote ${await describe(target)}`);
    }
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  const stamp: Stamp = { hash, outputs: DEMO_OUTPUTS };
  await writeFile(path.join(root, STAMP_FILE), `${JSON.stringify(stamp, null, 2)}\n`);
  return { outDir: root, skipped: false, written };
}

function isMain(): boolean {
  const entry = process.argv[1];
  return entry !== undefined && import.meta.url === pathToFileURL(path.resolve(entry)).href;
}

if (isMain()) {
  const args = process.argv.slice(2);
  const force = args.includes('--force');
  const outDir = args.find((a) => !a.startsWith('--')) ?? 'examples/demo/repository';
  buildDemoRepository(outDir, { force }).catch((err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.exitCode = 1;
  });
}
