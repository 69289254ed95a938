/**
 * @module test/unit/store/local-source
 * LocalModelSource over a temp directory: archive and directory targets, the
 * disk cache (reuse, versions, restart sweep), single flight, containment and
 * listing.
 */

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, realpath, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, describe, it } from 'node:test';
import * as tar from 'tar';
import { ServingError } from '../../../src/errors.js';
import { cacheEntryName, cleanCacheDir, ENTRY_CONTENT_DIR, ENTRY_METADATA_FILE, publishDirectory, readCacheEntry } from '../../../src/store/cache-publish.js';
import type { ExtractLimits } from '../../../src/store/extract-limits.js';
import { LocalModelSource, type ExtractionEvent } from '../../../src/store/local-source.js';
import { isServingError } from '../../support/serving-error.js';

const LIMITS: ExtractLimits = { maxBytes: 64 * 1024 * 1024, maxEntries: 1000 };
const sandboxes: string[] = [];

after(async () => {
  await Promise.all(sandboxes.map((dir) => rm(dir, { recursive: true, force: true })));
});

interface Fixture {
  readonly root: string;
  readonly cacheDir: string;
  readonly extractions: ExtractionEvent[];
  readonly source: LocalModelSource;
  /** A new source over the same root and cache, as after a restart. */
  readonly restart: () => LocalModelSource;
}

async function fixture(limits: ExtractLimits = LIMITS): Promise<Fixture> {
  const base = await mkdtemp(path.join(tmpdir(), 'onnx-mme-local-'));
  sandboxes.push(base);
  const root = path.join(base, 'models');
  const cacheDir = path.join(base, 'cache');
  await mkdir(root);
  const extractions: ExtractionEvent[] = [];
  const make = (): LocalModelSource => new LocalModelSource({ root, cacheDir, limits, onExtract: (event) => extractions.push(event) });
  return { root, cacheDir, extractions, source: make(), restart: make };
}

type Files = Readonly<Record<string, string | Buffer>>;

/** Writes `files` to a staging dir and packs them with tar.c into `<root>/<rel>`. */
async function writeArchive(root: string, rel: string, files: Files, mtime?: Date): Promise<string> {
  const staging = await mkdtemp(path.join(tmpdir(), 'onnx-mme-stage-'));
  sandboxes.push(staging);
  for (const [name, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(staging, name)), { recursive: true });
    await writeFile(path.join(staging, name), content);
  }
  const file = path.join(root, rel);
  await mkdir(path.dirname(file), { recursive: true });
  const tops = [...new Set(Object.keys(files).map((name) => name.split('/')[0] ?? name))];
  await tar.c({ gzip: true, file, cwd: staging, portable: true }, tops);
  if (mtime) await utimes(file, mtime, mtime);
  return file;
}

function tritonFiles(weights: Buffer | string = randomBytes(50_000)): Files {
  return { 'mymodel/config.pbtxt': 'name: "mymodel"\n', 'mymodel/1/model.onnx': weights };
}

