/**
 * @module backends/js-step-sandbox
 * Where and how a js step's process runs (docs/security.md#javascript-steps):
 *
 * - its own directory under the temp dir, named after its server so that a
 *   later server can sweep it when this one ends without removing it
 *   (backends/js-step-leftovers.ts): `host/` (js-step-host.js and the
 *   two modules it imports, copied there with a package.json, so the step
 *   reads nothing of the server's install), `scratch/` (the only place it
 *   may write; its cwd), and, when the step runs as another user,
 *   `model-<128 random bits>/`: the model directory mirrored (directories
 *   made, files hard-linked, or copied across filesystems), so the step can
 *   reach its files whatever the modes of the cache directory's parents, and
 *   nothing else of the cache. The mirror must be readable by others (the
 *   step is "others" to the files' owner); the sandbox directory is 0711, so
 *   another local user can reach the mirror only by a name it cannot list
 *   or guess;
 * - Node's permission model: `--permission`, reads allowed in `host/` and the
 *   model directory only, writes in `scratch/` only; no child processes,
 *   worker threads, addons, WASI or inspector (not granted);
 * - a scrubbed environment: nothing of the server's (no AWS_*, no MME_*);
 * - RLIMIT_AS through prlimit (util-linux): the process's address space is
 *   capped at js_heap_limit_mb + JS_STEP_FIXED_OVERHEAD_MB, so its typed
 *   arrays (outside V8's heap limit) are bounded too;
 * - when the server runs as root, another uid and gid (MME_JS_STEP_USER,
 *   65534:65534 by default): the step cannot read /proc/<server>/environ or
 *   mem nor signal the server, and the OS checks every file it opens.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, chown, copyFile, link, lstat, mkdir, mkdtemp, readdir, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sandboxNamePrefix } from './js-step-leftovers.js';

/**
 * Address space node and V8 reserve before a step allocates anything
 * (V8's code range, heap reservations, thread stacks, glibc's arena with
 * MALLOC_ARENA_MAX=1): about 1030 MiB measured on node 24 x64 (VmSize of an
 * idle step process), plus room for the step's start-up and the batches in
 * flight. js_heap_limit_mb is added on top.
 */
export const JS_STEP_FIXED_OVERHEAD_MB = 1280;
/** The heap limit (and so the memory bound) of a step whose config sets no js_heap_limit_mb. */
export const DEFAULT_JS_HEAP_LIMIT_MB = 1024;
/** The user a step runs as when the server runs as root and MME_JS_STEP_USER is not set (nobody:nogroup). */
export const DEFAULT_JS_STEP_USER = { uid: 65534, gid: 65534 } as const;

const HOST_FILES = ['js-step-host.js', 'js-step-bulk.js', 'js-step-frames.js', 'js-step-protocol.js'];

export interface StepUser {
  readonly uid: number;
  readonly gid: number;
}

export interface Sandbox {
  /** Where the step reads its model (the model directory, or its mirror). */
  readonly modelDir: string;
  readonly scratchDir: string;
  /** What to spawn: the command, its arguments, and spawn's options for uid/gid, env and cwd. */
  readonly command: string;
  readonly args: readonly string[];
  readonly env: NodeJS.ProcessEnv;
  readonly user: StepUser | undefined;
  /** The process's address-space limit (RLIMIT_AS). */
  readonly memoryBoundBytes: number;
  /** Remove the directory (at unload). */
  remove(): Promise<void>;
}

export interface SandboxOptions {
  readonly modelDir: string;
  readonly heapLimitMb: number;
  /** The user to run as when this process is root; undefined = DEFAULT_JS_STEP_USER. */
  readonly user?: StepUser;
}

let prlimitPath: string | null | undefined;

/** prlimit's path on PATH, or null (found once). */
function findPrlimit(): string | null {
  if (prlimitPath !== undefined) return prlimitPath;
  for (const dir of (process.env['PATH'] ?? '/usr/bin:/bin').split(':')) {
    const candidate = path.join(dir || '.', 'prlimit');
    try {
      execFileSync(candidate, ['--version'], { stdio: 'ignore', timeout: 5000 });
      return (prlimitPath = candidate);
    } catch {
      // not here
    }
  }
  return (prlimitPath = null);
}

/** Thrown when a step cannot be given its sandbox: the message is for the load error (no host path). */
export class SandboxError extends Error {}

