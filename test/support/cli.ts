/**
 * @module test/support/cli
 * Runs the built `onnx-mme` command as a child process, as a user would, and
 * collects its exit code and output. Asynchronous on purpose: tests run the
 * S3 server or the inference server in their own process, which must keep
 * answering while the command runs.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The compiled entry point (dist/src/cli/onnx-mme.js beside this compiled file's tree). */
export const CLI = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'cli', 'onnx-mme.js');

export interface CliResult {
  /** null when a signal ended the command; then `signal` names it. */
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface CliOptions {
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly cwd?: string;
  readonly stdin?: string | Buffer;
}

export function runCli(args: readonly string[], options: CliOptions = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: options.cwd,
      // The SDK's Node-version notice is not what these tests read.
      env: { ...process.env, NODE_NO_WARNINGS: '1', ...options.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', reject);
    child.once('close', (code, signal) => {
      // Tests print stdout when the exit code is wrong; a death by signal must say so there, with what it wrote to stderr.
      if (signal !== null) stdout += `\n[onnx-mme ${args[0] ?? ''} ended by ${signal}; its stderr: ${stderr.slice(-2000)}]`;
      resolve({ code, signal, stdout, stderr });
    });
    child.stdin.end(options.stdin ?? '');
  });
}

/** `key: value` lines of a command's stdout. */
export function fields(stdout: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of stdout.split('\n')) {
    const m = /^([a-z]+): (.*)$/.exec(line);
    if (m) out[m[1]!] = m[2]!;
  }
  return out;
}
