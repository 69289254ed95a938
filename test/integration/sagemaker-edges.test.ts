/**
 * The SageMaker management API's edges, from outside: the real server on a
 * real socket, driven with fetch and raw HTTP. Each case was a defect
 * (issue 19 item 8):
 *  - a model_name too long for any URL was accepted, could then never be
 *    invoked or deleted, and stayed loaded;
 *  - a DELETE while the same model was loading answered 404, and the load
 *    then completed and stayed listed;
 *  - `url` was checked lexically: a symlink into /proc was scanned, `url: "/"`
 *    walked the filesystem for seconds and answered 400 or 507 at random;
 *  - error messages named host paths (the cache dir, the source root).
 */
import assert from 'node:assert/strict';
import { mkdir, realpath, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { addSub, ensembleRepository, sizedModel, writeModelDir, writeRepository } from '../../examples/models/zoo.js';
import { slowModel } from '../support/slow-model.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer, type JsonReply, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();
let server: TestServer;
let root: string;
/** /opt/ml/models/<hash>/model as SageMaker lays it out, under a temp dir. */
let models: string;
let sourceDir: string;
let cacheDir: string;

const MAX_ENTRIES = 500;
const seq16 = Array.from({ length: 16 }, (_, i) => i);
const addSubBody = { inputs: [input('INPUT0', 'FP32', [1, 16], seq16), input('INPUT1', 'FP32', [1, 16], seq16)] };

function load(name: string, url: string, target?: string): Promise<JsonReply> {
  return request(`${server.url}/models`, {
    method: 'POST',
    headers: target ? { 'X-Amzn-SageMaker-Target-Model': target } : {},
    json: { model_name: name, url },
  });
}

const del = (name: string): Promise<JsonReply> => request(`${server.url}/models/${encodeURIComponent(name)}`, { method: 'DELETE' });
/** Names in GET /models, each cut to 40 characters (an assertion must not print a 3 MiB name). */
const listed = async (): Promise<string[]> =>
  ((await request(`${server.url}/models`)).body.models as { modelName: string }[]).map((m) => m.modelName.slice(0, 40));

async function waitFor(cond: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 2));
  }
}

before(async () => {
  root = await realpath(await tempDir(ctx));
  models = path.join(root, 'opt-ml-models');
  sourceDir = path.join(root, 'source');
  cacheDir = path.join(root, 'cache');
  await mkdir(sourceDir, { recursive: true });
  // A small entry limit, so a tree over it is cheap to build.
  // Roots as wide as '/': the system trees, the cache and the tree bounds below are walls of their own inside any root
  // (what a url outside narrower roots gets is test/integration/access-control.test.ts's).
  server = await startTestServer({
    modelSource: sourceDir,
    cacheDir,
    env: { SAGEMAKER_MULTI_MODEL: 'true', MME_MODEL_URL_ROOTS: '/', MME_ARCHIVE_MAX_ENTRIES: String(MAX_ENTRIES) },
  });
});

after(async () => {
  await server.close();
  await ctx.run();
});

