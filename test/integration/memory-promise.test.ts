/**
 * The memory promise (docs/memory-and-caching.md), checked from outside as an
 * operator would see it: the server started by `./serve` in its own process
 * (so glibc reads the allocator settings `serve` applies), models of tens of
 * MB generated on disk, a budget a fraction of their sum, concurrent cold
 * requests, SageMaker-mode load/invoke/unload cycles, and the resident set of
 * the server's process tree read from /proc. Bounds are ratios and fixed
 * margins, not timings.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { MIB, runScenario, startServe, writeMatMulModels, type ServeProcess } from '../support/memory-scenario.js';
import { tempDir } from '../support/temp-dir.js';

const cleanups: (() => Promise<void>)[] = [];
const ctx = { after: (fn: () => Promise<void>) => cleanups.push(fn) };
after(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

/** The promise's fixed margin above idle + budget (docs/memory-and-caching.md states it). */
const PEAK_MARGIN_BYTES = 64 * MIB;
/** After unloading everything: within idle × 1.1 plus this. */
const UNLOAD_SLACK_BYTES = 8 * MIB;

describe('memory promise (process-tree RSS from /proc)', { skip: process.platform !== 'linux' }, () => {
  it('peak RSS stays within idle + budget + 64 MiB under concurrent cold loads and SageMaker cycles; unloading returns it to idle', async () => {
    const root = await tempDir(ctx);
    // Four models of 16 MiB of weights each (one 512 → 8192 MatMul), a 40 MiB budget: two fit, never all four.
    const names = await writeMatMulModels(root, 4, 512, 8192);
    const budget = 40 * MIB;
    let server: ServeProcess | undefined;
    try {
      server = await startServe({ MME_MODEL_SOURCE: root, MME_CACHE_DIR: path.join(await tempDir(ctx), 'cache'), MME_MEMORY_BUDGET_BYTES: String(budget) });
      const f = await runScenario(server, root, names, 2);
      const mib = (b: number): string => `${(b / MIB).toFixed(1)} MiB`;
      const figures = `idle ${mib(f.idleBytes)}, peak ${mib(f.peakBytes)}, after unload ${mib(f.afterUnloadBytes)}, budget ${mib(budget)}, statuses ${JSON.stringify(f.statuses)}`;
      assert.deepEqual(Object.keys(f.statuses), ['200'], `every request, load and unload succeeded (${figures})`);
      assert.ok(f.peakBytes <= f.idleBytes + budget + PEAK_MARGIN_BYTES, `peak within idle + budget + 64 MiB: ${figures}`);
      assert.ok(f.afterUnloadBytes <= f.idleBytes * 1.1 + UNLOAD_SLACK_BYTES, `after unloading everything, within idle × 1.1 + 8 MiB: ${figures}`);
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      assert.match(metrics, /^onnx_mme_loaded_model_bytes 0$/m, 'nothing reserved once everything is unloaded');
      assert.match(metrics, /^onnx_mme_measured_model_bytes \d+/m, 'the measured figure is exposed next to the reserved one');
      // Both figures per model: GET /models/{name} and the repository index.
      const headers = { 'content-type': 'application/json' };
      assert.equal(
        (await fetch(`${server.url}/models`, { method: 'POST', headers, body: JSON.stringify({ model_name: 'one', url: path.join(root, names[0]!) }) })).status,
        200,
      );
      const one = (await (await fetch(`${server.url}/models/one`)).json()) as Record<string, number>;
      const weights = 512 * 8192 * 4;
      // A booking follows the process's measured growth (registry/model-loader.ts normalize): once every model was
      // unloaded, the next load reuses memory the allocator kept and can read somewhat below its weights. Half the
      // weights tells a real figure from a wrong one without depending on what the allocator kept.
      const floor = weights / 2;
      assert.ok(one['reservedBytes']! >= floor, `reserved is a real figure (≥ half the weights): ${JSON.stringify(one)}`);
      assert.equal(typeof one['measuredBytes'], 'number', JSON.stringify(one));
      await (
        await fetch(`${server.url}/invocations`, {
          method: 'POST',
          headers: { ...headers, 'X-Amzn-SageMaker-Target-Model': names[1]! },
          body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 512], data: new Array(512).fill(0) }] }),
        })
      ).arrayBuffer();
      const index = (await (await fetch(`${server.url}/v2/repository/index`, { method: 'POST', headers, body: '{}' })).json()) as Record<string, unknown>[];
      const row = index.find((r) => r['name'] === names[1]);
      assert.ok(typeof row?.['reserved_bytes'] === 'number' && row['reserved_bytes'] >= floor, JSON.stringify(row));
      assert.equal(typeof row?.['measured_bytes'], 'number', JSON.stringify(row));
    } finally {
      await server?.stop();
    }
  });
});
