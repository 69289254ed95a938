/**
 * The accounting of a load (registry/model-loader.ts) and its reconciliation
 * with measured memory (registry/memory-manager.ts), on fakes: packages that
 * "allocate" by moving a fake resident set, and probes that tell the truth,
 * lie, or watch a model grow after warm-up.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics } from '../../../src/observability/metrics.js';
import { MemoryManager, type Resident } from '../../../src/registry/memory-manager.js';
import { gpuDelta, loadPeakBytes, PackageModelLoader, type ModelLoaderDeps } from '../../../src/registry/model-loader.js';
import type { PackageLoadRequest } from '../../../src/registry/package-loader.js';
import { deferred, fakePackage, settle } from './fake-loader.js';

const MIB = 1024 * 1024;

interface Rig {
  readonly loader: PackageModelLoader;
  readonly memory: MemoryManager;
  /** The fake process's resident set. */
  rss: number;
  /** Loads whose package is being built now. */
  building: number;
  maxBuilding: number;
  /** used bytes seen by each load while its package was built. */
  readonly usedDuringLoad: number[];
  readonly gates: Map<string, Promise<void>>;
}

function rig(options: { budget?: number; files?: number; grows?: (label: string) => number; admitted?: boolean[]; measure?: () => number | undefined } = {}): Rig {
  const logger = silentLogger();
  const metrics = createMetrics();
  const memory = new MemoryManager({ budgetBytes: options.budget ?? 100 * MIB, maxModels: undefined, waitMs: 50, logger, metrics, ...(options.measure ? { measure: options.measure } : {}) });
  const files = options.files ?? 10 * MIB;
  const r: Rig = {
    memory,
    rss: 200 * MIB,
    building: 0,
    maxBuilding: 0,
    usedDuringLoad: [],
    gates: new Map(),
    loader: undefined as unknown as PackageModelLoader,
  };
  const deps: ModelLoaderDeps = {
    memory,
    loadPackage: async (request: PackageLoadRequest) => {
      r.building++;
      r.maxBuilding = Math.max(r.maxBuilding, r.building);
      r.usedDuringLoad.push(memory.usedBytes);
      await (r.gates.get(request.label) ?? Promise.resolve());
      r.rss += options.grows?.(request.label) ?? files;
      r.building--;
      return fakePackage(request);
    },
    warmUp: async () => {},
    place: async (_model, _label, _warmup, admitCopy) => {
      options.admitted?.push(admitCopy(files + MIB));
    },
    predictFiles: async () => ({ predictedBytes: files + MIB, fileBytes: files }),
    predictLoaded: async () => files + MIB,
    probe: { rssBytes: () => r.rss },
    logger,
    metrics,
  };
  (r as { loader: PackageModelLoader }).loader = new PackageModelLoader(deps);
  return r;
}

const req = (label: string): PackageLoadRequest => ({ dir: `/m/${label}`, label, fallbackName: label });

