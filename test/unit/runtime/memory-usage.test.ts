/**
 * Memory probes: cgroup limits (v2, v1, unlimited), nvidia-smi output parsing,
 * and the provider options that keep GPU memory honest (CUDA arena growth,
 * TensorRT engine cache under the disk cache).
 */
import assert from 'node:assert/strict';
import os from 'node:os';
import { describe, it } from 'node:test';
import { containerMemoryLimitBytes, gpuMemory, parseNvidiaSmi, processRssBytes } from '../../../src/runtime/memory-usage.js';
import { providerOption } from '../../../src/runtime/provider-options.js';

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
  it('CUDA grows its arena by what is requested, on the configured device', () => {
    assert.deepEqual(providerOption('cuda', 1, undefined), { name: 'cuda', deviceId: 1, arenaExtendStrategy: 'kSameAsRequested' });
  });
  it('TensorRT caches engines and timing data under the given directory', () => {
    assert.deepEqual(providerOption('tensorrt', 0, '/cache/.tensorrt'), {
      name: 'tensorrt',
      deviceId: 0,
      trtEngineCacheEnable: true,
      trtEngineCachePath: '/cache/.tensorrt',
      trtTimingCacheEnable: true,
      trtTimingCachePath: '/cache/.tensorrt',
    });
  });
  it('CPU takes no options', () => {
    assert.deepEqual(providerOption('cpu', 0, '/x'), { name: 'cpu' });
  });
});
