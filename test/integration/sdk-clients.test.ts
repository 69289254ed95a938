/**
 * The AWS SDK as users run it against the container: its error
 * deserializer reads our error bodies (name from `code`, text from
 * `message`; not "UnknownError"), and CustomAttributes
 * `target-model=team/x.tar.gz` picks the target on a single-model endpoint
 * (no TargetModel), validated like the header.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { InvokeEndpointCommand, SageMakerRuntimeClient } from '@aws-sdk/client-sagemaker-runtime';
import { packTarGz, scale, writeModelDir } from '../../examples/models/zoo.js';
import { tempDir } from '../support/temp-dir.js';
import { input, startTestServer, type TestServer } from '../support/test-server.js';

const ctx = {
  cleanups: [] as (() => Promise<void>)[],
  after(fn: () => Promise<void>) {
    this.cleanups.push(fn);
  },
};
let server: TestServer;
let client: SageMakerRuntimeClient;

const encode = (v: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(v));
const body = encode({ inputs: [input('INPUT0', 'FP32', [1, 4], [1, 2, 3, 4])] });

before(async () => {
  const root = await tempDir(ctx);
  const source = path.join(root, 'source');
  await writeModelDir(path.join(root, 'work', 'x'), 'model', scale(2));
  await packTarGz(path.join(root, 'work', 'x'), path.join(source, 'team', 'x.tar.gz'));
  await writeModelDir(path.join(root, 'work', 'y'), 'model', scale(5));
  await packTarGz(path.join(root, 'work', 'y'), path.join(source, 'team', 'y.tar.gz'));
  server = await startTestServer({ modelSource: source, cacheDir: path.join(root, 'cache') });
  client = new SageMakerRuntimeClient({
    endpoint: server.url,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    maxAttempts: 1,
  });
});

after(async () => {
  client.destroy();
  await server.close();
  for (const c of ctx.cleanups.reverse()) await c();
});

function outputOf(out: { Body?: Uint8Array }): number[] {
  return JSON.parse(new TextDecoder().decode(out.Body)).outputs[0].data;
}

describe('AWS SDK error bodies', () => {
  it('a refused request surfaces our code as the error name and our message, not UnknownError', async () => {
    const err = await client
      .send(
        new InvokeEndpointCommand({
          EndpointName: 'e',
          TargetModel: 'team/x.tar.gz',
          ContentType: 'application/json',
          Body: encode({ inputs: [input('NOPE', 'FP32', [1, 4], [1, 2, 3, 4])] }),
        }),
      )
      .then(
        () => assert.fail('expected a rejection'),
        (e: Error & { $metadata?: { httpStatusCode?: number } }) => e,
      );
    assert.equal(err.$metadata?.httpStatusCode, 400);
    assert.equal(err.name, 'INVALID_INPUT');
    assert.notEqual(err.message, 'UnknownError');
    assert.match(err.message, /team\/x\.tar\.gz/);
    assert.match(err.message, /NOPE/);
  });

  it('a missing target: 404 named MODEL_NOT_FOUND with the target in the message', async () => {
    const err = await client
      .send(new InvokeEndpointCommand({ EndpointName: 'e', TargetModel: 'team/none.tar.gz', ContentType: 'application/json', Body: body }))
      .then(
        () => assert.fail('expected a rejection'),
        (e: Error & { $metadata?: { httpStatusCode?: number } }) => e,
      );
    assert.equal(err.$metadata?.httpStatusCode, 404);
    assert.equal(err.name, 'MODEL_NOT_FOUND');
    assert.match(err.message, /team\/none\.tar\.gz/);
  });
});

describe('CustomAttributes target-model (single-model endpoints, GPU instances)', () => {
  it('selects the target when TargetModel is absent, and is echoed back', async () => {
    const out = await client.send(
      new InvokeEndpointCommand({ EndpointName: 'e', ContentType: 'application/json', CustomAttributes: 'trace=1; target-model=team/x.tar.gz', Body: body }),
    );
    assert.deepEqual(outputOf(out), [2, 4, 6, 8]);
    assert.equal(out.CustomAttributes, 'trace=1; target-model=team/x.tar.gz');
    const other = await client.send(
      new InvokeEndpointCommand({ EndpointName: 'e', ContentType: 'application/json', CustomAttributes: 'target-model=team/y.tar.gz', Body: body }),
    );
    assert.deepEqual(outputOf(other), [5, 10, 15, 20]);
  });

  it('TargetModel wins over CustomAttributes', async () => {
    const out = await client.send(
      new InvokeEndpointCommand({
        EndpointName: 'e',
        TargetModel: 'team/y.tar.gz',
        ContentType: 'application/json',
        CustomAttributes: 'target-model=team/x.tar.gz',
        Body: body,
      }),
    );
    assert.deepEqual(outputOf(out), [5, 10, 15, 20]);
  });

  it('is validated like the header: a path escape, an empty value or two targets are 400 INVALID_TARGET', async () => {
    for (const attrs of ['target-model=../etc/passwd', 'target-model=', 'target-model=team/x.tar.gz,target-model=team/y.tar.gz']) {
      const err = await client
        .send(new InvokeEndpointCommand({ EndpointName: 'e', ContentType: 'application/json', CustomAttributes: attrs, Body: body }))
        .then(
          () => assert.fail(`expected a rejection for ${attrs}`),
          (e: Error & { $metadata?: { httpStatusCode?: number } }) => e,
        );
      assert.equal(err.$metadata?.httpStatusCode, 400, attrs);
      assert.equal(err.name, 'INVALID_TARGET', attrs);
    }
  });

  it('attributes without target-model leave the default model in charge', async () => {
    const err = await client.send(new InvokeEndpointCommand({ EndpointName: 'e', ContentType: 'application/json', CustomAttributes: 'c=1', Body: body })).then(
      () => assert.fail('expected a rejection'),
      (e: Error & { $metadata?: { httpStatusCode?: number } }) => e,
    );
    // This source is a plain directory of archives: no default model.
    assert.equal(err.$metadata?.httpStatusCode, 404);
    assert.match(err.message, /default model/);
  });
});
