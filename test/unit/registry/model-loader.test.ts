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
import { bookingFor, gpuDelta, loadPeakBytes, PackageModelLoader, type ModelLoaderDeps } from '../../../src/registry/model-loader.js';
import type { CopyBooking } from '../../../src/runtime/onnx-session.js';
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

function rig(
  options: {
    budget?: number;
    files?: number;
    grows?: (label: string) => number;
    books?: CopyBooking[];
    measure?: () => number | undefined;
    concurrency?: number;
  } = {},
): Rig {
  const logger = silentLogger();
  const metrics = createMetrics();
  const memory = new MemoryManager({
    budgetBytes: options.budget ?? 100 * MIB,
    maxModels: undefined,
    waitMs: 50,
    logger,
    metrics,
    ...(options.measure ? { measure: options.measure } : {}),
  });
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
    place: async (_model, _request, book) => {
      options.books?.push(book);
    },
    predictFiles: async () => ({ predictedBytes: files + MIB, fileBytes: files }),
    footprint: async () => ({ fileBytes: files, sessions: 1 }),
    probe: { rssBytes: () => r.rss },
    ...(options.concurrency === undefined ? {} : { concurrency: options.concurrency }),
    logger,
    metrics,
  };
  (r as { loader: PackageModelLoader }).loader = new PackageModelLoader(deps);
  return r;
}

const req = (label: string): PackageLoadRequest => ({ dir: `/m/${label}`, label, fallbackName: label });

