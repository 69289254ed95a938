/**
 * @module cli/pack
 * `onnx-mme pack <dir> -o model.tar.gz`: validate, then write a gzip tarball
 * the server loads under any object name. The archive root always holds model
 * directories: a repository's are packed as they are; a single model directory
 * is put inside a directory of its own name, so the model keeps its name
 * wherever the archive is uploaded (a config.pbtxt at the archive root would
 * take the archive's name, and a `name:` that differs is a load error).
 * Entries are sorted with a fixed mtime and no owners, so the same tree gives
 * the same bytes; symbolic links are stored as the files they point to; the
 * junk the extractor skips (`.DS_Store`, `._*`, `__MACOSX`) is left out. The
 * file appears only when complete (written beside it, then renamed).
 */
import { mkdir, readdir, realpath, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { createWriteStream } from 'node:fs';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import * as tar from 'tar';
import {
  EXIT_FAILED,
  EXIT_OK,
  formatBytes,
  numberOption,
  parseCommandLine,
  stringOption,
  UsageError,
  write,
  type CliCommand,
  type CliIo,
} from './cli-support.js';
import { formatReport, validatePackage } from './validate.js';
import { DEFAULT_PROGRESS_INTERVAL_MS, ProgressBar } from './progress.js';
import { isArchiveName } from '../store/target-path.js';

/** Fixed entry mtime: the same tree always packs to the same bytes. */
const PACK_MTIME = new Date('2024-01-01T00:00:00Z');

function isJunk(name: string): boolean {
  return name === '.DS_Store' || name === '__MACOSX' || name.startsWith('._');
}

/** Every path under `dir`, relative and POSIX, directories (with a trailing /) before their contents, sorted. */
async function listTree(dir: string, rel: string, seen: Set<string>): Promise<string[]> {
  const real = await realpath(path.join(dir, rel));
  if (seen.has(real)) throw new UsageError(`${path.join(dir, rel)}: a symbolic link loops back to a directory above it`);
  seen.add(real);
  const names = (await readdir(path.join(dir, rel))).filter((n) => !isJunk(n)).sort();
  const out: string[] = [];
  for (const name of names) {
    const child = rel === '' ? name : `${rel}/${name}`;
    const info = await stat(path.join(dir, child)).catch(() => undefined); // follows links
    if (!info) throw new UsageError(`${path.join(dir, child)}: a dangling symbolic link`);
    if (info.isDirectory()) out.push(`${child}/`, ...(await listTree(dir, child, new Set(seen))));
    else if (info.isFile()) out.push(child);
  }
  return out;
}

/** Bytes of the regular files among `entries` (paths under `root`), links followed: what packing reads. */
async function entryBytes(root: string, entries: readonly string[]): Promise<number> {
  let total = 0;
  for (const e of entries) if (!e.endsWith('/')) total += (await stat(path.join(root, e))).size;
  return total;
}

/**
 * Write `root`'s tree into `outFile` (gzip), under `prefix/` when given.
 * `onProgress` hears the tar bytes written so far against their total (file
 * contents plus tar's headers and padding, roughly), as the gzip stream reads them.
 */
export async function writeTarGz(
  root: string,
  outFile: string,
  prefix: string | undefined,
  onProgress?: (done: number, total: number) => void,
): Promise<number> {
  const entries = await listTree(root, '', new Set());
  const total = (await entryBytes(root, entries)) + 512 * (entries.length + 3);
  const temp = `${outFile}.tmp-${process.pid}`;
  await mkdir(path.dirname(outFile), { recursive: true });
  let done = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      done += chunk.length;
      onProgress?.(Math.min(done, total), total);
      cb(null, chunk);
    },
  });
  try {
    const pack = tar.create(
      {
        cwd: root,
        portable: true,
        follow: true,
        noDirRecurse: true,
        mtime: PACK_MTIME,
        ...(prefix === undefined ? {} : { prefix }),
      },
      prefix === undefined ? entries : ['./', ...entries],
    );
    await pipeline(pack, counter, createGzip({ level: 9 }), createWriteStream(temp));
    await rename(temp, outFile);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
  return (await stat(outFile)).size;
}

export const packCommand: CliCommand = {
  name: 'pack',
  help: `Usage: onnx-mme pack <dir> [-o model.tar.gz]

Validates <dir> exactly as 'onnx-mme validate' does, then writes a gzip
tarball in the layout the server expects: model directories at the archive
root. A single model directory (config.pbtxt and/or version directories at its
top) is stored inside a directory of its own name, so it keeps that name
whatever the object is called in S3; a repository (several model directories,
e.g. an ensemble and its steps) is stored as it is. Symbolic links are stored
as the files they point to. Nothing is written when validation fails.

Options:
  -o, --output <file>  where to write (default: <dir name>.tar.gz in the current directory)
  --progress-interval <s>  seconds between progress lines on stderr when it is not a terminal (default 5;
                       a terminal gets a bar)
  -h, --help           this help

Environment (as the server): MME_ARCHIVE_MAX_BYTES, MME_ARCHIVE_MAX_ENTRIES, MME_ARCHIVE_MAX_RATIO.

Exit status: 0 written, 1 validation failed, 2 bad command line.`,
  async run(argv: readonly string[], io: CliIo): Promise<number> {
    const parsed = parseCommandLine(
      argv,
      { output: { type: 'string', short: 'o' }, 'progress-interval': { type: 'string' } },
      { min: 1, max: 1, names: 'the model directory to pack' },
    );
    if (parsed.help) {
      write(io.stdout, this.help);
      return EXIT_OK;
    }
    const input = path.resolve(parsed.positionals[0]!);
    const info = await stat(input).catch(() => undefined);
    if (!info?.isDirectory())
      throw new UsageError(`${parsed.positionals[0]}: not a directory (pack takes a model directory; validate checks an existing .tar.gz)`);
    const output = path.resolve(stringOption(parsed, 'output') ?? `${path.basename(input)}.tar.gz`);
    if (!isArchiveName(path.basename(output))) throw new UsageError(`${output}: the output must end in .tar.gz or .tgz (the server looks for those names)`);
    if (output.startsWith(`${input}${path.sep}`)) throw new UsageError(`${output}: the output must not be inside the directory being packed`);

    const report = await validatePackage(input, io.env);
    if (!report.ok || report.root === undefined) {
      write(io.stderr, formatReport(report));
      write(io.stderr, `pack: nothing written to ${output}`);
      return EXIT_FAILED;
    }
    // A single model goes under its own name; a repository (possibly the one directory it wraps) as it is.
    const prefix = report.singleModel ? path.basename(report.root) : undefined;
    const intervalMs = numberOption(parsed, 'progress-interval', DEFAULT_PROGRESS_INTERVAL_MS / 1000, 0) * 1000;
    let bar: ProgressBar | undefined;
    let tarBytes = 0;
    const bytes = await writeTarGz(report.root, output, prefix, (done, total) => {
      bar ??= new ProgressBar(io.stderr, total, `packing ${path.basename(output)}`, { intervalMs });
      tarBytes = total;
      bar.update(done);
    });
    bar?.finish(tarBytes);
    write(io.stderr, formatReport(report));
    const layout = prefix === undefined ? `${report.models.length} model directories at the root` : `model directory '${prefix}/' at the root`;
    write(io.stdout, `${output}  ${formatBytes(bytes)}  (${layout}; entry model '${report.entry ?? '?'}')`);
    return EXIT_OK;
  },
};