describe('LocalModelSource: archives', () => {
  it('extracts a Triton archive into the cache with metadata', async () => {
    const f = await fixture();
    const weights = randomBytes(80_000);
    await writeArchive(f.root, 'model_a.tar.gz', tritonFiles(weights));
    const model = await f.source.localize('model_a.tar.gz');
    assert.equal(model.target, 'model_a.tar.gz');
    assert.ok(model.dir.startsWith(f.cacheDir + path.sep));
    assert.equal(path.basename(model.dir), ENTRY_CONTENT_DIR);
    assert.deepEqual(await readFile(path.join(model.dir, 'mymodel', '1', 'model.onnx')), weights);
    assert.match(model.version, /^\d+-[\d.]+$/);
    const metadata = await readCacheEntry(path.dirname(model.dir));
    assert.equal(metadata?.target, 'model_a.tar.gz');
    assert.equal(metadata?.version, model.version);
    assert.equal(metadata?.files, 2);
    assert.equal(f.extractions.length, 1);
    // A second localize reuses the entry.
    const again = await f.source.localize('./model_a.tar.gz');
    assert.equal(again.dir, model.dir);
    assert.equal(f.extractions.length, 1);
  });

  it('keeps nested and look-alike targets apart', async () => {
    const f = await fixture();
    await writeArchive(f.root, 'team/b.tar.gz', tritonFiles('nested'));
    await writeArchive(f.root, 'team_b.tar.gz', tritonFiles('flat'));
    assert.notEqual(cacheEntryName('team/b.tar.gz', '1'), cacheEntryName('team_b.tar.gz', '1'));
    const nested = await f.source.localize('team/b.tar.gz');
    const flat = await f.source.localize('team_b.tar.gz');
    assert.notEqual(nested.dir, flat.dir);
    assert.equal(await readFile(path.join(nested.dir, 'mymodel/1/model.onnx'), 'utf8'), 'nested');
    assert.equal(await readFile(path.join(flat.dir, 'mymodel/1/model.onnx'), 'utf8'), 'flat');
  });

  it('shares one extraction among concurrent callers (single flight)', async () => {
    const f = await fixture();
    await writeArchive(f.root, 'busy.tgz', tritonFiles(randomBytes(2 * 1024 * 1024)));
    const models = await Promise.all(Array.from({ length: 8 }, () => f.source.localize('busy.tgz')));
    assert.equal(f.extractions.length, 1);
    assert.equal(new Set(models.map((m) => m.dir)).size, 1);
    assert.equal((await readdir(f.cacheDir)).length, 1, 'one entry, no temp leftovers');
  });

  it('extracts a changed archive to a new entry and removes the old one once released', async () => {
    const f = await fixture();
    const file = await writeArchive(f.root, 'm.tar.gz', tritonFiles('version one'), new Date('2024-01-01T00:00:00Z'));
    const first = await f.source.localize('m.tar.gz');
    await rm(file);
    await writeArchive(f.root, 'm.tar.gz', tritonFiles('version two, longer'), new Date('2024-06-01T00:00:00Z'));
    const second = await f.source.localize('m.tar.gz');
    assert.notEqual(second.version, first.version);
    assert.notEqual(second.dir, first.dir);
    assert.equal(await readFile(path.join(second.dir, 'mymodel/1/model.onnx'), 'utf8'), 'version two, longer');
    assert.equal(f.extractions.length, 2);
    assert.equal((await readdir(f.cacheDir)).length, 2, 'the old entry stays while a loaded model uses it');
    first.release();
    await f.source.cache.settled();
    assert.deepEqual(await readdir(f.cacheDir), [path.basename(path.dirname(second.dir))]);
  });

  it('rejects a hostile archive naming the target, and caches nothing', async () => {
    const f = await fixture();
    const staging = await mkdtemp(path.join(tmpdir(), 'onnx-mme-stage-'));
    sandboxes.push(staging);
    await mkdir(path.join(staging, 'mymodel'));
    await writeFile(path.join(staging, 'mymodel', 'config.pbtxt'), 'name: "mymodel"');
    await symlink('/etc/passwd', path.join(staging, 'mymodel', 'passwd'));
    await tar.c({ gzip: true, file: path.join(f.root, 'evil.tar.gz'), cwd: staging, portable: true }, ['mymodel']);
    await assert.rejects(
      f.source.localize('evil.tar.gz'),
      isServingError('ARCHIVE_REJECTED', /^model 'evil\.tar\.gz': archive entry 'mymodel\/passwd' rejected: .*\/etc\/passwd/),
    );
    assert.deepEqual(await readdir(f.cacheDir), []);
  });

  it('rejects a corrupt archive and recovers once it is replaced', async () => {
    const f = await fixture();
    await writeFile(path.join(f.root, 'broken.tar.gz'), randomBytes(1000));
    await assert.rejects(f.source.localize('broken.tar.gz'), isServingError('ARCHIVE_REJECTED', /^model 'broken\.tar\.gz': model archive is corrupt/));
    assert.deepEqual(await readdir(f.cacheDir), []);
    await writeArchive(f.root, 'broken.tar.gz', tritonFiles('fixed'), new Date('2030-01-01T00:00:00Z'));
    const model = await f.source.localize('broken.tar.gz');
    assert.equal(await readFile(path.join(model.dir, 'mymodel/1/model.onnx'), 'utf8'), 'fixed');
  });

  it('applies the extraction limits', async () => {
    const f = await fixture({ maxBytes: 1024 * 1024, maxEntries: 3 });
    await writeArchive(f.root, 'many.tar.gz', { 'a/1': 'x', 'a/2': 'x', 'a/3': 'x', 'a/4': 'x' });
    await assert.rejects(f.source.localize('many.tar.gz'), isServingError('ARCHIVE_REJECTED', /'many\.tar\.gz'.*more than 3 entries/));
    assert.deepEqual(await readdir(f.cacheDir), []);
  });
});

