/**
 * The container image without a Docker engine: the runtime tree both
 * Dockerfiles build (docker/assemble-runtime.sh: production install from the
 * lockfile + compiled src + serve) is assembled here by the same script, laid
 * out as the runtime stage lays it out (symlinks on the PATH, the stage's ENV),
 * and started the way SageMaker starts the image (`docker run IMAGE serve`:
 * the exec-form ENTRYPOINT with `serve`, SAGEMAKER_BIND_TO_PORT,
 * SAGEMAKER_MULTI_MODEL=true), then pinged and invoked. The Dockerfiles are
 * read first and every fact the test relies on is checked against them, so the
 * image and this test cannot drift apart silently.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, stat, symlink } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { addSub, writeModelDir } from '../../examples/models/zoo.js';
import { copyParts, execForm, keyValues, readDockerfile, type Dockerfile, type Instruction, type Stage } from '../support/dockerfile.js';
import { LAUNCHER_ENV, LAUNCHER_NODE_FLAGS } from '../support/launcher.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request } from '../support/test-server.js';

const ctx = new Cleanups();
after(() => ctx.run());

/** Root of the compiled tree this test runs from (dist/, or a helper's out dir). */
const buildRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The repository: dist/'s parent in CI, else the working directory (`npm test` runs from the root). */
const repoRoot = [path.resolve(buildRoot, '..'), process.cwd()].find((d) => existsSync(path.join(d, 'docker', 'assemble-runtime.sh'))) ?? process.cwd();

const IMAGE_ROOT = '/opt/onnx-mme';
const IMAGE_BIN = '/usr/local/bin';

interface ImageSpec {
  readonly file: string;
  readonly dockerfile: Dockerfile;
  readonly build: Stage;
  readonly runtime: Stage;
}

function all(stage: Stage, keyword: string): Instruction[] {
  return stage.instructions.filter((i) => i.keyword === keyword);
}

function one(stage: Stage, keyword: string, file: string): Instruction {
  const found = all(stage, keyword);
  assert.equal(found.length, 1, `${file}: the runtime stage must have exactly one ${keyword}`);
  return found[0]!;
}

async function loadImage(name: string): Promise<ImageSpec> {
  const file = path.join('docker', name);
  const dockerfile = await readDockerfile(path.join(repoRoot, file));
  const build = dockerfile.stages.find((s) => s.name === 'build');
  assert.ok(build, `${file}: no stage named 'build'`);
  const runtime = dockerfile.stages[dockerfile.stages.length - 1]!;
  assert.notEqual(runtime, build, `${file}: the last stage must be the runtime stage`);
  return { file, dockerfile, build, runtime };
}

/** The assemble-runtime.sh invocation of the build stage: [repo, buildDir, dest] as paths inside the image. */
function assembleArgs(image: ImageSpec): [string, string, string] {
  const runs = all(image.build, 'RUN')
    .map((r) => /sh docker\/assemble-runtime\.sh (\S+) (\S+) (\S+)/.exec(r.args))
    .filter((m) => m !== null);
  assert.equal(runs.length, 1, `${image.file}: the build stage must run docker/assemble-runtime.sh once`);
  const m = runs[0]!;
  return [m[1]!, m[2]!, m[3]!];
}

async function freePort(): Promise<number> {
  const probe = createServer();
  probe.listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const address = probe.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** path → [size, mtime] of every file under dir. */
async function snapshot(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const walk = async (d: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      const s = await stat(p);
      out.set(path.relative(dir, p), `${s.size}:${s.mtimeMs}`);
      if (e.isDirectory()) await walk(p);
    }
  };
  await walk(dir);
  return out;
}

const images: ImageSpec[] = [];