export async function prepareSandbox(options: SandboxOptions): Promise<Sandbox> {
  const prlimit = findPrlimit();
  if (prlimit === null) throw new SandboxError('the memory bound of a js step needs prlimit (util-linux), which is not on PATH');
  const user = process.getuid?.() === 0 ? (options.user ?? DEFAULT_JS_STEP_USER) : undefined;
  if (user) await checkReachable(os.tmpdir(), user);
  const root = await mkdtemp(path.join(os.tmpdir(), sandboxNamePrefix()));
  try {
    await chmod(root, 0o711);
    const host = path.join(root, 'host');
    await mkdir(host, { mode: 0o755 });
    const here = path.dirname(fileURLToPath(import.meta.url));
    for (const f of HOST_FILES) await copyFile(path.join(here, f), path.join(host, f));
    await writeFile(path.join(host, 'package.json'), '{ "type": "module" }\n');
    for (const f of [...HOST_FILES, 'package.json']) await chmod(path.join(host, f), 0o644);
    const scratch = path.join(root, 'scratch');
    await mkdir(scratch, { mode: 0o700 });
    let modelDir = path.resolve(options.modelDir);
    if (user) {
      await chown(scratch, user.uid, user.gid);
      modelDir = path.join(root, `model-${randomBytes(16).toString('hex')}`);
      await mirror(path.resolve(options.modelDir), modelDir, '');
    }
    const limitBytes = (options.heapLimitMb + JS_STEP_FIXED_OVERHEAD_MB) * 1024 * 1024;
    const args = [
      `--as=${limitBytes}`,
      // No file it writes (in its scratch, its bulk file of js-step-bulk.ts) grows past its memory bound: EFBIG.
      `--fsize=${limitBytes}`,
      '--',
      process.execPath,
      '--permission',
      `--allow-fs-read=${host}`,
      `--allow-fs-read=${modelDir}`,
      `--allow-fs-read=${scratch}`,
      `--allow-fs-write=${scratch}`,
      `--max-old-space-size=${options.heapLimitMb}`,
      // WebAssembly's guard regions (10 GiB of address space per memory) do not fit under RLIMIT_AS.
      '--disable-wasm-trap-handler',
      path.join(host, 'js-step-host.js'),
    ];
    const env: NodeJS.ProcessEnv = {
      MALLOC_ARENA_MAX: '1',
      // Tensors up to 32 MiB from malloc's heap, and what is freed kept there: a batch's fresh ArrayBuffers then
      // reuse pages already mapped instead of faulting in new ones (most of a 4 MiB tensor's cost on a VM).
      GLIBC_TUNABLES: `glibc.malloc.mmap_threshold=${32 * 1024 * 1024}:glibc.malloc.trim_threshold=${limitBytes}`,
      ...(process.env['TZ'] === undefined ? {} : { TZ: process.env['TZ'] }),
    };
    return {
      modelDir,
      scratchDir: scratch,
      command: prlimit,
      args,
      env,
      user,
      memoryBoundBytes: limitBytes,
      remove: () => rm(root, { recursive: true, force: true }),
    };
  } catch (err) {
    await rm(root, { recursive: true, force: true });
    throw err;
  }
}

/** The step's user must be able to enter every directory down to the temp dir, where its sandbox is made. */
async function checkReachable(dir: string, user: StepUser): Promise<void> {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    const st = await stat(d);
    const bit = st.uid === user.uid ? 0o100 : st.gid === user.gid ? 0o010 : 0o001;
    if ((st.mode & bit) === 0) {
      throw new SandboxError(
        `the js step runs as uid ${user.uid} (MME_JS_STEP_USER), which cannot enter the temp directory (TMPDIR) where its sandbox is made; point TMPDIR at a directory others can traverse`,
      );
    }
    if (d === path.dirname(d)) return;
  }
}

/**
 * `from` rebuilt at `to`, readable by anyone: directories made (0755), files
 * hard-linked (copied when across filesystems), links recreated as they are
 * (the permission model still refuses what they point at outside). A file
 * others cannot read is refused: the step's user could not read it either.
 */
async function mirror(from: string, to: string, within: string): Promise<void> {
  await mkdir(to, { mode: 0o755 });
  await chmod(to, 0o755);
  for (const entry of await readdir(from, { withFileTypes: true })) {
    const source = path.join(from, entry.name);
    const target = path.join(to, entry.name);
    const name = within === '' ? entry.name : `${within}/${entry.name}`;
    if (entry.isDirectory()) {
      await mirror(source, target, name);
    } else if (entry.isSymbolicLink()) {
      await symlink(await readlink(source), target);
    } else if (entry.isFile()) {
      const { mode } = await lstat(source);
      if ((mode & 0o004) === 0) {
        throw new SandboxError(
          `its file '${name}' is not readable by others (mode ${(mode & 0o777).toString(8).padStart(4, '0')}): the js step runs as another user and could not read it`,
        );
      }
      await link(source, target).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'EXDEV' || err.code === 'EPERM') return copyFile(source, target);
        throw err;
      });
    }
  }
}
