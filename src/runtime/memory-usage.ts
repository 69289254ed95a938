/**
 * @module runtime/memory-usage
 * Where memory is measured: this process's resident set (CPU sessions live in
 * worker threads of this process), the container's memory limit (cgroups),
 * and GPU memory through the driver's `nvidia-smi` (the CUDA/TensorRT
 * providers allocate there): a device's total for the budget's default, and
 * this process's own use of one device for a load's measurement (other
 * processes on a shared GPU must not count against our models). Every probe degrades to `undefined` rather than
 * failing: accounting then keeps its prediction.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';

/** Resident set size of the whole process (all worker threads). */
export function processRssBytes(): number {
  return process.memoryUsage.rss();
}

/** The process's memory at idle: what model memory is measured above. */
export interface MemoryBaseline {
  readonly rssBytes: number;
  /** The main thread's JavaScript heap and array buffers then. */
  readonly jsBytes: number;
}

function jsBytes(): number {
  const m = process.memoryUsage();
  return m.heapTotal + m.arrayBuffers;
}

export function takeBaseline(): MemoryBaseline {
  return { rssBytes: processRssBytes(), jsBytes: jsBytes() };
}

/**
 * Memory the process holds above its idle baseline that is not the main
 * thread's JavaScript heap or buffers (request bodies, answers and their
 * garbage: not model memory, and bounded by the request limits): what the
 * models hold (sessions, arenas, main-thread copies), plus the runtime
 * workers' own small heaps.
 */
export function modelMemoryBytes(baseline: MemoryBaseline): number {
  return processRssBytes() - baseline.rssBytes - Math.max(0, jsBytes() - baseline.jsBytes);
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
    execFile('nvidia-smi', ['--query-gpu=memory.used,memory.total', '--format=csv,noheader,nounits'], { timeout: timeoutMs }, (err, stdout) =>
      resolve(err ? undefined : parseNvidiaSmi(stdout, deviceId)),
    );
  });
}

/**
 * Parses `nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits`
 * together with `--query-gpu=index,uuid --format=csv,noheader` (which device
 * index has which UUID): the bytes `pid` uses on each device, 0 where it has
 * no context yet.
 */
export function parseGpuProcessBytes(apps: string, gpus: string, pid: number): Map<number, number> {
  const byUuid = new Map<string, number>();
  const out = new Map<number, number>();
  for (const line of gpus.trim().split('\n')) {
    const [index, uuid] = line.split(',').map((s) => s.trim());
    if (index === undefined || uuid === undefined || index === '' || !Number.isInteger(Number(index))) continue;
    byUuid.set(uuid, Number(index));
    out.set(Number(index), 0);
  }
  for (const line of apps.trim().split('\n')) {
    const [uuid, appPid, used] = line.split(',').map((s) => s.trim());
    const device = uuid === undefined ? undefined : byUuid.get(uuid);
    const mib = Number(used);
    if (device !== undefined && Number(appPid) === pid && Number.isFinite(mib)) out.set(device, (out.get(device) ?? 0) + mib * 1024 * 1024);
  }
  return out;
}

function smi(args: readonly string[], timeoutMs: number): Promise<string | undefined> {
  return new Promise((resolve) => execFile('nvidia-smi', [...args], { timeout: timeoutMs }, (err, stdout) => resolve(err ? undefined : stdout)));
}

/** This process's GPU memory per device index, from the driver; undefined without nvidia-smi. */
export async function gpuProcessBytes(pid: number = process.pid, timeoutMs = 3000): Promise<Map<number, number> | undefined> {
  const [gpus, apps] = await Promise.all([
    smi(['--query-gpu=index,uuid', '--format=csv,noheader'], timeoutMs),
    smi(['--query-compute-apps=gpu_uuid,pid,used_memory', '--format=csv,noheader,nounits'], timeoutMs),
  ]);
  return gpus === undefined || apps === undefined ? undefined : parseGpuProcessBytes(apps, gpus, pid);
}
