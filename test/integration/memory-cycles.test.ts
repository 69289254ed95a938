/**
 * No leaked sessions: 200 SageMaker load/invoke/unload cycles through a real
 * server started by the launcher grow its resident set (from /proc) by less
 * than half of what 200 leaked sessions would hold. A file of its own, so
 * that the process starting the server holds nothing else: spawning from a
 * process that still hosts other tests' servers and their runtime workers
 * copies all of that, and once ran out of memory.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { sizedModel, writeModelDir } from '../../examples/models/zoo.js';
import { procFigures } from '../support/density-scenario.js';
import { startServe } from '../support/memory-scenario.js';
import { tempDir } from '../support/temp-dir.js';
import { input, request } from '../support/test-server.js';

const cleanups: (() => Promise<void>)[] = [];
const ctx = { after: (fn: () => Promise<void>) => cleanups.push(fn) };
after(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

const row = [1, 2, 3, 4];

describe('load/unload cycles', () => {
  it(
    '200 load/unload cycles grow the server process by less than half of what leaked sessions would hold (no leaked sessions)',
    { skip: process.platform !== 'linux' },
    async () => {
      const root = await tempDir(ctx);
      const dir = await writeModelDir(root, 'cycled', sizedModel(500_000));
      await writeFile(path.join(root, 'unused'), '');
      // A real server started by the launcher, its resident set read from /proc: a server inside this test process
      // would share its memory with whatever the file's other tests left in it (the figure it settled at varied 2x).
      const s = await startServe({ MME_MODEL_SOURCE: root, MME_CACHE_DIR: path.join(await tempDir(ctx), 'cache') });
      ctx.after(() => s.stop());
      const cycle = async (i: number) => {
        const name = `cycled-${i}`;
        const loaded = await request(`${s.url}/models`, { method: 'POST', json: { model_name: name, url: dir } });
        assert.equal(loaded.status, 200, loaded.text);
        const r = await request(`${s.url}/models/${name}/invoke`, { method: 'POST', json: { inputs: [input('INPUT0', 'FP32', [1, 4], row)] } });
        assert.equal(r.status, 200, r.text);
        assert.equal((await request(`${s.url}/models/${name}`, { method: 'DELETE' })).status, 200);
      };
      // The allocator keeps freed pages for reuse: measure from after it has settled.
      for (let i = 0; i < 20; i++) await cycle(i);
      const settled = (await procFigures(s.pid)).rssKb;
      for (let i = 20; i < 220; i++) await cycle(i);
      const end = (await procFigures(s.pid)).rssKb;
      // A leaked session would hold its 500 KB weights: 200 of them, 100 MB. Without a leak the resident set still
      // grows by 10-20 MB here: V8 lets its heap grow until a major collection, and the allocator keeps what it
      // freed. Over 2,000 cycles it levelled off about 60 MB above the settled figure, the live heap unchanged.
      const leaked = (200 * 500_000) / 1024;
      assert.ok(end - settled < leaked / 2, `RSS grew from ${settled} to ${end} kB over 200 load/unload cycles (bound: ${Math.round(leaked / 2)} kB)`);
      const metrics = await (await fetch(`${s.url}/metrics`)).text();
      assert.match(metrics, /^onnx_mme_loaded_model_bytes 0$/m);
      assert.match(metrics, /^onnx_mme_loaded_models 0$/m);
    },
  );
});