describe('LocalModelSource: directories and resolution', () => {
  it('uses a model directory in place, versioned by its config.pbtxt', async () => {
    const f = await fixture();
    const dir = path.join(f.root, 'dirmodel');
    await mkdir(path.join(dir, '1'), { recursive: true });
    await writeFile(path.join(dir, 'config.pbtxt'), 'name: "dirmodel"');
    await writeFile(path.join(dir, '1', 'model.onnx'), 'w');
    await utimes(path.join(dir, 'config.pbtxt'), new Date('2024-01-01'), new Date('2024-01-01'));
    const model = await f.source.localize('dirmodel');
    assert.equal(model.dir, await realpath(dir));
    await utimes(path.join(dir, 'config.pbtxt'), new Date('2024-02-01'), new Date('2024-02-01'));
    const again = await f.source.localize('dirmodel');
    assert.notEqual(again.version, model.version);
    assert.equal(f.extractions.length, 0);
    assert.deepEqual(await readdir(f.cacheDir).catch(() => []), []);
  });

  it('tries the directory, then .tar.gz, then .tgz for a target without a suffix', async () => {
    const f = await fixture();
    await mkdir(path.join(f.root, 'both'));
    await writeFile(path.join(f.root, 'both', 'config.pbtxt'), 'name: "both"');
    await writeArchive(f.root, 'both.tar.gz', tritonFiles('archive'));
    await writeArchive(f.root, 'gz.tar.gz', tritonFiles('gz'));
    await writeArchive(f.root, 'gz.tgz', tritonFiles('tgz'));
    await writeArchive(f.root, 'team/only.tgz', tritonFiles('only tgz'));

    assert.equal((await f.source.localize('both')).dir, await realpath(path.join(f.root, 'both')));
    const gz = await f.source.localize('gz');
    assert.equal(gz.target, 'gz');
    assert.equal(await readFile(path.join(gz.dir, 'mymodel/1/model.onnx'), 'utf8'), 'gz');
    const onlyTgz = await f.source.localize('team/only');
    assert.equal(await readFile(path.join(onlyTgz.dir, 'mymodel/1/model.onnx'), 'utf8'), 'only tgz');
  });

  it('reports a missing target as MODEL_NOT_FOUND naming the target, not the source root (a host path)', async () => {
    const f = await fixture();
    await assert.rejects(f.source.localize('nope.tar.gz'), (err: unknown) => {
      assert.ok(err instanceof ServingError);
      assert.equal(err.code, 'MODEL_NOT_FOUND');
      assert.equal(
        err.message,
        "model 'nope.tar.gz' not found in the model source (local directory); POST /v2/repository/index (gRPC: RepositoryIndex) lists the models it holds",
      );
      return true;
    });
    await assert.rejects(f.source.localize('team/nope'), isServingError('MODEL_NOT_FOUND', /'team\/nope'/));
  });

  it('rejects invalid targets, non-archive files, and links out of the root', async () => {
    const f = await fixture();
    await assert.rejects(f.source.localize('../escape.tar.gz'), isServingError('INVALID_TARGET', /"\.\.\/escape\.tar\.gz"/));
    await writeFile(path.join(f.root, 'notes.txt'), 'hi');
    await assert.rejects(f.source.localize('notes.txt'), isServingError('INVALID_TARGET', /'notes\.txt'.*neither/));
    const outside = await mkdtemp(path.join(tmpdir(), 'onnx-mme-outside-'));
    sandboxes.push(outside);
    await writeArchive(outside, 'secret.tar.gz', tritonFiles('secret'));
    await symlink(path.join(outside, 'secret.tar.gz'), path.join(f.root, 'link.tar.gz'));
    await assert.rejects(f.source.localize('link.tar.gz'), isServingError('INVALID_TARGET', /'link\.tar\.gz' resolves outside/));
    assert.deepEqual(await readdir(f.cacheDir).catch(() => []), []);
  });

  it('accepts a file:// URL as the root', async () => {
    const f = await fixture();
    await writeArchive(f.root, 'u.tar.gz', tritonFiles('url'));
    const source = new LocalModelSource({ root: pathToFileURL(f.root).href, cacheDir: f.cacheDir, limits: LIMITS });
    assert.equal(source.description, pathToFileURL(f.root).href);
    const model = await source.localize('u.tar.gz');
    assert.equal(await readFile(path.join(model.dir, 'mymodel/1/model.onnx'), 'utf8'), 'url');
  });

  it('rejects a caller whose signal is already aborted', async () => {
    const f = await fixture();
    await writeArchive(f.root, 'a.tar.gz', tritonFiles());
    await assert.rejects(f.source.localize('a.tar.gz', AbortSignal.abort()), isServingError('CANCELLED', /'a\.tar\.gz'/));
  });
});

