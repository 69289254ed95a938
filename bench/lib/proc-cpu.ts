/**
 * @module bench/lib/proc-cpu
 * CPU time of another process (user + system, all its threads), or of one
 * of its threads, from Linux /proc, in µs. The invocations bench divides the
 * CPU time a server spent over a run by the requests it answered: CPU per
 * request, which a shared machine disturbs far less than requests per second.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

let ticksPerSecond: number | undefined;

/** The kernel's clock ticks per second (`getconf CLK_TCK`, 100 on Linux in practice). */
function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** utime + stime of `pid` so far, µs (tick resolution: 10 ms where CLK_TCK is 100). */
export function processCpuUs(pid: number): number {
  return cpuUsOf(`/proc/${pid}/stat`);
}

/**
 * utime + stime of one thread of `pid` so far, µs; `tid` defaults to the
 * main thread (its id is the process's): what a server's event loop spent,
 * apart from its workers and onnxruntime's threads.
 */
export function threadCpuUs(pid: number, tid = pid): number {
  return cpuUsOf(`/proc/${pid}/task/${tid}/stat`);
}

/**
 * utime + stime so far, µs, of each thread of `pid` whose name (comm, cut at 15 characters) starts with
 * `namePrefix`, by thread id: e.g. the runtime workers (`onnx-mme-runtim`). A thread that ended meanwhile is left out.
 */
export function namedThreadsCpuUs(pid: number, namePrefix: string): Map<number, number> {
  const out = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      if (readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').startsWith(namePrefix)) out.set(Number(tid), threadCpuUs(pid, Number(tid)));
    } catch {
      // the thread ended
    }
  }
  return out;
}

/** What the threads of two namedThreadsCpuUs readings spent between them: the total µs, and each thread's share of it, largest first. */
export function threadShares(before: ReadonlyMap<number, number>, after: ReadonlyMap<number, number>): { total: number; shares: number[] } {
  const used = [...after].map(([tid, us]) => us - (before.get(tid) ?? 0));
  const total = used.reduce((a, b) => a + b, 0);
  return { total, shares: used.map((u) => (total > 0 ? u / total : 0)).sort((a, b) => b - a) };
}

/**
 * A /proc stat line: the name (comm), which is in parentheses and may hold spaces, and the fields after it, the
 * first of them the state (field 3 of proc(5)): field N is fields[N - 3].
 */
export function parseStat(stat: string): { name: string; fields: string[] } {
  const close = stat.lastIndexOf(')');
  return { name: stat.slice(stat.indexOf('(') + 1, close), fields: stat.slice(close + 2).split(' ') };
}

function cpuUsOf(statFile: string): number {
  // utime is field 14, stime 15.
  const { fields } = parseStat(readFileSync(statFile, 'utf8'));
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1e6) / clockTicks();
}
