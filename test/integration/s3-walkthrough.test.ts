/**
 * The local S3 walkthrough of docs/memory-and-caching.md, run as written: the example script
 * starts an S3-compatible store, `put` adds a tarball, the container serves it
 * by target, `put` again replaces it, `rm` retires it.
 */
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import net, { type AddressInfo } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { after, it } from 'node:test';
import { packTarGz, scale, writeModelDir } from '../../examples/models/zoo.js';
import { S3RVER_CREDENTIALS } from '../support/s3rver.js';
import { tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer } from '../support/test-server.js';

const run = promisify(execFile);
const script = fileURLToPath(new URL('../../examples/s3/local-s3.js', import.meta.url));
const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

it('local-s3.js serve / put / rm drive a container reading s3://models/prefix/', async () => {
  const work = await tempDir({ after: (fn: () => Promise<void>) => cleanups.push(fn) });
  const port = await freePort();
  const env: NodeJS.ProcessEnv = { ...process.env, S3_PORT: String(port) };
  delete env['AWS_ENDPOINT_URL_S3'];
  const store = spawn(process.execPath, [script, 'serve', path.join(work, 's3')], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  cleanups.push(async () => {
    store.kill('SIGINT');
    await new Promise((r) => store.once('exit', r));
  });
  let printed = '';
  await new Promise<void>((resolve, reject) => {
    store.stdout.on('data', (chunk: Buffer) => {
      printed += chunk.toString();
      if (printed.includes('Serve from it with')) resolve();
    });
    store.once('exit', (code) => reject(new Error(`local-s3 serve exited with ${code}: ${printed}`)));
  });
  assert.match(printed, new RegExp(`MME_MODEL_SOURCE=s3://models/prefix/ AWS_ENDPOINT_URL_S3=http://127.0.0.1:${port}`));

  const put = async (factor: number) => {
    const dir = await writeModelDir(path.join(work, `m${factor}`), 'scaler', scale(factor));
    const file = path.join(work, `scaler-${factor}.tar.gz`);
    await packTarGz(dir, file);
    const { stdout } = await run(process.execPath, [script, 'put', file, 'prefix/scaler.tar.gz'], { env });
    assert.match(stdout, /put s3:\/\/models\/prefix\/scaler\.tar\.gz ETag "/);
  };
  await put(2);
  const { stdout: listing } = await run(process.execPath, [script, 'ls', 'prefix/'], { env });
  assert.match(listing, /s3:\/\/models\/prefix\/scaler\.tar\.gz/);

  const saved = { id: process.env['AWS_ACCESS_KEY_ID'], secret: process.env['AWS_SECRET_ACCESS_KEY'] };
  process.env['AWS_ACCESS_KEY_ID'] = S3RVER_CREDENTIALS.accessKeyId;
  process.env['AWS_SECRET_ACCESS_KEY'] = S3RVER_CREDENTIALS.secretAccessKey;
  cleanups.push(async () => {
    for (const [k, v] of [
      ['AWS_ACCESS_KEY_ID', saved.id],
      ['AWS_SECRET_ACCESS_KEY', saved.secret],
    ] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });
  const server = await startTestServer({
    modelSource: 's3://models/prefix/',
    cacheDir: path.join(work, 'cache'),
    env: { AWS_ENDPOINT_URL_S3: `http://127.0.0.1:${port}`, MME_REVALIDATE_SECONDS: '0.1', MME_LOG_LEVEL: 'warn' },
  });
  cleanups.push(() => server.close());
  const invoke = () =>
    request(`${server.url}/invocations`, {
      method: 'POST',
      headers: { 'X-Amzn-SageMaker-Target-Model': 'scaler.tar.gz' },
      json: { inputs: [input('INPUT0', 'FP32', [1, 4], [1, 2, 3, 4])] },
    });
  const first = await invoke();
  assert.equal(first.status, 200, first.text);
  assert.deepEqual(first.body.outputs[0].data, [2, 4, 6, 8]);

  await put(10); // update in place: same key, new object
  await new Promise((r) => setTimeout(r, 150));
  const updated = await invoke();
  assert.deepEqual(updated.body.outputs[0].data, [10, 20, 30, 40]);

  await run(process.execPath, [script, 'rm', 'prefix/scaler.tar.gz'], { env });
  await new Promise((r) => setTimeout(r, 150));
  assert.equal((await invoke()).status, 404);
});
