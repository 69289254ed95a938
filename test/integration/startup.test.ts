/**
 * The operator's first minutes, from outside: `./serve` as a process. What
 * is wrong at start-up stops it with exit 2 and one log line naming the
 * setting to change (no stack trace); `--help` prints help; PORT, MME_PORT
 * and `--port` are refused naming SAGEMAKER_BIND_TO_PORT; a started server
 * says what it runs in one readable line, and in a readable form on request
 * (MME_LOG_FORMAT=pretty); every JSON answer ends with a newline.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer as createHttpServer } from 'node:http';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { after, describe, it } from 'node:test';
import { packTarGz, tiny, writeModelDir } from '../../examples/models/zoo.js';
import { s3rverEnv, startLoopbackS3 } from '../support/s3rver.js';
import { repoRoot, startServe } from '../support/serve-process.js';
import { tempDir } from '../support/temp-dir.js';
import { startTestServer } from '../support/test-server.js';
import { StartupError } from '../../src/errors.js';

const cleanups: (() => Promise<void>)[] = [];
const ctx = { after: (fn: () => Promise<void>) => void cleanups.push(fn) };
after(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

interface Exited {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `command args` with `env` laid over this environment (undefined removes a variable) until it exits (at most 30 s). */
async function runToExit(command: string, args: readonly string[], env: Record<string, string | undefined>): Promise<Exited> {
  const merged: NodeJS.ProcessEnv = { ...process.env, MME_HOST: '127.0.0.1', SAGEMAKER_BIND_TO_PORT: '0', MME_LOG_LEVEL: 'info', ...env };
  for (const [k, v] of Object.entries(merged)) if (v === undefined) delete merged[k];
  const proc = spawn(command, args, { env: merged, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => proc.kill('SIGKILL'), 30_000);
  const code = await new Promise<number | null>((resolve) => proc.once('close', (c) => resolve(c)));
  clearTimeout(timer);
  return { code, stdout, stderr };
}

const serve = path.join(repoRoot, 'serve');

/** The one JSON line of a refused start: exit 2, level fatal, the setting named, no stack anywhere. */
function refusal(r: Exited, setting: string): Record<string, unknown> {
  assert.equal(r.code, 2, `exit code: ${r.stdout}${r.stderr}`);
  const lines = r.stdout.split('\n').filter(Boolean);
  const last = JSON.parse(lines.at(-1)!) as Record<string, unknown>;
  assert.equal(last['level'], 'fatal');
  assert.equal(last['setting'], setting);
  assert.match(String(last['msg']), /^onnx-mme cannot start: /);
  for (const name of setting.split(', ')) assert.ok(String(last['msg']).includes(name), `the message names ${name}: ${String(last['msg'])}`);
  assert.equal(lines.filter((l) => (JSON.parse(l) as Record<string, unknown>)['level'] === 'fatal').length, 1, 'one line says why');
  assert.doesNotMatch(r.stdout + r.stderr, /\n\s+at /, 'no stack trace');
  assert.equal(r.stderr, '', 'nothing on stderr');
  return last;
}

async function modelDir(): Promise<{ root: string; models: string }> {
  const root = await tempDir(ctx);
  const models = path.join(root, 'models');
  await writeModelDir(models, 'tiny', tiny());
  return { root, models };
}

describe('start-up failures: exit 2, one line naming the setting', () => {
  it('a model source that does not exist names MME_MODEL_SOURCE and the path', async () => {
    const root = await tempDir(ctx);
    const missing = path.join(root, 'does', 'not', 'exist');
    const line = refusal(await runToExit(serve, [], { MME_MODEL_SOURCE: missing, MME_CACHE_DIR: path.join(root, 'cache') }), 'MME_MODEL_SOURCE');
    assert.ok(String(line['msg']).includes(missing), String(line['msg']));
  });

  it('a cache directory that cannot be created names MME_CACHE_DIR', async () => {
    const { root, models } = await modelDir();
    // Under a plain file: refused whoever runs the test (root included).
    await writeFile(path.join(root, 'a-file'), 'x');
    refusal(await runToExit(serve, [], { MME_MODEL_SOURCE: models, MME_CACHE_DIR: path.join(root, 'a-file', 'cache') }), 'MME_CACHE_DIR');
  });

  it('a port in use names SAGEMAKER_BIND_TO_PORT (EADDRINUSE)', async () => {
    const { root, models } = await modelDir();
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => blocker.close(() => resolve())));
    const port = (blocker.address() as { port: number }).port;
    const line = refusal(
      await runToExit(serve, [], { MME_MODEL_SOURCE: models, MME_CACHE_DIR: path.join(root, 'cache'), SAGEMAKER_BIND_TO_PORT: String(port) }),
      'SAGEMAKER_BIND_TO_PORT',
    );
    assert.match(String(line['msg']), new RegExp(`port ${port} is already in use .*EADDRINUSE`));
  });

  it('the gRPC and metrics ports in use name MME_GRPC_PORT and MME_METRICS_PORT, an address not of this host MME_HOST (the StartupError main.ts logs)', async () => {
    const { root, models } = await modelDir();
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => blocker.close(() => resolve())));
    const port = String((blocker.address() as { port: number }).port);
    for (const setting of ['MME_GRPC_PORT', 'MME_METRICS_PORT']) {
      await assert.rejects(
        startTestServer({ modelSource: models, cacheDir: path.join(root, `cache-${setting}`), env: { [setting]: port } }),
        (err: unknown) => {
          assert.ok(err instanceof StartupError, String(err));
          assert.equal(err.setting, setting);
          assert.match(err.message, new RegExp(`port ${port} is already in use .*EADDRINUSE.*set ${setting} to a free port`));
          return true;
        },
      );
    }
    // An address this host does not have (TEST-NET-1, RFC 5737) names MME_HOST.
    await assert.rejects(startTestServer({ modelSource: models, cacheDir: path.join(root, 'cache-host'), env: { MME_HOST: '192.0.2.1' } }), (err: unknown) => {
      assert.ok(err instanceof StartupError, String(err));
      assert.equal(err.setting, 'MME_HOST');
      assert.match(err.message, /cannot listen on 192\.0\.2\.1 \(EADDRNOTAVAIL\): set MME_HOST/);
      return true;
    });
  });

  it('bad settings: every variable named in `setting`, one line, on stdout with the other log lines', async () => {
    const line = refusal(
      await runToExit(serve, [], { SAGEMAKER_BIND_TO_PORT: 'eighty', MME_EXECUTION_PROVIDERS: 'cuda,quantum' }),
      'SAGEMAKER_BIND_TO_PORT, MME_EXECUTION_PROVIDERS',
    );
    assert.match(String(line['msg']), /unknown provider 'quantum'/);
  });
});

