/**
 * @module cli/push
 * `onnx-mme push <model.tar.gz> s3://bucket/prefix/[name]`: validate the
 * archive (unless --no-validate), then upload it with a multipart upload
 * (@aws-sdk/lib-storage: parts in parallel, each retried by the SDK, the
 * upload aborted on failure so no parts are left behind), with a progress bar
 * on stderr, and print the object's URI and ETag. The S3 client is configured
 * from the server's own settings (AWS_REGION, AWS_ENDPOINT_URL_S3 with
 * path-style addressing), so what the server can read, push can write.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import type { S3Client } from '@aws-sdk/client-s3';
import { createS3Client } from '../store/s3-client.js';
import { isArchiveName } from '../store/target-path.js';
import { Upload } from '@aws-sdk/lib-storage';
import { isS3Uri, parseS3Uri, s3ObjectUri } from '../config/s3-uri.js';
import type { ServerConfig } from '../config/server-config.js';
import {
  EXIT_FAILED,
  EXIT_OK,
  formatBytes,
  numberOption,
  parseCommandLine,
  readSettings,
  UsageError,
  write,
  type CliCommand,
  type CliIo,
} from './cli-support.js';
import { DEFAULT_PROGRESS_INTERVAL_MS, ProgressBar } from './progress.js';
import { formatReport, validatePackage } from './validate.js';

const MIB = 1024 * 1024;
/** S3's smallest part (all but the last) and most parts per upload. */
const MIN_PART_MIB = 5;
const MAX_PARTS = 10_000;

/** The client the server builds for these settings (store/s3-client: one rule for both). */
export function s3ClientFor(settings: Pick<ServerConfig, 'awsRegion' | 's3Endpoint'>): S3Client {
  return createS3Client({ region: settings.awsRegion, endpoint: settings.s3Endpoint });
}

export interface PushDestination {
  readonly bucket: string;
  readonly key: string;
}

