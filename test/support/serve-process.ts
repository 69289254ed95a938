/**
 * @module test/support/serve-process
 * The server as SageMaker runs it: `serve` as a child process on a free
 * loopback port, its JSON log lines collected, its pid at hand (for RSS read
 * from /proc and for signals). For the tests that measure the process from
 * outside: shutdown deadlines, memory under stalled uploads, /ping under flood.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

export interface ServeProcess {
  readonly proc: ChildProcess;
  readonly port: number;
  readonly url: string;
  readonly lines: Record<string, unknown>[];
  /** Resolves with the exit code (null after a signal). */
  readonly exited: Promise<number | null>;
  /** Stops it (SIGKILL) if it is still running. */
  kill(): Promise<void>;
}

/**
 * `env` is laid over this process's environment; a value of undefined removes the variable.
 * `wrapper`: a command line that runs `serve` (e.g. strace ... --), whose own pid is then `proc.pid`.
 */
export async function startServe(env: Record<string, string | undefined>, wrapper: readonly string[] = []): Promise<ServeProcess> {
  const serve = path.join(repoRoot, 'serve');
  const [command, ...args] = [...wrapper, serve, 'serve'];
  const merged: NodeJS.ProcessEnv = { ...process.env, SAGEMAKER_BIND_TO_PORT: '0', MME_HOST: '127.0.0.1', MME_LOG_LEVEL: 'info', ...env };
  for (const [k, v] of Object.entries(merged)) if (v === undefined) delete merged[k];
  const proc = spawn(command!, args, {
    env: merged,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const lines: Record<string, unknown>[] = [];
  const rl = createInterface({ input: proc.stdout! });
  const port = await new Promise<number>((resolve, reject) => {
    rl.on('line', (line) => {
      let rec: Record<string, unknown>;
      try {
        rec = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      lines.push(rec);
      if (rec['msg'] === 'onnx-mme listening') resolve(rec['port'] as number);
    });
    void exited.then((code) => reject(new Error(`serve exited early with code ${code}${proc.signalCode === null ? '' : ` (${proc.signalCode})`}`)));
  });
  return {
    proc,
    port,
    url: `http://127.0.0.1:${port}`,
    lines,
    exited,
    kill: async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill('SIGKILL');
      await exited;
    },
  };
}

/** Resident set size of a process in bytes, from /proc/<pid>/status (VmRSS). */
export function rssBytes(pid: number): number {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) * 1024;
}