describe('the command line and the port', () => {
  for (const flag of ['--help', '-h']) {
    it(`./serve ${flag} prints the help and exits 0 without starting`, async () => {
      const r = await runToExit(serve, [flag], { MME_MODEL_SOURCE: '/does/not/exist' });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^Usage: \.\/serve/);
      assert.match(r.stdout, /SAGEMAKER_BIND_TO_PORT +port for every route/);
      assert.match(r.stdout, /docs\/configuration\.md/);
      assert.doesNotMatch(r.stdout, /"level"/, 'no log line: nothing started');
    });
  }

  it('./serve --port 9000 is refused naming SAGEMAKER_BIND_TO_PORT and the value', async () => {
    const line = refusal(await runToExit(serve, ['--port', '9000'], {}), 'SAGEMAKER_BIND_TO_PORT');
    assert.match(String(line['msg']), /SAGEMAKER_BIND_TO_PORT=9000 \.\/serve/);
    assert.deepEqual(line['args'], ['--port', '9000']);
  });

  it('an unknown argument is refused naming it', async () => {
    const r = await runToExit(serve, ['--verbose'], {});
    assert.equal(r.code, 2);
    assert.match(JSON.parse(r.stdout.trim()).msg as string, /serve takes no arguments \(got '--verbose'\)/);
  });

  it('onnx-mme serve --port=9000 is refused the same way (the CLI path)', async () => {
    const r = await runToExit(process.execPath, [path.join(repoRoot, 'dist', 'src', 'cli', 'onnx-mme.js'), 'serve', '--port=9000'], {});
    assert.equal(r.code, 2);
    assert.match(r.stderr, /set SAGEMAKER_BIND_TO_PORT instead, e\.g\. SAGEMAKER_BIND_TO_PORT=9000/);
  });

  for (const name of ['PORT', 'MME_PORT']) {
    it(`${name}=9000 (another port than SAGEMAKER_BIND_TO_PORT's) is refused naming SAGEMAKER_BIND_TO_PORT`, async () => {
      const line = refusal(await runToExit(serve, [], { [name]: '9000' }), 'SAGEMAKER_BIND_TO_PORT');
      assert.match(String(line['msg']), new RegExp(`${name}=9000 is not read by this server.*set SAGEMAKER_BIND_TO_PORT=9000 instead`));
    });
  }
});

