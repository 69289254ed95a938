/**
 * `onnx-mme pack`: validate, then a tarball in the layout the server expects.
 * Round trips: pack → validate says OK; pack → the real server serves the
 * archive (under another object name too) and answers correctly. Invalid
 * directories produce nothing; the same tree packs to the same bytes.
 */
import assert from 'node:assert/strict';
import { copyFile, mkdir, readFile, stat, symlink } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as tar from 'tar';
import { addSub, configText, ensembleRepository, sizedModel, writeModelDir, writeRepository } from '../../examples/models/zoo.js';
import { runCli } from '../support/cli.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { addSubBody, input, request, startTestServer } from '../support/test-server.js';

const ctx = new Cleanups();
after(() => ctx.run());

async function entries(file: string): Promise<string[]> {
  const names: string[] = [];
  await tar.list({ file, onReadEntry: (e) => names.push(`${e.path}${e.type === 'SymbolicLink' ? ' -> link' : ''}`) });
  return names;
}

let work = '';
let source = '';
const seq16 = Array.from({ length: 16 }, (_, i) => i);
const body = addSubBody(2);

describe('onnx-mme pack', () => {
  before(async () => {
    work = await tempDir(ctx, 'onnx-mme-cli-pack-');
    source = path.join(work, 'source');
    await mkdir(source);
    await writeModelDir(work, 'add_sub', addSub());
    await writeRepository(path.join(work, 'pipeline'), ensembleRepository().models);
  });

  it('a single model directory: stored under its own name, validates, and the server serves it under any object name', async () => {
    const out = path.join(source, 'add_sub.tar.gz');
    const packed = await runCli(['pack', path.join(work, 'add_sub'), '-o', out]);
    assert.equal(packed.code, 0, packed.stderr);
    assert.match(packed.stdout, /add_sub\.tar\.gz .*model directory 'add_sub\/' at the root; entry model 'add_sub'/);
    assert.match(packed.stderr, /OK: the server will load this package/, 'the validation report goes to stderr');
    assert.deepEqual(await entries(out), ['add_sub/', 'add_sub/1/', 'add_sub/1/model.onnx', 'add_sub/config.pbtxt']);

    const validated = await runCli(['validate', out]);
    assert.equal(validated.code, 0, validated.stdout);

    // The model keeps its name whatever the object is called (a flat archive would take the object's name).
    await copyFile(out, path.join(source, 'renamed-in-s3.tar.gz'));
    const server = await startTestServer({ modelSource: source, cacheDir: path.join(work, 'cache') });
    ctx.after(() => server.close());
    for (const target of ['add_sub.tar.gz', 'renamed-in-s3.tar.gz']) {
      const res = await request(`${server.url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': target }, json: body });
      assert.equal(res.status, 200, `${target}: ${res.text}`);
      assert.equal(res.body.model_name, 'add_sub');
      assert.deepEqual(
        res.body.outputs[0].data,
        seq16.map((v) => v + 2),
      );
    }
  });

  it('an ensemble repository: model directories at the root; validates; the server runs the ensemble', async () => {
    const out = path.join(source, 'pipeline.tgz');
    const packed = await runCli(['pack', path.join(work, 'pipeline'), '--output', out]);
    assert.equal(packed.code, 0, packed.stderr);
    assert.match(packed.stdout, /3 model directories at the root; entry model 'pipeline'/);
    const names = await entries(out);
    assert.deepEqual(
      names.filter((n) => /^[^/]+\/$/.test(n)),
      ['classifier/', 'pipeline/', 'preprocess/'],
    );
    assert.ok(names.includes('pipeline/1/'), 'the ensemble keeps its (empty) version directory');

    const validated = await runCli(['validate', out, '--json']);
    assert.equal(validated.code, 0, validated.stdout);
    assert.equal((JSON.parse(validated.stdout) as { entry: string }).entry, 'pipeline');

    const server = await startTestServer({ modelSource: source, cacheDir: path.join(work, 'cache-ens') });
    ctx.after(() => server.close());
    const res = await request(`${server.url}/invocations`, {
      method: 'POST',
      headers: { 'X-Amzn-SageMaker-Target-Model': 'pipeline.tgz' },
      json: { inputs: [input('INPUT', 'FP32', [1, 4], [1, 2, 3, 4])] },
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.model_name, 'pipeline');
    assert.deepEqual(res.body.outputs[0].shape, [1, 3]);
  });

  it('the same tree packs to the same bytes; a symbolic link is stored as the file it points to', async () => {
    const dir = path.join(work, 'linked');
    await writeModelDir(work, 'linked', { config: addSub().config! });
    await writeModelDir(work, 'weights', { onnx: addSub().onnx });
    await symlink(path.join(work, 'weights', '1', 'model.onnx'), path.join(dir, '1', 'model.onnx'));
    const a = path.join(work, 'a.tar.gz');
    const b = path.join(work, 'b.tar.gz');
    assert.equal((await runCli(['pack', dir, '-o', a])).code, 0);
    assert.equal((await runCli(['pack', dir, '-o', b])).code, 0);
    assert.deepEqual(await readFile(a), await readFile(b));
    assert.deepEqual(await entries(a), ['linked/', 'linked/1/', 'linked/1/model.onnx', 'linked/config.pbtxt']);
    assert.equal((await runCli(['validate', a])).code, 0, 'the archive holds the model bytes, not a link out of it');
  });

  it('an invalid directory: the problems on stderr, exit 1, nothing written', async () => {
    await writeModelDir(work, 'broken', {
      onnx: addSub().onnx,
      config: configText({
        maxBatchSize: 8,
        inputs: [{ name: 'WRONG', dataType: 'FP32', dims: [16] }],
        outputs: [{ name: 'OUTPUT0', dataType: 'FP32', dims: [16] }],
      }),
    });
    const out = path.join(work, 'broken.tar.gz');
    const r = await runCli(['pack', path.join(work, 'broken'), '-o', out]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /input 'WRONG' is in config\.pbtxt but not in the ONNX model/);
    assert.match(r.stderr, /pack: nothing written/);
    await assert.rejects(stat(out), { code: 'ENOENT' });
    await assert.rejects(stat(`${out}.tmp-${process.pid}`), { code: 'ENOENT' });
  });

  it('progress on stderr: plain lines at the --progress-interval when stderr is not a terminal, ending at 100%', async () => {
    await writeModelDir(work, 'big', sizedModel(8 * 1024 * 1024));
    const out = path.join(work, 'big.tar.gz');
    // Interval 0: a line per chunk the gzip stream reads, so the test does not depend on how fast packing is.
    const r = await runCli(['pack', path.join(work, 'big'), '-o', out, '--progress-interval', '0']);
    assert.equal(r.code, 0, r.stderr);
    const percents = [...r.stderr.matchAll(/^packing big\.tar\.gz \[[#.]{30}\] +(\d+)% .*\/s/gm)].map((m) => Number(m[1]));
    assert.ok(percents.length >= 3, `several progress lines, got ${percents.length}`);
    assert.ok(
      percents.every((p, i) => i === 0 || p >= percents[i - 1]!),
      `percentages never go back: ${percents.join(',')}`,
    );
    assert.equal(percents.at(-1), 100);
    assert.ok(!r.stderr.includes('\r'), 'no terminal redraws in a log');
    // The default interval (5 s) keeps a log short: the first line and the last.
    const quiet = await runCli(['pack', path.join(work, 'big'), '-o', out]);
    const lines = quiet.stderr.split('\n').filter((l) => l.startsWith('packing '));
    assert.ok(lines.length >= 1 && lines.length <= 4, `a short log: ${lines.length} lines`);
    assert.match(lines.at(-1)!, / 100% /);
    assert.equal((await runCli(['pack', path.join(work, 'big'), '-o', out, '--progress-interval', 'soon'])).code, 2);
  });

  it('usage errors: exit 2', async () => {
    const notDir = await runCli(['pack', path.join(source, 'add_sub.tar.gz')]);
    assert.equal(notDir.code, 2);
    assert.match(notDir.stderr, /not a directory/);
    const badName = await runCli(['pack', path.join(work, 'add_sub'), '-o', path.join(work, 'model.zip')]);
    assert.equal(badName.code, 2);
    assert.match(badName.stderr, /must end in \.tar\.gz or \.tgz/);
    const inside = await runCli(['pack', path.join(work, 'add_sub'), '-o', path.join(work, 'add_sub', 'x.tar.gz')]);
    assert.equal(inside.code, 2);
    assert.match(inside.stderr, /must not be inside the directory being packed/);
  });
});
