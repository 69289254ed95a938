/**
 * Who may manage models, from outside: a real `serve` process, real HTTP
 * (fetch and raw sockets) and gRPC clients, the server's own log read back.
 *
 * - Default model control (`none`) with restricted APIs: a hostile client
 *   without credentials tries every load and unload route and RPC, in every
 *   spelling express or the lean path would take (letter case, trailing
 *   slash, encoded names, /endpoints/…, gRPC and ModelMesh), with no key, a
 *   wrong key and another group's key; each is refused before its body is
 *   read, nothing loads, /ping and gRPC health stay open, and no key value
 *   reaches the log.
 * - Explicit control with url roots: every url outside the roots (a file,
 *   nothing, a system directory, a directory with a model, one without, a
 *   link out of a root) gets the same answer, over HTTP and ModelMesh.
 * - Explicit control off SageMaker without roots, or an unknown API group:
 *   the server refuses to start, naming the setting.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Metadata, status } from '@grpc/grpc-js';
import { addSub, tiny, writeModelDir, writeRepository } from '../../examples/models/zoo.js';
import { call, connect, inferRequest, type GrpcClients } from '../support/grpc-client.js';
import { repoRoot, startServe, type ServeProcess } from '../support/serve-process.js';
import { input, request, type JsonReply } from '../support/test-server.js';

const ADMIN = 'S3CR3T-admin-value';
const INFER = 'K1-infer-value';
const SCRAPE = 'M3-scrape-value';
const WRONG = 'wrong-guess-0123456789';
const seq16 = Array.from({ length: 16 }, (_, i) => i + 1);
const addSubBody = { inputs: [input('INPUT0', 'FP32', [1, 16], seq16), input('INPUT1', 'FP32', [1, 16], seq16)] };

function grpcTarget(server: ServeProcess): string {
  const listening = server.lines.find((l) => l['msg'] === 'onnx-mme listening')!;
  return `127.0.0.1:${listening['grpcPort'] as number}`;
}

function meta(pairs: Record<string, string>): Metadata {
  const m = new Metadata();
  for (const [k, v] of Object.entries(pairs)) m.set(k, v);
  return m;
}

/**
 * A request written by hand on a socket, with any request target: headers
 * declaring a body of `declared` bytes (the body's own length unless said),
 * then `body`. With a declared body that never comes, an answer can only
 * come from a server that decided without reading it.
 */
