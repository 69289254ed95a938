/**
 * What a load costs in runs of the model, measured from outside: a slow
 * fixed-shape model (tens of ms a run, far above
 * MME_MAIN_THREAD_MAX_RUN_US, set to 100 µs here) is loaded through the real server, and the time
 * its load spends running it (warm-up and placement: from the log line
 * `model sessions created` to `model loaded`) is compared with the median
 * time of a request once it is resident. Placement decides from the graph
 * and runs nothing; a timed probe had run such a model 8 times (warm-up + 7
 * probe runs).
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { writeModelDir } from '../../examples/models/zoo.js';
import { slowModel } from '../support/slow-model.js';
import { tempDir } from '../support/temp-dir.js';
import { request, startTestServer } from '../support/test-server.js';

const cleanups: (() => Promise<void>)[] = [];
const ctx = { after: (fn: () => Promise<void>) => cleanups.push(fn) };
after(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

describe('load cost', () => {
  it('a heavy fixed-shape model runs about once while it loads (it used to run eight times)', async () => {
    const root = await tempDir(ctx);
    const width = 256;
    const model = slowModel({ width, rows: 512, layers: 32 });
    await writeModelDir(root, 'heavy', model);
    // Heavy against the limit whatever the machine's speed: a run here takes 8-50 ms at 16 layers (quiet or loaded
    // 2-core box), which straddled the default limit's settling point (50x 1000 us), so the limit is set to 100 us
    // and a run of this model (16-100 ms at 32 layers) is far past it (5 ms) on any machine.
    const s = await startTestServer({ modelSource: root, cacheDir: path.join(await tempDir(ctx), 'cache'), env: { MME_MAIN_THREAD_MAX_RUN_US: '100' } });
    cleanups.push(() => s.close());
    const body = { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, width], data: Array.from({ length: width }, () => 0.5) }] };
    const invoke = () => request(`${s.url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': 'heavy' }, json: body });
    const first = await invoke();
    assert.equal(first.status, 200, first.text);
    const runs: number[] = [];
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      assert.equal((await invoke()).status, 200);
      runs.push(performance.now() - started);
    }
    const run = [...runs].sort((a, b) => a - b)[2]!;
    const at = (msg: string) => Date.parse(String(s.logs.find((l) => l['msg'] === msg && l['model'] === 'heavy')?.['time']));
    // What runs the model during the load: warm-up and placement, from the sessions existing to the model being ready.
    const runningMs = at('model loaded') - at('model sessions created');
    assert.ok(run > 5, `the model must be heavy for this test to mean anything: a run took ${run.toFixed(1)} ms`);
    assert.ok(Number.isFinite(runningMs), 'both log lines are there');
    // The span also holds the package build after the sessions exist and the first run, which is cold: on a
    // quiet machine it measured 3.0-3.4x a warm run (2.5x failed half the runs there). Eight runs, the old
    // cost, are far past 4x.
    assert.ok(runningMs < 4 * run, `warm-up and placement took ${runningMs} ms, ${(runningMs / run).toFixed(2)}x a run of ${run.toFixed(1)} ms`);
    const placed = s.logs.find((l) => l['msg'] === 'session placed' && l['model'] === 'heavy');
    assert.equal(placed?.['placement'], 'runtime worker only', JSON.stringify(placed));
  });
});
