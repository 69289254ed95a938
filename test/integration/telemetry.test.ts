/**
 * No phone-home (docs/security.md#outbound-connections): a real server
 * process, started as SageMaker starts it (`serve`) with a fresh HOME, loads
 * models from a real S3-compatible store and runs them, and onnxruntime's
 * telemetry store (`$HOME/.cache/Microsoft/DeveloperTools/.onnxruntime/`)
 * never appears; the same for the CLI loading a model. MME_ORT_TELEMETRY=true
 * turns it back on: the same run then leaves the store, which is what shows
 * the check can fail. Under strace, the server's only connection attempts go
 * to the configured S3 endpoint.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, it } from 'node:test';
import { packTarGz, scale, writeModelDir } from '../../examples/models/zoo.js';
import { runCli } from '../support/cli.js';
import { s3rverEnv, startLoopbackS3, type LoopbackS3 } from '../support/s3rver.js';
import { startServe, type ServeProcess } from '../support/serve-process.js';
import { tempDir } from '../support/temp-dir.js';
import { input, request } from '../support/test-server.js';

const STORE = path.join('.cache', 'Microsoft', 'DeveloperTools', '.onnxruntime');

const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

let root: string;
let s3: LoopbackS3;
before(async () => {
  root = await tempDir({ after: (fn: () => Promise<void>) => cleanups.push(fn) }, 'onnx-mme-telemetry-');
  s3 = await startLoopbackS3(['models']);
  cleanups.push(() => s3.close());
  for (const factor of [2, 3]) {
    const dir = await writeModelDir(path.join(root, 'src'), `scale${factor}`, scale(factor));
    const file = path.join(root, `scale${factor}.tar.gz`);
    await packTarGz(dir, file);
    await s3.upload(`prefix/scale${factor}.tar.gz`, await readFile(file));
  }
});

/**
 * The environment of a process as an operator would start it: a fresh HOME,
 * and neither onnxruntime's variable nor ours inherited from this test process
 * (whose own imports of the server set ORT_DISABLE_TELEMETRY).
 */
/**
 * onnxruntime turns its telemetry off by itself where it sees a CI service's
 * variable (CI=true in this project's CI): without them, both runs see what a
 * user's server sees, and the default run's check can fail.
 */
const CI_VARIABLES = [
  'CI',
  'TF_BUILD',
  'GITHUB_ACTIONS',
  'GITLAB_CI',
  'CIRCLECI',
  'TRAVIS',
  'JENKINS_URL',
  'CODEBUILD_BUILD_ID',
  'BUILDKITE',
  'TEAMCITY_VERSION',
  'APPVEYOR',
  'BITBUCKET_BUILD_NUMBER',
];

async function freshEnv(name: string, extra: Record<string, string> = {}): Promise<Record<string, string | undefined>> {
  const home = path.join(root, name, 'home');
  await mkdir(home, { recursive: true });
  return {
    ...Object.fromEntries(CI_VARIABLES.map((v) => [v, undefined])),
    HOME: home,
    ORT_DISABLE_TELEMETRY: undefined,
    MME_ORT_TELEMETRY: undefined,
    ...s3rverEnv(s3.endpoint),
    AWS_ENDPOINT_URL: undefined,
    MME_MODEL_SOURCE: 's3://models/prefix/',
    MME_CACHE_DIR: path.join(root, name, 'cache'),
    ...extra,
  };
}

/** Every file under dir, relative to it. */
async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) out.push(path.relative(dir, path.join(e.parentPath, e.name)));
  }
  return out.sort();
}

/** Loads both models from S3 by invoking them, runs each several times, then stops the server with SIGTERM. */
async function loadRunStop(child: ServeProcess, stopPid = child.proc.pid!): Promise<void> {
  for (const factor of [2, 3]) {
    for (let i = 0; i < 3; i++) {
      const r = await request(`${child.url}/invocations`, {
        method: 'POST',
        headers: { 'X-Amzn-SageMaker-Target-Model': `scale${factor}.tar.gz` },
        json: { inputs: [input('INPUT0', 'FP32', [1, 4], [1, 2, 3, i])] },
      });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const out = (r.body as { outputs: { data: number[] }[] }).outputs[0]!.data;
      assert.deepEqual(
        out,
        [1, 2, 3, i].map((x) => x * factor),
      );
    }
  }
  process.kill(stopPid, 'SIGTERM');
  assert.equal(await child.exited, 0, 'the server exits 0 on SIGTERM');
}

