/**
 * @module test/unit/registry/repository-layout
 * scanRepository on real temporary directories: a single model directory, a
 * repository of models, a repository wrapped in one more directory, which
 * version directories count; and chooseEntryModel's choice and errors.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ServingError, type ErrorCode } from '../../../src/errors.js';
import { chooseEntryModel, scanRepository, type ModelDirectory, type RepositoryLayout } from '../../../src/registry/repository-layout.js';

let base: string;
let counter = 0;

before(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'repo-layout-test-'));
});

after(async () => {
  await rm(base, { recursive: true, force: true });
});

/** Create a fresh directory tree; keys ending in '/' are directories, others files with the given text. */
async function tree(entries: Record<string, string>): Promise<string> {
  const root = path.join(base, `t${counter++}`);
  await mkdir(root, { recursive: true });
  for (const [rel, content] of Object.entries(entries)) {
    const p = path.join(root, rel);
    if (rel.endsWith('/')) {
      await mkdir(p, { recursive: true });
    } else {
      await mkdir(path.dirname(p), { recursive: true });
      await writeFile(p, content);
    }
  }
  return root;
}

const ONNX_CONFIG = 'platform: "onnxruntime_onnx"\nmax_batch_size: 8\n';
const ENSEMBLE_CONFIG = 'name: "ens"\nplatform: "ensemble"\n';

async function rejectsWith(p: Promise<unknown>, code: ErrorCode, message: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof ServingError, `expected ServingError, got ${String(err)}`);
    assert.equal(err.code, code);
    assert.equal(err.message, message);
    assert.equal(err.model, undefined);
    return true;
  });
}

describe('scanRepository: single model directory', () => {
  test('config.pbtxt and a version dir at the root → one model named by the fallback name', async () => {
    const root = await tree({ 'config.pbtxt': ONNX_CONFIG, '1/model.onnx': 'x' });
    const layout = await scanRepository(root, 'my-model');
    assert.deepEqual(layout, {
      root,
      singleModel: true,
      models: [{ name: 'my-model', dir: root, configText: ONNX_CONFIG, versions: [1] }],
    });
  });

  test('version dirs without config.pbtxt → single model with configText undefined (auto-complete)', async () => {
    const root = await tree({ '3/model.onnx': 'x', '1/model.onnx': 'x' });
    const layout = await scanRepository(root, 'fallback');
    assert.equal(layout.singleModel, true);
    assert.deepEqual(layout.models, [{ name: 'fallback', dir: root, configText: undefined, versions: [1, 3] }]);
  });

  test('config.pbtxt alone (no versions) is still a model directory', async () => {
    const root = await tree({ 'config.pbtxt': ENSEMBLE_CONFIG });
    const layout = await scanRepository(root, 'fb');
    assert.equal(layout.singleModel, true);
    assert.deepEqual(layout.models[0]!.versions, []);
  });

  test("only positive numeric dirs without a leading '0' are versions, in numeric order", async () => {
    const root = await tree({
      'config.pbtxt': ONNX_CONFIG,
      '1/': '',
      '2/': '',
      '10/': '',
      '0/': '',
      '01/': '',
      '007/': '',
      'abc/': '',
      '3a/': '',
      '-1/': '',
      '1.5/': '',
      '5': 'a file named 5, not a directory',
    });
    const layout = await scanRepository(root, 'm');
    assert.deepEqual(layout.models[0]!.versions, [1, 2, 10]);
  });

  test('a symlinked version directory counts', async () => {
    const root = await tree({ 'config.pbtxt': ONNX_CONFIG, 'real/model.onnx': 'x' });
    await symlink(path.join(root, 'real'), path.join(root, '7'));
    const layout = await scanRepository(root, 'm');
    assert.deepEqual(layout.models[0]!.versions, [7]);
  });
});

