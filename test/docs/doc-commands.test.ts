/**
 * The commands of our docs, run as written. Every shell block marked
 * `<!-- doc-test: KIND -->` in any Markdown file (the README's quick starts
 * among them) runs in bash, in a directory laid out like a fresh clone after
 * `npm ci && npm start` (the demo repository generated, `dist/` built; the
 * example pipelines built as `npm run pipelines` does), and
 * each command's output must match the `# ...` lines under it.
 *
 * Kinds:
 * - `demo-server`: the server `npm start` runs (package.json's own start
 *   script), on a free loopback port that replaces localhost:8080;
 * - `sagemaker`: an S3-compatible server (s3rver) stands in for S3 with the
 *   bucket `my-model-bucket`, and deploy-mme.js gets `--dry-run`, so
 *   everything but the AWS calls runs;
 * - `demo-server-python`: the same, for blocks that also need python3 with
 *   numpy (skipped, with the reason, where python3 or numpy is missing);
 * - `standalone`: nothing running; the block starts what it needs in the
 *   background (`&`), on free ports that replace 8080 and 4569;
 * - `haproxy`: the same, for the one-host HAProxy recipe
 *   (docs/scaling-out.md): its ports (8080, 8081-8083, 8404) become free
 *   ones, in the commands and in the copy of examples/haproxy/haproxy.cfg
 *   the block runs, and the haproxy binary (the Debian package) is on PATH.
 *
 * Every block must leave the directory it runs from as it found it: what a
 * quick start writes goes under $TMPDIR (a directory of the test's here), so
 * a reader's clone gets no stray files.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { buildDemoRepository } from '../../examples/demo/build-demo-repository.js';
import { buildPipelines } from '../../examples/pipelines/build-pipelines.js';
import { markdownFiles } from '../support/markdown.js';
import { markedBlocks, runSteps, steps, type DocBlock } from '../support/doc-commands.js';
import { haproxyBinary } from '../support/haproxy-fleet.js';
import { S3RVER_CREDENTIALS, startLoopbackS3, type LoopbackS3 } from '../support/s3rver.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const KINDS = new Set(['demo-server', 'demo-server-python', 'sagemaker', 'standalone', 'haproxy']);
/** The ports of examples/haproxy/haproxy.cfg: HAProxy's frontend, the three instances, the stats page. */
const HAPROXY_PORTS = ['8080', '8081', '8082', '8083', '8404'];
/** What `demo-server-python` blocks need besides the server (they say so where they stand). */
const hasNumpy = spawnSync('python3', ['-c', 'import numpy'], { stdio: 'ignore' }).status === 0;

const blocks: DocBlock[] = markdownFiles(repoRoot).flatMap((f) => markedBlocks(f, readFileSync(path.join(repoRoot, f), 'utf8')));

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * Every file under `dir` (symbolic links listed, not followed: dist/ and the
 * examples linked from the clone are not the blocks' to write), but the
 * temporary directories the blocks get and `.cache/`, the disk cache `npm
 * start` gives its server (package.json; ignored by git).
 */
function filesUnder(dir: string, rel = ''): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(path.join(dir, rel), { withFileTypes: true })) {
    const name = rel === '' ? entry.name : `${rel}/${entry.name}`;
    if (rel === '' && /^(tmp(-.*)?|\.cache)$/.test(entry.name)) continue;
    out.push(name);
    if (entry.isDirectory()) out.push(...filesUnder(dir, name));
  }
  return out.sort();
}

