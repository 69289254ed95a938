/**
 * @module test/unit/store/extract-archive
 * Safe extraction: good Triton archives, tar format variants, and hostile or
 * corrupt archives. Hostile archives are written byte by byte (tar.c refuses to
 * create most of them) and extracted through publishDirectory so every
 * rejection also proves the cache holds no leftover and nothing escaped.
 */

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import * as tar from 'tar';
import { ServingError, type ErrorCode } from '../../../src/errors.js';
import { publishDirectory } from '../../../src/store/cache-publish.js';
import { measureDiskBytes, measureListedDiskBytes } from '../../../src/store/disk-usage.js';
import { extractArchive, type ExtractLimits } from '../../../src/store/extract-archive.js';
import { tarBytes, tgz, type RawEntry } from '../../support/raw-tar.js';
import { isServingError } from '../../support/serving-error.js';

const LIMITS: ExtractLimits = { maxBytes: 64 * 1024 * 1024, maxEntries: 1000 };
const sandboxes: string[] = [];

after(async () => {
  await Promise.all(sandboxes.map((dir) => rm(dir, { recursive: true, force: true })));
});

async function sandbox(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'onnx-mme-extract-'));
  sandboxes.push(dir);
  return dir;
}

// ---- helpers ----

async function listTree(dir: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for (const dirent of await readdir(dir, { withFileTypes: true })) {
    const rel = prefix === '' ? dirent.name : `${prefix}/${dirent.name}`;
    out.push(rel);
    if (dirent.isDirectory()) out.push(...(await listTree(path.join(dir, dirent.name), rel)));
  }
  return out.sort();
}

/**
 * Extracts `archive` through publishDirectory into `<sandbox>/a/b/cache` and
 * asserts the rejection, an empty cache, and an untouched sandbox (escapes
 * via `../` would land in a/b, a, or the sandbox root).
 */
async function expectRejected(archive: Buffer, code: ErrorCode, pattern: RegExp, limits: ExtractLimits = LIMITS): Promise<void> {
  const root = await sandbox();
  const cacheDir = path.join(root, 'a', 'b', 'cache');
  await mkdir(cacheDir, { recursive: true });
  const archivePath = path.join(root, 'input.tar.gz');
  await writeFile(archivePath, archive);
  await assert.rejects(
    publishDirectory({
      cacheDir,
      target: 'hostile.tar.gz',
      version: '1',
      fill: (dir) => extractArchive(archivePath, dir, limits),
    }),
    isServingError(code, pattern),
  );
  assert.deepEqual(await readdir(cacheDir), [], 'the cache holds no temp or final dir');
  assert.deepEqual(await listTree(root), ['a', 'a/b', 'a/b/cache', 'input.tar.gz'], 'nothing written outside');
}

async function extractTo(archive: Buffer | Readable, limits: ExtractLimits = LIMITS) {
  const root = await sandbox();
  const dest = path.join(root, 'dest');
  await mkdir(dest);
  let input: string | Readable;
  if (Buffer.isBuffer(archive)) {
    input = path.join(root, 'input.tar.gz');
    await writeFile(input, archive);
  } else {
    input = archive;
  }
  const result = await extractArchive(input, dest, limits);
  return { dest, result };
}

async function tritonArchive(): Promise<{ archive: Buffer; weights: Buffer; config: string }> {
  const src = await sandbox();
  const weights = randomBytes(300_000);
  const config = 'name: "mymodel"\nplatform: "onnxruntime_onnx"\n';
  await mkdir(path.join(src, 'mymodel', '1'), { recursive: true });
  await writeFile(path.join(src, 'mymodel', 'config.pbtxt'), config);
  await writeFile(path.join(src, 'mymodel', '1', 'model.onnx'), weights);
  const file = path.join(src, 'model.tar.gz');
  await tar.c({ gzip: true, file, cwd: src, portable: true }, ['mymodel']);
  return { archive: await readFile(file), weights, config };
}

// ---- tests ----

