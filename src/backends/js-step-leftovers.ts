/**
 * @module backends/js-step-leftovers
 * Whose a js step's sandbox directory is, and the sweep of those whose
 * server is gone.
 *
 * A sandbox (backends/js-step-sandbox.ts) is removed when its step is
 * released. A server that ends without releasing its models (SIGKILL, the
 * kernel's OOM killer, a grace period that ran out) leaves its sandboxes in
 * the temp directory: the step's host files, its scratch, and the mirror of
 * the model's files, hard links into the disk cache that keep the bytes of
 * an evicted entry on disk. Each sandbox's name therefore carries its
 * owner: the server's pid namespace, pid and start time (in clock ticks since
 * boot, /proc/<pid>/stat). At start-up a server removes the sandboxes whose
 * owner is gone: same namespace (a pid means nothing across namespaces that
 * share a temp directory), and no process with that pid and start time (a
 * pid is reused). Only directories this server's user owns are touched, so
 * a name planted by another local user is left as it is.
 */
import { readFileSync, readlinkSync } from 'node:fs';
import { lstat, readdir, rm } from 'node:fs/promises';
import path from 'node:path';

/** What every sandbox's name starts with (the bulk files' directory is `onnx-mme-js-bulk-`, gone once opened). */
export const SANDBOX_NAME_PREFIX = 'onnx-mme-js-';

/** A sandbox's owner: `<pid namespace>-<pid>-<start time>`. */
const OWNED_NAME = /^onnx-mme-js-(\d+)-(\d+)-(\d+)-[^-]+$/;

interface Owner {
  readonly namespace: string;
  readonly pid: number;
  readonly startTime: string;
}

/** A process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat), or undefined when there is no such process. */
function startTimeOf(pid: number | 'self'): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    // The command name (field 2) may hold spaces and parentheses: fields count from the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/** This process's pid namespace as a number (`pid:[4026531836]`), or undefined off Linux. */
function pidNamespace(): string | undefined {
  try {
    return /^pid:\[(\d+)\]$/.exec(readlinkSync('/proc/self/ns/pid'))?.[1];
  } catch {
    return undefined;
  }
}

let self: Owner | null | undefined;

function thisServer(): Owner | undefined {
  if (self === undefined) {
    const namespace = pidNamespace();
    const startTime = startTimeOf('self');
    self = namespace !== undefined && startTime !== undefined ? { namespace, pid: process.pid, startTime } : null;
  }
  return self ?? undefined;
}

/** The prefix for mkdtemp of this server's sandboxes: its owner in the name where /proc tells it, else the bare prefix (never swept). */
export function sandboxNamePrefix(): string {
  const owner = thisServer();
  return owner === undefined ? SANDBOX_NAME_PREFIX : `${SANDBOX_NAME_PREFIX}${owner.namespace}-${owner.pid}-${owner.startTime}-`;
}

/** Whether a sandbox named `name` belongs to a server of this pid namespace that is no longer running. */
export function ownerIsGone(name: string): boolean {
  const me = thisServer();
  const m = OWNED_NAME.exec(name);
  if (me === undefined || m === null) return false;
  const [, namespace, pid, startTime] = m as unknown as [string, string, string, string];
  if (namespace !== me.namespace) return false;
  if (Number(pid) === me.pid && startTime === me.startTime) return false;
  return startTimeOf(Number(pid)) !== startTime;
}

/**
 * Remove the sandboxes in `tmpDir` whose server is gone (ownerIsGone), owned by this process's user and
 * not links; returns how many. A directory that cannot be read or removed is left (the next start tries again).
 */
export async function sweepLeftoverSandboxes(tmpDir: string): Promise<number> {
  let names: string[];
  try {
    names = await readdir(tmpDir);
  } catch {
    return 0;
  }
  const uid = process.getuid?.();
  let removed = 0;
  for (const name of names) {
    if (!name.startsWith(SANDBOX_NAME_PREFIX) || !ownerIsGone(name)) continue;
    const dir = path.join(tmpDir, name);
    try {
      const st = await lstat(dir);
      if (!st.isDirectory() || (uid !== undefined && st.uid !== uid)) continue;
      await rm(dir, { recursive: true, force: true });
      removed++;
    } catch {
      // Raced with another server's sweep, or not ours to remove.
    }
  }
  return removed;
}
