/**
 * @module runtime/memory-usage
 * Where memory is measured: this process's resident set (CPU sessions live in
 * worker threads of this process), the container's memory limit (cgroups),
 * and GPU memory through the driver's `nvidia-smi` (the CUDA/TensorRT
 * providers allocate there). Every probe degrades to `undefined` rather than
 * failing: accounting then keeps its prediction.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';

/** Resident set size of the whole process (all worker threads). */
export function processRssBytes(): number {
  return process.memoryUsage.rss();
}

/** Values cgroups use for "no limit" are around 2^63; anything above the machine's memory is no limit. */
function parseLimit(text: string): number | undefined {
  const v = text.trim();
  if (v === '' || v === 'max') return undefined;
  const n = Number(v);
  return Number.isFinite(n) && n > 0 && n < os.totalmem() ? n : undefined;
}

/**
 * The container's memory limit (cgroup v2 `memory.max`, else v1
 * `memory.limit_in_bytes`), or undefined when unlimited; `readFile` is
 * injectable for tests.
 */
export function containerMemoryLimitBytes(readFile: (file: string) => string = (f) => readFileSync(f, 'utf8')): number | undefined {
  for (const file of ['/sys/fs/cgroup/memory.max', '/sys/fs/cgroup/memory/memory.limit_in_bytes']) {
    try {
      const limit = parseLimit(readFile(file));
      if (limit !== undefined) return limit;
    } catch {
      // not this cgroup version
    }
  }
  return undefined;
}

/** Memory a budget for this host may be a share of: the container limit, else physical memory. */
export function hostMemoryBytes(): number {
  return containerMemoryLimitBytes() ?? os.totalmem();
}

export interface GpuMemory {
  readonly usedBytes: number;
  readonly totalBytes: number;
}

/** Parses `nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader,nounits` (MiB per line, one line per GPU). */
export function parseNvidiaSmi(output: string, deviceId: number): GpuMemory | undefined {
  const line = output.trim().split('\n')[deviceId];
  if (line === undefined) return undefined;
  const [used, total] = line.split(',').map((s) => Number(s.trim()));
  if (!Number.isFinite(used) || !Number.isFinite(total) || used === undefined || total === undefined) return undefined;
  return { usedBytes: used * 1024 * 1024, totalBytes: total * 1024 * 1024 };
}

/** GPU memory of one device from the driver, or undefined without nvidia-smi (no GPU, or not in PATH). */
export function gpuMemory(deviceId: number, timeoutMs = 3000): Promise<GpuMemory | undefined> {
  return new Promise((resolve) => {
    execFile(
      'nvidia-smi',
      ['--query-gpu=memory.used,memory.total', '--format=csv,noheader,nounits'],
      { timeout: timeoutMs },
      (err, stdout) => resolve(err ? undefined : parseNvidiaSmi(stdout, deviceId)),
    );
  });
}
