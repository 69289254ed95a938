/**
 * @module bench/lib/launcher-process
 * A bench that measures server code in its own process (the js step's
 * loader, not a server on a socket) runs that measurement in a child started
 * with the launcher's settings (test/support/launcher.ts: glibc's allocator
 * thresholds, V8's young generation), so its figures are those of the
 * settings users ship rather than of the bench runner's defaults. On the
 * 2-core bench VM the two differ by up to 6× for 4 MiB buffers: the launcher
 * maps every block of 64 KiB or more fresh (so an unloaded model's memory goes
 * back to the kernel), and a fresh page costs a fault.
 *
 * Parent: `inLauncherProcess(new URL(import.meta.url))` from the bench's
 * `run()`; child: launcher-child.ts, given that module's URL, calls its
 * `measure()` and answers with the report.
 */
import { launcherEnv } from '../../test/support/launcher.js';
import { spawnChild } from './child.js';
import type { BenchReport } from './report.js';

/** A bench module measured this way exports `measure()`, what its `run()` would otherwise do in the runner's process. */
export interface MeasuredInChild {
  measure(): Promise<BenchReport>;
}

/** `measure()` of the bench module at `moduleUrl`, in a child process with the launcher's settings. */
export async function inLauncherProcess(moduleUrl: URL): Promise<BenchReport> {
  const child = await spawnChild(
    'launcher-child',
    new URL('./launcher-child.js', import.meta.url),
    [moduleUrl.href],
    launcherEnv(process.env['NODE_OPTIONS']),
    60_000,
  );
  try {
    return (await child.request<{ report: BenchReport }>({ measure: true })).report;
  } finally {
    await child.stop();
  }
}
