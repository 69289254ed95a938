/**
 * The registry on fakes (test/unit/registry/fake-loader.ts), through the
 * handles the edges resolve: single flight, leases, unload waiting for
 * leases, LRU eviction through the real MemoryManager, the source's models
 * (freshness and back-off on a fake clock: no sleeps), SageMaker-managed
 * models, close. No server, no files, no onnxruntime: the loader is injected.
 */
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { cancellationOf } from '../../../src/cancellation.js';
import { tempDir } from '../../support/temp-dir.js';
import { isServingError } from '../../support/serving-error.js';
import { ServingError } from '../../../src/errors.js';
import { FakeClock } from '../scheduler/fakes.js';
import { deferred, registryFixture, settle } from './fake-loader.js';

describe('ModelRegistry: single flight and leases', () => {
  test('concurrent requests for one target share one load; other targets load in parallel', async () => {
    const { registry, loader } = registryFixture();
    loader.hold = true;
    const a1 = registry.resolve({ kind: 'target', target: 'a' }).acquire();
    const a2 = registry.resolve({ kind: 'target', target: 'a' }).acquire();
    const b = registry.resolve({ kind: 'target', target: 'b' }).acquire();
    await settle();
    assert.equal(loader.loadsOf('a').length, 1, 'one load for two requests');
    assert.equal(loader.loadsOf('b').length, 1, 'b does not wait for a');
    assert.equal(registry.resolve({ kind: 'target', target: 'a' }).resident()?.state, 'LOADING');
    for (const c of loader.calls) c.gate.resolve();
    const [l1, l2, lb] = await Promise.all([a1, a2, b]);
    assert.equal(l1.pkg, l2.pkg, 'the same package');
    assert.notEqual(l1.pkg, lb.pkg);
    assert.equal(registry.loadedCount(), 2);
    assert.equal(registry.resolve({ kind: 'target', target: 'a' }).resident()?.state, 'READY');
    // Resident: the hot path leases without a promise, and without another load.
    const hot = registry.resolve({ kind: 'target', target: 'a' }).leaseNow();
    assert.equal(hot?.pkg, l1.pkg);
    assert.equal(loader.loadsOf('a').length, 1);
    for (const l of [l1, l2, lb, hot!]) l.release();
  });

  test('a failed load leaves nothing behind (copy released, no entry); the next request loads again', async () => {
    const { registry, loader, source, memory } = registryFixture();
    loader.failures.set('a', new Error('bad graph'));
    await assert.rejects(registry.resolve({ kind: 'target', target: 'a' }).acquire(), /bad graph/);
    assert.equal(registry.resolve({ kind: 'target', target: 'a' }).resident(), undefined);
    assert.deepEqual(source.releasedCopies, ['a@v1'], 'the disk copy is let go');
    assert.equal(memory.usedBytes, 0, 'the reservation is given back');
    loader.failures.clear();
    const lease = await registry.resolve({ kind: 'target', target: 'a' }).acquire();
    assert.equal(loader.loadsOf('a').length, 2);
    lease.release();
  });

  test('a request that gives up while the model loads does not fail the others', async () => {
    const { registry, loader } = registryFixture();
    loader.hold = true;
    const controller = new AbortController();
    const leaving = registry.resolve({ kind: 'target', target: 'a' }).acquire(cancellationOf(controller.signal));
    const staying = registry.resolve({ kind: 'target', target: 'a' }).acquire();
    await settle();
    controller.abort();
    await assert.rejects(leaving);
    loader.calls[0]!.gate.resolve();
    const lease = await staying;
    assert.equal(lease.pkg.entry.name, 'a');
    lease.release();
  });

  test('unload waits for the last lease, then releases the package and its memory', async () => {
    const { registry, loader, memory, source } = registryFixture();
    const lease = await registry.resolve({ kind: 'target', target: 'a' }).acquire();
    const pkg = await loader.calls[0]!.result;
    let unloaded = false;
    const unloading = registry
      .resolve({ kind: 'target', target: 'a' })
      .unload()
      .then(() => (unloaded = true));
    await settle();
    assert.equal(unloaded, false, 'a request still holds it');
    assert.equal(pkg.released(), false);
    assert.equal(registry.resolve({ kind: 'target', target: 'a' }).resident()?.state, 'UNLOADING');
    assert.equal(registry.resolve({ kind: 'target', target: 'a' }).leaseNow(), undefined, 'no new lease on a model going away');
    lease.release();
    lease.release(); // idempotent: must not drive the count negative
    await unloading;
    assert.equal(pkg.released(), true);
    assert.equal(memory.usedBytes, 0);
    assert.deepEqual(source.releasedCopies, ['a@v1']);
    assert.equal(registry.resolve({ kind: 'target', target: 'a' }).resident(), undefined);
    await assert.rejects(registry.resolve({ kind: 'target', target: 'a' }).unload(), isServingError('MODEL_NOT_FOUND', /'a' is not loaded/));
  });
});

