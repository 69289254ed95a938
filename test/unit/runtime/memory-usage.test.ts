/**
 * Memory probes: cgroup limits (v2, v1, unlimited), nvidia-smi output parsing,
 * and the provider options that keep GPU memory honest (CUDA arena growth,
 * TensorRT engine cache under the disk cache).
 */
import assert from 'node:assert/strict';
import os from 'node:os';
import { describe, it } from 'node:test';
import {
  containerMemoryLimitBytes,
  gpuMemory,
  gpuProcessBytes,
  parseGpuProcessBytes,
  parseNvidiaSmi,
  processRssBytes,
} from '../../../src/runtime/memory-usage.js';
import { ortSessionOptions, providerOption, tensorrtCacheEnvironment } from '../../../src/runtime/provider-options.js';

function files(map: Record<string, string>): (f: string) => string {
  return (f) => {
    const v = map[f];
    if (v === undefined) throw Object.assign(new Error(`ENOENT ${f}`), { code: 'ENOENT' });
    return v;
  };
}

describe('containerMemoryLimitBytes', () => {
  it('reads cgroup v2 memory.max', () => {
    assert.equal(containerMemoryLimitBytes(files({ '/sys/fs/cgroup/memory.max': '1073741824\n' })), 1073741824);
  });
  it('falls back to cgroup v1 memory.limit_in_bytes', () => {
    assert.equal(containerMemoryLimitBytes(files({ '/sys/fs/cgroup/memory/memory.limit_in_bytes': '536870912\n' })), 536870912);
  });
  it('treats "max" and v1 sentinels above physical memory as no limit', () => {
    assert.equal(containerMemoryLimitBytes(files({ '/sys/fs/cgroup/memory.max': 'max\n' })), undefined);
    assert.equal(containerMemoryLimitBytes(files({ '/sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712\n' })), undefined);
    assert.equal(containerMemoryLimitBytes(files({})), undefined);
  });
  it('never exceeds physical memory when read from this machine', () => {
    const limit = containerMemoryLimitBytes();
    assert.ok(limit === undefined || limit <= os.totalmem());
  });
});

describe('GPU memory', () => {
  it('parses nvidia-smi CSV per device (MiB)', () => {
    const out = '1234, 81920\n10, 40960\n';
    assert.deepEqual(parseNvidiaSmi(out, 0), { usedBytes: 1234 * 2 ** 20, totalBytes: 81920 * 2 ** 20 });
    assert.deepEqual(parseNvidiaSmi(out, 1), { usedBytes: 10 * 2 ** 20, totalBytes: 40960 * 2 ** 20 });
    assert.equal(parseNvidiaSmi(out, 2), undefined);
    assert.equal(parseNvidiaSmi('[N/A], [N/A]\n', 0), undefined);
  });
  it('is undefined, not an error, where there is no driver', async () => {
    const gpu = await gpuMemory(0, 2000);
    assert.ok(gpu === undefined || gpu.totalBytes > 0);
  });
  it('process RSS is positive', () => {
    assert.ok(processRssBytes() > 0);
  });
});

describe('providerOption', () => {
  it('CUDA and TensorRT get their device only: onnxruntime-node forwards nothing else to them', () => {
    assert.deepEqual(providerOption('cuda', 1), { name: 'cuda', deviceId: 1 });
    assert.deepEqual(providerOption('tensorrt', 0), { name: 'tensorrt', deviceId: 0 });
  });
  it('CPU takes no options', () => {
    assert.deepEqual(providerOption('cpu', 0), { name: 'cpu' });
  });
  it('every session allocates its initializers outside the arena (a config entry the binding does forward)', () => {
    const options = ortSessionOptions({
      providers: ['cuda', 'cpu'],
      deviceId: 0,
      graphOptimizationLevel: 'all',
      intraOpThreads: undefined,
      interOpThreads: undefined,
    });
    assert.deepEqual(options.extra, { session: { use_device_allocator_for_initializers: '1' } });
  });
  it("TensorRT's caches through the variables its provider reads; the operator's own values win", () => {
    const env: NodeJS.ProcessEnv = { ORT_TENSORRT_CACHE_PATH: '/mine' };
    tensorrtCacheEnvironment(env, '/cache/.tensorrt');
    assert.deepEqual(env, { ORT_TENSORRT_CACHE_PATH: '/mine', ORT_TENSORRT_ENGINE_CACHE_ENABLE: '1', ORT_TENSORRT_TIMING_CACHE_ENABLE: '1' });
  });
});

describe('GPU memory per process (nvidia-smi)', () => {
  const gpus = 'GPU-0, GPU-aaa\n'.replace('GPU-0', '0') + '1, GPU-bbb\n';
  const apps = 'GPU-aaa, 4242, 300\nGPU-aaa, 99, 5000\nGPU-bbb, 4242, 20\nGPU-bbb, 4242, 12\n';
  it("counts this process's use on each device, not the device's total or other processes'", () => {
    const m = parseGpuProcessBytes(apps, gpus, 4242);
    assert.equal(m.get(0), 300 * 1024 * 1024);
    assert.equal(m.get(1), 32 * 1024 * 1024, 'two contexts of the process on one device add up');
  });
  it('a device where the process has no context yet reads 0; an unknown UUID is ignored', () => {
    const m = parseGpuProcessBytes('GPU-zzz, 4242, 7\n', gpus, 4242);
    assert.deepEqual(
      [...m],
      [
        [0, 0],
        [1, 0],
      ],
    );
  });
  it('the empty answer of a machine without compute apps', () => {
    assert.deepEqual(
      [...parseGpuProcessBytes('', gpus, 1)],
      [
        [0, 0],
        [1, 0],
      ],
    );
  });
  it('no driver: undefined, not an error', async () => {
    const m = await gpuProcessBytes(process.pid, 2000);
    assert.ok(m === undefined || m instanceof Map);
  });
});
