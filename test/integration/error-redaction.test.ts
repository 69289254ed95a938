/**
 * docs/security.md, "What error answers show": no answer a client sees, over
 * HTTP or gRPC, names the server's own directories (source root, cache
 * directory, a model's directory or warm-up file) or its S3 bucket and
 * prefix. Every error this test can provoke is provoked through a real
 * server (a local source and an S3 source behind the real AWS SDK), and every
 * answer body is searched for the paths and names the test set up; the full
 * text stays in the server's log.
 */
import assert from 'node:assert/strict';
import { mkdir, readFile, realpath, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Metadata } from '@grpc/grpc-js';
import { addSub, packTarGz, scale, writeModelDir, type ModelDirContents } from '../../examples/models/zoo.js';
import { call, connect, inferRequest, type GrpcClients } from '../support/grpc-client.js';
import { freePort } from '../support/memory-scenario.js';
import { tgz } from '../support/raw-tar.js';
import { S3Proxy } from '../support/s3-proxy.js';
import { startLoopbackS3, type LoopbackS3, useS3rverCredentials } from '../support/s3rver.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();
const BUCKET = 'redact-bucket-7q';
const PREFIX = 'hidden-prefix-9z/';
const ABSENT_BUCKET = 'absent-bucket-4k';
let restoreCredentials: (() => void) | undefined;

const body = { inputs: [input('INPUT0', 'FP32', [1, 4], [1, 2, 3, 4])] };

function warmupConfig(name: string): string {
  return `name: "${name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
model_warmup [ { name: "from_file" batch_size: 1 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "input0.bin" } } } ]
`;
}

/** The broken packages, by name: each fails its load its own way. */
async function writeBroken(root: string): Promise<void> {
  await writeModelDir(root, 'corrupt', { onnx: Buffer.from('this is not an onnx protobuf at all, just bytes'.repeat(4)) });
  await writeModelDir(root, 'badconfig', { onnx: addSub().onnx, config: 'name: "badconfig"\nplatform: "onnxruntime_onnx"\ninput [ { name: ' });
  const warm = await writeModelDir(root, 'shortwarm', { onnx: scale(2).onnx, config: warmupConfig('shortwarm') });
  await mkdir(path.join(warm, 'warmup'));
  await writeFile(path.join(warm, 'warmup', 'input0.bin'), Buffer.alloc(6));
  const wrongType: ModelDirContents = {
    onnx: scale(2).onnx,
    config: warmupConfig('wrongio')
      .replace(/INPUT0/g, 'NOPE')
      .replace('from_file', 'zeros')
      .replace('input_data_file: "input0.bin"', 'zero_data: true'),
  };
  await writeModelDir(root, 'wrongio', wrongType);
}

interface Answer {
  readonly what: string;
  readonly text: string;
}

