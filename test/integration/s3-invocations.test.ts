/**
 * The product's promise end to end: a tarball dropped into an S3 prefix is
 * invoked by name with the target header, no load call, the container
 * talking to a real S3-compatible server through the real AWS SDK.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, it } from 'node:test';
import { addSub, packTarGz, writeModelDir } from '../../examples/models/zoo.js';
import { startLoopbackS3, S3RVER_CREDENTIALS, type LoopbackS3 } from '../support/s3rver.js';
import { tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer, type TestServer } from '../support/test-server.js';

const ctx = {
  cleanups: [] as (() => Promise<void>)[],
  after(fn: () => Promise<void>) {
    this.cleanups.push(fn);
  },
};
let s3: LoopbackS3;
let server: TestServer;
const seq16 = Array.from({ length: 16 }, (_, i) => i);
const body = { inputs: [input('INPUT0', 'FP32', [1, 16], seq16), input('INPUT1', 'FP32', [1, 16], seq16)] };
const saved = { id: process.env['AWS_ACCESS_KEY_ID'], secret: process.env['AWS_SECRET_ACCESS_KEY'] };

before(async () => {
  s3 = await startLoopbackS3(['models']);
  const root = await tempDir(ctx);
  await writeModelDir(path.join(root, 'work'), 'add_sub', addSub());
  await packTarGz(path.join(root, 'work'), path.join(root, 'add_sub.tar.gz'));
  await s3.upload('prefix/team/add_sub.tar.gz', await readFile(path.join(root, 'add_sub.tar.gz')));
  // The container uses the standard credential chain, as on SageMaker.
  process.env['AWS_ACCESS_KEY_ID'] = S3RVER_CREDENTIALS.accessKeyId;
  process.env['AWS_SECRET_ACCESS_KEY'] = S3RVER_CREDENTIALS.secretAccessKey;
  server = await startTestServer({
    modelSource: 's3://models/prefix/',
    cacheDir: path.join(root, 'cache'),
    env: { AWS_ENDPOINT_URL_S3: s3.endpoint },
  });
});

after(async () => {
  await server?.close();
  await s3?.close();
  for (const fn of ctx.cleanups.reverse()) await fn();
  for (const [k, v] of [
    ['AWS_ACCESS_KEY_ID', saved.id],
    ['AWS_SECRET_ACCESS_KEY', saved.secret],
  ] as const) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

it('invokes a tarball from the S3 prefix by target, without a load call', async () => {
  const r = await request(`${server.url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': 'team/add_sub.tar.gz' }, json: body });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(
    r.body.outputs[0].data,
    seq16.map((x) => 2 * x),
  );
});

it('an unknown key is a 404 naming the target, not the bucket or prefix', async () => {
  const r = await request(`${server.url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': 'team/missing.tar.gz' }, json: body });
  assert.equal(r.status, 404, r.text);
  assert.equal(r.body.code, 'MODEL_NOT_FOUND');
  assert.match(r.body.error, /team\/missing\.tar\.gz/);
  assert.doesNotMatch(r.text, /s3:|models\/prefix|'models'/);
});

it('without a header and without MME_DEFAULT_MODEL, says how to name a model', async () => {
  const r = await request(`${server.url}/invocations`, { method: 'POST', json: body });
  assert.equal(r.status, 404);
  assert.match(r.body.error, /X-Amzn-SageMaker-Target-Model/);
});