describe('container images', () => {
  before(async () => {
    images.push(await loadImage('Dockerfile.cpu'), await loadImage('Dockerfile.gpu'));
  });

  it('both Dockerfiles build the same runtime tree with the shared script and start it the same way', () => {
    for (const image of images) {
      const { file, build, runtime, dockerfile } = image;
      assert.match(build.base, /^node:24-bookworm-slim$/, `${file}: build stage base`);
      // Every file the build stage copies exists, and it copies what the script needs (and no tests, no examples).
      const copied = all(build, 'COPY').flatMap((c) => copyParts(c.args).sources);
      for (const src of copied) assert.ok(existsSync(path.join(repoRoot, src)), `${file}: COPY ${src}: no such path in the repository`);
      for (const needed of ['package.json', 'package-lock.json', 'tsconfig.json', 'serve', 'src', 'docker/assemble-runtime.sh']) {
        assert.ok(copied.includes(needed), `${file}: the build stage does not COPY ${needed}`);
      }
      assert.ok(
        all(build, 'RUN').some((r) => /^npm ci\b/.test(r.args) && !/--omit/.test(r.args)),
        `${file}: a full 'npm ci' must fill the npm cache the production install reads`,
      );
      assert.ok(
        all(build, 'RUN').some((r) => r.args.includes('npm run build')),
        `${file}: no 'npm run build'`,
      );
      assert.deepEqual(assembleArgs(image), ['/src', '/src/dist', IMAGE_ROOT], `${file}: assemble-runtime.sh arguments`);
      assert.ok(
        all(build, 'WORKDIR').some((w) => w.args === '/src'),
        `${file}: the build stage works in /src`,
      );

      // Runtime stage: the assembled tree copied unchanged, nothing else from the build.
      const fromBuild = all(runtime, 'COPY')
        .map((c) => copyParts(c.args))
        .filter((c) => c.from === 'build');
      assert.ok(
        fromBuild.some((c) => c.sources.length === 1 && c.sources[0] === IMAGE_ROOT && c.dest === IMAGE_ROOT),
        `${file}: COPY --from=build ${IMAGE_ROOT} ${IMAGE_ROOT}`,
      );
      for (const c of fromBuild) {
        assert.ok(
          c.sources.every((s) => s === IMAGE_ROOT || s === '/usr/local/bin/node'),
          `${file}: runtime stage copies ${c.sources.join(' ')} from the build stage`,
        );
      }
      const links = all(runtime, 'RUN').flatMap((r) => [...r.args.matchAll(/ln -s (\S+) (\S+)/g)].map((m) => [m[1]!, m[2]!] as const));
      assert.deepEqual(
        new Map(links),
        new Map([
          [`${IMAGE_ROOT}/serve`, `${IMAGE_BIN}/serve`],
          [`${IMAGE_ROOT}/serve`, `${IMAGE_BIN}/onnx-mme`],
        ]),
        `${file}: serve and onnx-mme on the PATH, both the launcher (its process-wide settings apply to either)`,
      );
      const labels = new Map(all(runtime, 'LABEL').flatMap((l) => [...keyValues(l.args)]));
      assert.equal(labels.get('com.amazonaws.sagemaker.capabilities.multi-models'), 'true', `${file}: multi-models label`);
      assert.equal(labels.get('com.amazonaws.sagemaker.capabilities.accept-bind-to-port'), 'true', `${file}: accept-bind-to-port label`);
      assert.equal(one(runtime, 'EXPOSE', file).args, '8080');
      assert.equal(all(runtime, 'USER').length, 0, `${file}: SageMaker expects root; no USER`);
      const entrypoint = execForm(one(runtime, 'ENTRYPOINT', file).args);
      assert.ok(entrypoint, `${file}: ENTRYPOINT must be in exec form (Node as PID 1 gets SIGTERM)`);
      assert.deepEqual(entrypoint, [`${IMAGE_BIN}/onnx-mme`], `${file}: ENTRYPOINT`);
      assert.ok(!JSON.stringify(dockerfile).includes('tini'), `${file}: SageMaker's docs rule out tini`);
      assert.deepEqual(execForm(one(runtime, 'CMD', file).args), ['serve'], `${file}: CMD`);
      for (const env of all(runtime, 'ENV')) {
        assert.ok(
          !/MME_CACHE_DIR=\/opt\/ml\/model|MME_MODEL_SOURCE/.test(env.args),
          `${file}: ENV ${env.args} (the model source is SageMaker's, the cache must not be in it)`,
        );
      }
    }
    const [cpu, gpu] = images as [ImageSpec, ImageSpec];
    assert.equal(cpu.runtime.base, 'node:24-bookworm-slim');
    assert.match(gpu.runtime.base, /^nvidia\/cuda:12\.\d+\.\d+-cudnn-runtime-ubuntu22\.04$/);
    assert.ok(
      all(gpu.runtime, 'COPY').some((c) => copyParts(c.args).sources[0] === '/usr/local/bin/node'),
      'GPU image: Node.js 24 from the build stage',
    );
    const cudaInstall = all(gpu.build, 'RUN').find((r) => r.args.includes('onnxruntime-node/script/install.js'));
    assert.ok(cudaInstall, 'GPU image: runs onnxruntime-node install script');
    assert.match(cudaInstall.args, /ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules\/onnxruntime-node\/script\/install\.js/);
    assert.match(cudaInstall.args, /libonnxruntime_providers_\$p\.so/, 'GPU image: checks the provider libraries are there');
    assert.ok(!all(cpu.build, 'RUN').some((r) => r.args.includes('script/install')), 'CPU image: no CUDA libraries');
  });

  it('.dockerignore keeps build outputs and dependencies out of the context but nothing the build copies', async () => {
    const patterns = (await readFile(path.join(repoRoot, '.dockerignore'), 'utf8'))
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    for (const p of ['node_modules', 'dist', '.git']) assert.ok(patterns.includes(p), `.dockerignore: ${p}`);
    const copied = images.flatMap((i) => all(i.build, 'COPY').flatMap((c) => copyParts(c.args).sources));
    for (const src of copied) {
      for (const p of patterns) {
        const glob = p
          .replace(/[.+^$()|[\]\\]/g, '\\$&')
          .replace(/\*\*\//g, '\u0000')
          .replace(/\*/g, '[^/]*')
          .replace(/\u0000/g, '(.*/)?');
        const re = new RegExp(`^${glob}(/|$)`);
        assert.ok(!re.test(src), `.dockerignore pattern '${p}' excludes '${src}', which ${images[0]!.file} copies`);
      }
    }
  });

  it('the assembled runtime tree starts as `docker run IMAGE serve` does, answers /ping and serves a model', async (t) => {
    const image = images[0]!;
    const work = await tempDir(ctx, 'onnx-mme-packaging-');
    const dest = path.join(work, 'opt', 'onnx-mme');
    // The build stage's invocation, with its paths mapped: /src → the repository, /src/dist → this compiled tree.
    const [, , imageDest] = assembleArgs(image);
    assert.equal(imageDest, IMAGE_ROOT);
    const assembled = spawnSync('sh', [path.join(repoRoot, 'docker', 'assemble-runtime.sh'), repoRoot, buildRoot, dest], { encoding: 'utf8' });
    assert.equal(
      assembled.status,
      0,
      `assemble-runtime.sh failed (it installs offline from the npm cache a full 'npm ci' fills):\n${assembled.stderr}${assembled.stdout}`,
    );

    // What the tree holds: production dependencies only, this platform's onnxruntime binaries, compiled JS.
    const pkg = JSON.parse(await readFile(path.join(repoRoot, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    for (const dep of Object.keys(pkg.dependencies))
      assert.ok(existsSync(path.join(dest, 'node_modules', dep, 'package.json')), `production dependency ${dep} missing`);
    // A dev dependency that a production one also needs (protobufjs, under @grpc/proto-loader, depends on @types/node) is not dev-only: the lockfile says which are.
    const lock = JSON.parse(await readFile(path.join(repoRoot, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
    for (const dep of Object.keys(pkg.devDependencies)) {
      if (lock.packages[`node_modules/${dep}`]?.dev !== true) continue;
      assert.ok(!existsSync(path.join(dest, 'node_modules', dep)), `dev dependency ${dep} in the runtime tree`);
    }
    assert.deepEqual(await readdir(path.join(dest, 'node_modules', 'onnxruntime-node', 'bin', 'napi-v6')), [process.platform]);
    assert.deepEqual(await readdir(path.join(dest, 'node_modules', 'onnxruntime-node', 'bin', 'napi-v6', process.platform)), [process.arch]);
    assert.deepEqual((await readdir(dest)).sort(), ['dist', 'node_modules', 'package-lock.json', 'package.json', 'serve']);
    assert.deepEqual(await readdir(path.join(dest, 'dist')), ['src']);
    assert.equal(JSON.parse(await readFile(path.join(dest, 'package.json'), 'utf8')).type, 'module');

    // The runtime stage's symlinks, in a bin directory standing for /usr/local/bin.
    const bin = path.join(work, 'usr-local-bin');
    await mkdir(bin);
    for (const r of all(image.runtime, 'RUN')) {
      for (const m of r.args.matchAll(/ln -s (\S+) (\S+)/g)) {
        await symlink(m[1]!.replace(IMAGE_ROOT, dest), path.join(bin, path.basename(m[2]!)));
      }
    }
    const imageEnv = Object.fromEntries(all(image.runtime, 'ENV').flatMap((e) => [...keyValues(e.args)]));
    // Without this process's allocator and Node settings: the launcher must bring its own.
    const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('MALLOC_') && k !== 'NODE_OPTIONS'));
    const envBase = { ...inherited, ...imageEnv, PATH: `${bin}${path.delimiter}${process.env['PATH'] ?? ''}` };

    // A model source the way SageMaker mounts /opt/ml/model: the archive is made by the image's own CLI.
    const models = path.join(work, 'opt-ml-model');
    await mkdir(models);
    await writeModelDir(path.join(work, 'authoring'), 'add_sub', addSub());
    const packed = spawnSync(path.join(bin, 'onnx-mme'), ['pack', path.join(work, 'authoring', 'add_sub'), '-o', path.join(models, 'add_sub.tar.gz')], {
      env: envBase,
      encoding: 'utf8',
    });
    assert.equal(packed.status, 0, `onnx-mme pack from the runtime tree: ${packed.stderr}`);
    await writeModelDir(models, 'plain', addSub());
    const sourceBefore = await snapshot(models);

    const entrypoint = execForm(one(image.runtime, 'ENTRYPOINT', image.file).args)!;
    const port = await freePort();
    const tmp = path.join(work, 'tmp');
    await mkdir(tmp);
    // `docker run IMAGE serve`: the arguments replace CMD and follow the ENTRYPOINT.
    const child: ChildProcess = spawn(path.join(bin, path.basename(entrypoint[0]!)), [...entrypoint.slice(1), 'serve'], {
      env: {
        ...envBase,
        SAGEMAKER_BIND_TO_PORT: String(port),
        SAGEMAKER_MULTI_MODEL: 'true',
        MME_MODEL_SOURCE: models,
        // Standing in for /opt/ml/models, where SageMaker extracts what it loads (the roots' default under SageMaker).
        MME_MODEL_URL_ROOTS: models,
        MME_HOST: '127.0.0.1',
        // MME_CACHE_DIR is left to its default (under TMPDIR), as in the image.
        TMPDIR: tmp,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    t.after(() => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const lines: Record<string, unknown>[] = [];
    await new Promise<void>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on('line', (line) => {
        const rec = JSON.parse(line) as Record<string, unknown>;
        lines.push(rec);
        if (rec['msg'] === 'onnx-mme listening') resolve();
      });
      child.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${stderr}`)));
    });
    const listening = lines.find((l) => l['msg'] === 'onnx-mme listening')!;
    assert.equal(listening['port'], port, 'SAGEMAKER_BIND_TO_PORT is honoured');
    if (process.platform === 'linux') {
      // The launcher exec'd node (Node is PID 1 in the image) with its process-wide settings: the allocator's and V8's young generation.
      const environ = (await readFile(`/proc/${child.pid}/environ`, 'latin1')).split('\0');
      for (const [k, v] of Object.entries(LAUNCHER_ENV)) assert.ok(environ.includes(`${k}=${v}`), `the server runs with ${k}=${v}`);
      const argv = (await readFile(`/proc/${child.pid}/cmdline`, 'latin1')).split('\0');
      for (const flag of LAUNCHER_NODE_FLAGS) assert.ok(argv.includes(flag), `the server runs with ${flag}: ${argv.join(' ')}`);
      assert.ok(argv.some((a) => a.endsWith('dist/src/cli/onnx-mme.js')) && argv.includes('serve'), `the entrypoint runs the CLI's serve: ${argv.join(' ')}`);
    }
    assert.equal(listening['multiModel'], true, 'SAGEMAKER_MULTI_MODEL=true is read');
    assert.equal(listening['modelControl'], 'explicit', 'SageMaker drives the load API');
    assert.equal(listening['cacheDir'], path.join(tmp, 'onnx-mme-cache'));

    const url = `http://127.0.0.1:${port}`;
    const ping = await request(`${url}/ping`);
    assert.equal(ping.status, 200);
    assert.equal(ping.text, '');
    const list = await request(`${url}/models`);
    assert.equal(list.status, 200);
    assert.deepEqual(list.body, { models: [] });

    const seq = Array.from({ length: 16 }, (_, i) => i);
    const body = {
      inputs: [
        input('INPUT0', 'FP32', [1, 16], seq),
        input(
          'INPUT1',
          'FP32',
          [1, 16],
          seq.map(() => 1),
        ),
      ],
    };
    const invoked = await request(`${url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': 'add_sub.tar.gz' }, json: body });
    assert.equal(invoked.status, 200, invoked.text);
    assert.deepEqual(
      invoked.body.outputs[0].data,
      seq.map((v) => v + 1),
    );
    assert.deepEqual(
      invoked.body.outputs[1].data,
      seq.map((v) => v - 1),
    );

    // SageMaker's own MME flow on the same process: load by url, invoke by model_name.
    const loaded = await request(`${url}/models`, { method: 'POST', json: { model_name: 'plain-model', url: path.join(models, 'plain') } });
    assert.equal(loaded.status, 200, loaded.text);
    const viaName = await request(`${url}/models/plain-model/invoke`, { method: 'POST', json: body });
    assert.equal(viaName.status, 200, viaName.text);

    // /opt/ml/model is only read: the archive was extracted into the cache under TMPDIR.
    assert.deepEqual(await snapshot(models), sourceBefore);
    assert.ok((await readdir(path.join(tmp, 'onnx-mme-cache'))).length > 0);

    child.kill('SIGTERM');
    const [code] = (await once(child, 'exit')) as [number | null];
    assert.equal(code, 0, `exit after SIGTERM: ${stderr}`);
  });
});