describe('model loader accounting', () => {
  test("a load reserves its peak (files twice) while it loads, then what it holds", async () => {
    const r = rig();
    const loaded = await r.loader.load(req('a'));
    assert.equal(r.usedDuringLoad[0], loadPeakBytes(11 * MIB, 10 * MIB), 'files + allowance + the create transient');
    assert.equal(loaded.bytes, 11 * MIB, 'then the prediction (the measurement, 10 MiB, is lower)');
    assert.equal(loaded.measuredBytes, 10 * MIB);
    assert.equal(r.memory.usedBytes, 11 * MIB);
    await loaded.release();
    assert.equal(r.memory.usedBytes, 0);
  });

  test('concurrent loads are measured one at a time, each with its own growth', async () => {
    const r = rig({ grows: (l) => (l === 'big' ? 40 * MIB : 5 * MIB) });
    const gate = deferred();
    r.gates.set('big', gate.promise);
    const big = r.loader.load(req('big'));
    const small = r.loader.load(req('small'));
    await settle();
    assert.equal(r.building, 1, 'the second load waits for the first to be measured');
    gate.resolve();
    const [b, s] = await Promise.all([big, small]);
    assert.equal(r.maxBuilding, 1);
    assert.equal(b.measuredBytes, 40 * MIB, "the big model's growth is its own");
    assert.equal(s.measuredBytes, 5 * MIB, 'and is not charged to the small one');
    assert.equal(b.bytes, 40 * MIB, 'a measurement above the prediction raises the reservation');
    assert.equal(s.bytes, 11 * MIB);
  });

  test('a failed load releases its reservation and lets the next load measure', async () => {
    const r = rig();
    r.gates.set('bad', Promise.reject(new Error('bad graph')));
    await assert.rejects(r.loader.load(req('bad')), /bad graph/);
    assert.equal(r.memory.usedBytes, 0);
    const ok = await r.loader.load(req('ok'));
    assert.equal(ok.measuredBytes, 10 * MIB);
  });

  test('a probe that lies low (negative, NaN) never lowers a reservation below the prediction', async () => {
    const r = rig({ grows: () => -500 * MIB });
    const a = await r.loader.load(req('a'));
    assert.equal(a.measuredBytes, 0);
    assert.equal(a.bytes, 11 * MIB);
    const r2 = rig({ grows: () => Number.NaN });
    const b = await r2.loader.load(req('b'));
    assert.equal(b.measuredBytes, undefined);
    assert.equal(b.bytes, 11 * MIB);
  });

  test('a load cancelled while it is built stops before warm-up, releases the package and its reservation, and throws the reason', async () => {
    const r = rig();
    const gate = deferred();
    r.gates.set('a', gate.promise);
    const abort = new AbortController();
    const a = r.loader.load({ ...req('a'), signal: abort.signal });
    const next = r.loader.load(req('b'));
    await settle();
    assert.equal(r.building, 1);
    const reason = new Error('unloaded while loading');
    abort.abort(reason);
    gate.resolve();
    await assert.rejects(a, (err) => err === reason);
    // The next load gets its measuring turn as usual.
    const b = await next;
    assert.equal(b.measuredBytes, 10 * MIB);
    assert.equal(r.memory.usedBytes, 11 * MIB, "only b's reservation is left");
  });

  test('a load cancelled while it waits for its measuring turn leaves at once; the loads around it keep their order', async () => {
    const r = rig();
    const gate = deferred();
    r.gates.set('first', gate.promise);
    const first = r.loader.load(req('first'));
    const abort = new AbortController();
    const waiting = r.loader.load({ ...req('waiting'), signal: abort.signal });
    const third = r.loader.load(req('third'));
    await settle();
    abort.abort(new Error('gone'));
    await assert.rejects(waiting, /gone/);
    await settle();
    assert.equal(r.building, 1, 'the third load still waits for the first to be measured');
    gate.resolve();
    await Promise.all([first, third]);
    assert.equal(r.maxBuilding, 1);
  });

  test('a main-thread copy is made only when the budget has room for it now, beside the load at its peak', async () => {
    // The copy is created while the load still holds its peak (21 MiB): it needs 11 MiB more.
    for (const [budget, expected] of [[32 * MIB, true], [31 * MIB, false]] as const) {
      const admitted: boolean[] = [];
      const r = rig({ budget, admitted });
      const a = await r.loader.load(req('a'));
      assert.deepEqual(admitted, [expected], `budget ${budget / MIB} MiB`);
      await a.release();
      assert.equal(r.memory.usedBytes, 0, 'the copy went with the rest');
    }
  });
});

function resident(memory: MemoryManager, key: string, bytes: number, log: string[]): Resident {
  const r: Resident = { key, label: key, bytes, pinned: () => false, evict: async () => void log.push(key) };
  memory.track(r);
  return r;
}

