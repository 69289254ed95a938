/**
 * @module bench/lib/child
 * Parent and child sides of the tiny line protocol the bench uses so that the
 * load generator and each server run in different processes (no shared event
 * loop). A child prints one JSON line when ready (servers: `{"port": n}`),
 * then answers one JSON line per JSON command line on stdin. A child exits
 * when its stdin ends, so none outlives a crashed parent.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

// ---------------------------------------------------------------------------
// Parent side

export interface BenchChild {
  readonly name: string;
  readonly pid: number | undefined;
  /** The child's first line. */
  readonly hello: Record<string, unknown>;
  /** Send one command line, wait for the next answer line. */
  request<T>(command: unknown): Promise<T>;
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const p of live) p.kill('SIGKILL');
});

/**
 * Spawn `node <entry> ...args` (entry: a compiled .js next to this module,
 * e.g. `new URL('./express-server.js', import.meta.url)`) and wait for its
 * ready line.
 */
export async function spawnChild(
  name: string,
  entry: URL,
  args: readonly string[] = [],
  env: Readonly<Record<string, string>> = {},
  startTimeoutMs = 120_000,
): Promise<BenchChild> {
  const proc = spawn(process.execPath, [fileURLToPath(entry), ...args], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, ...env },
  });
  live.add(proc);
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  void exited.then(() => live.delete(proc));

  const lines: string[] = [];
  const waiters: { resolve: (line: string) => void; reject: (err: Error) => void }[] = [];
  let closedError: Error | undefined;
  const rl = createInterface({ input: proc.stdout! });
  rl.on('line', (line) => {
    const w = waiters.shift();
    if (w) w.resolve(line);
    else lines.push(line);
  });
  proc.once('exit', (code, signal) => {
    closedError = new Error(`${name} exited (code ${code}, signal ${signal})`);
    for (const w of waiters.splice(0)) w.reject(closedError);
  });
  proc.once('error', (err) => {
    closedError = err;
    for (const w of waiters.splice(0)) w.reject(err);
  });
  const nextLine = (timeoutMs?: number): Promise<string> => {
    const queued = lines.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    if (closedError) return Promise.reject(closedError);
    return new Promise<string>((resolve, reject) => {
      const timer = timeoutMs === undefined ? undefined : setTimeout(() => reject(new Error(`${name}: no answer within ${timeoutMs} ms`)), timeoutMs);
      waiters.push({
        resolve: (l) => {
          clearTimeout(timer);
          resolve(l);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
    });
  };

  let hello: Record<string, unknown>;
  try {
    hello = JSON.parse(await nextLine(startTimeoutMs)) as Record<string, unknown>;
  } catch (err) {
    proc.kill('SIGKILL');
    throw err;
  }

  return {
    name,
    pid: proc.pid,
    hello,
    async request<T>(command: unknown): Promise<T> {
      proc.stdin!.write(`${JSON.stringify(command)}\n`);
      const answer = JSON.parse(await nextLine()) as T & { error?: string };
      if (typeof answer === 'object' && answer !== null && typeof answer.error === 'string') throw new Error(`${name}: ${answer.error}`);
      return answer;
    },
    async stop(): Promise<void> {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.stdin!.end();
      const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** The port a server child announced. */
export function childPort(child: BenchChild): number {
  const port = child.hello['port'];
  if (typeof port !== 'number') throw new Error(`${child.name} did not report a port: ${JSON.stringify(child.hello)}`);
  return port;
}

// ---------------------------------------------------------------------------
// Child side

/** Print the ready line. */
export function announce(hello: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(hello)}\n`);
}

/**
 * Answer each JSON command line on stdin with `handler`'s result (or
 * `{"error": ...}`), one at a time; run `onEnd` and exit when stdin ends.
 */
export function serveCommands(handler: (command: unknown) => Promise<unknown>, onEnd: () => Promise<void> = async () => {}): void {
  const rl = createInterface({ input: process.stdin });
  let chain = Promise.resolve();
  rl.on('line', (line) => {
    chain = chain.then(async () => {
      let answer: unknown;
      try {
        answer = await handler(JSON.parse(line));
      } catch (err) {
        answer = { error: err instanceof Error ? err.message : String(err) };
      }
      process.stdout.write(`${JSON.stringify(answer)}\n`);
    });
  });
  rl.on('close', () => {
    void chain
      .then(onEnd)
      .catch((err: unknown) => process.stderr.write(`bench child cleanup failed: ${String(err)}\n`))
      .finally(() => process.exit(0));
  });
}
