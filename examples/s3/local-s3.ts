/**
 * @module examples/s3/local-s3
 * A local S3-compatible store for trying the S3 flow without AWS and without
 * the aws CLI (docs/memory-and-caching.md, "Models from S3"):
 *
 *   node dist/examples/s3/local-s3.js serve [dir]        s3rver on 127.0.0.1:4569, bucket `models`,
 *                                                       the demo tarballs uploaded under `prefix/`
 *   node dist/examples/s3/local-s3.js put FILE KEY      add or replace an object (e.g. prefix/x.tar.gz)
 *   node dist/examples/s3/local-s3.js rm KEY            delete an object (retire a model)
 *   node dist/examples/s3/local-s3.js ls [PREFIX]       list objects with size and ETag
 *
 * S3_PORT overrides the port. `put`/`rm`/`ls` talk to any S3 endpoint through
 * the standard AWS settings (AWS_ENDPOINT_URL_S3, credentials), defaulting to
 * the local one. s3rver is a dev dependency: this is for trying, not serving.
 */
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DeleteObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { allowS3rverContinuationTokens, S3rver, S3RVER_CREDENTIALS } from '../../test/support/s3rver.js';

const BUCKET = 'models';
const PORT = Number(process.env['S3_PORT'] ?? 4569);
const ENDPOINT = process.env['AWS_ENDPOINT_URL_S3'] ?? `http://127.0.0.1:${PORT}`;
const here = path.dirname(fileURLToPath(import.meta.url));
/**
 * The demo repository built by `npm run demo`: examples/demo/repository in the
 * working directory (the repository root, where the docs run this), else the
 * one beside this script's checkout (dist/examples/s3 → examples/demo/repository).
 */
const DEMO_DIR =
  [path.resolve('examples', 'demo', 'repository'), path.resolve(here, '..', '..', '..', 'examples', 'demo', 'repository')].find((d) => existsSync(d)) ??
  path.resolve(here, '..', '..', '..', 'examples', 'demo', 'repository');

function client(): S3Client {
  const hasCredentials = process.env['AWS_ACCESS_KEY_ID'] !== undefined;
  return new S3Client({
    endpoint: ENDPOINT,
    region: process.env['AWS_REGION'] ?? 'us-east-1',
    forcePathStyle: true,
    ...(hasCredentials ? {} : { credentials: S3RVER_CREDENTIALS }),
  });
}

/** `s3://bucket/key` or a bare key in the `models` bucket. */
function location(arg: string): { bucket: string; key: string } {
  const m = /^s3:\/\/([^/]+)\/(.+)$/.exec(arg);
  return m ? { bucket: m[1]!, key: m[2]! } : { bucket: BUCKET, key: arg.replace(/^\/+/, '') };
}

async function serve(dir: string | undefined): Promise<void> {
  allowS3rverContinuationTokens();
  const data = dir ?? path.join(process.env['TMPDIR'] ?? '/tmp', 'onnx-mme-local-s3');
  const server = new S3rver({ port: PORT, address: '127.0.0.1', directory: data, silent: true, configureBuckets: [{ name: BUCKET }] });
  await server.run();
  const s3 = client();
  let uploaded = 0;
  try {
    for (const name of (await readdir(DEMO_DIR)).filter((n) => n.endsWith('.tar.gz'))) {
      await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: `prefix/${name}`, Body: await readFile(path.join(DEMO_DIR, name)) }));
      process.stdout.write(`uploaded s3://${BUCKET}/prefix/${name}\n`);
      uploaded++;
    }
  } catch {
    // No demo repository yet: `npm run demo` builds it.
  }
  if (uploaded === 0) process.stdout.write('no demo tarballs found: run `npm run demo` first, or `put` your own\n');
  process.stdout.write(
    [
      '',
      `S3-compatible store on ${ENDPOINT} (data in ${data}). Serve from it with:`,
      `  MME_MODEL_SOURCE=s3://${BUCKET}/prefix/ AWS_ENDPOINT_URL_S3=${ENDPOINT} \\`,
      `    AWS_ACCESS_KEY_ID=${S3RVER_CREDENTIALS.accessKeyId} AWS_SECRET_ACCESS_KEY=${S3RVER_CREDENTIALS.secretAccessKey} ./serve`,
      'Ctrl-C stops it.',
      '',
    ].join('\n'),
  );
  process.once('SIGINT', () => void server.close().then(() => process.exit(0)));
}

async function main(): Promise<void> {
  const [command, ...args] = process.argv.slice(2);
  switch (command) {
    case 'serve':
      return serve(args[0]);
    case 'put': {
      const [file, target] = args;
      if (!file || !target) throw new Error('usage: put FILE KEY');
      const { bucket, key } = location(target);
      const answer = await client().send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: await readFile(file) }));
      process.stdout.write(`put s3://${bucket}/${key} ETag ${answer.ETag ?? '?'}\n`);
      return;
    }
    case 'rm': {
      if (!args[0]) throw new Error('usage: rm KEY');
      const { bucket, key } = location(args[0]);
      await client().send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
      process.stdout.write(`deleted s3://${bucket}/${key}\n`);
      return;
    }
    case 'ls': {
      const { bucket, key } = location(args[0] ?? '');
      const page = await client().send(new ListObjectsV2Command({ Bucket: bucket, Prefix: key }));
      for (const o of page.Contents ?? []) process.stdout.write(`${o.Size ?? 0}\t${o.ETag ?? ''}\ts3://${bucket}/${o.Key ?? ''}\n`);
      return;
    }
    default:
      process.stdout.write('usage: local-s3.js serve [dir] | put FILE KEY | rm KEY | ls [PREFIX]\n');
      process.exitCode = command === undefined ? 0 : 2;
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