describe('reconciliation of measured memory with the budget', () => {
  test('a model that grows after warm-up: idle models are evicted least recently used first until measured memory fits', async () => {
    let measured = 60 * MIB;
    const log: string[] = [];
    const memory = new MemoryManager({ budgetBytes: 100 * MIB, maxModels: undefined, waitMs: 50, logger: silentLogger(), metrics: createMetrics(), measure: () => measured });
    const grants = [await memory.reserve('a', 20 * MIB), await memory.reserve('b', 20 * MIB), await memory.reserve('c', 20 * MIB)];
    const rs = ['a', 'b', 'c'].map((k) => resident(memory, k, 20 * MIB, log));
    for (const [i, r] of rs.entries()) r.evict = async () => void (log.push(r.key), grants[i]!.release(), (measured -= 20 * MIB));
    memory.touch('a'); // a is now the most recently used
    await memory.reconcile();
    assert.deepEqual(log, [], 'within the budget: nothing to do');
    measured = 130 * MIB; // c's activations grew by 70 MiB after its warm-up
    await memory.reconcile();
    assert.deepEqual(log, ['b', 'c'], 'least recently used first, one at a time until measured memory fits');
    assert.ok(measured <= 100 * MIB);
  });

  test('a load about to start makes room for itself in measured memory too', async () => {
    let measured = 90 * MIB;
    const log: string[] = [];
    const memory = new MemoryManager({ budgetBytes: 100 * MIB, maxModels: undefined, waitMs: 50, logger: silentLogger(), metrics: createMetrics(), measure: () => measured });
    const old = await memory.reserve('old', 10 * MIB);
    const r = resident(memory, 'old', 10 * MIB, log);
    r.evict = async () => void (log.push('old'), old.release(), (measured -= 60 * MIB));
    // Reservations alone (10 + 20 of 100) would admit it at once; the process holds 90 MiB.
    const grant = await memory.reserve('new', 20 * MIB);
    assert.deepEqual(log, ['old']);
    grant.release();
  });

  test('a probe that lies high costs evictions of idle models, never a refused load', async () => {
    const log: string[] = [];
    const memory = new MemoryManager({ budgetBytes: 100 * MIB, maxModels: undefined, waitMs: 50, logger: silentLogger(), metrics: createMetrics(), measure: () => 10_000 * MIB });
    const first = await memory.reserve('a', 10 * MIB);
    resident(memory, 'a', 10 * MIB, log).evict = async () => void (log.push('a'), first.release());
    const second = await memory.reserve('b', 10 * MIB);
    assert.deepEqual(log, ['a'], 'the idle model went');
    assert.equal(memory.usedBytes, 10 * MIB, 'and the load went ahead on its reservation');
    second.release();
  });

  test('a probe that throws or reads NaN is ignored: reservations alone', async () => {
    const memory = new MemoryManager({ budgetBytes: 100 * MIB, maxModels: undefined, waitMs: 50, logger: silentLogger(), metrics: createMetrics(), measure: () => { throw new Error('no /proc'); } });
    assert.equal(memory.measuredBytes(), undefined);
    (await memory.reserve('a', 10 * MIB)).release();
    const nan = new MemoryManager({ budgetBytes: 100 * MIB, maxModels: undefined, waitMs: 50, logger: silentLogger(), metrics: createMetrics(), measure: () => Number.NaN });
    assert.equal(nan.measuredBytes(), undefined);
  });

  test('tryGrow grants only free room, without evicting', async () => {
    const log: string[] = [];
    const memory = new MemoryManager({ budgetBytes: 30 * MIB, maxModels: undefined, waitMs: 50, logger: silentLogger(), metrics: createMetrics() });
    const idle = await memory.reserve('idle', 10 * MIB);
    resident(memory, 'idle', 10 * MIB, log);
    const r = await memory.reserve('a', 10 * MIB);
    assert.equal(r.tryGrow(10 * MIB), true);
    assert.equal(r.tryGrow(1), false, 'the budget is full: no copy, and the idle model stays');
    assert.deepEqual(log, []);
    assert.equal(r.bytes, 20 * MIB);
    r.release();
    idle.release();
  });
});

describe('GPU measurement', () => {
  test("the growth on the devices the package's sessions use; a missing reading is no measurement", () => {
    const before = new Map([[0, 100], [1, 50]]);
    const after = new Map([[0, 130], [1, 500]]);
    assert.equal(gpuDelta(before, after, new Set([0])), 30, 'device 1 is another model (or process) of no concern');
    assert.equal(gpuDelta(before, after, new Set([0, 1])), 480);
    assert.equal(gpuDelta(undefined, after, new Set([0])), undefined);
    assert.equal(gpuDelta(before, new Map([[1, 0]]), new Set([0])), undefined);
  });
});