describe('extractArchive: good archives', () => {
  it('extracts a Triton layout and reports files and bytes', async () => {
    const { archive, weights, config } = await tritonArchive();
    const { dest, result } = await extractTo(archive);
    assert.deepEqual(await listTree(dest), ['mymodel', 'mymodel/1', 'mymodel/1/model.onnx', 'mymodel/config.pbtxt']);
    assert.deepEqual(await readFile(path.join(dest, 'mymodel', '1', 'model.onnx')), weights);
    assert.equal(await readFile(path.join(dest, 'mymodel', 'config.pbtxt'), 'utf8'), config);
    assert.equal(result.files, 2);
    assert.equal(result.bytes, weights.length + Buffer.byteLength(config));
    // The advance charge is in blocks, never below what the filesystem allocated (du), and far above the data bytes for tiny files.
    const measured = (await measureDiskBytes(dest)) - (await lstat(dest)).blocks * 512;
    assert.ok(result.diskBytes >= measured, `charged ${result.diskBytes}, du ${measured}`);
    assert.ok(result.diskBytes >= result.bytes + 2 * 4096, `charged ${result.diskBytes}: data plus two directories`);
  });

  it('accepts a stream input (as an S3 body would be)', async () => {
    const { archive, weights } = await tritonArchive();
    // Small chunks exercise header and body boundaries across writes.
    const chunks: Buffer[] = [];
    for (let i = 0; i < archive.length; i += 777) chunks.push(archive.subarray(i, i + 777));
    const { dest } = await extractTo(Readable.from(chunks));
    assert.deepEqual(await readFile(path.join(dest, 'mymodel', '1', 'model.onnx')), weights);
  });

  it('handles pax long names written by tar.c', async () => {
    const src = await sandbox();
    const longDir = `mymodel/${'d'.repeat(120)}/${'e'.repeat(90)}`;
    await mkdir(path.join(src, longDir), { recursive: true });
    await writeFile(path.join(src, longDir, 'model.onnx'), 'weights');
    const file = path.join(src, 'long.tar.gz');
    await tar.c({ gzip: true, file, cwd: src, portable: true }, ['mymodel']);
    const { dest } = await extractTo(await readFile(file));
    assert.equal(await readFile(path.join(dest, longDir, 'model.onnx'), 'utf8'), 'weights');
  });

  it('handles GNU long names (type L)', async () => {
    const longName = `mymodel/${'g'.repeat(150)}.onnx`;
    const archive = gzipSync(
      Buffer.concat([
        tarBytes([{ name: '././@LongLink', type: 'L', body: `${longName}\0` }], { end: false }),
        tarBytes([{ name: longName.slice(0, 100), body: 'gnu' }]),
      ]),
    );
    const { dest } = await extractTo(archive);
    assert.equal(await readFile(path.join(dest, longName), 'utf8'), 'gnu');
  });

  it('skips macOS junk and the archive root entry', async () => {
    const archive = tgz([
      { name: './', type: '5' },
      { name: './mymodel/', type: '5' },
      { name: './mymodel/config.pbtxt', body: 'name: "m"' },
      { name: './mymodel/._config.pbtxt', body: 'apple double' },
      { name: './.DS_Store', body: 'finder' },
      { name: '__MACOSX/mymodel/._x', body: 'junk' },
    ]);
    const { dest, result } = await extractTo(archive);
    assert.deepEqual(await listTree(dest), ['mymodel', 'mymodel/config.pbtxt']);
    assert.equal(result.files, 1);
  });

  it('lists every directory, file and link it created: measured from the list, the tree reads what du reads', async () => {
    const archive = tgz([
      { name: 'pkg/config.pbtxt', body: 'name: "pkg"' },
      { name: 'pkg/1/model.onnx', body: Buffer.alloc(10_000, 1) },
      { name: 'pkg/2/', type: '5' },
      { name: 'pkg/deep/a/b/c/weights.bin', body: Buffer.alloc(70_000, 2) },
      { name: 'pkg/latest', type: '2', linkname: '1' },
      { name: '._junk', body: 'skipped' },
    ]);
    const { dest, result } = await extractTo(archive);
    const listed = [...result.paths].map((p) => path.relative(dest, p)).sort();
    const walked = (await listTree(dest)).sort();
    assert.deepEqual(listed, walked, 'the list is the tree');
    assert.equal(await measureListedDiskBytes([dest, ...result.paths]), await measureDiskBytes(dest));
  });

  it('allows a symlink that stays inside the archive', async () => {
    const archive = tgz([
      { name: 'mymodel/1/model.onnx', body: 'v1' },
      { name: 'mymodel/latest', type: '2', linkname: '1' },
    ]);
    const { dest } = await extractTo(archive);
    assert.equal(await readlink(path.join(dest, 'mymodel', 'latest')), '1');
    assert.equal(await readFile(path.join(dest, 'mymodel', 'latest', 'model.onnx'), 'utf8'), 'v1');
  });
});