/** The environment of a reader's shell: no AWS or MME settings leaking in from the test runner. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^(AWS_|MME_|SAGEMAKER_|npm_)/.test(k)) env[k] = v;
  return { ...env, NODE_NO_WARNINGS: '1', ...extra };
}

describe('marked doc blocks', () => {
  it('exist (the README quick starts at least) and use known kinds', () => {
    const readme = blocks.filter((b) => b.file === 'README.md');
    assert.ok(readme.filter((b) => b.kind === 'demo-server').length >= 2, 'README quick starts 1 and 3 are marked');
    // Quick start 2 starts its own server with what SageMaker sets (SAGEMAKER_MULTI_MODEL=true, the url roots).
    assert.ok(
      readme.some(
        (b) => b.kind === 'standalone' && /SAGEMAKER_MULTI_MODEL=true MME_MODEL_URL_ROOTS=/.test(b.text) && /POST localhost:8080\/models /.test(b.text),
      ),
      'the SageMaker rehearsal is marked and sets what SageMaker sets',
    );
    assert.ok(
      readme.some((b) => b.kind === 'sagemaker'),
      'the SageMaker deployment block is marked',
    );
    // The AWS SDK needs a region for every call; s3rver here does not, so the runs below cannot catch a block without one.
    for (const b of blocks.filter((x) => x.kind === 'sagemaker')) {
      const region = b.text.search(/^export AWS_REGION=/m);
      for (const m of b.text.matchAll(/onnx-mme\.js push |deploy-mme\.js/g))
        assert.ok(region >= 0 && region < m.index!, `${b.file}:${b.line}: '${m[0].trim()}' runs before AWS_REGION is set`);
    }
    for (const b of blocks) assert.ok(KINDS.has(b.kind), `${b.file}:${b.line}: unknown doc-test kind '${b.kind}'`);
  });
});

describe('doc commands, run as written', () => {
  let work = '';
  /** $TMPDIR of the blocks that share the demo server (one, so a file one quick start writes is there for the next). */
  let sharedTmp = '';
  /** The recipe's ports → free ones, for `haproxy` blocks. */
  const haproxyPorts = new Map<string, string>();
  let port = 0;
  let server: ChildProcess | undefined;
  let s3: LoopbackS3 | undefined;

  before(async () => {
    work = await mkdtemp(path.join(tmpdir(), 'onnx-mme-docs-'));
    await buildDemoRepository(path.join(work, 'examples', 'demo', 'repository'), { log: () => {} });
    await buildPipelines(path.join(work, 'examples', 'pipelines', 'out')); // `npm run pipelines`
    symlinkSync(path.join(repoRoot, 'dist'), path.join(work, 'dist'));
    symlinkSync(path.join(repoRoot, 'serve'), path.join(work, 'serve'));
    // The SageMaker steps fill in the policy files beside the script.
    symlinkSync(path.join(repoRoot, 'examples', 'sagemaker'), path.join(work, 'examples', 'sagemaker'));
    sharedTmp = path.join(work, 'tmp');
    mkdirSync(sharedTmp);
    if (blocks.some((b) => b.kind === 'haproxy')) {
      for (const p of HAPROXY_PORTS) haproxyPorts.set(p, String(await freePort()));
      const recipe = readFileSync(path.join(repoRoot, 'examples', 'haproxy', 'haproxy.cfg'), 'utf8');
      mkdirSync(path.join(work, 'examples', 'haproxy'));
      writeFileSync(path.join(work, 'examples', 'haproxy', 'haproxy.cfg'), withHaproxyPorts(recipe));
    }
    port = await freePort();
    // `npm start` without npm: its prestart (build, demo) is done above; this is its start script.
    const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    const start = pkg.scripts['start']!;
    assert.match(start, /MME_MODEL_SOURCE=\$\{MME_MODEL_SOURCE:-examples\/demo\/repository\}/);
    server = spawn('sh', ['-c', start], {
      cwd: work,
      detached: true, // its own process group: the shell and the node it starts stop together
      env: cleanEnv({ SAGEMAKER_BIND_TO_PORT: String(port) }),
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let printed = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`npm start's server did not listen within 60 s: ${printed}`)), 60_000);
      server!.stdout!.on('data', (d: Buffer) => {
        printed += d.toString();
        if (printed.includes('onnx-mme listening')) {
          clearTimeout(timer);
          resolve();
        }
      });
      server!.once('exit', (code) => reject(new Error(`the server exited with ${code}: ${printed}`)));
    });
    s3 = await startLoopbackS3(['my-model-bucket']);
  });

  after(async () => {
    if (server && server.exitCode === null && server.pid !== undefined) {
      const exited = new Promise((r) => server!.once('exit', r));
      process.kill(-server.pid, 'SIGTERM');
      await exited;
    }
    await s3?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  function withHaproxyPorts(text: string): string {
    return text.replace(new RegExp(`\\b(${HAPROXY_PORTS.join('|')})\\b`, 'g'), (p) => haproxyPorts.get(p)!);
  }

  /** The one-host HAProxy recipe: its own ports, haproxy on PATH, everything else as written. */
  async function haproxyRecipe(list: ReturnType<typeof steps>, base: { cwd: string; timeoutMs: number }) {
    const tmp = await mkdtemp(path.join(work, 'tmp-'));
    const bin = path.dirname(haproxyBinary());
    return runSteps(list, { ...base, env: cleanEnv({ TMPDIR: tmp, PATH: `${bin}:${process.env['PATH'] ?? ''}` }), rewrite: withHaproxyPorts });
  }

  /** A block that starts its own servers: 8080 and 4569 become free ports, everything else as written. */
  async function standalone(list: ReturnType<typeof steps>, base: { cwd: string; timeoutMs: number }) {
    const [http, s3port] = [await freePort(), await freePort()];
    const tmp = await mkdtemp(path.join(work, 'tmp-'));
    return runSteps(list, {
      ...base,
      env: cleanEnv({ SAGEMAKER_BIND_TO_PORT: String(http), S3_PORT: String(s3port), TMPDIR: tmp }),
      rewrite: (c) => c.replaceAll('localhost:8080', `127.0.0.1:${http}`).replaceAll('127.0.0.1:4569', `127.0.0.1:${s3port}`),
    });
  }

  for (const block of blocks) {
    it(`${block.file}:${block.line} (${block.kind})`, async (t) => {
      if (block.kind === 'demo-server-python' && !hasNumpy) {
        t.skip('python3 with numpy is not installed');
        return;
      }
      const base = { cwd: work, timeoutMs: 120_000 };
      const local = (c: string) => c.replaceAll('localhost:8080', `127.0.0.1:${port}`);
      const list = steps(block.text);
      assert.ok(list.length > 0, 'an empty block');
      const filesBefore = filesUnder(work);
      const results =
        block.kind === 'standalone'
          ? await standalone(list, base)
          : block.kind === 'haproxy'
            ? await haproxyRecipe(list, base)
            : block.kind === 'sagemaker'
              ? await runSteps(list, {
                  ...base,
                  env: cleanEnv({
                    TMPDIR: sharedTmp,
                    AWS_ENDPOINT_URL_S3: s3!.endpoint,
                    AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId,
                    AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
                  }),
                  rewrite: (c) => (c.includes('deploy-mme.js') ? `${c} --dry-run` : c),
                })
              : await runSteps(list, { ...base, env: cleanEnv({ TMPDIR: sharedTmp }), rewrite: local });
      const failed = results
        .filter((r) => r.mismatch !== undefined)
        .map((r) => `line ${block.line + r.step.line}: ${r.step.command.split('\n')[0]}\n  ${r.mismatch}`);
      assert.deepEqual(failed, []);
      const left = filesUnder(work).filter((f) => !filesBefore.includes(f));
      assert.deepEqual(left, [], 'files the block left where it ran (a quick start writes under "${TMPDIR:-/tmp}" or $(mktemp -d))');
      if (block.kind === 'sagemaker') {
        const deploy = results.find((r) => r.step.command.includes('deploy-mme.js'));
        if (deploy) {
          const printed = JSON.parse(deploy.output) as {
            model: { PrimaryContainer: { Mode: string; ModelDataUrl: string } };
            invocations: { TargetModel: string }[];
          };
          assert.equal(printed.model.PrimaryContainer.Mode, 'MultiModel');
          assert.match(printed.model.PrimaryContainer.ModelDataUrl, /^s3:\/\//);
          assert.ok(printed.invocations.length > 0);
        }
      }
    });
  }
});

describe('the step reader', () => {
  it('pairs commands with the comment lines under them, heredocs and continuations included', () => {
    const list = steps("# prose\necho a \\\n  b\n# a b\n\n# more prose\n#   on two lines\ncat > f <<'EOF'\nx\nEOF\ncat f\n# x\npython3 -c 'a\nb' \\\n  -x\n");
    assert.deepEqual(
      list.map((s) => [s.command, s.expected]),
      [
        ['echo a \\\n  b', ['a b']],
        ["cat > f <<'EOF'\nx\nEOF", []],
        ['cat f', ['x']],
        ["python3 -c 'a\nb' \\\n  -x", []],
      ],
    );
  });
  it('fails a command whose output differs from the docs, or that fails', async () => {
    const results = await runSteps(steps(`echo 1\n# 2\nfalse\necho '{"a":1,"b":2}'\n# {"a":1,...}   (annotation)\n`), { cwd: tmpdir(), env: process.env });
    assert.match(results[0]!.mismatch ?? '', /printed "1", the docs show "2"/);
    assert.match(results[1]!.mismatch ?? '', /exit status 1/);
    assert.equal(results[2]!.mismatch, undefined);
  });
});