describe('ModelRegistry: eviction', () => {
  test('a load that needs room evicts idle models least recently used first, never one in use', async () => {
    const { registry, loader, memory } = registryFixture({ budgetBytes: 20 });
    (await registry.resolve({ kind: 'target', target: 'a' }).acquire()).release();
    (await registry.resolve({ kind: 'target', target: 'b' }).acquire()).release();
    // a is used again: b is now the least recently used.
    registry.resolve({ kind: 'target', target: 'a' }).leaseNow()!.release();
    const c = await registry.resolve({ kind: 'target', target: 'c' }).acquire();
    assert.equal(registry.resolve({ kind: 'target', target: 'b' }).resident(), undefined, 'b was evicted');
    assert.equal(registry.resolve({ kind: 'target', target: 'a' }).resident()?.state, 'READY');
    assert.equal((await loader.loadsOf('b')[0]!.result).released(), true);
    assert.equal(memory.usedBytes, 20);
    // a is idle, c is held: loading b again evicts a, not c.
    const b = await registry.resolve({ kind: 'target', target: 'b' }).acquire();
    assert.equal(registry.resolve({ kind: 'target', target: 'a' }).resident(), undefined);
    assert.equal(registry.resolve({ kind: 'target', target: 'c' }).resident()?.state, 'READY');
    assert.equal(loader.loadsOf('b').length, 2, 'an evicted model is loaded again on its next request');
    b.release();
    c.release();
  });

  test('when every model is in use a load waits for a lease to end; past the wait it gets 507', async () => {
    const { registry } = registryFixture({ budgetBytes: 20, waitMs: 2000 });
    const a = await registry.resolve({ kind: 'target', target: 'a' }).acquire();
    const b = await registry.resolve({ kind: 'target', target: 'b' }).acquire();
    let loaded = false;
    const c = registry
      .resolve({ kind: 'target', target: 'c' })
      .acquire()
      .then((l) => ((loaded = true), l));
    await settle();
    assert.equal(loaded, false, 'waiting for memory held by requests');
    a.release();
    const lc = await c;
    assert.equal(registry.resolve({ kind: 'target', target: 'a' }).resident(), undefined, 'a was evicted once idle');
    const short = registryFixture({ budgetBytes: 10, waitMs: 20 });
    const held = await short.registry.resolve({ kind: 'target', target: 'a' }).acquire();
    await assert.rejects(
      short.registry.resolve({ kind: 'target', target: 'b' }).acquire(),
      isServingError('INSUFFICIENT_MEMORY', /'b' needs about 10 bytes.*in flight/),
    );
    held.release();
    lc.release();
    b.release();
  });
});