function rawRequest(
  url: string,
  method: string,
  target: string,
  headers: Record<string, string>,
  body: string,
  declared = Buffer.byteLength(body),
): Promise<{ status: number; text: string }> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1');
    let raw = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer to ${method} ${target} within 10 s${body.length < declared ? ': the server waited for the body' : ''}`));
    }, 10_000);
    socket.on('data', (d: Buffer) => {
      raw = Buffer.concat([raw, d]);
      const end = raw.indexOf('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(raw.toString('latin1'));
      if (end >= 0 && length && raw.length >= end + 4 + Number(length[1])) {
        clearTimeout(timer);
        socket.destroy();
        resolve({ status: Number(raw.subarray(9, 12).toString()), text: raw.subarray(end + 4).toString('utf8') });
      }
    });
    socket.on('error', reject);
    const lines = [`${method} ${target} HTTP/1.1`, 'Host: x', 'Content-Type: application/json', `Content-Length: ${declared}`];
    for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
    socket.write(`${lines.join('\r\n')}\r\n\r\n${body}`);
  });
}

/** Every load or unload spelling a client could try over HTTP (method, path, body). */
function manageRequests(name: string, url: string): { method: string; path: string; json?: unknown }[] {
  const load = { model_name: name, url };
  return [
    { method: 'POST', path: '/models', json: load },
    { method: 'POST', path: '/models/', json: load },
    { method: 'POST', path: '/MODELS', json: load },
    { method: 'POST', path: '/Models/?x=1', json: load },
    { method: 'DELETE', path: `/models/${name}` },
    { method: 'DELETE', path: `/MODELS/${name}/` },
    { method: 'DELETE', path: `/models/${encodeURIComponent('team/x')}` },
    { method: 'POST', path: '/v2/repository/models/add_sub/load' },
    { method: 'POST', path: '/v2/repository/models/add_sub/load/' },
    { method: 'POST', path: '/V2/Repository/Models/add_sub/LOAD' },
    { method: 'POST', path: '/v2/repository/models/team/add_sub/load' },
    { method: 'POST', path: '/v2/repository/models/add%5Fsub/load' },
    { method: 'POST', path: '/v2/repository/models/add_sub/unload' },
    { method: 'POST', path: '/V2/REPOSITORY/MODELS/add_sub/UNLOAD/' },
  ];
}

async function send(base: string, r: { method: string; path: string; json?: unknown }, headers: Record<string, string> = {}): Promise<JsonReply> {
  return request(`${base}${r.path}`, { method: r.method, headers, ...(r.json === undefined ? {} : { json: r.json }) });
}

describe('model control none, restricted APIs: a client without the keys', () => {
  let root = '';
  let managed = '';
  let server: ServeProcess;
  let grpc: GrpcClients;
  const hostileValues = [WRONG, INFER, SCRAPE];

  before(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-access-'));
    // Two models: no default model, so a request without a target gets the no-default answer.
    await writeRepository(path.join(root, 'models'), { add_sub: addSub(), tiny: tiny() });
    managed = path.join(root, 'managed', 'm1');
    await writeModelDir(managed, 'add_sub', addSub());
    server = await startServe({
      MME_MODEL_SOURCE: path.join(root, 'models'),
      MME_CACHE_DIR: path.join(root, 'cache'),
      MME_GRPC_PORT: '0',
      MME_RUNTIME_WORKERS: '1',
      // Every line the server can write, for the check that no key value is among them.
      MME_LOG_LEVEL: 'debug',
      MME_HTTP_RESTRICTED_API: `model-repository:admin-key=${ADMIN};inference:infer-key=${INFER};metrics:scrape-key=${SCRAPE}`,
      MME_GRPC_RESTRICTED_PROTOCOL: `model-repository:admin-key=${ADMIN};inference:infer-key=${INFER}`,
      MME_MODEL_CONTROL: undefined,
      MME_MODEL_URL_ROOTS: undefined,
      SAGEMAKER_MULTI_MODEL: undefined,
    });
    grpc = connect(grpcTarget(server));
  });

  after(async () => {
    grpc?.close();
    await server?.kill();
    await rm(root, { recursive: true, force: true });
  });

  it('says at start-up which mode and why, and which groups are restricted (names only)', () => {
    const listening = server.lines.find((l) => l['msg'] === 'onnx-mme listening')!;
    assert.equal(listening['modelControl'], 'none');
    assert.match(String(listening['modelControlFrom']), /default/);
    assert.deepEqual(listening['restrictedHttpApis'], ['model-repository', 'inference', 'metrics']);
    assert.deepEqual(listening['restrictedGrpcProtocols'], ['model-repository', 'inference']);
    assert.ok(server.lines.some((l) => /^model control none/.test(String(l['msg']))));
  });

  it('/ping and gRPC health stay open without any header', async () => {
    assert.equal((await request(`${server.url}/ping`)).status, 200);
    assert.equal((await request(`${server.url}/ping`, { method: 'POST' })).status, 200);
    const health = await call(grpc.health, 'Check', { service: '' });
    assert.equal(health.error, null);
    assert.equal(health.response.status, 'SERVING');
  });

  it('every load and unload spelling: 403 API_RESTRICTED without the key, with a wrong one, or with another group’s', async () => {
    for (const headers of <Record<string, string>[]>[
      {},
      { 'admin-key': WRONG },
      { 'admin-key': INFER },
      { 'infer-key': INFER },
      { 'Admin-Key': `${ADMIN}x` },
    ]) {
      for (const r of manageRequests('evil', managed)) {
        const reply = await send(server.url, r, headers);
        assert.equal(reply.status, 403, `${r.method} ${r.path} ${JSON.stringify(headers)}: ${reply.text}`);
        assert.equal(reply.body.code, 'API_RESTRICTED', reply.text);
        assert.match(reply.body.error, /^This API is restricted, expecting header 'admin-key'/);
        for (const v of [ADMIN, WRONG, INFER]) assert.ok(!reply.text.includes(v), reply.text);
      }
    }
    // Listing and describing are the same group.
    for (const p of ['/models', '/models/evil', '/MODELS/']) assert.equal((await request(`${server.url}${p}`)).status, 403, p);
    assert.equal((await request(`${server.url}/v2/repository/index`, { method: 'POST' })).status, 403);
  });

  it('OPTIONS and methods no route serves: 405 with Allow on every restricted route, never an answer in front of the key', async () => {
    for (const [p, allow] of [
      ['/models', 'GET, POST, HEAD'],
      ['/MODELS/evil/', 'GET, DELETE, HEAD'],
      ['/v2/repository/models/add_sub/load', 'POST'],
      ['/v2/repository/index/', 'POST'],
      ['/v2/models/stats', 'GET, HEAD'],
      ['/metrics', 'GET, HEAD'],
      ['/invocations', 'POST'],
    ] as const) {
      for (const method of ['OPTIONS', 'PUT', 'PATCH']) {
        const reply = await request(`${server.url}${p}`, { method, headers: { 'admin-key': ADMIN } });
        assert.equal(reply.status, 405, `${method} ${p}: ${reply.text}`);
        assert.equal(reply.body.code, 'METHOD_NOT_ALLOWED');
        assert.equal(reply.headers.get('allow'), allow, `${method} ${p}`);
      }
    }
    const unknown = await request(`${server.url}/nope`, { method: 'OPTIONS' });
    assert.deepEqual([unknown.status, unknown.body.code], [404, 'ROUTE_NOT_FOUND']);
  });

  it('refuses before reading the body: a declared 50 MB body that never comes is answered at once', async () => {
    for (const [method, target] of [
      ['POST', '/models'],
      ['POST', '/v2/repository/models/add_sub/load'],
      ['POST', '/invocations'],
      ['POST', '/v2/models/add_sub/infer'],
      ['POST', '/V2/MODELS/add_sub/INFER/'],
    ] as const) {
      const reply = await rawRequest(server.url, method, target, {}, '', 50 * 1024 * 1024);
      assert.equal(reply.status, 403, `${method} ${target}: ${reply.text}`);
      assert.match(reply.text, /API_RESTRICTED/);
    }
  });

  it('with the admin key the second wall answers: 403 MODEL_CONTROL_DISABLED naming MME_MODEL_CONTROL; nothing loads', async () => {
    for (const r of manageRequests('evil', managed)) {
      const reply = await send(server.url, r, { 'admin-key': ADMIN });
      assert.equal(reply.status, 403, `${r.method} ${r.path}: ${reply.text}`);
      assert.equal(reply.body.code, 'MODEL_CONTROL_DISABLED', reply.text);
      assert.match(reply.body.error, /MME_MODEL_CONTROL is 'none'/);
    }
    const listed = await request(`${server.url}/models`, { headers: { 'admin-key': ADMIN } });
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(listed.body.models, []);
    const index = await request(`${server.url}/v2/repository/index`, { method: 'POST', headers: { 'admin-key': ADMIN } });
    assert.ok(!index.body.some((m: { state: string }) => m.state === 'READY'), index.text);
  });

  it('inference needs its key on every path; with it, models of the source still load on first use', async () => {
    const paths = ['/invocations', '/invocations/', '/endpoints/e/invocations', '/models/x/invoke', '/v2/models/add_sub/infer', '/V2/MODELS/add_sub/INFER'];
    for (const p of paths) {
      const reply = await request(`${server.url}${p}`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': 'add_sub' }, json: addSubBody });
      assert.equal(reply.status, 403, `${p}: ${reply.text}`);
      assert.equal(reply.body.code, 'API_RESTRICTED');
    }
    const ok = await request(`${server.url}/v2/models/add_sub/infer`, { method: 'POST', headers: { 'infer-key': INFER }, json: addSubBody });
    assert.equal(ok.status, 200, ok.text);
    // Metadata is not restricted here: it answers without a key.
    assert.equal((await request(`${server.url}/v2/models/add_sub`)).status, 200);
  });

  it('an absolute-form target (as through a proxy) is routed and guarded as its path is', async () => {
    const { host } = new URL(server.url);
    const absolute = (target: string, headers: Record<string, string>, body: string): Promise<{ status: number; text: string }> =>
      rawRequest(server.url, 'POST', target, headers, body);
    const json = JSON.stringify(addSubBody);
    const denied = await absolute(`http://${host}/models`, {}, JSON.stringify({ model_name: 'x', url: '/tmp' }));
    assert.equal(denied.status, 403, denied.text);
    assert.match(denied.text, /API_RESTRICTED/);
    const noKey = await absolute(`HTTP://${host}/v2/models/add_sub/infer`, {}, json);
    assert.equal(noKey.status, 403, noKey.text);
    const ok = await absolute(`http://${host}/v2/models/add_sub/infer?x=1`, { 'infer-key': INFER }, json);
    assert.equal(ok.status, 200, ok.text);
    assert.equal(JSON.parse(ok.text).model_name, 'add_sub');
  });

  it('the no-default-model answer lists no model names when model-repository is restricted', async () => {
    const reply = await request(`${server.url}/invocations`, { method: 'POST', headers: { 'infer-key': INFER }, json: addSubBody });
    assert.equal(reply.status, 404, reply.text);
    assert.match(reply.body.error, /holds 2 models and no single ensemble/);
    assert.ok(!/add_sub|tiny/.test(reply.text), reply.text);
  });

  it('/metrics needs the scrape key', async () => {
    assert.equal((await request(`${server.url}/metrics`)).status, 403);
    assert.equal((await request(`${server.url}/metrics`, { headers: { 'scrape-key': WRONG } })).status, 403);
    assert.equal((await request(`${server.url}/metrics`, { headers: { 'scrape-key': SCRAPE } })).status, 200);
  });

  it('gRPC: repository load/unload and inference need their metadata (bare or triton-grpc-protocol-), then model control refuses', async () => {
    for (const md of <Record<string, string>[]>[{}, { 'admin-key': WRONG }, { 'triton-grpc-protocol-admin-key': INFER }]) {
      for (const method of ['RepositoryModelLoad', 'RepositoryModelUnload', 'RepositoryIndex']) {
        const r = await call(grpc.inference, method, { repository_name: '', model_name: 'add_sub' }, { metadata: meta(md) });
        assert.equal(r.error?.code, status.PERMISSION_DENIED, `${method} ${JSON.stringify(md)}`);
        assert.match(r.error!.details, /^This protocol is restricted, expecting header 'admin-key'/);
      }
    }
    for (const md of <Record<string, string>[]>[{ 'admin-key': ADMIN }, { 'triton-grpc-protocol-admin-key': ADMIN }]) {
      const r = await call(grpc.inference, 'RepositoryModelLoad', { repository_name: '', model_name: 'add_sub' }, { metadata: meta(md) });
      assert.equal(r.error?.code, status.PERMISSION_DENIED);
      assert.match(r.error!.details, /MME_MODEL_CONTROL is 'none'/);
    }
    const inputs = [
      { name: 'INPUT0', datatype: 'FP32', shape: [1, 16], values: seq16 },
      { name: 'INPUT1', datatype: 'FP32', shape: [1, 16], values: seq16 },
    ];
    const denied = await call(grpc.inference, 'ModelInfer', inferRequest('add_sub', inputs));
    assert.equal(denied.error?.code, status.PERMISSION_DENIED);
    const allowed = await call(grpc.inference, 'ModelInfer', inferRequest('add_sub', inputs), { metadata: meta({ 'infer-key': INFER }) });
    assert.equal(allowed.error, null, allowed.error?.details);
    // The stream is refused as a whole, before any of its messages is read.
    const stream = grpc.inference.ModelStreamInfer();
    const ended = new Promise<{ code: number }>((resolve) => stream.on('error', (e: { code: number }) => resolve(e)));
    stream.on('data', () => undefined);
    stream.write(inferRequest('add_sub', inputs));
    assert.equal((await ended).code, status.PERMISSION_DENIED);
  });

  it('no key value, right or wrong, is ever written to the log', () => {
    const log = JSON.stringify(server.lines);
    assert.ok(
      server.lines.some((l) => l['code'] === 'API_RESTRICTED'),
      'the refusals are logged',
    );
    for (const v of [ADMIN, INFER, SCRAPE, ...hostileValues]) assert.ok(!log.includes(v), `the log holds '${v}'`);
  });
});