describe('scanRepository: repository of models', () => {
  test('model subdirectories, sorted; hidden, __MACOSX, files and non-model dirs are ignored', async () => {
    const root = await tree({
      'beta/config.pbtxt': ONNX_CONFIG,
      'beta/1/model.onnx': 'x',
      'alpha/2/model.onnx': 'x',
      'alpha/1/model.onnx': 'x',
      'empty/': '',
      'docs/readme.txt': 'not a model',
      '.hidden/config.pbtxt': ONNX_CONFIG,
      '__MACOSX/config.pbtxt': ONNX_CONFIG,
      'notes.txt': 'file at root',
    });
    const layout = await scanRepository(root, 'fb');
    assert.equal(layout.singleModel, false);
    assert.equal(layout.root, root);
    assert.deepEqual(layout.models, [
      { name: 'alpha', dir: path.join(root, 'alpha'), configText: undefined, versions: [1, 2] },
      { name: 'beta', dir: path.join(root, 'beta'), configText: ONNX_CONFIG, versions: [1] },
    ]);
  });

  test('a repository of many models: every one, in name order, a linked model directory followed and a link to a file ignored', async () => {
    const entries: Record<string, string> = {};
    for (let i = 0; i < 60; i++) entries[`m${String(i).padStart(2, '0')}/1/model.onnx`] = 'x';
    const root = await tree(entries);
    const elsewhere = await tree({ 'config.pbtxt': ONNX_CONFIG, '1/model.onnx': 'x' });
    await symlink(elsewhere, path.join(root, 'linked'));
    await writeFile(path.join(base, `file${counter}`), 'x');
    await symlink(path.join(base, `file${counter}`), path.join(root, 'to-a-file'));
    const layout = await scanRepository(root, 'fb');
    assert.deepEqual(
      layout.models.map((m) => m.name),
      [...Array.from({ length: 60 }, (_, i) => `m${String(i).padStart(2, '0')}`), 'linked'].sort((a, b) => a.localeCompare(b)),
    );
    assert.equal(layout.models.find((m) => m.name === 'linked')?.configText, ONNX_CONFIG);
  });

  test('of several directories that cannot be read, the first by name is reported, as one by one would', async () => {
    const entries: Record<string, string> = {};
    for (let i = 0; i < 40; i++) entries[`m${String(i).padStart(2, '0')}/1/model.onnx`] = 'x';
    for (const bad of ['m07', 'm31']) entries[`${bad}/config.pbtxt`] = `${'#'.repeat(64)}\n${ONNX_CONFIG}`;
    const root = await tree(entries);
    await assert.rejects(scanRepository(root, 'fb', { configMaxBytes: 32 }), (err: unknown) => {
      assert.ok(err instanceof ServingError);
      assert.match(err.message, /m07\/config\.pbtxt/);
      return true;
    });
  });

  test('a repository wrapped in one more directory (tar -czf x.tar.gz repo/) is unwrapped', async () => {
    const root = await tree({
      'repo/a/config.pbtxt': ONNX_CONFIG,
      'repo/a/1/model.onnx': 'x',
      'repo/b/1/model.onnx': 'x',
      '__MACOSX/repo/._a': 'junk',
      '.DS_Store': 'junk',
    });
    const layout = await scanRepository(root, 'fb');
    assert.equal(layout.root, path.join(root, 'repo'));
    assert.equal(layout.singleModel, false);
    assert.deepEqual(
      layout.models.map((m) => [m.name, m.dir]),
      [
        ['a', path.join(root, 'repo', 'a')],
        ['b', path.join(root, 'repo', 'b')],
      ],
    );
  });

  test('a single model wrapped in one directory takes that directory name', async () => {
    const root = await tree({ 'resnet/config.pbtxt': ONNX_CONFIG, 'resnet/1/model.onnx': 'x' });
    const layout = await scanRepository(root, 'archive-name');
    // The wrapper 'resnet' is itself a model directory, so it is found as a repository of one model.
    assert.equal(layout.singleModel, false);
    assert.deepEqual(layout.models, [{ name: 'resnet', dir: path.join(root, 'resnet'), configText: ONNX_CONFIG, versions: [1] }]);
  });

  test('a single model wrapped in two directories is unwrapped to the inner model', async () => {
    const root = await tree({ 'outer/resnet/config.pbtxt': ONNX_CONFIG, 'outer/resnet/1/model.onnx': 'x' });
    const layout = await scanRepository(root, 'archive-name');
    assert.equal(layout.root, path.join(root, 'outer'));
    assert.deepEqual(
      layout.models.map((m) => m.name),
      ['resnet'],
    );
  });

  test('a missing root is MODEL_NOT_FOUND', async () => {
    const root = path.join(base, 'does-not-exist');
    // The message never names the host path (it may be the cache or a SageMaker url).
    await rejectsWith(scanRepository(root, 'fb'), 'MODEL_NOT_FOUND', 'the model directory does not exist or is not a directory');
  });

  test('a file as root is MODEL_NOT_FOUND', async () => {
    const root = await tree({ 'f.txt': 'x' });
    const file = path.join(root, 'f.txt');
    await rejectsWith(scanRepository(file, 'fb'), 'MODEL_NOT_FOUND', 'the model directory does not exist or is not a directory');
  });

  const NO_MODEL =
    'no model found in the package; expected Triton layout <model>/config.pbtxt and <model>/<version>/model.onnx (or config.pbtxt at the archive root)';

  test('an empty root is INVALID_MODEL', async () => {
    await rejectsWith(scanRepository(await tree({}), 'fb'), 'INVALID_MODEL', NO_MODEL);
  });

  test('directories without any model content are INVALID_MODEL', async () => {
    await rejectsWith(scanRepository(await tree({ 'x/': '', 'y/readme.md': 'hi', 'z.txt': 'z' }), 'fb'), 'INVALID_MODEL', NO_MODEL);
    await rejectsWith(scanRepository(await tree({ 'wrapper/nothing/': '' }), 'fb'), 'INVALID_MODEL', NO_MODEL);
  });

  test('version dirs that are all ignored do not make a model', async () => {
    await rejectsWith(scanRepository(await tree({ '0/model.onnx': 'x', '01/model.onnx': 'x', 'v1/model.onnx': 'x' }), 'fb'), 'INVALID_MODEL', NO_MODEL);
  });
});