describe('ModelRegistry: freshness', () => {
  test('nothing is asked of the source before the period ends; the hot path steps aside exactly when it does', async () => {
    const clock = new FakeClock();
    const { registry, source } = registryFixture({ registry: { revalidateMs: 1000, clock } });
    (await registry.resolve({ kind: 'target', target: 'a' }).acquire()).release();
    let checks = 0;
    const real = source.currentVersion.bind(source);
    source.currentVersion = async (t) => (checks++, real(t));
    await clock.advance(999_999);
    const hot = registry.resolve({ kind: 'target', target: 'a' }).leaseNow();
    assert.ok(hot, 'still fresh 1 µs before the period ends');
    hot.release();
    await clock.advance(1);
    assert.equal(registry.resolve({ kind: 'target', target: 'a' }).leaseNow(), undefined, 'due: the hot path steps aside');
    (await registry.resolve({ kind: 'target', target: 'a' }).acquire()).release();
    assert.equal(checks, 1, 'one check, then fresh again');
    assert.ok(registry.resolve({ kind: 'target', target: 'a' }).leaseNow());
  });

  test('a changed object detaches the entry: new requests load the new version, the old one drains then goes', async () => {
    const clock = new FakeClock();
    const { registry, loader, source } = registryFixture({ registry: { revalidateMs: 1, clock } });
    const old = await registry.resolve({ kind: 'target', target: 'a' }).acquire();
    source.versions.set('a', 'v2');
    await clock.advance(1000); // the revalidation period (1 ms) has passed
    assert.equal(registry.resolve({ kind: 'target', target: 'a' }).leaseNow(), undefined, 'due for a check: the hot path steps aside');
    const fresh = await registry.resolve({ kind: 'target', target: 'a' }).acquire();
    assert.notEqual(fresh.pkg, old.pkg);
    assert.equal(loader.loadsOf('a').length, 2);
    assert.equal(loader.loadsOf('a')[1]!.request.dir, '/fake/a/v2');
    const oldPkg = await loader.loadsOf('a')[0]!.result;
    assert.equal(oldPkg.released(), false, 'a request still runs on the old version');
    old.release();
    await settle();
    assert.equal(oldPkg.released(), true);
    assert.deepEqual(source.releasedCopies, ['a@v1']);
    fresh.release();
  });

  test('a deleted object: MODEL_NOT_FOUND; an unreachable source: the cached copy keeps serving', async () => {
    const clock = new FakeClock();
    const { registry, loader, source, metrics } = registryFixture({ registry: { revalidateMs: 1, clock } });
    (await registry.resolve({ kind: 'target', target: 'a' }).acquire()).release();
    source.unreachable = true;
    await clock.advance(1000); // the revalidation period (1 ms) has passed
    const cached = await registry.resolve({ kind: 'target', target: 'a' }).acquire();
    assert.equal(loader.loadsOf('a').length, 1, 'served from memory');
    cached.release();
    source.unreachable = false;
    source.versions.delete('a');
    await clock.advance(1000); // the revalidation period (1 ms) has passed
    await assert.rejects(registry.resolve({ kind: 'target', target: 'a' }).acquire(), isServingError('MODEL_NOT_FOUND', /'a' not found/));
    const text = await metrics.registry.metrics();
    assert.match(text, /result="error"\} 1/);
    assert.match(text, /result="deleted"\} 1/);
  });

  test('concurrent requests to a stale entry share one freshness check', async () => {
    const clock = new FakeClock();
    const { registry, source } = registryFixture({ registry: { revalidateMs: 1, clock } });
    (await registry.resolve({ kind: 'target', target: 'a' }).acquire()).release();
    await clock.advance(1000); // the revalidation period (1 ms) has passed
    let checks = 0;
    const gate = deferred();
    const real = source.currentVersion.bind(source);
    source.currentVersion = async (t) => (checks++, await gate.promise, real(t));
    const all = [
      registry.resolve({ kind: 'target', target: 'a' }).acquire(),
      registry.resolve({ kind: 'target', target: 'a' }).acquire(),
      registry.resolve({ kind: 'target', target: 'a' }).acquire(),
    ];
    await settle();
    gate.resolve();
    for (const l of await Promise.all(all)) l.release();
    assert.equal(checks, 1);
  });
});