describe('model loader accounting', () => {
  test('a load reserves its peak (files twice) while it loads, then what it was measured to hold', async () => {
    const r = rig();
    const loaded = await r.loader.load(req('a'));
    assert.equal(r.usedDuringLoad[0], loadPeakBytes(11 * MIB, 10 * MIB), 'files + allowance + the create transient');
    assert.equal(loaded.measuredBytes, 10 * MIB);
    assert.equal(loaded.bytes, 10 * MIB, 'then the measurement (below the 11 MiB prediction): the booking follows what was measured');
    assert.equal(r.memory.usedBytes, 10 * MIB);
    await loaded.release();
    assert.equal(r.memory.usedBytes, 0);
  });

  test('at concurrency 1 loads are built one at a time, each measured exactly', async () => {
    const r = rig({ grows: (l) => (l === 'big' ? 40 * MIB : 5 * MIB) });
    const gate = deferred();
    r.gates.set('big', gate.promise);
    const big = r.loader.load(req('big'));
    const small = r.loader.load(req('small'));
    await settle();
    assert.equal(r.building, 1, 'the second load waits for a slot');
    gate.resolve();
    const [b, s] = await Promise.all([big, small]);
    assert.equal(r.maxBuilding, 1);
    assert.equal(b.measuredBytes, 40 * MIB, "the big model's growth is its own");
    assert.equal(s.measuredBytes, 5 * MIB, 'and is not charged to the small one');
    assert.equal(b.bytes, 40 * MIB);
    // The estimate is calibrated by what loads measured: big's 30 MiB beyond its files is now what a session is expected to hold.
    assert.equal(r.loader.sessionOverheadBytes, 30 * MIB);
    assert.equal(s.bytes, bookingFor(5 * MIB, 10 * MIB + 30 * MIB), 'never below half the estimate');
  });

  test('concurrent loads overlap; each is booked at the estimate, then at its share of the group once the last ends', async () => {
    const r = rig({ concurrency: 4, grows: (l) => (l === 'a' ? 6 * MIB : 10 * MIB) });
    const gates = ['a', 'b', 'c'].map((l) => {
      const g = deferred();
      r.gates.set(l, g.promise);
      return g;
    });
    const loads = ['a', 'b', 'c'].map((l) => r.loader.load(req(l)));
    await settle();
    assert.equal(r.building, 3, 'all three are built at once');
    gates[0]!.resolve();
    const a = await loads[0]!;
    assert.equal(a.measuredBytes, undefined, 'not alone: no figure of its own yet');
    assert.equal(a.bytes, 11 * MIB, 'booked at the estimate meanwhile');
    gates[1]!.resolve();
    gates[2]!.resolve();
    const [, b, c] = await Promise.all(loads);
    await settle();
    // The group grew 26 MiB; equal estimates share it equally.
    for (const m of [a, b!, c!]) assert.ok(Math.abs(m.measuredBytes! - (26 * MIB) / 3) <= 1, String(m.measuredBytes));
    const total = [a, b!, c!].reduce((n, m) => n + m.bytes, 0);
    assert.ok(Math.abs(total - 26 * MIB) <= 3, `booked ${total} for 26 MiB measured`);
    assert.equal(r.memory.usedBytes, total);
    // The next load is alone and calibrates nothing away: its own growth, exactly.
    const d = await r.loader.load(req('d'));
    assert.equal(d.measuredBytes, 10 * MIB);
  });

  test('memory released by an eviction during a load is not taken off its measurement', async () => {
    const r = rig();
    const old = await r.loader.load(req('old'));
    const gate = deferred();
    r.gates.set('new', gate.promise);
    const load = r.loader.load(req('new'));
    await settle();
    await old.release();
    r.rss -= 10 * MIB; // what the old model held
    gate.resolve();
    assert.equal((await load).measuredBytes, 10 * MIB);
  });

  test('a failed load releases its reservation and lets the next load measure', async () => {
    const r = rig();
    const bad = Promise.reject(new Error('bad graph'));
    // Awaited only once the load builds its package, a turn of the event loop or more from now.
    bad.catch(() => undefined);
    r.gates.set('bad', bad);
    await assert.rejects(r.loader.load(req('bad')), /bad graph/);
    assert.equal(r.memory.usedBytes, 0);
    const ok = await r.loader.load(req('ok'));
    assert.equal(ok.measuredBytes, 10 * MIB);
  });

  test('a probe that lies low (negative, NaN) never books a model below half its estimate', async () => {
    const r = rig({ grows: () => -500 * MIB });
    const a = await r.loader.load(req('a'));
    assert.equal(a.measuredBytes, 0);
    assert.equal(a.bytes, 5 * MIB, 'half of the estimate, the files alone now that a session was measured to hold nothing beyond them');
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
    assert.equal(r.memory.usedBytes, 10 * MIB, "only b's reservation is left");
  });

  test('a load cancelled while it waits for a slot leaves at once; the loads around it keep their order', async () => {
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
    assert.equal(r.building, 1, 'the third load still waits for the first to finish');
    gate.resolve();
    await Promise.all([first, third]);
    assert.equal(r.maxBuilding, 1);
  });

  test('a main-thread copy is booked on top of the load while it exists, only when the budget has room now', async () => {
    const books: CopyBooking[] = [];
    const r = rig({ budget: 25 * MIB, books });
    const a = await r.loader.load(req('a'));
    assert.equal(a.bytes, 10 * MIB);
    const booked = books[0]!.tryGrow(10 * MIB);
    assert.equal(booked, r.loader.sessionOverheadBytes + 10 * MIB, 'its weights and a session as measured');
    assert.equal(a.bytes, 10 * MIB + booked!);
    assert.equal(books[0]!.tryGrow(10 * MIB), undefined, 'no room for a second');
    books[0]!.shrink(booked!);
    assert.equal(a.bytes, 10 * MIB, 'dropped: given back');
    await a.release();
    assert.equal(r.memory.usedBytes, 0);
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
    const memory = new MemoryManager({
      budgetBytes: 100 * MIB,
      maxModels: undefined,
      waitMs: 50,
      logger: silentLogger(),
      metrics: createMetrics(),
      measure: () => measured,
    });
    const grants = [
      await memory.reserve({ label: 'a' }, 20 * MIB),
      await memory.reserve({ label: 'b' }, 20 * MIB),
      await memory.reserve({ label: 'c' }, 20 * MIB),
    ];
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
    const memory = new MemoryManager({
      budgetBytes: 100 * MIB,
      maxModels: undefined,
      waitMs: 50,
      logger: silentLogger(),
      metrics: createMetrics(),
      measure: () => measured,
    });
    const old = await memory.reserve({ label: 'old' }, 10 * MIB);
    const r = resident(memory, 'old', 10 * MIB, log);
    r.evict = async () => void (log.push('old'), old.release(), (measured -= 60 * MIB));
    // Reservations alone (10 + 20 of 100) would admit it at once; the process holds 90 MiB.
    const grant = await memory.reserve({ label: 'new' }, 20 * MIB);
    assert.deepEqual(log, ['old']);
    grant.release();
  });

  test('a probe that lies high costs evictions of idle models, never a refused load', async () => {
    const log: string[] = [];
    const memory = new MemoryManager({
      budgetBytes: 100 * MIB,
      maxModels: undefined,
      waitMs: 50,
      logger: silentLogger(),
      metrics: createMetrics(),
      measure: () => 10_000 * MIB,
    });
    const first = await memory.reserve({ label: 'a' }, 10 * MIB);
    resident(memory, 'a', 10 * MIB, log).evict = async () => void (log.push('a'), first.release());
    const second = await memory.reserve({ label: 'b' }, 10 * MIB);
    assert.deepEqual(log, ['a'], 'the idle model went');
    assert.equal(memory.usedBytes, 10 * MIB, 'and the load went ahead on its reservation');
    second.release();
  });

  test('a probe that throws or reads NaN is ignored: reservations alone', async () => {
    const memory = new MemoryManager({
      budgetBytes: 100 * MIB,
      maxModels: undefined,
      waitMs: 50,
      logger: silentLogger(),
      metrics: createMetrics(),
      measure: () => {
        throw new Error('no /proc');
      },
    });
    assert.equal(memory.measuredBytes(), undefined);
    (await memory.reserve({ label: 'a' }, 10 * MIB)).release();
    const nan = new MemoryManager({
      budgetBytes: 100 * MIB,
      maxModels: undefined,
      waitMs: 50,
      logger: silentLogger(),
      metrics: createMetrics(),
      measure: () => Number.NaN,
    });
    assert.equal(nan.measuredBytes(), undefined);
  });

  test('tryGrow grants only free room, without evicting', async () => {
    const log: string[] = [];
    const memory = new MemoryManager({ budgetBytes: 30 * MIB, maxModels: undefined, waitMs: 50, logger: silentLogger(), metrics: createMetrics() });
    const idle = await memory.reserve({ label: 'idle' }, 10 * MIB);
    resident(memory, 'idle', 10 * MIB, log);
    const r = await memory.reserve({ label: 'a' }, 10 * MIB);
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
    const before = new Map([
      [0, 100],
      [1, 50],
    ]);
    const after = new Map([
      [0, 130],
      [1, 500],
    ]);
    assert.equal(gpuDelta(before, after, new Set([0])), 30, 'device 1 is another model (or process) of no concern');
    assert.equal(gpuDelta(before, after, new Set([0, 1])), 480);
    assert.equal(gpuDelta(undefined, after, new Set([0])), undefined);
    assert.equal(gpuDelta(before, new Map([[1, 0]]), new Set([0])), undefined);
  });
});
