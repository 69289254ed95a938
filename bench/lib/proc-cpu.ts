/**
 * @module bench/lib/proc-cpu
 * CPU time of another process (user + system, all its threads), or of one
 * of its threads, from Linux /proc, in µs. The invocations bench divides the
 * CPU time a server spent over a run by the requests it answered: CPU per
 * request, which a shared machine disturbs far less than requests per second.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

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

function cpuUsOf(statFile: string): number {
  const stat = readFileSync(statFile, 'utf8');
  // Fields after the command name, which is in parentheses and may hold spaces: state is field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1e6) / clockTicks();
}