describe('model_name limits', () => {
  it('a 3 MiB model_name is refused at once with 400 naming the limit, without echoing it or registering anything', async () => {
    const url = path.join(models, 'huge', 'model');
    await writeModelDir(url, 'add_sub', addSub());
    const name = 'n'.repeat(3 * 1024 * 1024);
    const started = performance.now();
    const r = await load(name, url);
    const ms = performance.now() - started;
    assert.equal(r.status, 400, r.text.slice(0, 300));
    assert.equal(r.body.code, 'INVALID_REQUEST');
    assert.match(r.body.error, /model_name is 3145728 characters long, over the limit of 1024/);
    assert.ok(r.text.length < 2048, `the answer echoes the name (${r.text.length} bytes)`);
    assert.ok(!(await listed()).includes('n'.repeat(40)), 'the 3 MiB name is listed');
    // Not logged either: the log lines stay small.
    assert.ok(
      server.logs.every((l) => JSON.stringify(l).length < 64 * 1024),
      'a log line holds the 3 MiB name',
    );
    console.log(`# 3 MiB model_name: ${r.status} in ${ms.toFixed(0)} ms`);
  });

  it('refuses control characters, a leading space, dot segments and an over-long target header', async () => {
    const url = path.join(models, 'names', 'model');
    await writeModelDir(url, 'add_sub', addSub());
    for (const [name, problem] of [
      ['a\u0001b', /non-printable/],
      ['a\u202Eb', /non-printable/],
      [' lead', /starts with whitespace/],
      ['..', /dot segment/],
      ['.', /dot segment/],
      ['', /model_name|load request/],
    ] as const) {
      const r = await load(name, url);
      assert.equal(r.status, 400, `${JSON.stringify(name)}: ${r.text.slice(0, 300)}`);
      assert.match(r.body.error, problem);
    }
    const longHeader = await load('ok-name', url, 't'.repeat(1025));
    assert.equal(longHeader.status, 400, longHeader.text.slice(0, 300));
    assert.match(longHeader.body.error, /X-Amzn-SageMaker-Target-Model is 1025 characters long, over the limit of 1024/);
    for (const name of await listed()) assert.ok(!['a\u0001b', 'a\u202Eb', ' lead', '..', '.', 'ok-name'].includes(name), `${JSON.stringify(name)} is listed`);
  });

  it('the longest name taken (1024 characters, 9 KiB encoded) is loaded, invoked, described and deleted over a real socket', async () => {
    const url = path.join(models, 'longest', 'model');
    await writeModelDir(url, 'add_sub', addSub());
    // U+20AC is 3 bytes of UTF-8: 1024 of them are 9216 bytes percent-encoded in the request line.
    const name = '\u20AC'.repeat(1024);
    const target = 'x'.repeat(1024);
    const loaded = await load(name, url, target);
    assert.equal(loaded.status, 200, loaded.text.slice(0, 300));
    const enc = encodeURIComponent(name);
    assert.equal(enc.length, 9216);
    const described = await request(`${server.url}/models/${enc}`);
    assert.equal(described.status, 200);
    assert.equal(described.body.modelName, name);
    const inv = await request(`${server.url}/models/${enc}/invoke`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': target }, json: addSubBody });
    assert.equal(inv.status, 200, inv.text.slice(0, 300));
    assert.deepEqual(
      inv.body.outputs[0].data,
      seq16.map((x) => 2 * x),
    );
    const d = await request(`${server.url}/models/${enc}`, { method: 'DELETE', headers: { 'X-Amzn-SageMaker-Target-Model': target } });
    assert.equal(d.status, 200, d.text.slice(0, 300));
    assert.ok(!(await listed()).includes(name.slice(0, 40)));
  });
});

describe('errors never name host paths', () => {
  it('bad inputs across /models, /invocations and /v2 answer without the cache dir, the source root or the temp dir', async () => {
    // The local source holds broken things of every kind.
    await writeFile(path.join(sourceDir, 'corrupt.tar.gz'), Buffer.from('not a gzip stream at all'));
    await writeFile(path.join(sourceDir, 'plainfile'), 'x');
    await mkdir(path.join(sourceDir, 'emptydir'), { recursive: true });
    await writeModelDir(sourceDir, 'garbage', { onnx: Buffer.from('not an onnx graph'), config: 'name: "garbage"\nbackend: "onnxruntime"\n' });
    await writeModelDir(sourceDir, 'dangling', {
      config:
        'name: "dangling"\nbackend: "onnxruntime"\nmax_batch_size: 0\ninput [{ name: "x" data_type: TYPE_FP32 dims: [1] }]\noutput [{ name: "y" data_type: TYPE_FP32 dims: [1] }]\n',
    });
    await symlink(path.join(root, 'nowhere.onnx'), path.join(sourceDir, 'dangling', '1', 'model.onnx'));
    const brokenUrl = path.join(models, 'broken', 'model');
    await writeModelDir(brokenUrl, 'add_sub', { onnx: addSub().onnx, config: 'max_batch_size: "eight"' });
    const fileUrl = path.join(models, 'afile');
    await mkdir(models, { recursive: true });
    await writeFile(fileUrl, 'x');

    const invokeTarget = (target: string) =>
      request(`${server.url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': target }, json: addSubBody });
    const replies: [string, JsonReply][] = [
      ['invocations missing', await invokeTarget('missing.tar.gz')],
      ['invocations missing dir', await invokeTarget('missing')],
      ['invocations corrupt archive', await invokeTarget('corrupt.tar.gz')],
      ['invocations plain file', await invokeTarget('plainfile')],
      ['invocations empty dir', await invokeTarget('emptydir')],
      ['invocations garbage onnx', await invokeTarget('garbage')],
      ['invocations dangling link', await invokeTarget('dangling')],
      ['invocations no target', await request(`${server.url}/invocations`, { method: 'POST', json: addSubBody })],
      ['v2 infer missing', await request(`${server.url}/v2/models/missing/infer`, { method: 'POST', json: addSubBody })],
      ['v2 metadata corrupt', await request(`${server.url}/v2/models/corrupt.tar.gz`)],
      ['v2 load emptydir', await request(`${server.url}/v2/repository/models/emptydir/load`, { method: 'POST' })],
      ['v2 ready missing', await request(`${server.url}/v2/models/missing/ready`)],
      ['load missing url', await load('m1', path.join(models, 'does-not-exist', 'model'))],
      ['load url is a file', await load('m2', fileUrl)],
      ['load broken config', await load('m3', brokenUrl)],
      ['load the cache dir', await load('m4', cacheDir)],
      ['load the source root', await load('m5', sourceDir)],
      ['load /etc', await load('m6', '/etc')],
      ['load relative', await load('m7', 'relative/path')],
      ['invoke unknown', await request(`${server.url}/models/nope/invoke`, { method: 'POST', json: addSubBody })],
      ['delete unknown', await del('nope')],
    ];
    const secrets = [cacheDir, sourceDir, root, os.tmpdir(), '/etc/'];
    const leaks: string[] = [];
    for (const [what, r] of replies) {
      assert.ok(r.status >= 400, `${what}: ${r.status} ${r.text}`);
      if (secrets.some((s) => r.text.includes(s))) leaks.push(`${what} (${r.status}): ${r.body?.error ?? r.text}`);
    }
    assert.deepEqual(leaks, [], `answers naming host paths:\n${leaks.join('\n')}`);
    assert.deepEqual(await listed(), []);
  });
});

describe('DELETE and POST of one name at the same time', () => {
  const peek = (name: string) => server.running.registry.managed.resident(name);

  it('a DELETE while the model is loading cancels the load: 200, then the model is neither listed nor loaded, and the POST answers 404', async () => {
    // Its load's warm-up runs the whole graph once (constant shape): the DELETE arrives while it loads.
    const url = path.join(models, 'loading1', 'model');
    await writeModelDir(url, 'slow', slowModel({ layers: 8 }));
    const posted = load('loading1', url);
    await waitFor(() => peek('loading1')?.state === 'LOADING');
    // Meanwhile an invoke is a clear 404, not a half-loaded model.
    const early = await request(`${server.url}/models/loading1/invoke`, {
      method: 'POST',
      json: { inputs: [input('INPUT0', 'FP32', [1, 512], new Array(512).fill(1))] },
    });
    // (Still loading after it answered: it was answered during the load.)
    if (peek('loading1')?.state === 'LOADING') {
      assert.equal(early.status, 404, early.text);
      assert.match(early.body.error, /'loading1' is not loaded yet: its POST \/models is still loading it/);
    }
    const started = performance.now();
    const d = await del('loading1');
    const deleteMs = performance.now() - started;
    assert.equal(d.status, 200, d.text);
    // DELETE answered: the load is over and released, not half there.
    assert.equal(peek('loading1'), undefined, 'still resident after DELETE answered');
    assert.equal((await request(`${server.url}/models/loading1`)).status, 404);
    const p = await posted;
    assert.equal(p.status, 404, p.text);
    assert.equal(p.body.code, 'MODEL_NOT_FOUND');
    assert.match(p.body.error, /model 'loading1' was unloaded \(DELETE \/models\/\{name\}\) while it was loading/);
    assert.ok(!(await listed()).includes('loading1'));
    const inv = await request(`${server.url}/models/loading1/invoke`, {
      method: 'POST',
      json: { inputs: [input('INPUT0', 'FP32', [1, 512], new Array(512).fill(1))] },
    });
    assert.equal(inv.status, 404);
    assert.ok(server.logs.some((l) => l['msg'] === 'model load cancelled: the model was unloaded while it loaded' && l['model'] === 'loading1'));
    assert.equal(server.running.registry.loadedCount(), 0);
    // The name is free again.
    assert.equal((await load('loading1', url)).status, 200);
    assert.equal((await del('loading1')).status, 200);
    console.log(`# DELETE during load: ${d.status} in ${deleteMs.toFixed(0)} ms; POST ${p.status}; listed afterwards: no`);
  });

  it('a DELETE of a name never registered is 404, also while another name loads', async () => {
    const url = path.join(models, 'loading2', 'model');
    await writeModelDir(url, 'slow', slowModel({ layers: 8 }));
    const posted = load('loading2', url);
    await waitFor(() => peek('loading2')?.state === 'LOADING');
    const d = await del('never-registered');
    assert.equal(d.status, 404);
    assert.equal((await posted).status, 200);
    assert.equal((await del('loading2')).status, 200);
  });

  it('a second POST while the first still loads a broken package fails with the same error, not 409', async () => {
    // An ensemble whose first step takes a while to create (48 MiB of weights) and whose second step's config is broken.
    const ens = ensembleRepository();
    const url = path.join(models, 'twice-broken', 'model');
    await writeRepository(url, {
      ...ens.models,
      preprocess: { onnx: sizedModel(48 * 1024 * 1024).onnx!, config: `name: "preprocess"\n${sizedModel(1024).config!}` },
      classifier: { onnx: addSub().onnx, config: 'max_batch_size: "eight"' },
    });
    const first = load('twice-broken', url);
    await waitFor(() => peek('twice-broken')?.state === 'LOADING');
    const [a, b] = await Promise.all([first, load('twice-broken', url)]);
    assert.deepEqual([a.status, b.status], [400, 400], `${a.text} / ${b.text}`);
    assert.equal(b.body.code, 'INVALID_MODEL');
    assert.equal(b.body.error, a.body.error);
    assert.ok(!(await listed()).includes('twice-broken'));
  });

  it('two POSTs of one name at once: one 200, the other 409 once the model is loaded', async () => {
    const url = path.join(models, 'twice', 'model');
    await writeModelDir(url, 'add_sub', addSub());
    const [a, b] = await Promise.all([load('twice', url), load('twice', url)]);
    assert.deepEqual([a.status, b.status].sort(), [200, 409], `${a.text} / ${b.text}`);
    assert.ok((await listed()).includes('twice'));
    assert.equal((await del('twice')).status, 200);
  });

  it('a POST of a name while its DELETE is in progress waits for the DELETE, then loads: 200 and it serves', async () => {
    const url = path.join(models, 'reload1', 'model');
    await writeModelDir(url, 'slow', slowModel({ rowsInput: true, layers: 8 }));
    assert.equal((await load('reload1', url)).status, 200);
    // A request in flight holds the model, so the DELETE waits for it.
    const body = { inputs: [input('INPUT0', 'FP32', [1, 512], new Array(512).fill(1)), input('SHAPE', 'INT64', [2], [2048, 512])] };
    const inflight = request(`${server.url}/models/reload1/invoke`, { method: 'POST', json: body });
    await waitFor(() => server.running.service.inflightCount > 0);
    const order: string[] = [];
    const deleting = del('reload1').then((r) => (order.push('delete'), r));
    await waitFor(() => !server.running.registry.managed.has('reload1'));
    const posted = load('reload1', url).then((r) => (order.push('post'), r));
    const [inv, d, p] = await Promise.all([inflight, deleting, posted]);
    assert.equal(inv.status, 200, inv.text.slice(0, 300));
    assert.equal(d.status, 200, d.text);
    assert.equal(p.status, 200, p.text);
    assert.deepEqual(order, ['delete', 'post']);
    const again = await request(`${server.url}/models/reload1/invoke`, {
      method: 'POST',
      json: { inputs: [body.inputs[0], input('SHAPE', 'INT64', [2], [1, 512])] },
    });
    assert.equal(again.status, 200, again.text.slice(0, 300));
    assert.equal((await del('reload1')).status, 200);
  });
});

describe('url: the real path is checked, and the work is bounded', () => {
  it('url "/" is refused at once with 400, the same answer every time, without walking the filesystem', async () => {
    const statuses: number[] = [];
    const times: number[] = [];
    for (let i = 0; i < 3; i++) {
      const started = performance.now();
      const r = await load(`root${i}`, '/');
      times.push(performance.now() - started);
      statuses.push(r.status);
      assert.equal(r.body.code, 'INVALID_REQUEST', r.text);
      assert.match(r.body.error, /url is the filesystem root, which never holds a model/);
    }
    assert.deepEqual(statuses, [400, 400, 400]);
    console.log(`# url "/": ${statuses.join('/')} in ${times.map((t) => t.toFixed(0)).join('/')} ms`);
  });

  it('a url that is a symbolic link into /proc, /sys or /etc is refused with 400 on its real path', async () => {
    const links = path.join(root, 'links');
    await mkdir(links, { recursive: true });
    for (const [name, target, where] of [
      ['to-proc', '/proc/self', /the system directory \/proc/],
      ['to-sys', '/sys', /the system directory \/sys/],
      ['to-etc', '/etc', /the system directory \/etc/],
      ['to-root', '/', /the filesystem root/],
    ] as const) {
      await symlink(target, path.join(links, name));
      const started = performance.now();
      const r = await load(name, path.join(links, name));
      const ms = performance.now() - started;
      assert.equal(r.status, 400, `${name}: ${r.text}`);
      assert.match(r.body.error, /resolves \(through a symbolic link\) into/);
      assert.match(r.body.error, where);
      assert.ok(!r.text.includes(links), r.text);
      if (name === 'to-proc') console.log(`# url symlink into /proc: ${r.status} in ${ms.toFixed(0)} ms`);
    }
    for (const [url, where] of [
      ['/proc/self', /\/proc/],
      ['/etc', /\/etc/],
      ['/dev/shm', /\/dev/],
      ['/usr', /\/usr/],
    ] as const) {
      const r = await load('sys', url);
      assert.equal(r.status, 400, `${url}: ${r.text}`);
      assert.match(r.body.error, where);
    }
    const cache = await load('cache', path.join(cacheDir));
    assert.equal(cache.status, 400, cache.text);
    assert.match(cache.body.error, /cache directory/);
    assert.ok(!(await listed()).some((n) => ['to-proc', 'to-sys', 'to-etc', 'to-root', 'sys', 'cache'].includes(n)));
  });

  it('a url through a symbolic link to a model directory loads (modelUrl is the url as sent)', async () => {
    const real = path.join(models, 'linked-real', 'model');
    await writeModelDir(real, 'add_sub', addSub());
    const link = path.join(root, 'linked-url');
    await symlink(real, link);
    const r = await load('linked', link);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.modelUrl, link);
    const inv = await request(`${server.url}/models/linked/invoke`, { method: 'POST', json: addSubBody });
    assert.equal(inv.status, 200, inv.text);
    assert.equal((await del('linked')).status, 200);
  });

  it('a tree with more entries than MME_ARCHIVE_MAX_ENTRIES is refused with the same 400 every time', async () => {
    const url = path.join(models, 'huge-tree', 'model');
    await writeModelDir(url, 'add_sub', addSub());
    const junk = path.join(url, 'junk');
    await mkdir(junk, { recursive: true });
    for (let i = 0; i < MAX_ENTRIES; i++) await writeFile(path.join(junk, `f${i}`), '');
    const answers = [await load('huge-tree', url), await load('huge-tree', url)];
    for (const r of answers) {
      assert.equal(r.status, 400, r.text);
      assert.equal(r.body.code, 'INVALID_MODEL');
      assert.match(r.body.error, new RegExp(`holds more than ${MAX_ENTRIES} entries \\(MME_ARCHIVE_MAX_ENTRIES\\)`));
    }
    assert.equal(answers[0]!.text, answers[1]!.text);
    assert.ok(!(await listed()).includes('huge-tree'));
  });

  it('a package with a link into /proc is refused before anything reads it', async () => {
    const url = path.join(models, 'proc-link', 'model');
    await writeModelDir(url, 'add_sub', { config: addSub().config! });
    await symlink('/proc/self/environ', path.join(url, 'add_sub', '1', 'model.onnx'));
    const r = await load('proc-link', url);
    assert.equal(r.status, 400, r.text);
    assert.equal(r.body.code, 'INVALID_MODEL');
    assert.match(r.body.error, /'add_sub\/1\/model\.onnx' in the package links into the system directory \/proc/);
    assert.ok(!(await listed()).includes('proc-link'));
  });
});

/** A SageMaker-mode server that loads urls only under `allowed`, and a POST /models to it. */
async function rootsServer(base: string, allowed: string): Promise<{ s: TestServer; post(name: string, url: string): Promise<JsonReply> }> {
  const s = await startTestServer({
    modelSource: path.join(base, 'source'),
    cacheDir: path.join(base, 'cache'),
    env: { SAGEMAKER_MULTI_MODEL: 'true', MME_MODEL_URL_ROOTS: allowed },
  });
  return { s, post: (name, url) => request(`${s.url}/models`, { method: 'POST', json: { model_name: name, url } }) };
}

describe('MME_MODEL_URL_ROOTS', () => {
  it('a package inside the roots whose links lead out of them is refused; links that stay inside load', async (t) => {
    const base = await realpath(await tempDir(t));
    const allowed = path.join(base, 'opt-ml-models');
    const outside = path.join(base, 'elsewhere');
    await writeModelDir(path.join(outside, 'model'), 'add_sub', addSub());
    // A file link out of the roots, and a directory link inside them whose own file link leads out.
    const fileOut = path.join(allowed, 'h1', 'model');
    await writeModelDir(fileOut, 'add_sub', { config: addSub().config! });
    await symlink(path.join(outside, 'model', 'add_sub', '1', 'model.onnx'), path.join(fileOut, 'add_sub', '1', 'model.onnx'));
    const hop = path.join(allowed, 'shared', '1');
    await mkdir(hop, { recursive: true });
    await symlink(path.join(outside, 'model', 'add_sub', '1', 'model.onnx'), path.join(hop, 'model.onnx'));
    const dirHop = path.join(allowed, 'h2', 'model');
    await mkdir(path.join(dirHop, 'add_sub'), { recursive: true });
    await writeFile(path.join(dirHop, 'add_sub', 'config.pbtxt'), addSub().config!);
    await symlink(hop, path.join(dirHop, 'add_sub', '1'));
    // Links that stay inside the roots.
    const fine = path.join(allowed, 'h3', 'model');
    await writeModelDir(path.join(allowed, 'h3', 'real'), 'add_sub', addSub());
    await mkdir(path.join(fine, 'add_sub'), { recursive: true });
    await writeFile(path.join(fine, 'add_sub', 'config.pbtxt'), addSub().config!);
    await symlink(path.join(allowed, 'h3', 'real', 'add_sub', '1'), path.join(fine, 'add_sub', '1'));
    const { s, post } = await rootsServer(base, allowed);
    try {
      for (const [name, url, rel] of [
        ['file-out', fileOut, 'add_sub/1/model.onnx'],
        ['dir-hop', dirHop, 'add_sub/1/model.onnx'],
      ] as const) {
        const r = await post(name, url);
        assert.equal(r.status, 400, `${name}: ${r.text}`);
        assert.equal(r.body.code, 'INVALID_MODEL');
        assert.match(
          r.body.error,
          new RegExp(`'${rel.replace(/[./]/g, (c) => `\\${c}`)}' in the package links outside the directories MME_MODEL_URL_ROOTS allows`),
        );
        assert.ok(!r.text.includes(base), r.text);
      }
      const ok = await post('fine', fine);
      assert.equal(ok.status, 200, ok.text);
      const inv = await request(`${s.url}/models/fine/invoke`, { method: 'POST', json: addSubBody });
      assert.equal(inv.status, 200, inv.text);
    } finally {
      await s.close();
    }
  });

  it('only urls whose real path lies in the named directories load; a link out of them is refused', async (t) => {
    const base = await realpath(await tempDir(t));
    const allowed = path.join(base, 'opt-ml-models');
    const inside = path.join(allowed, 'h1', 'model');
    await writeModelDir(inside, 'add_sub', addSub());
    const outside = path.join(base, 'elsewhere', 'model');
    await writeModelDir(outside, 'add_sub', addSub());
    await symlink(outside, path.join(allowed, 'escape'));
    const { s, post } = await rootsServer(base, allowed);
    try {
      const ok = await post('in', inside);
      assert.equal(ok.status, 200, ok.text);
      for (const [name, url] of [
        ['out', outside],
        ['escape', path.join(allowed, 'escape')],
      ] as const) {
        const r = await post(name, url);
        assert.equal(r.status, 400, `${name}: ${r.text}`);
        assert.match(r.body.error, /url lies outside the directories MME_MODEL_URL_ROOTS allows/);
        assert.ok(!r.text.includes(base), r.text);
      }
      const list = await request(`${s.url}/models`);
      assert.deepEqual(
        list.body.models.map((m: { modelName: string }) => m.modelName),
        ['in'],
      );
    } finally {
      await s.close();
    }
  });
});