it('a server process that loads and runs models from S3 leaves no onnxruntime telemetry store under its HOME', async () => {
  const env = await freshEnv('default');
  const child = await startServe(env);
  cleanups.push(() => child.kill());
  await loadRunStop(child);
  const home = env['HOME']!;
  assert.equal(existsSync(path.join(home, '.cache', 'Microsoft')), false, `${STORE} was created: ${(await filesUnder(home)).join(', ')}`);
  assert.deepEqual(
    (await filesUnder(home)).filter((f) => /onnxruntime|deviceid/.test(f)),
    [],
  );
  const listening = child.lines.find((l) => l['msg'] === 'onnx-mme listening');
  assert.equal(listening?.['ortTelemetry'], false, 'the startup line says telemetry is off');
});

it('MME_ORT_TELEMETRY=true turns onnxruntime telemetry back on: the same run leaves its store (and a warning at startup)', async () => {
  const env = await freshEnv('on', { MME_ORT_TELEMETRY: 'true' });
  const child = await startServe(env);
  cleanups.push(() => child.kill());
  await loadRunStop(child);
  const files = await filesUnder(env['HOME']!);
  assert.ok(files.includes(path.join(STORE, 'onnxruntime.db')), `no telemetry store with MME_ORT_TELEMETRY=true: ${files.join(', ')}`);
  assert.ok(
    child.lines.some((l) => l['level'] === 'warn' && /MME_ORT_TELEMETRY=true/.test(String(l['msg']))),
    'a warning names the setting',
  );
});

it('MME_ORT_TELEMETRY with a value that is not a boolean stops startup with a message naming it', async () => {
  const env = await freshEnv('bad', { MME_ORT_TELEMETRY: 'maybe' });
  await assert.rejects(startServe(env), /exited early with code 2/);
  assert.equal(existsSync(path.join(env['HOME']!, '.cache')), false);
});

it('the CLI loading a model in onnxruntime (onnx-mme validate) leaves no telemetry store either', async () => {
  const env = await freshEnv('cli');
  const r = await runCli(['validate', path.join(root, 'src', 'scale2')], { env });
  assert.equal(r.code, 0, r.stderr + r.stdout);
  assert.match(r.stdout, /scale2/);
  assert.deepEqual(await filesUnder(env['HOME']!), []);
});

/** strace installed and allowed to trace here (ptrace can be forbidden in a container). */
function canStrace(): boolean {
  try {
    execFileSync('strace', ['-qq', '-f', '-e', 'trace=none', 'true'], { stdio: 'ignore', timeout: 30_000 });
    return true;
  } catch {
    return false;
  }
}

it(
  'under strace, every connection the server process attempts (all threads, any child) goes to the configured S3 endpoint',
  { skip: canStrace() ? false : 'strace is not installed (apt-get install strace) or may not trace here' },
  async () => {
    const env = await freshEnv('strace');
    const trace = path.join(root, 'strace', 'connect.txt');
    // -f: every thread (runtime workers, onnxruntime's pools) and child process; only connect(2) is recorded.
    const child = await startServe(env, ['strace', '-f', '-qq', '-e', 'trace=connect', '-o', trace, '--']);
    cleanups.push(() => child.kill());
    // strace's child is `serve`, which execs node: that pid is the server, and SIGTERM goes to it, not to strace.
    const serverPid = Number((await readFile(`/proc/${child.proc.pid}/task/${child.proc.pid}/children`, 'utf8')).trim().split(/\s+/)[0]);
    assert.ok(serverPid > 0, 'strace has a child');
    await loadRunStop(child, serverPid);
    const lines = (await readFile(trace, 'utf8')).split('\n').filter((l) => l.includes('connect('));
    const s3Port = new URL(s3.endpoint).port;
    const inet = lines.filter((l) => /sa_family=AF_INET6?\b/.test(l));
    assert.ok(inet.length > 0, `no connection to S3 recorded at all: the trace cannot be read (${lines.slice(0, 3).join(' | ')})`);
    const elsewhere = inet.filter((l) => !(l.includes(`htons(${s3Port})`) && l.includes('"127.0.0.1"')));
    assert.deepEqual(elsewhere, [], 'connection attempts to anything but the S3 endpoint');
  },
);