describe('extractArchive: hostile entries are rejected, leaving nothing behind', () => {
  const cases: ReadonlyArray<{ name: string; entries: RawEntry[]; pattern: RegExp }> = [
    { name: 'parent traversal', entries: [{ name: '../evil', body: 'x' }], pattern: /'\.\.\/evil'.*"\.\." segment/ },
    {
      name: 'deep parent traversal',
      entries: [{ name: '../../../../../evil', body: 'x' }],
      pattern: /"\.\." segment/,
    },
    { name: 'traversal after a dir', entries: [{ name: 'a/../../evil', body: 'x' }], pattern: /'a\/\.\.\/\.\.\/evil'/ },
    { name: 'absolute path', entries: [{ name: '/tmp/onnx-mme-evil', body: 'x' }], pattern: /'\/tmp\/onnx-mme-evil'.*absolute/ },
    { name: 'drive letter', entries: [{ name: 'C:/evil', body: 'x' }], pattern: /'C:\/evil'.*absolute/ },
    { name: 'backslash path', entries: [{ name: '..\\evil', body: 'x' }], pattern: /backslash/ },
    { name: 'control character', entries: [{ name: 'evil\u001b[2J', body: 'x' }], pattern: /control character/ },
    {
      name: 'absolute symlink',
      entries: [{ name: 'passwd', type: '2', linkname: '/etc/passwd' }],
      pattern: /'passwd'.*absolute path '\/etc\/passwd'/,
    },
    {
      name: 'relative symlink escaping',
      entries: [{ name: 'mymodel/up', type: '2', linkname: '../../../../etc' }],
      pattern: /'mymodel\/up'.*outside the archive/,
    },
    {
      name: 'symlink chain escaping via realpath',
      entries: [
        { name: 's', type: '2', linkname: '.' },
        { name: 'l', type: '2', linkname: 's/..' },
      ],
      pattern: /'l'.*resolves outside/,
    },
    {
      name: 'file written through a symlink',
      entries: [
        { name: 'sub/', type: '5' },
        { name: 'lnk', type: '2', linkname: 'sub' },
        { name: 'lnk/model.onnx', body: 'x' },
      ],
      pattern: /'lnk\/model\.onnx'.*beneath symbolic link 'lnk'/,
    },
    { name: 'dangling symlink', entries: [{ name: 'gone', type: '2', linkname: 'nothing-here' }], pattern: /'gone'.*dangling/ },
    {
      name: 'hard link',
      entries: [
        { name: 'model.onnx', body: 'x' },
        { name: 'hl', type: '1', linkname: 'model.onnx' },
      ],
      pattern: /'hl'.*hard links/,
    },
    { name: 'hard link to outside', entries: [{ name: 'shadow', type: '1', linkname: '/etc/shadow' }], pattern: /'shadow'.*hard links/ },
    { name: 'character device', entries: [{ name: 'null', type: '3' }], pattern: /'null'.*device/ },
    { name: 'block device', entries: [{ name: 'sda', type: '4' }], pattern: /'sda'.*device/ },
    { name: 'FIFO', entries: [{ name: 'pipe', type: '6' }], pattern: /'pipe'.*FIFO/ },
    { name: 'GNU dump dir', entries: [{ name: 'dump', type: 'D' }], pattern: /'dump'.*unsupported entry type/ },
    { name: 'unknown type', entries: [{ name: 'weird', type: 'Z', body: 'x' }], pattern: /'weird'.*unsupported entry type/ },
    {
      name: 'duplicate file',
      entries: [
        { name: 'model.onnx', body: 'a' },
        { name: 'model.onnx', body: 'b' },
      ],
      pattern: /'model\.onnx'.*conflicts/,
    },
    {
      name: 'directory over a file',
      entries: [
        { name: 'thing', body: 'a' },
        { name: 'thing/', type: '5' },
      ],
      pattern: /'thing\/'.*conflicts/,
    },
  ];
  for (const { name, entries, pattern } of cases) {
    it(`rejects ${name}`, () => expectRejected(tgz(entries), 'ARCHIVE_REJECTED', pattern));
  }

  it('rejects hostile entries placed after good ones (partial output removed)', () =>
    expectRejected(
      tgz([
        { name: 'mymodel/config.pbtxt', body: 'name: "m"' },
        { name: 'mymodel/1/model.onnx', body: randomBytes(100_000) },
        { name: '../../../evil', body: 'x' },
      ]),
      'ARCHIVE_REJECTED',
      /'\.\.\/\.\.\/\.\.\/evil'/,
    ));
});

