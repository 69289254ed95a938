/**
 * `onnx-mme push` against a real S3-compatible server on loopback (s3rver, the
 * real AWS SDK on both sides): a >10 MiB archive goes up as a multipart upload
 * (5 MiB parts → 3 parts) with progress on stderr and the ETag on stdout, the
 * object is byte-identical, and the server then serves it from the S3 prefix
 * (invoked with `onnx-mme invoke`). Invalid archives are not uploaded.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { GetObjectCommand, HeadObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { addSub, configText, packTarGz, SIZED_MODEL_OFFSET, sizedModel, writeModelDir } from '../../examples/models/zoo.js';
import { fields, runCli } from '../support/cli.js';
import { S3RVER_CREDENTIALS, startLoopbackS3, useS3rverCredentials, type LoopbackS3 } from '../support/s3rver.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { startTestServer } from '../support/test-server.js';

const ctx = new Cleanups();
let s3: LoopbackS3;
let client: S3Client;
let work = '';
let big = '';
let env: Record<string, string> = {};

const MIB = 1024 * 1024;

async function head(key: string): Promise<{ etag: string | undefined; size: number | undefined } | undefined> {
  try {
    const h = await client.send(new HeadObjectCommand({ Bucket: 'models', Key: key }));
    return { etag: h.ETag, size: h.ContentLength };
  } catch (err) {
    if ((err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) return undefined;
    throw err;
  }
}

describe('onnx-mme push', () => {
  before(async () => {
    s3 = await startLoopbackS3(['models']);
    client = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: S3RVER_CREDENTIALS });
    work = await tempDir(ctx, 'onnx-mme-cli-push-');
    // Incompressible weights: the archive stays over 10 MiB, so 5 MiB parts make a real multipart upload.
    await writeModelDir(work, 'big', sizedModel(14 * MIB));
    big = path.join(work, 'big.tar.gz');
    const packed = await runCli(['pack', path.join(work, 'big'), '-o', big]);
    assert.equal(packed.code, 0, packed.stderr);
    assert.ok((await stat(big)).size > 10 * MIB, 'the archive must span several 5 MiB parts');
    env = {
      AWS_ENDPOINT_URL_S3: s3.endpoint,
      AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
      AWS_REGION: '',
      AWS_DEFAULT_REGION: '',
    };
  });

  after(async () => {
    client?.destroy();
    await s3?.close();
    await ctx.run();
  });

  it('uploads a >10 MiB archive in 5 MiB parts with progress, prints the ETag; the server then serves it from S3', async () => {
    const size = (await stat(big)).size;
    // --progress-interval 0: a plain line for every progress event (stderr is not a terminal here), whatever the upload's speed.
    const r = await runCli(['push', big, 's3://models/prefix/', '--part-size', '5', '--progress-interval', '0'], {
      env: { ...env, MME_MODEL_SOURCE: 's3://models/prefix/' },
    });
    assert.equal(r.code, 0, r.stderr);
    const out = fields(r.stdout);
    assert.equal(out['uri'], 's3://models/prefix/big.tar.gz');
    assert.equal(out['bytes'], String(size));
    assert.equal(out['parts'], String(Math.ceil(size / (5 * MIB))));
    assert.equal(out['target'], 'big.tar.gz', 'the header value for a server reading MME_MODEL_SOURCE');
    assert.match(r.stderr, /validated: big\.tar\.gz/);
    assert.match(r.stderr, /uploading big\.tar\.gz \[#+\.*\] +\d+% .*\(part \d\)/, 'progress on stderr');
    const progress = r.stderr.split('\n').filter((l) => l.startsWith('uploading big.tar.gz'));
    assert.ok(progress.length >= 3, `a line per part at least: ${progress.length}`);
    assert.match(progress.at(-1)!, / 100% /);
    assert.ok(!r.stderr.includes('\r'), 'no terminal redraws in a log');
    assert.match(r.stderr, /in 3 parts/);

    const object = await head('prefix/big.tar.gz');
    assert.ok(object);
    assert.equal(out['etag'], object.etag, 'the printed ETag is the object’s');
    assert.equal(object.size, size);
    const got = await client.send(new GetObjectCommand({ Bucket: 'models', Key: 'prefix/big.tar.gz' }));
    const uploaded = Buffer.from(await got.Body!.transformToByteArray());
    const digest = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
    assert.equal(digest(uploaded), digest(await readFile(big)));

    // The server (same settings: AWS_ENDPOINT_URL_S3, default credential chain) serves the pushed archive.
    ctx.after(useS3rverCredentials());
    const server = await startTestServer({ modelSource: 's3://models/prefix/', cacheDir: path.join(work, 'cache'), env: { AWS_ENDPOINT_URL_S3: s3.endpoint } });
    ctx.after(() => server.close());
    const requestFile = path.join(work, 'request.json');
    const x = [10, 20, 30, 40];
    await writeFile(requestFile, JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: x }] }));
    const invoked = await runCli(['invoke', '--url', server.url, '--target', out['target']!, '--json', requestFile]);
    assert.equal(invoked.code, 0, invoked.stderr);
    const answer = JSON.parse(invoked.stdout) as { outputs: { data: number[] }[] };
    assert.deepEqual(
      answer.outputs[0]!.data,
      x.map((v, i) => v + SIZED_MODEL_OFFSET[i]!),
    );
  });

  it('an explicit object name under a nested prefix; a small archive goes up in one request', async () => {
    await writeModelDir(work, 'small', addSub());
    const small = path.join(work, 'small.tar.gz');
    assert.equal((await runCli(['pack', path.join(work, 'small'), '-o', small])).code, 0);
    const r = await runCli(['push', small, 's3://models/prefix/team/renamed.tar.gz'], { env });
    assert.equal(r.code, 0, r.stderr);
    const out = fields(r.stdout);
    assert.equal(out['uri'], 's3://models/prefix/team/renamed.tar.gz');
    assert.equal(out['parts'], '1');
    assert.equal(out['target'], undefined, 'no MME_MODEL_SOURCE, no target line');
    assert.equal((await head('prefix/team/renamed.tar.gz'))?.etag, out['etag']);
  });

  it('an invalid archive is not uploaded (exit 1) unless --no-validate says so', async () => {
    await writeModelDir(work, 'wrong', {
      onnx: addSub().onnx,
      config: configText({
        maxBatchSize: 8,
        inputs: [{ name: 'NOPE', dataType: 'FP32', dims: [16] }],
        outputs: [{ name: 'OUTPUT0', dataType: 'FP32', dims: [16] }],
      }),
    });
    const wrong = path.join(work, 'wrong.tar.gz');
    await packTarGz(path.join(work, 'wrong'), wrong); // pack would refuse it
    const refused = await runCli(['push', wrong, 's3://models/prefix/'], { env });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /input 'NOPE' is in config\.pbtxt but not in the ONNX model/);
    assert.match(refused.stderr, /push: nothing uploaded to s3:\/\/models\/prefix\/wrong\.tar\.gz/);
    assert.equal(await head('prefix/wrong.tar.gz'), undefined);

    const forced = await runCli(['push', wrong, 's3://models/prefix/', '--no-validate'], { env });
    assert.equal(forced.code, 0, forced.stderr);
    assert.ok(await head('prefix/wrong.tar.gz'));
  });

  it('validate s3://bucket/prefix/: every archive under it fetched as the server fetches it, one table; exit 1 for the broken one', async () => {
    // What the tests above left under the prefix: big.tar.gz, team/renamed.tar.gz, and wrong.tar.gz (pushed with --no-validate).
    const r = await runCli(['validate', 's3://models/prefix/'], { env });
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /^MODEL +RESULT +INPUTS +OUTPUTS +MEMORY$/m);
    assert.match(r.stdout, /^big\.tar\.gz +ok +INPUT0 FP32\[-1,4\] +OUTPUT0 FP32\[-1,4\] +\d+\.\d+ MiB$/m);
    assert.match(r.stdout, /^team\/renamed\.tar\.gz +ok /m);
    assert.match(r.stdout, /^wrong\.tar\.gz +error \(\d problems?\)/m);
    assert.match(r.stdout, /input 'NOPE' is in config\.pbtxt but not in the ONNX model/);
    assert.match(r.stdout, /^INVALID: 1 of 3 models would be refused when loaded$/m);

    const team = await runCli(['validate', 's3://models/prefix/team/'], { env });
    assert.equal(team.code, 0, team.stdout + team.stderr);
    assert.match(team.stdout, /^OK: the server will load its one model$/m);
  });

  it('S3 errors and bad destinations: exit 1 with the reason, exit 2 for the command line', async () => {
    const noBucket = await runCli(['push', big, 's3://no-such-bucket/prefix/', '--no-validate'], { env });
    assert.equal(noBucket.code, 1);
    assert.match(noBucket.stderr, /push: upload to s3:\/\/no-such-bucket\/prefix\/big\.tar\.gz failed: NoSuchBucket/);

    const notArchive = await runCli(['push', big, 's3://models/prefix/model.bin'], { env });
    assert.equal(notArchive.code, 2);
    assert.match(notArchive.stderr, /must end in \.tar\.gz or \.tgz/);
    const notS3 = await runCli(['push', big, 'https://example.com/x.tar.gz'], { env });
    assert.equal(notS3.code, 2);
    assert.match(notS3.stderr, /not an s3:\/\/ URI/);
    const badPart = await runCli(['push', big, 's3://models/prefix/', '--part-size', '1'], { env });
    assert.equal(badPart.code, 2);
    assert.match(badPart.stderr, /--part-size must be a number >= 5/);
  });
});
