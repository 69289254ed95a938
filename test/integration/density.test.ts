/**
 * Density (issue 28), from outside: a few hundred generated models resident
 * in a real server process started by `./serve`, against the same sessions
 * in a plain onnxruntime-node process in the same test
 * (test/support/density-scenario.ts). Node is told it has 16 CPUs, so the
 * server runs a 16-core machine's defaults. Every figure is a ratio or a
 * count from /proc, the repository index and /metrics:
 * - RSS per further model (between half the models and all of them) ≤ 1.25×
 *   the plain process for ~1 MB models, and from idle (with the fixed costs
 *   the first models bring, the bounded main-thread copies) ≤ 1.5×; RSS per
 *   model from idle ≤ 1.6× for tiny ones (before this wave: 2.0× and 2.1× at
 *   the same 16-core defaults);
 * - threads added per further model ≤ 0.05 between half the models and all
 *   of them (the thread count does not grow with models), and in all no more
 *   than the bounded main-thread copies' pools;
 * - reserved bytes per model ≤ 1.5× what was measured (per model and in all),
 *   and the sum booked covers at least half the growth seen from outside.
 * The ~1 MB models get two requests each, so the bounded main-thread copies exist.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import path from 'node:path';
import { cpusPreload, FEATURES, invokeTarget, measureDensity, writeDensityModels, type DensityFigures, type DensityKind } from '../support/density-scenario.js';
import { tempDir } from '../support/temp-dir.js';
import { startTestServer } from '../support/test-server.js';

const cleanups: (() => Promise<void>)[] = [];
const ctx = { after: (fn: () => Promise<void>) => cleanups.push(fn) };
after(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

function describeFigures(f: DensityFigures): string {
  const perModel = (a: number, b: number, n: number): string => `${((b - a) / n).toFixed(1)} KB`;
  const sorted = [...f.reservedOverMeasured].sort((a, b) => a - b);
  return [
    `${f.models} models, statuses ${JSON.stringify(f.statuses)}`,
    `server RSS/model ${perModel(f.server.idle.rssKb, f.server.loaded.rssKb, f.models)}, raw ${perModel(f.raw.before.rssKb, f.raw.after.rssKb, f.raw.models)}, ratio ${f.rssRatio.toFixed(2)} from idle, ${f.marginalRssRatio.toFixed(2)} per further model`,
    `threads idle ${f.server.idle.threads} → ${f.server.half.threads} at half → ${f.server.loaded.threads} (${f.marginalThreadsPerModel.toFixed(3)}/further model, ${f.threadsPerModel.toFixed(3)}/model from idle; raw ${f.rawThreadsPerModel.toFixed(3)})`,
    `reserved ${(f.reservedBytes / 1024).toFixed(0)} KB, measured ${(f.measuredBytes / 1024).toFixed(0)} KB (above 0 for ${sorted.length} models), per-model reserved÷measured median ${sorted[Math.floor(sorted.length / 2)]?.toFixed(2)}`,
  ].join('; ');
}

async function scenario(kind: DensityKind, count: number, requestsEach: number): Promise<DensityFigures> {
  const root = await tempDir(ctx);
  const names = await writeDensityModels(root, kind, count);
  return measureDensity(root, names, kind, { env: { NODE_OPTIONS: cpusPreload(16) }, requestsEach });
}

describe('density: each model costs about what onnxruntime costs', { skip: process.platform !== 'linux' }, () => {
  // ~1 MB models: two requests each, so the bounded copies exist; RSS per further model (past the first half, which brings
  // the copies). Tiny models (20-100 KB each) are near the noise of the JavaScript heaps' steps, so more of them, one
  // request each, and RSS per model from idle.
  // Issue 28's goals, which hold run after run on a quiet 2-core machine at 16-core defaults: ~1 MB models measured
  // 1.12-1.14x raw per further model and 1.30-1.32x from idle, tiny ones 1.25-1.29x from idle (bench/README.md, density).
  // Tiny ones read 1.26-1.44x here with two busy loops beside the test and 1.51x once in CI beside the rest of the suite
  // (1,000 loads interleave with another test file's work; where glibc's two arenas and V8 put the garbage varies): 1.6x
  // from idle is their bound. Without the young-generation cap (docs/memory-and-caching.md) they read 1.76x alone.
  for (const [kind, count, requestsEach, marginalBound, idleBound] of [
    ['mlp', 120, 2, 1.25, 1.5],
    ['tiny', 1000, 1, undefined, 1.6],
  ] as const) {
    it(`${count} ${kind} models: RSS per model ≤ ${marginalBound ?? idleBound}× a plain onnxruntime-node process, threads independent of the count, bookings follow measurement`, async (t) => {
      const f = await scenario(kind, count, requestsEach);
      const figures = describeFigures(f);
      // The margins, on a pass too: CI's runs are where a drift shows first.
      t.diagnostic(figures);
      assert.deepEqual(Object.keys(f.statuses), ['200'], figures);
      if (marginalBound !== undefined) assert.ok(f.marginalRssRatio <= marginalBound, `RSS per further model ≤ ${marginalBound}× raw: ${figures}`);
      assert.ok(f.rssRatio <= idleBound, `RSS per model from idle ≤ ${idleBound}× raw: ${figures}`);
      // Past the first models (which bring the bounded main-thread copies, MME_MAIN_THREAD_COPIES, and their threads), none.
      assert.ok(f.marginalThreadsPerModel <= 0.05, `≤ 0.05 threads added per further model at a 16-core machine's defaults: ${figures}`);
      assert.ok(f.server.loaded.threads - f.server.idle.threads <= 16 + 4, `in all, at most the copies' threads (16) and a few: ${figures}`);
      const sorted = [...f.reservedOverMeasured].sort((a, b) => a - b);
      // A tiny model's load often reads 0 (the allocator reuses what earlier loads freed): 360-388 of 1,000 read above 0
      // alone on a 2-core machine, the same before and after this wave's changes, and 224 beside the rest of the suite.
      // An eighth keeps the median meaningful (over 125 models at least); the totals below bound every model.
      assert.ok(sorted.length >= count / 8, `an eighth of the models at least have a measured figure above 0: ${figures}`);
      assert.ok(sorted[Math.floor(sorted.length / 2)]! <= 1.5, `per model, reserved ≤ 1.5× measured (median): ${figures}`);
      assert.ok(f.reservedBytes <= 1.5 * f.measuredBytes, `in all, reserved ≤ 1.5× measured: ${figures}`);
      const growthBytes = (f.server.loaded.rssKb - f.server.idle.rssKb) * 1024;
      assert.ok(f.reservedBytes <= 1.5 * growthBytes, `reserved ≤ 1.5× the RSS growth seen from /proc: ${figures}`);
      // Every tiny model runs on the main thread only (runtime/session-placement.ts), moved there inside its load's
      // measurement: 1,000 of them book 0.65-0.70 of the growth on a 2-core machine (0.33 when the move was unmeasured).
      // What stays unbooked is not the sessions' (each model's share of the JavaScript heap, the first request's allocations).
      assert.ok(f.reservedBytes >= 0.5 * growthBytes, `and books at least half of it (the budget stays true of the process): ${figures}`);
    });
  }
});

describe('concurrent cold loads', () => {
  /** Each load's measured section (package, warm-up, placement, footprint) as [start, end] ms, from its `model loaded` line. */
  function sections(logs: readonly Record<string, unknown>[]): [number, number][] {
    return logs
      .filter((l) => l['msg'] === 'model loaded')
      .map((l) => {
        const end = Date.parse(String(l['time']));
        const st = l['stagesMs'] as Record<string, number>;
        return [end - (st['package']! + (st['warmup'] ?? 0) + (st['place'] ?? 0) + (st['footprint'] ?? 0)), end];
      });
  }
  /** Most sections in progress at one moment (1 ms of slack: log times are whole milliseconds). */
  function maxOverlap(xs: readonly [number, number][]): number {
    let most = 0;
    for (const [start] of xs) most = Math.max(most, xs.filter(([s, e]) => s <= start && start < e - 1).length);
    return most;
  }

  it('overlap up to MME_LOAD_CONCURRENCY, one at a time at 1; every request answered', async () => {
    const root = await tempDir(ctx);
    const names = await writeDensityModels(root, 'mlp', 8);
    const overlaps: Record<string, number> = {};
    for (const concurrency of ['1', '4']) {
      const s = await startTestServer({
        modelSource: root,
        cacheDir: path.join(await tempDir(ctx), 'cache'),
        env: { MME_LOAD_CONCURRENCY: concurrency, MME_RUNTIME_WORKERS: '2' },
      });
      try {
        const statuses = await Promise.all(names.map((n) => invokeTarget(s.url, n, FEATURES.mlp)));
        assert.deepEqual(
          statuses,
          names.map(() => 200),
        );
        const xs = sections(s.logs);
        assert.equal(xs.length, names.length);
        overlaps[concurrency] = maxOverlap(xs);
      } finally {
        await s.close();
      }
    }
    assert.equal(overlaps['1'], 1, `one at a time: ${JSON.stringify(overlaps)}`);
    assert.ok(overlaps['4']! >= 2 && overlaps['4']! <= 4, `loads overlapped, at most 4 at once: ${JSON.stringify(overlaps)}`);
  });
});