describe('a started server', () => {
  it('logs one readable summary (MiB/GiB, source, cache, listeners) beside the listening line; JSON answers end with a newline', async () => {
    const { root, models } = await modelDir();
    const child = await startServe({ MME_MODEL_SOURCE: models, MME_CACHE_DIR: path.join(root, 'cache'), MME_DRAIN_SECONDS: '0' });
    cleanups.push(() => child.kill());
    const listening = child.lines.find((l) => l['msg'] === 'onnx-mme listening')!;
    assert.equal(typeof listening['memoryBudgetBytes'], 'number', 'the listening line keeps its raw figures');
    while (!child.lines.some((l) => String(l['msg']).startsWith('ready: '))) await new Promise((r) => setTimeout(r, 10));
    const summary = String(child.lines.find((l) => String(l['msg']).startsWith('ready: '))!['msg']);
    assert.ok(summary.includes(`HTTP 127.0.0.1:${child.port}`), summary);
    assert.ok(summary.includes(`models from ${listening['source'] as string}`), summary);
    assert.ok(summary.includes(`cache ${path.join(root, 'cache')}`), summary);
    assert.match(summary, /memory budget \d+(\.\d+)? (MiB|GiB)/);
    assert.match(summary, /up to \d+(\.\d+)? (MiB|GiB|TiB)/);

    const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: new Array(16).fill(1) }] });
    const answers = [
      await fetch(`${child.url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': 'tiny' }, body }),
      await fetch(`${child.url}/v2/models/tiny/infer`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body }),
      await fetch(`${child.url}/v2/models/tiny`),
      await fetch(`${child.url}/v2`),
      await fetch(`${child.url}/models`),
      await fetch(`${child.url}/v2/models/nosuch/infer`, { method: 'POST', body }),
      await fetch(`${child.url}/no/such/route`),
    ];
    for (const res of answers) {
      assert.match(res.headers.get('content-type') ?? '', /^application\/json/, res.url);
      const bytes = Buffer.from(await res.arrayBuffer());
      assert.equal(bytes.at(-1), 0x0a, `${res.url} (${res.status}) ends with a newline`);
      assert.equal(Number(res.headers.get('content-length')), bytes.length, `${res.url}: Content-Length counts it`);
      JSON.parse(bytes.toString('utf8'));
    }
  });

  it('MME_LOG_FORMAT=pretty: readable lines; the drain line says a second signal skips it, and one does', async () => {
    const { root, models } = await modelDir();
    const proc = spawn(serve, [], {
      env: {
        ...process.env,
        MME_HOST: '127.0.0.1',
        SAGEMAKER_BIND_TO_PORT: '0',
        MME_LOG_LEVEL: 'info',
        MME_LOG_FORMAT: 'pretty',
        MME_MODEL_SOURCE: models,
        MME_CACHE_DIR: path.join(root, 'cache'),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    cleanups.push(async () => void (proc.exitCode === null && proc.kill('SIGKILL')));
    const lines: string[] = [];
    const closed = new Promise<number | null>((resolve) => proc.once('close', (c) => resolve(c)));
    await new Promise<void>((resolve, reject) => {
      createInterface({ input: proc.stdout }).on('line', (line) => {
        lines.push(line);
        if (/ INFO  ready: /.test(line)) resolve();
      });
      void closed.then((c) => reject(new Error(`serve exited with ${c}: ${lines.join('\n')}`)));
    });
    const ready = lines.find((l) => / INFO  ready: /.test(l))!;
    assert.match(ready, /^\d\d:\d\d:\d\d\.\d{3} INFO  ready: HTTP 127\.0\.0\.1:\d+; models from file:\/\//);
    assert.ok(
      lines.every((l) => !l.startsWith('{')),
      `no JSON lines: ${lines.find((l) => l.startsWith('{'))}`,
    );
    const listening = lines.find((l) => l.includes(' onnx-mme listening  '))!;
    assert.match(listening, / port=\d+ /);
    assert.match(listening, / memoryBudgetFrom="host memory \(cgroup limit or RAM\)"| memoryBudgetFrom="GPU memory/);

    const started = Date.now();
    proc.kill('SIGINT');
    while (!lines.some((l) => l.includes('draining: not ready, still serving'))) await new Promise((r) => setTimeout(r, 10));
    proc.kill('SIGINT');
    assert.equal(await closed, 0);
    assert.ok(Date.now() - started < 4_000, `the second signal skipped the 5 s drain (${Date.now() - started} ms)`);
    const drain = lines.find((l) => l.includes('draining: not ready, still serving'))!;
    assert.match(drain, /hint="a second SIGTERM or SIGINT \(Ctrl-C again\) ends the drain now"/);
    assert.ok(lines.some((l) => l.includes('drain period cut short by a second signal')));
  });

  it('an S3 source that does not answer: a warning naming MME_MODEL_SOURCE, the bucket and prefix; what the disk cache holds is served', async () => {
    const root = await tempDir(ctx);
    const s3 = await startLoopbackS3(['models']);
    let s3Closed = false;
    cleanups.push(async () => void (s3Closed || (await s3.close())));
    await writeModelDir(path.join(root, 'work'), 'tiny', tiny());
    await packTarGz(path.join(root, 'work'), path.join(root, 'tiny.tar.gz'));
    await s3.upload('prefix/tiny.tar.gz', await readFile(path.join(root, 'tiny.tar.gz')));
    const env = { MME_MODEL_SOURCE: 's3://models/prefix/', MME_CACHE_DIR: path.join(root, 'cache'), MME_DRAIN_SECONDS: '0' };
    const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: new Array(16).fill(1) }] });
    const invoke = (url: string): Promise<Response> =>
      fetch(`${url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': 'tiny.tar.gz' }, body });

    // While S3 answers, the model is downloaded into the disk cache.
    const first = await startServe({ ...env, ...s3rverEnv(s3.endpoint) });
    cleanups.push(() => first.kill());
    const fresh = await invoke(first.url);
    const answer = await fresh.text();
    assert.equal(fresh.status, 200, answer);
    await first.kill();

    // Then S3 goes away: a restart warns at once and still serves the cached copy.
    await s3.close();
    s3Closed = true;
    const child = await startServe({ ...env, ...s3rverEnv(s3.endpoint) });
    cleanups.push(() => child.kill());
    assert.equal((await fetch(`${child.url}/ping`)).status, 200);
    const deadline = Date.now() + 10_000;
    while (!child.lines.some((l) => l['setting'] === 'MME_MODEL_SOURCE') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const warning = child.lines.find((l) => l['setting'] === 'MME_MODEL_SOURCE');
    assert.ok(warning, 'a warning names MME_MODEL_SOURCE');
    assert.equal(warning['level'], 'warn');
    assert.equal(warning['bucket'], 'models');
    assert.equal(warning['prefix'], 'prefix/');
    assert.match(String(warning['msg']), /MME_MODEL_SOURCE does not answer: listing s3:\/\/models\/prefix\/ failed: .*ECONNREFUSED/);
    const cached = await invoke(child.url);
    assert.equal(cached.status, 200, 'served from the disk cache');
    assert.equal(await cached.text(), answer);
    assert.ok(child.lines.some((l) => l['msg'] === 'S3 cannot be reached: serving the copy in the disk cache' && l['model'] === 'tiny.tar.gz'));
  });

  it('an S3 source that denies the listing (a role with s3:GetObject alone): a warning that says what still works', async () => {
    const root = await tempDir(ctx);
    // S3's own answer to a request the policy does not allow.
    const denying = createHttpServer((_req, res) => {
      res.writeHead(403, { 'Content-Type': 'application/xml' });
      res.end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>');
    });
    await new Promise<void>((resolve) => denying.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => denying.close(() => resolve())));
    const endpoint = `http://127.0.0.1:${(denying.address() as { port: number }).port}`;
    const child = await startServe({ ...s3rverEnv(endpoint), MME_MODEL_SOURCE: 's3://models/prefix/', MME_CACHE_DIR: path.join(root, 'cache') });
    cleanups.push(() => child.kill());
    const deadline = Date.now() + 10_000;
    while (!child.lines.some((l) => l['setting'] === 'MME_MODEL_SOURCE') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const warning = child.lines.find((l) => l['setting'] === 'MME_MODEL_SOURCE');
    assert.equal(warning?.['level'], 'warn');
    assert.match(
      String(warning['msg']),
      /^MME_MODEL_SOURCE cannot be listed: access denied listing s3:\/\/models\/prefix\/.*Models still load by name where s3:GetObject is allowed; the repository index needs s3:ListBucket/,
    );
  });

  it('SageMaker multi-model endpoint, MME_MODEL_SOURCE unset: starts even without /opt/ml/model (SageMaker loads through /models)', async () => {
    const root = await tempDir(ctx);
    const child = await startServe({ SAGEMAKER_MULTI_MODEL: 'true', MME_MODEL_SOURCE: undefined, MME_CACHE_DIR: path.join(root, 'cache') });
    cleanups.push(() => child.kill());
    assert.equal((await fetch(`${child.url}/ping`)).status, 200);
    if (!existsSync('/opt/ml/model')) {
      const note = child.lines.find((l) => String(l['msg']).startsWith('no model source: /opt/ml/model does not exist'));
      assert.equal(note?.['level'], 'info', 'the default missing there is expected: info, not a warning');
      while (!child.lines.some((l) => String(l['msg']).startsWith('ready: '))) await new Promise((r) => setTimeout(r, 10));
      assert.match(String(child.lines.find((l) => String(l['msg']).startsWith('ready: '))!['msg']), /models only through POST \/models/);
    }
  });
});