describe('extractArchive: corrupt archives', () => {
  it('rejects a truncated .tar.gz', async () => {
    const { archive } = await tritonArchive();
    await expectRejected(archive.subarray(0, Math.floor(archive.length / 2)), 'ARCHIVE_REJECTED', /^model archive is corrupt: /);
  });

  it('rejects a tar truncated inside a complete gzip stream', async () => {
    const tarData = tarBytes([{ name: 'model.onnx', body: randomBytes(5000) }]);
    await expectRejected(gzipSync(tarData.subarray(0, 2000)), 'ARCHIVE_REJECTED', /^model archive is corrupt: .*[Tt]runcated/);
  });

  it('rejects garbage bytes', () => expectRejected(randomBytes(4096), 'ARCHIVE_REJECTED', /^model archive is corrupt: /));

  it('rejects gzip-compressed garbage', () => expectRejected(gzipSync(randomBytes(4096)), 'ARCHIVE_REJECTED', /^model archive is corrupt: /));

  it('reports a failing input stream as UPSTREAM_UNAVAILABLE', async () => {
    const { archive } = await tritonArchive();
    let reads = 0;
    const failing = new Readable({
      read() {
        if (reads++ === 0) this.push(archive.subarray(0, 4096));
        else this.destroy(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
      },
    });
    const root = await sandbox();
    await assert.rejects(extractArchive(failing, root, LIMITS), isServingError('UPSTREAM_UNAVAILABLE', /socket hang up/));
  });

  it('rejects an empty file', () => expectRejected(Buffer.alloc(0), 'ARCHIVE_REJECTED', /^model archive is corrupt: /));
});

describe('extractArchive: limits', () => {
  const small: ExtractLimits = { maxBytes: 1024 * 1024, maxEntries: 10 };

  it('stops a gzip bomb (one huge zero file) before writing it', async () => {
    const started = Date.now();
    const bomb = tgz([{ name: 'mymodel/1/model.onnx', body: Buffer.alloc(64 * 1024 * 1024) }]);
    assert.ok(bomb.length < 200 * 1024, 'the bomb compresses well');
    await expectRejected(bomb, 'ARCHIVE_REJECTED', /'mymodel\/1\/model\.onnx'.*over the limit of 1048576 bytes/, small);
    assert.ok(Date.now() - started < 10_000);
  });

  it('stops when the total of many small files exceeds maxBytes', () =>
    expectRejected(
      tgz(Array.from({ length: 5 }, (_, i) => ({ name: `part-${i}.bin`, body: Buffer.alloc(300 * 1024) }))),
      'ARCHIVE_REJECTED',
      /expands to more than 1048576 bytes.*'part-3\.bin'/,
      small,
    ));

  it('stops padding after the end of the archive', () =>
    expectRejected(
      gzipSync(Buffer.concat([tarBytes([{ name: 'model.onnx', body: 'x' }]), Buffer.alloc(8 * 1024 * 1024)])),
      'ARCHIVE_REJECTED',
      /follow the end of the tar archive/,
      small,
    ));

  it('rejects too many entries', () =>
    expectRejected(tgz(Array.from({ length: 20 }, (_, i) => ({ name: `f${i}`, body: 'x' }))), 'ARCHIVE_REJECTED', /more than 10 entries.*'f10'/, small));

  it('accepts an archive exactly at the limits', async () => {
    const { result } = await extractTo(tgz(Array.from({ length: 10 }, (_, i) => ({ name: `f${i}`, body: Buffer.alloc(102_400) }))), {
      maxBytes: 1_024_000,
      maxEntries: 10,
    });
    assert.equal(result.files, 10);
    assert.equal(result.bytes, 1_024_000);
  });
});

describe('extractArchive: compression ratio', () => {
  const MIB = 1024 * 1024;
  const limits: ExtractLimits = { maxBytes: 1 << 30, maxEntries: 100, maxRatio: 200 };
  /** `bytes` of FP32-looking data where `share` of the 4-byte values are random and the rest are zeros. */
  function sparse(bytes: number, share: number): Buffer {
    const data = Buffer.alloc(bytes);
    const noise = randomBytes(bytes);
    for (let i = 0; i < bytes; i += 4) if (noise[i]! / 256 < share) noise.copy(data, i, i, i + 4);
    return data;
  }

  it('refuses a bomb of many files (each under every byte limit) once the tar stream passes the grace, leaving nothing', async () => {
    const bomb = tgz(Array.from({ length: 6 }, (_, i) => ({ name: `bomb/1/part${i}.bin`, body: Buffer.alloc(8 * MIB) })));
    await expectRejected(
      bomb,
      'ARCHIVE_REJECTED',
      /expands more than 200:1 \(\d+ compressed bytes gave \d+ bytes of tar data\).*MME_ARCHIVE_MAX_RATIO/,
      limits,
    );
  });

  it('stops within a chunk of the grace: the bytes written are the grace, not the archive', async () => {
    const bomb = tgz([{ name: 'bomb/1/model.onnx', body: Buffer.alloc(48 * MIB) }]);
    const root = await sandbox();
    const err = await extractArchive(Readable.from([bomb]), root, limits).catch((e: unknown) => e);
    assert.ok(err instanceof ServingError && err.code === 'ARCHIVE_REJECTED', String(err));
    const decompressed = Number(err.details?.['decompressedBytes']);
    assert.ok(decompressed > 16 * MIB && decompressed < 17 * MIB, `stopped after ${decompressed} bytes of tar data`);
  });

  it('lets real-looking weights, a 99%-sparse model and a small all-zero model through; 0 turns the check off', async () => {
    const weights = randomBytes(20 * MIB);
    assert.equal((await extractTo(tgz([{ name: 'm/1/model.onnx', body: weights }]), limits)).result.bytes, weights.length);
    const pruned = sparse(20 * MIB, 0.01);
    assert.equal((await extractTo(tgz([{ name: 'm/1/model.onnx', body: pruned }]), limits)).result.bytes, pruned.length);
    const zeros = Buffer.alloc(15 * MIB);
    assert.equal((await extractTo(tgz([{ name: 'm/1/model.onnx', body: zeros }]), limits)).result.bytes, zeros.length);
    const bigZeros = tgz([{ name: 'm/1/model.onnx', body: Buffer.alloc(24 * MIB) }]);
    await expectRejected(bigZeros, 'ARCHIVE_REJECTED', /expands more than 200:1/, limits);
    assert.equal((await extractTo(bigZeros, { ...limits, maxRatio: 0 })).result.bytes, 24 * MIB);
  });
});

describe('extractArchive: disk charged in blocks', () => {
  it('charges every tiny file a block and stops at storageBytes before the disk fills, leaving nothing', async () => {
    const files = Array.from({ length: 300 }, (_, i) => ({ name: `m/assets/f${i}`, body: 'tiny' }));
    // 300 files of 4 bytes are 1,200 bytes of data but 300 blocks on disk.
    await expectRejected(tgz(files), 'INSUFFICIENT_STORAGE', /more than the 409600 bytes of disk \(in blocks\)/, {
      maxBytes: 1 << 30,
      maxEntries: 1000,
      storageBytes: 100 * 4096,
    });
    const { dest, result } = await extractTo(tgz(files.slice(0, 50)), { maxBytes: 1 << 30, maxEntries: 1000, storageBytes: 100 * 4096 });
    assert.equal(result.diskBytes, 50 * 4096 + 2 * 4096, 'a block per file and per directory');
    const measured = (await measureDiskBytes(dest)) - (await lstat(dest)).blocks * 512;
    assert.ok(result.diskBytes >= measured, `charged ${result.diskBytes}, du ${measured}`);
  });
});

describe('extractArchive: cancellation', () => {
  it('rejects at once with an already aborted signal', async () => {
    const root = await sandbox();
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(extractArchive(Readable.from([Buffer.alloc(10)]), root, LIMITS, controller.signal), isServingError('CANCELLED', /cancelled/));
  });

  it('stops a running extraction and leaves no cache entry', async () => {
    const root = await sandbox();
    const cacheDir = path.join(root, 'cache');
    const data = tgz([{ name: 'model.onnx', body: randomBytes(2 * 1024 * 1024) }]);
    const controller = new AbortController();
    // A slow source: the first chunk arrives, then the stream stalls until aborted.
    const slow = new Readable({ read() {} });
    slow.push(data.subarray(0, 64 * 1024));
    setTimeout(() => controller.abort(), 50);
    await assert.rejects(
      publishDirectory({
        cacheDir,
        target: 'slow.tar.gz',
        version: '1',
        signal: controller.signal,
        fill: (dir, signal) => extractArchive(slow, dir, LIMITS, signal),
      }),
      isServingError('CANCELLED', /cancelled/),
    );
    assert.deepEqual(await readdir(cacheDir), []);
  });
});