// ------------------------------------------------------------------ chooseEntryModel

function model(name: string, configText?: string): ModelDirectory {
  return { name, dir: `/r/${name}`, configText, versions: [1] };
}

function layoutOf(...models: ModelDirectory[]): RepositoryLayout {
  return { root: '/r', models, singleModel: false };
}

function throwsWith(fn: () => unknown, code: ErrorCode, message: string): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ServingError);
    assert.equal(err.code, code);
    assert.equal(err.message, message);
    assert.equal(err.model, undefined);
    return true;
  });
}

describe('chooseEntryModel', () => {
  test('a single model is the entry, ensemble or not', () => {
    const only = model('solo', ONNX_CONFIG);
    assert.equal(chooseEntryModel(layoutOf(only)), only);
    const noConfig = model('bare');
    assert.equal(chooseEntryModel(layoutOf(noConfig)), noConfig);
  });

  test('among several models, the single ensemble is the entry', () => {
    const ens = model('pipeline', ENSEMBLE_CONFIG);
    assert.equal(chooseEntryModel(layoutOf(model('a', ONNX_CONFIG), ens, model('b'))), ens);
  });

  test('the ensemble platform is recognised with single quotes and without spaces', () => {
    const ens1 = model('e1', "platform:'ensemble'");
    assert.equal(chooseEntryModel(layoutOf(model('a', ONNX_CONFIG), ens1)), ens1);
    const ens2 = model('e2', 'max_batch_size: 4\nplatform : "ensemble"\n');
    assert.equal(chooseEntryModel(layoutOf(ens2, model('a', ONNX_CONFIG))), ens2);
  });

  test('a platform that only starts with "ensemble" is not an ensemble', () => {
    throwsWith(
      () => chooseEntryModel(layoutOf(model('a', 'platform: "ensemble_like"'), model('b', ONNX_CONFIG))),
      'INVALID_MODEL',
      'cannot choose the entry model: it has 2 models (a, b) and no ensemble; package one model per archive, add exactly one ensemble (platform: "ensemble") that wires them, or set MME_DEFAULT_MODEL for the default model',
    );
  });

  test('preferred wins over the ensemble rule', () => {
    const a = model('a', ONNX_CONFIG);
    assert.equal(chooseEntryModel(layoutOf(a, model('pipeline', ENSEMBLE_CONFIG)), 'a'), a);
  });

  test('a preferred name that is not in the package is MODEL_NOT_FOUND listing the models', () => {
    throwsWith(() => chooseEntryModel(layoutOf(model('a'), model('b')), 'zz'), 'MODEL_NOT_FOUND', "the package has no model named 'zz' (it has: a, b)");
    throwsWith(() => chooseEntryModel(layoutOf(model('only')), 'other'), 'MODEL_NOT_FOUND', "the package has no model named 'other' (it has: only)");
  });

  test('several models and no ensemble is INVALID_MODEL listing the models', () => {
    throwsWith(
      () => chooseEntryModel(layoutOf(model('a', ONNX_CONFIG), model('b'), model('c', ONNX_CONFIG))),
      'INVALID_MODEL',
      'cannot choose the entry model: it has 3 models (a, b, c) and no ensemble; package one model per archive, add exactly one ensemble (platform: "ensemble") that wires them, or set MME_DEFAULT_MODEL for the default model',
    );
  });

  test('several ensembles is INVALID_MODEL listing the ensembles', () => {
    throwsWith(
      () => chooseEntryModel(layoutOf(model('e1', ENSEMBLE_CONFIG), model('m', ONNX_CONFIG), model('e2', ENSEMBLE_CONFIG))),
      'INVALID_MODEL',
      'cannot choose the entry model: it has 2 ensembles (e1, e2); package one model per archive, add exactly one ensemble (platform: "ensemble") that wires them, or set MME_DEFAULT_MODEL for the default model',
    );
  });

  test('works on a scanned repository', async () => {
    const root = await tree({
      'pre/config.pbtxt': ONNX_CONFIG,
      'pre/1/model.onnx': 'x',
      'ens/config.pbtxt': ENSEMBLE_CONFIG,
      'ens/1/': '',
      'post/1/model.onnx': 'x',
    });
    const layout = await scanRepository(root, 'fb');
    assert.deepEqual(
      layout.models.map((m) => m.name),
      ['ens', 'post', 'pre'],
    );
    assert.equal(chooseEntryModel(layout).name, 'ens');
    assert.equal(chooseEntryModel(layout, 'post').dir, path.join(root, 'post'));
  });
});