describe('LocalModelSource: restart', () => {
  it('sweeps leftovers and reuses complete entries without re-extracting', async () => {
    const f = await fixture();
    await writeArchive(f.root, 'keep.tar.gz', tritonFiles('kept'));
    const before = await f.source.localize('keep.tar.gz');
    // Leftovers of a crash: a temp dir, an entry-named dir without metadata, and an unrelated file.
    await mkdir(path.join(f.cacheDir, '.tmp-abc123', 'model'), { recursive: true });
    await writeFile(path.join(f.cacheDir, '.tmp-abc123', 'model', 'half.onnx'), 'partial');
    const incomplete = cacheEntryName('other.tar.gz', '1-2');
    await mkdir(path.join(f.cacheDir, incomplete, ENTRY_CONTENT_DIR), { recursive: true });
    await writeFile(path.join(f.cacheDir, 'README.txt'), 'not ours');

    const cleaned = await cleanCacheDir(f.cacheDir);
    assert.deepEqual(cleaned.removed.map((p) => path.basename(p)).sort(), ['.tmp-abc123', incomplete].sort());
    assert.deepEqual(cleaned.kept, [path.dirname(before.dir)]);
    assert.deepEqual((await readdir(f.cacheDir)).sort(), ['README.txt', path.basename(path.dirname(before.dir))].sort());

    const after = await f.restart().localize('keep.tar.gz');
    assert.equal(after.dir, before.dir);
    assert.equal(after.version, before.version);
    assert.equal(f.extractions.length, 1, 'no second extraction after restart');
  });

  it('removes an entry whose metadata is corrupt or belongs to another name', async () => {
    const f = await fixture();
    await writeArchive(f.root, 'x.tar.gz', tritonFiles());
    const model = await f.source.localize('x.tar.gz');
    const entryDir = path.dirname(model.dir);
    await writeFile(path.join(entryDir, ENTRY_METADATA_FILE), '{not json');
    const cleaned = await cleanCacheDir(f.cacheDir);
    assert.deepEqual(cleaned.removed, [entryDir]);
    assert.deepEqual(await readdir(f.cacheDir), []);
  });
});