/** `s3://bucket/prefix/` → prefix + the file's name; `s3://bucket/prefix/name.tar.gz` → that key. */
export function pushDestination(uri: string, file: string): PushDestination {
  if (!isS3Uri(uri)) throw new UsageError(`'${uri}' is not an s3:// URI (expected s3://bucket/prefix/ or s3://bucket/prefix/name.tar.gz)`);
  const rest = uri.trim().slice('s3://'.length);
  const slash = rest.lastIndexOf('/');
  const toPrefix = slash === -1 || rest.endsWith('/');
  const location = (() => {
    try {
      return parseS3Uri(toPrefix ? uri : `s3://${rest.slice(0, slash + 1)}`);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  })();
  const name = toPrefix ? path.basename(file) : rest.slice(slash + 1);
  if (!isArchiveName(name)) {
    throw new UsageError(
      `object name '${name}' must end in .tar.gz or .tgz: the server resolves a target to <prefix><target>, <prefix><target>.tar.gz or .tgz`,
    );
  }
  return { bucket: location.bucket, key: location.prefix + name };
}

/** The target header that reaches this object, when MME_MODEL_SOURCE names the prefix it sits under. */
function targetFor(dest: PushDestination, env: NodeJS.ProcessEnv): string | undefined {
  const source = env['MME_MODEL_SOURCE']?.trim();
  if (!source || !isS3Uri(source)) return undefined;
  try {
    const loc = parseS3Uri(source);
    return loc.bucket === dest.bucket && dest.key.startsWith(loc.prefix) ? dest.key.slice(loc.prefix.length) : undefined;
  } catch {
    return undefined;
  }
}

export const pushCommand: CliCommand = {
  name: 'push',
  help: `Usage: onnx-mme push <model.tar.gz> s3://bucket/prefix/[name.tar.gz] [options]

Validates the archive as 'onnx-mme validate' does (every problem is listed and
nothing is uploaded when there is one), then uploads it with a multipart
upload: parts go up in parallel and a failed upload is aborted, leaving no
parts behind. Progress goes to stderr (a bar on a terminal; otherwise a line
every --progress-interval seconds and one at the end); the object's URI and
ETag go to stdout. With a destination ending in '/', the object is named after the file.

Options:
  --part-size <MiB>    part size in MiB (default 8, at least 5; raised when the file would need more than 10000 parts)
  --concurrency <n>    parts uploaded at once (default 4)
  --no-validate        upload without validating first
  --progress-interval <s>  seconds between progress lines when stderr is not a terminal (default 5)
  -h, --help           this help

Environment (as the server):
  AWS_REGION (or AWS_DEFAULT_REGION)          region of the bucket (us-east-1 when an endpoint is set and no region)
  AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL)   S3-compatible endpoint (MinIO, LocalStack, s3rver); path-style addressing
  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ...   the AWS SDK's standard credential chain
  MME_MODEL_SOURCE                            when it is the s3:// prefix the server reads, the target header is printed too
  MME_ARCHIVE_MAX_BYTES, MME_ARCHIVE_MAX_ENTRIES, MME_ARCHIVE_MAX_RATIO   extraction limits used by validation

Exit status: 0 uploaded, 1 validation or upload failed, 2 bad command line.`,
  async run(argv: readonly string[], io: CliIo): Promise<number> {
    const parsed = parseCommandLine(
      argv,
      { 'part-size': { type: 'string' }, concurrency: { type: 'string' }, 'no-validate': { type: 'boolean' }, 'progress-interval': { type: 'string' } },
      { min: 2, max: 2, names: 'the archive and the s3:// destination' },
    );
    if (parsed.help) {
      write(io.stdout, this.help);
      return EXIT_OK;
    }
    const [file, uri] = parsed.positionals as [string, string];
    const info = await stat(file).catch(() => undefined);
    if (!info?.isFile()) throw new UsageError(`${file}: not a file (push uploads a .tar.gz; make one with 'onnx-mme pack')`);
    const dest = pushDestination(uri, file);
    const settings = readSettings(io.env, ['awsRegion', 's3Endpoint']);
    const concurrency = Math.floor(numberOption(parsed, 'concurrency', 4, 1));
    const partSize = Math.max(numberOption(parsed, 'part-size', 8, MIN_PART_MIB) * MIB, Math.ceil(info.size / MAX_PARTS));

    if (parsed.values['no-validate'] !== true) {
      const report = await validatePackage(file, io.env);
      if (!report.ok) {
        write(io.stderr, formatReport(report));
        write(io.stderr, `push: nothing uploaded to ${s3ObjectUri(dest.bucket, dest.key)}`);
        return EXIT_FAILED;
      }
      write(
        io.stderr,
        `validated: ${report.label} (entry model '${report.entry ?? '?'}', ${report.models.length} model${report.models.length === 1 ? '' : 's'})`,
      );
    }

    const client = s3ClientFor(settings);
    const objectUri = s3ObjectUri(dest.bucket, dest.key);
    const bar = new ProgressBar(io.stderr, info.size, `uploading ${path.basename(file)}`, {
      intervalMs: numberOption(parsed, 'progress-interval', DEFAULT_PROGRESS_INTERVAL_MS / 1000, 0) * 1000,
    });
    const parts = new Set<number>();
    const upload = new Upload({
      client,
      params: { Bucket: dest.bucket, Key: dest.key, Body: createReadStream(file), ContentLength: info.size, ContentType: 'application/gzip' },
      partSize: Math.round(partSize),
      queueSize: concurrency,
      leavePartsOnError: false,
    });
    let loaded = 0;
    upload.on('httpUploadProgress', (p) => {
      if (p.part !== undefined) parts.add(p.part);
      loaded = Math.max(loaded, p.loaded ?? 0);
      bar.update(loaded, p.part === undefined ? undefined : `part ${p.part}`);
    });
    try {
      const result = await upload.done();
      bar.finish(info.size);
      write(io.stdout, `uri: ${objectUri}`);
      write(io.stdout, `etag: ${result.ETag ?? '(none returned)'}`);
      write(io.stdout, `bytes: ${info.size}`);
      write(io.stdout, `parts: ${Math.max(1, parts.size)}`);
      const target = targetFor(dest, io.env);
      if (target !== undefined) write(io.stdout, `target: ${target}`);
      write(io.stderr, `uploaded ${formatBytes(info.size)} to ${objectUri} in ${Math.max(1, parts.size)} part${parts.size > 1 ? 's' : ''}`);
      return EXIT_OK;
    } catch (err) {
      bar.finish(loaded);
      const e = err as Error & { $metadata?: { httpStatusCode?: number }; Code?: string };
      const status = e.$metadata?.httpStatusCode;
      write(io.stderr, `push: upload to ${objectUri} failed: ${e.name}${status ? ` (HTTP ${status})` : ''}: ${e.message}`);
      return EXIT_FAILED;
    } finally {
      client.destroy();
    }
  },
};
