/**
 * The default model (registry/default-model.ts): chosen once from the
 * settings and what the source holds, never from a failed load's message; a
 * request without a target on a source with no default is told the header is
 * missing and why.
 */
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { chooseDefaultModel } from '../../../src/registry/default-model.js';
import { isServingError } from '../../support/serving-error.js';
import { tempDir } from '../../support/temp-dir.js';
import { FakeSource, registryFixture } from './fake-loader.js';

async function repo(t: TestContext, models: readonly string[], files: readonly string[] = []): Promise<string> {
  const root = await tempDir(t);
  for (const m of models) {
    await mkdir(path.join(root, m, '1'), { recursive: true });
    await writeFile(path.join(root, m, 'config.pbtxt'), `name: "${m}"\n`);
  }
  for (const f of files) await writeFile(path.join(root, f), 'not a model');
  return root;
}

const MISSING =
  /^no target model: the X-Amzn-SageMaker-Target-Model header is missing and fake:\/\/models has no default model \((.*)\); send the header naming a model of the source, or set MME_DEFAULT_MODEL$/;

describe('chooseDefaultModel', () => {
  test('MME_DEFAULT_MODEL naming a target of the source: that target (on a remote source, always)', async (t) => {
    const source = new FakeSource(['team/a.tar.gz']);
    assert.deepEqual(await chooseDefaultModel({ source, defaultRoot: await repo(t, ['a']), defaultModel: './team/a.tar.gz' }), {
      kind: 'target',
      target: 'team/a.tar.gz',
    });
    assert.deepEqual(await chooseDefaultModel({ source, defaultRoot: undefined, defaultModel: 'later.tar.gz' }), { kind: 'target', target: 'later.tar.gz' });
  });

  test('MME_DEFAULT_MODEL naming a model directory inside the root: the root, with that entry model', async (t) => {
    const root = await repo(t, ['a', 'b']);
    assert.deepEqual(await chooseDefaultModel({ source: new FakeSource([]), defaultRoot: root, defaultModel: 'b' }), {
      kind: 'repository',
      dir: root,
      label: 'b',
      preferredEntry: 'b',
    });
    const none = await chooseDefaultModel({ source: new FakeSource([]), defaultRoot: root, defaultModel: 'c' });
    assert.equal(none.kind, 'none');
    if (none.kind === 'none')
      assert.ok(isServingError('MODEL_NOT_FOUND', /^default model 'c' \(MME_DEFAULT_MODEL\) not found in fake:\/\/models$/)(none.error));
  });

  test('no setting: a root of one model (or one ensemble) is the default; a root of several, or of archives only, is none, saying the header is missing and why', async (t) => {
    const one = await repo(t, ['only']);
    assert.deepEqual(await chooseDefaultModel({ source: new FakeSource([]), defaultRoot: one, defaultModel: undefined }), {
      kind: 'repository',
      dir: one,
      label: path.basename(one),
      preferredEntry: undefined,
    });
    const cases: [string, RegExp][] = [
      [await repo(t, ['a', 'b'], ['c.tar.gz']), /^it holds 2 models \(a, b\) and no single ensemble to choose$/],
      [await repo(t, [], ['x.tar.gz', 'y.tgz']), /^it is not a model repository$/],
    ];
    for (const [root, why] of cases) {
      const choice = await chooseDefaultModel({ source: new FakeSource([]), defaultRoot: root, defaultModel: undefined });
      assert.equal(choice.kind, 'none');
      if (choice.kind !== 'none') continue;
      assert.equal(choice.error.code, 'MODEL_NOT_FOUND');
      const m = MISSING.exec(choice.error.message);
      assert.ok(m, choice.error.message);
      assert.match(m[1]!, why);
      assert.equal(choice.error.message.includes(root), false, 'never the host path');
    }
    // A root that is not there yet (a volume mounted later) is decided anew on the next request.
    const later = path.join(await tempDir(t), 'mounted-later');
    const fixture = registryFixture({ targets: [], registry: { defaultRoot: later } });
    await assert.rejects(
      fixture.registry.resolve({ kind: 'default' }).acquire(),
      isServingError('MODEL_NOT_FOUND', /header is missing .*\(its root is not a directory\)/),
    );
    await mkdir(path.join(later, 'only', '1'), { recursive: true });
    await writeFile(path.join(later, 'only', 'config.pbtxt'), 'name: "only"\n');
    (await fixture.registry.resolve({ kind: 'default' }).acquire()).release();
    assert.equal(fixture.loader.calls[0]!.request.dir, later);
    const remote = await chooseDefaultModel({ source: new FakeSource(['a']), defaultRoot: undefined, defaultModel: undefined });
    assert.equal(remote.kind, 'none');
    if (remote.kind === 'none') assert.match(remote.error.message, MISSING);
  });

  test('the default handle: chosen once, loads the root with its entry model, refuses unloading by name', async (t) => {
    const root = await repo(t, ['a', 'b']);
    const { registry, loader } = registryFixture({ targets: [], registry: { defaultRoot: root, defaultModel: 'b' } });
    const handle = registry.resolve({ kind: 'default' });
    assert.equal(handle.leaseNow(), undefined, 'nothing chosen or loaded yet');
    const lease = await handle.acquire();
    assert.equal(loader.calls.length, 1);
    assert.equal(loader.calls[0]!.request.dir, root);
    assert.equal(loader.calls[0]!.request.preferredEntry, 'b');
    lease.release();
    const hot = handle.leaseNow();
    assert.equal(hot?.pkg, lease.pkg, 'resident: leased at once');
    hot!.release();
    assert.equal(handle.ready(undefined), true);
    await assert.rejects(handle.unload(), isServingError('UNSUPPORTED', /cannot be unloaded by name/));
    // A registry whose default is none answers every such request with the choice's error, without loading.
    const none = registryFixture({ registry: { defaultRoot: await repo(t, ['a', 'b']) } });
    await assert.rejects(none.registry.resolve({ kind: 'default' }).acquire(), isServingError('MODEL_NOT_FOUND', /header is missing/));
    assert.equal(none.loader.calls.length, 0);
  });
});