async function httpAnswers(server: TestServer, name: string): Promise<Answer[]> {
  const v2Name = encodeURIComponent(name);
  const answers = await Promise.all([
    request(`${server.url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': name }, json: body }),
    request(`${server.url}/v2/models/${v2Name}/infer`, { method: 'POST', json: body }),
    request(`${server.url}/v2/models/${v2Name}`),
    request(`${server.url}/v2/models/${v2Name}/config`),
    request(`${server.url}/v2/repository/models/${v2Name}/load`, { method: 'POST', json: {} }),
  ]);
  return answers.map((r, i) => ({ what: `${name} HTTP #${i} ${r.status}`, text: r.text }));
}

async function grpcAnswers(clients: GrpcClients, name: string): Promise<Answer[]> {
  const calls = await Promise.all([
    call(clients.inference, 'ModelInfer', inferRequest(name, [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], values: [1, 2, 3, 4] }])),
    call(clients.inference, 'ModelMetadata', { name }),
    call(clients.inference, 'ModelConfig', { name }),
  ]);
  return calls.map((c, i) => ({
    what: `${name} gRPC #${i}`,
    text: c.error === null ? JSON.stringify(c.response) : `${c.error.details} ${JSON.stringify((c.error.metadata ?? new Metadata()).toJSON())}`,
  }));
}

function assertClean(answers: readonly Answer[], secrets: readonly string[]): void {
  for (const a of answers) for (const s of secrets) assert.ok(!a.text.includes(s), `${a.what} names ${s}: ${a.text}`);
}

describe('error answers name no host path, bucket or prefix', () => {
  let s3: LoopbackS3;
  let proxy: S3Proxy;

  before(async () => {
    restoreCredentials = useS3rverCredentials();
    s3 = await startLoopbackS3([BUCKET]);
    proxy = new S3Proxy(Number(new URL(s3.endpoint).port), BUCKET);
    await proxy.start();
  });

  after(async () => {
    await proxy?.close();
    await s3?.close();
    await ctx.run();
    restoreCredentials?.();
  });

  it('a local source: corrupt ONNX, bad config.pbtxt, short warm-up file, wrong warm-up input, hostile archive, missing model', async () => {
    const work = await tempDir(ctx);
    const root = path.join(work, 'source-root-secret-a1');
    const cacheDir = path.join(work, 'cache-dir-secret-b2');
    await mkdir(root, { recursive: true });
    await writeBroken(root);
    await writeFile(path.join(root, 'hostile.tar.gz'), tgz([{ name: '../escape.txt', body: 'x' }]));
    const server = await startTestServer({ modelSource: root, cacheDir, env: { MME_GRPC_PORT: '0' } });
    ctx.after(() => server.close());
    const clients = connect(`127.0.0.1:${server.running.grpcPort}`);
    ctx.after(async () => clients.close());
    const names = ['corrupt', 'badconfig', 'shortwarm', 'wrongio', 'hostile.tar.gz', 'missing', '../escape'];
    const answers: Answer[] = [];
    for (const name of names) answers.push(...(await httpAnswers(server, name)), ...(await grpcAnswers(clients, name)));
    const secrets = [root, await realpath(root), cacheDir, 'source-root-secret-a1', 'cache-dir-secret-b2', work];
    assertClean(answers, secrets);
    // The errors were real, and each answer still names its model and problem.
    const byName = (n: string) => answers.filter((a) => a.what.startsWith(`${n} HTTP #0`))[0]!.text;
    assert.match(byName('corrupt'), /"code":"INVALID_MODEL".*corrupt/);
    assert.match(byName('corrupt'), /1\/model\.onnx/);
    assert.match(byName('badconfig'), /"code":"INVALID_MODEL".*config\.pbtxt/);
    assert.match(byName('shortwarm'), /"code":"INVALID_MODEL".*input0\.bin/);
    assert.match(byName('hostile.tar.gz'), /"code":"ARCHIVE_REJECTED"/);
    assert.match(byName('missing'), /"code":"MODEL_NOT_FOUND"/);
    // The full text is in the log, under the request's id.
    const logged = server.logs.filter((l) => l['msg'] === 'request rejected' && typeof l['reqId'] === 'string');
    assert.ok(logged.length >= names.length, 'each refusal logged with its request id');
  });

  it('an S3 source: missing, denied, corrupt, bad config, short warm-up file, hostile archive, absent bucket', async () => {
    const work = await tempDir(ctx);
    const build = path.join(work, 'build');
    await writeBroken(build);
    for (const name of ['corrupt', 'badconfig', 'shortwarm', 'wrongio']) {
      await packTarGz(path.join(build, name), path.join(work, `${name}.tar.gz`));
      await s3.upload(`${PREFIX}${name}.tar.gz`, await readFile(path.join(work, `${name}.tar.gz`)));
    }
    await s3.upload(`${PREFIX}hostile.tar.gz`, tgz([{ name: '../escape.txt', body: 'x' }]));
    await s3.upload(`${PREFIX}private/denied.tar.gz`, await readFile(path.join(work, 'corrupt.tar.gz')));
    proxy.denyKeysStartingWith = `${PREFIX}private/`;
    const cacheDir = path.join(work, 'cache-dir-secret-c3');
    const server = await startTestServer({
      modelSource: `s3://${BUCKET}/${PREFIX}`,
      cacheDir,
      env: { AWS_ENDPOINT_URL_S3: proxy.url, AWS_REGION: 'us-east-1', MME_GRPC_PORT: '0' },
    });
    ctx.after(() => server.close());
    const absent = await startTestServer({
      modelSource: `s3://${ABSENT_BUCKET}/${PREFIX}`,
      cacheDir: path.join(work, 'cache-absent'),
      env: { AWS_ENDPOINT_URL_S3: proxy.url, AWS_REGION: 'us-east-1' },
    });
    ctx.after(() => absent.close());
    const clients = connect(`127.0.0.1:${server.running.grpcPort}`);
    ctx.after(async () => clients.close());
    const answers: Answer[] = [];
    for (const name of [
      'missing',
      'team/missing.tar.gz',
      'private/denied.tar.gz',
      'corrupt.tar.gz',
      'badconfig',
      'shortwarm.tar.gz',
      'wrongio.tar.gz',
      'hostile.tar.gz',
    ]) {
      answers.push(...(await httpAnswers(server, name)), ...(await grpcAnswers(clients, name)));
    }
    answers.push(...(await httpAnswers(absent, 'anything.tar.gz')));
    answers.push({ what: 'repository index', text: (await request(`${absent.url}/v2/repository/index`, { method: 'POST', json: {} })).text });
    assertClean(answers, [BUCKET, ABSENT_BUCKET, PREFIX.slice(0, -1), 's3://', cacheDir, 'cache-dir-secret-c3', work]);
    const first = (n: string) => answers.find((a) => a.what.startsWith(`${n} HTTP #0`))!.text;
    assert.match(first('missing'), /"code":"MODEL_NOT_FOUND".*missing\.tar\.gz/);
    assert.match(first('private/denied.tar.gz'), /"code":"ACCESS_DENIED"/);
    assert.match(first('corrupt.tar.gz'), /"code":"INVALID_MODEL".*model\.onnx/);
    assert.match(first('hostile.tar.gz'), /"code":"ARCHIVE_REJECTED"/);
    assert.match(
      answers.find((a) => a.what.startsWith('anything.tar.gz HTTP #0'))!.text,
      /"code":"UPSTREAM_UNAVAILABLE".*the bucket '<bucket>' does not exist/,
    );
    // The log keeps what the answer left out.
    assert.ok(
      absent.logs.some((l) => String(l['err'] ?? '').includes(ABSENT_BUCKET)),
      'the log names the absent bucket',
    );
  });

  it("an S3 endpoint that cannot be reached: neither its host name nor its address in any answer, the failure's kind kept", async () => {
    const work = await tempDir(ctx);
    // A name that never resolves (.invalid), and a loopback port nothing listens on.
    const unresolved = 'http://s3-internal-secret-h5.invalid:9000';
    const closed = `127.0.0.1:${await freePort()}`;
    const cases = [
      [unresolved, /ENOTFOUND/, ['s3-internal-secret-h5', ':9000']],
      [`http://${closed}`, /ECONNREFUSED/, [closed]],
    ] as const;
    for (const [i, [endpoint, kind, secrets]] of cases.entries()) {
      const server = await startTestServer({
        modelSource: `s3://${BUCKET}/${PREFIX}`,
        cacheDir: path.join(work, `cache-${i}`),
        env: { AWS_ENDPOINT_URL_S3: endpoint, AWS_REGION: 'us-east-1', MME_GRPC_PORT: '0' },
      });
      ctx.after(() => server.close());
      const clients = connect(`127.0.0.1:${server.running.grpcPort}`);
      ctx.after(async () => clients.close());
      const answers = [...(await httpAnswers(server, 'team/a.tar.gz')), ...(await grpcAnswers(clients, 'b.tar.gz'))];
      answers.push({ what: 'repository index', text: (await request(`${server.url}/v2/repository/index`, { method: 'POST', json: {} })).text });
      assertClean(answers, [...secrets, endpoint, BUCKET, PREFIX.slice(0, -1)]);
      const first = answers.find((a) => a.what.startsWith('team/a.tar.gz HTTP #0'))!.text;
      assert.match(first, /"code":"UPSTREAM_UNAVAILABLE"/);
      assert.match(first, kind);
      assert.ok(
        server.logs.some((l) => String(l['err'] ?? '').includes(secrets[0])),
        'the log names the endpoint',
      );
    }
  });
});
