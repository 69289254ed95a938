/**
 * @module bench/lib/proc-memory
 * Resident memory of another process, from Linux /proc: VmRSS now, VmHWM
 * (the kernel's exact high-water mark, resettable through clear_refs), and a
 * sampler that polls VmRSS on a timer so a bench can report a peak even where
 * the high-water mark cannot be reset. Linux only.
 */
import { readFile, writeFile } from 'node:fs/promises';

/** The `Vm*` lines of /proc/<pid>/status, in kB. */
export async function procStatusKb(pid: number): Promise<Record<string, number>> {
  const text = await readFile(`/proc/${pid}/status`, 'utf8');
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = /^(Vm\w+):\s+(\d+) kB/.exec(line);
    if (m) out[m[1]!] = Number(m[2]);
  }
  return out;
}

/**
 * Reset VmHWM to the current RSS (writes 5 to /proc/<pid>/clear_refs, Linux
 * ≥ 4.0), so a later VmHWM covers exactly what happened since. False where
 * the kernel or permissions do not allow it.
 */
export async function resetPeakRss(pid: number): Promise<boolean> {
  try {
    await writeFile(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/** Polls VmRSS every `intervalMs` until stopped; keeps the peak and the sample count. */
export class RssSampler {
  private timer: NodeJS.Timeout | undefined;
  private reading = false;
  peakKb = 0;
  samples = 0;

  constructor(
    private readonly pid: number,
    private readonly intervalMs = 20,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      // One read at a time: a slow read must not pile up reads behind it.
      if (this.reading) return;
      this.reading = true;
      procStatusKb(this.pid)
        .then(
          (s) => {
            this.peakKb = Math.max(this.peakKb, s['VmRSS'] ?? 0);
            this.samples++;
          },
          () => undefined,
        )
        .finally(() => (this.reading = false));
    }, this.intervalMs);
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