describe('LocalModelSource: list', () => {
  it('lists archives and model directories as relative targets', async () => {
    const f = await fixture();
    await writeArchive(f.root, 'a.tar.gz', tritonFiles());
    await writeArchive(f.root, 'team/b.tgz', tritonFiles());
    await writeArchive(f.root, 'deep/er/still/c.tar.gz', tritonFiles());
    await writeArchive(f.root, 'too/deep/for/the/walk.tar.gz', tritonFiles());
    await mkdir(path.join(f.root, 'single'), { recursive: true });
    await writeFile(path.join(f.root, 'single', 'config.pbtxt'), 'name: "single"');
    await mkdir(path.join(f.root, 'repo', 'm1'), { recursive: true });
    await writeFile(path.join(f.root, 'repo', 'm1', 'config.pbtxt'), 'name: "m1"');
    await mkdir(path.join(f.root, 'bare', '3'), { recursive: true });
    await writeFile(path.join(f.root, 'bare', '3', 'model.onnx'), 'w');
    await mkdir(path.join(f.root, 'docs'), { recursive: true });
    await writeFile(path.join(f.root, 'docs', 'notes.txt'), 'n');
    await mkdir(path.join(f.root, '.hidden'), { recursive: true });
    await writeFile(path.join(f.root, '.hidden', 'config.pbtxt'), 'x');
    await writeFile(path.join(f.root, 'plain.onnx'), 'x');

    const entries = await f.source.list();
    assert.deepEqual(
      entries.map((e) => e.target),
      ['a.tar.gz', 'bare', 'deep/er/still/c.tar.gz', 'repo', 'single', 'team/b.tgz'],
    );
    const a = entries.find((e) => e.target === 'a.tar.gz');
    assert.equal(typeof a?.sizeBytes, 'number');
    assert.ok(a?.lastModified instanceof Date);
    assert.equal(entries.find((e) => e.target === 'repo')?.sizeBytes, undefined);
  });

  it('does not list a cache dir that lives inside the root', async () => {
    const f = await fixture();
    const source = new LocalModelSource({ root: f.root, cacheDir: path.join(f.root, 'cache'), limits: LIMITS });
    await writeArchive(f.root, 'a.tar.gz', tritonFiles());
    await source.localize('a.tar.gz');
    assert.deepEqual(
      (await source.list()).map((e) => e.target),
      ['a.tar.gz'],
    );
  });
});

describe('publishDirectory', () => {
  it('keeps an existing complete entry of the same version and discards the new copy', async () => {
    const f = await fixture();
    const fill = (text: string) => async (dir: string) => {
      await writeFile(path.join(dir, 'payload'), text);
      return { bytes: text.length, files: 1 };
    };
    const first = await publishDirectory({ cacheDir: f.cacheDir, target: 't.tar.gz', version: 'v', fill: fill('first') });
    const second = await publishDirectory({ cacheDir: f.cacheDir, target: 't.tar.gz', version: 'v', fill: fill('second') });
    assert.equal(first.reused, false);
    assert.equal(second.reused, true);
    assert.equal(second.dir, first.dir);
    assert.equal(await readFile(path.join(second.contentDir, 'payload'), 'utf8'), 'first');
    assert.deepEqual(await readdir(f.cacheDir), [path.basename(first.dir)]);
  });

  it('removes the temp dir when the filler fails, and keeps its error', async () => {
    const f = await fixture();
    const boom = new ServingError('INVALID_MODEL', "model 't': bad");
    await assert.rejects(
      publishDirectory({
        cacheDir: f.cacheDir,
        target: 't.tar.gz',
        version: 'v',
        fill: async (dir) => {
          await writeFile(path.join(dir, 'partial'), 'x');
          throw boom;
        },
      }),
      (err: unknown) => err === boom,
    );
    assert.deepEqual(await readdir(f.cacheDir), []);
  });
});