describe('explicit model control: urls outside MME_MODEL_URL_ROOTS get one answer, whatever is there', () => {
  let root = '';
  let server: ServeProcess;
  let grpc: GrpcClients;

  before(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-access-'));
    const allowed = path.join(root, 'allowed');
    await writeModelDir(path.join(allowed, 'ok'), 'add_sub', addSub());
    await writeModelDir(path.join(root, 'outside', 'has-model'), 'add_sub', addSub());
    await mkdir(path.join(root, 'outside', 'empty'), { recursive: true });
    await writeFile(path.join(root, 'outside', 'file.txt'), 'not a model');
    await symlink(path.join(root, 'outside', 'has-model'), path.join(allowed, 'link-out'));
    server = await startServe({
      MME_MODEL_SOURCE: path.join(root, 'source'),
      MME_CACHE_DIR: path.join(root, 'cache'),
      MME_RUNTIME_WORKERS: '1',
      MME_MODEL_CONTROL: 'explicit',
      MME_MODEL_URL_ROOTS: allowed,
      MME_GRPC_PORT: '0',
      MME_MODEL_MESH: 'true',
      MME_METRICS_PORT: '0',
      MME_HTTP_RESTRICTED_API: `metrics:scrape-key=${SCRAPE}`,
    });
    grpc = connect(grpcTarget(server));
  });

  after(async () => {
    grpc?.close();
    await server?.kill();
    await rm(root, { recursive: true, force: true });
  });

  const outside = (): string[] => [
    path.join(root, 'outside', 'file.txt'),
    path.join(root, 'outside', 'missing', 'model'),
    path.join(root, 'outside', 'has-model'),
    path.join(root, 'outside', 'empty'),
    path.join(root, 'allowed', 'link-out'),
    '/etc',
    '/etc/passwd',
    '/proc/self',
    '/usr/share',
    '/nonexistent',
    '/',
  ];

  it('says so at start-up, and warns that the load API is open to anyone reaching the port', () => {
    const listening = server.lines.find((l) => l['msg'] === 'onnx-mme listening')!;
    assert.equal(listening['modelControl'], 'explicit');
    assert.equal(listening['modelControlFrom'], 'MME_MODEL_CONTROL=explicit');
    assert.ok(server.lines.some((l) => l['level'] === 'warn' && /without a key on the model-repository group/.test(String(l['msg']))));
  });

  it('/metrics lives on MME_METRICS_PORT only, behind its key there too', async () => {
    const listening = server.lines.find((l) => l['msg'] === 'onnx-mme listening')!;
    const side = `http://127.0.0.1:${listening['metricsPort'] as number}/metrics`;
    assert.equal((await request(side)).status, 403);
    assert.equal((await request(side, { headers: { 'scrape-key': WRONG } })).status, 403);
    const ok = await request(side, { headers: { 'scrape-key': SCRAPE } });
    assert.equal(ok.status, 200);
    assert.match(ok.text, /onnx_mme_/);
    assert.equal((await request(`${server.url}/metrics`, { headers: { 'scrape-key': SCRAPE } })).status, 404);
    for (const method of ['OPTIONS', 'POST']) {
      const other = await request(side, { method });
      assert.deepEqual([other.status, other.body.code, other.headers.get('allow')], [405, 'METHOD_NOT_ALLOWED', 'GET, HEAD'], method);
    }
    assert.ok(!JSON.stringify(server.lines).includes(SCRAPE));
  });

  it('POST /models: the same status, code and message for each, naming nothing inside', async () => {
    const answers = new Set<string>();
    for (const url of outside()) {
      const r = await request(`${server.url}/models`, { method: 'POST', json: { model_name: 'probe', url } });
      assert.equal(r.status, 400, `${url}: ${r.text}`);
      answers.add(r.text);
      assert.ok(!r.text.includes(root) && !r.text.includes('passwd') && !r.text.includes('add_sub'), r.text);
    }
    assert.equal(answers.size, 1, [...answers].join('\n'));
    assert.match([...answers][0]!, /outside the directories MME_MODEL_URL_ROOTS allows/);
    const ok = await request(`${server.url}/models`, { method: 'POST', json: { model_name: 'ok', url: path.join(root, 'allowed', 'ok') } });
    assert.equal(ok.status, 200, ok.text);
  });

  it('ModelMesh loadModel and predictModelSize: one answer for every modelPath outside the roots', async () => {
    const answers = new Set<string>();
    for (const modelPath of outside()) {
      for (const method of ['loadModel', 'predictModelSize']) {
        const r = await call(grpc.modelMesh, method, { modelId: 'probe', modelType: 'onnx', modelPath, modelKey: '' });
        assert.equal(r.error?.code, status.INVALID_ARGUMENT, `${method} ${modelPath}: ${r.error?.details}`);
        answers.add(r.error!.details);
      }
    }
    assert.equal(answers.size, 1, [...answers].join('\n'));
  });
});

