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
import { startLoopbackS3, useS3rverCredentials, type LoopbackS3 } from '../support/s3rver.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { addSubBody, request, startTestServer, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();
let s3: LoopbackS3;
let server: TestServer;
const seq16 = Array.from({ length: 16 }, (_, i) => i);
const body = addSubBody();

before(async () => {
  s3 = await startLoopbackS3(['models']);
  ctx.after(() => s3.close());
  const root = await tempDir(ctx);
  await writeModelDir(path.join(root, 'work'), 'add_sub', addSub());
  await packTarGz(path.join(root, 'work'), path.join(root, 'add_sub.tar.gz'));
  await s3.upload('prefix/team/add_sub.tar.gz', await readFile(path.join(root, 'add_sub.tar.gz')));
  // The container uses the standard credential chain, as on SageMaker.
  ctx.after(useS3rverCredentials());
  server = await startTestServer({
    modelSource: 's3://models/prefix/',
    cacheDir: path.join(root, 'cache'),
    env: { AWS_ENDPOINT_URL_S3: s3.endpoint },
  });
  ctx.after(() => server.close());
});

after(() => ctx.run());

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