describe('ModelRegistry: back-off after a failed load', () => {
  test('a load that failed because of the object is answered at once until its window ends (fake clock), then tried again; an explicit load retries now', async () => {
    const clock = new FakeClock();
    const { registry, loader } = registryFixture({ registry: { clock } });
    const a = registry.resolve({ kind: 'target', target: 'a' });
    loader.failures.set('a', new ServingError('INVALID_MODEL', "model 'a': bad graph", { model: 'a' }));
    await assert.rejects(a.acquire(), isServingError('INVALID_MODEL', /bad graph$/));
    await assert.rejects(a.acquire(), isServingError('INVALID_MODEL', /bad graph \(the load failed once; not retried for 2 s/));
    assert.equal(loader.loadsOf('a').length, 1, 'within the window: no second load');
    loader.failures.clear();
    await clock.advance(1_999_000);
    await assert.rejects(a.acquire(), isServingError('INVALID_MODEL', /not retried for 1 s/));
    await clock.advance(1000);
    (await a.acquire()).release();
    assert.equal(loader.loadsOf('a').length, 2, 'the window over: loaded again');
    // An explicit load forgets a remembered failure at once.
    const b = registry.resolve({ kind: 'target', target: 'b' });
    loader.failures.set('b', new ServingError('INVALID_MODEL', "model 'b': bad graph", { model: 'b' }));
    await assert.rejects(b.acquire());
    loader.failures.clear();
    await b.load();
    assert.equal(b.resident()?.state, 'READY');
  });
});

/** Real directories for SageMaker urls (the registry resolves them with realpath; the fake loader loads nothing from them). */
async function urls(t: TestContext, ...names: string[]): Promise<Record<string, string>> {
  const base = await tempDir(t);
  const out: Record<string, string> = {};
  for (const n of names) await mkdir((out[n] = path.join(base, n)));
  return out;
}

describe('ModelRegistry: SageMaker-managed models', () => {
  test('load, list, page out under memory pressure (still listed), page back in on invoke, unload', async (t) => {
    const { registry, loader } = registryFixture({ budgetBytes: 10 });
    const u = await urls(t, 'm1', 'm2');
    const info = await registry.managed.register('m1', u['m1']!, undefined);
    assert.equal(info.modelName, 'm1');
    assert.equal(info.modelUrl, u['m1']);
    await assert.rejects(registry.managed.register('m1', u['m1']!, undefined), isServingError('MODEL_ALREADY_LOADED', /'m1' is already loaded/));
    await registry.managed.register('m2', u['m2']!, 'team/m2.tar.gz');
    assert.deepEqual(
      [...registry.managed.all()].map((m) => m.modelName),
      ['m1', 'm2'],
    );
    assert.equal(registry.managed.resident('m1')?.state === 'READY', false, 'paged out to make room for m2');
    assert.equal(registry.managed.has('m1'), true, 'but still loaded for SageMaker');
    assert.deepEqual(registry.managed.versions('m1'), [1]);
    const lease = await registry.resolve({ kind: 'managed', name: 'm1', targetHeader: undefined }).acquire();
    assert.equal(loader.loadsOf('m1').length, 2, 'paged back in');
    assert.equal(registry.managed.resident('m2')?.state === 'READY', false);
    lease.release();
    await assert.rejects(
      registry.resolve({ kind: 'managed', name: 'm2', targetHeader: 'other.tar.gz' }).acquire(),
      isServingError('TARGET_MISMATCH', /'other.tar.gz' does not match/),
    );
    await registry.resolve({ kind: 'managed', name: 'm1', targetHeader: undefined }).unload();
    assert.equal(registry.managed.has('m1'), false);
    await assert.rejects(
      registry.resolve({ kind: 'managed', name: 'm1', targetHeader: undefined }).acquire(),
      isServingError('MODEL_NOT_FOUND', /'m1' is not loaded/),
    );
    assert.throws(() => registry.managed.describe('m1'), isServingError('MODEL_NOT_FOUND', /'m1'/));
  });

  test('urls outside an absolute model directory are refused naming the model', async () => {
    const { registry, loader } = registryFixture();
    for (const url of ['relative/dir', '/opt/../etc', '/proc/self', '/dev', '/']) {
      await assert.rejects(
        registry.managed.register('x', url, undefined),
        isServingError('INVALID_REQUEST', /model 'x': url (must be an absolute path|must not contain '\.\.'|is the (system directory|filesystem root))/),
      );
    }
    assert.equal(loader.calls.length, 0);
  });

  test('a DELETE during a managed load whose last stage ignores the cancel: the load is released before DELETE resolves, the POST gets 404', async (t) => {
    const { registry, loader, memory } = registryFixture();
    loader.hold = true;
    const u = await urls(t, 'm');
    const posting = registry.managed.register('m', u['m']!, undefined);
    posting.catch(() => undefined);
    while (loader.loadsOf('m').length === 0) await settle();
    const call = loader.loadsOf('m')[0]!;
    assert.equal(call.request.signal?.aborted, false);
    const deleting = registry.resolve({ kind: 'managed', name: 'm', targetHeader: undefined }).unload();
    await settle();
    assert.equal(call.request.signal?.aborted, true, 'the load was told');
    call.gate.resolve(); // the fake finishes its load anyway
    await deleting;
    assert.equal((await call.result).released(), true, 'released before DELETE resolved');
    assert.equal(memory.usedBytes, 0);
    await assert.rejects(posting, isServingError('MODEL_NOT_FOUND', /'m' was unloaded \(DELETE \/models\/\{name\}\) while it was loading/));
    assert.equal(registry.managed.has('m'), false);
    assert.deepEqual([...registry.managed.all()], []);
    await assert.rejects(
      registry.resolve({ kind: 'managed', name: 'm', targetHeader: undefined }).unload(),
      isServingError('MODEL_NOT_FOUND', /'m' is not loaded/),
    );
  });

  test('a failed managed load is not listed', async (t) => {
    const { registry, loader } = registryFixture();
    loader.failures.set('bad', new Error('no model found'));
    await assert.rejects(registry.managed.register('bad', (await urls(t, 'bad'))['bad']!, undefined), /no model found/);
    assert.deepEqual([...registry.managed.all()], []);
    assert.equal(registry.managed.has('bad'), false);
  });
});

describe('ModelRegistry: close', () => {
  test('waits for requests that hold a model, releases everything, then refuses', async (t) => {
    const { registry, loader, memory } = registryFixture();
    const lease = await registry.resolve({ kind: 'target', target: 'a' }).acquire();
    await registry.managed.register('m', (await urls(t, 'm'))['m']!, undefined);
    let closed = false;
    const closing = registry.close().then(() => (closed = true));
    await settle();
    assert.equal(closed, false);
    await assert.rejects(registry.resolve({ kind: 'target', target: 'b' }).acquire(), isServingError('SHUTTING_DOWN', /shutting down/));
    lease.release();
    await closing;
    for (const c of loader.calls) assert.equal((await c.result).released(), true);
    assert.equal(memory.usedBytes, 0);
    assert.deepEqual([...registry.managed.all()], []);
  });
});