describe('start-up refusals, naming the setting', () => {
  /** What the refused start wrote: its one log line (stdout), and anything on stderr. */
  function startFails(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
    const clean: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!/^(MME_|SAGEMAKER_)/.test(k)) clean[k] = v;
    const child = spawn(path.join(repoRoot, 'serve'), [], {
      env: { ...clean, SAGEMAKER_BIND_TO_PORT: '0', MME_HOST: '127.0.0.1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    return new Promise((resolve) =>
      child.once('exit', (code) => {
        clearTimeout(timer);
        resolve({ code, stderr });
      }),
    );
  }

  it('explicit control off SageMaker without MME_MODEL_URL_ROOTS', async () => {
    const r = await startFails({ MME_MODEL_CONTROL: 'explicit' });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /MME_MODEL_CONTROL=explicit .* needs MME_MODEL_URL_ROOTS/);
  });

  it('an unknown API group, and a bad mode', async () => {
    const r = await startFails({ MME_HTTP_RESTRICTED_API: `model-repo:k=${ADMIN}`, MME_MODEL_CONTROL: 'poll' });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /MME_HTTP_RESTRICTED_API: unknown API group 'model-repo'/);
    assert.match(r.stderr, /MME_MODEL_CONTROL must be 'none' or 'explicit'/);
    assert.ok(!r.stderr.includes(ADMIN), r.stderr);
  });

  it('a key value no client could send as written (outside printable ASCII), without echoing it', async () => {
    // A UTF-8 client's 'é' arrives as two latin1 characters: such a key would match only some other bytes.
    const r = await startFails({ MME_HTTP_RESTRICTED_API: 'inference:infer-key=s\u00e9cret-value' });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /MME_HTTP_RESTRICTED_API: item 1: the value of header 'infer-key' has a character outside printable ASCII/);
    assert.ok(!r.stderr.includes('cret-value'), r.stderr);
  });
});
