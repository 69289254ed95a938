/**
 * One place to see every model, tried as an operator would: a real `serve`
 * process over a local source holding good and broken models (and an
 * archive), plus a model loaded through SageMaker's POST /models.
 *  - At start, after listening, the log lists every model of the source with
 *    its state ("ready to load", "broken" with the reason, archives), without
 *    loading any, and never a host path.
 *  - POST /v2/repository/index lists them all with Triton's fields (name,
 *    version, state, reason); a model whose load failed gives the load's error
 *    as its reason (as Triton does) and in last_error; a loaded one its memory
 *    and last use; the SageMaker-loaded one is there too.
 *  - gRPC's RepositoryIndex gives the same reason.
 *  - `onnx-mme models --url` prints that as a table, and exits 1 when the
 *    server cannot be reached.
 */
import assert from 'node:assert/strict';

import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { addSub, packTarGz, writeModelDir } from '../../examples/models/zoo.js';
import { runCli } from '../support/cli.js';
import { call, connect } from '../support/grpc-client.js';
import { startServe, type ServeProcess } from '../support/serve-process.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request } from '../support/test-server.js';

const ctx = new Cleanups();
after(() => ctx.run());

const seq16 = Array.from({ length: 16 }, (_, i) => i);
const addSubBody = { inputs: [input('INPUT0', 'FP32', [1, 16], seq16), input('INPUT1', 'FP32', [1, 16], seq16)] };

interface IndexRow {
  name: string;
  version?: string;
  state: string;
  reason: string;
  reserved_bytes?: number;
  last_used?: string;
  last_error?: { code: string; message: string; at: string };
}

let root = '';
let source = '';
let server: ServeProcess;

async function until<T>(what: string, probe: () => T | undefined, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const found = probe();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('every model in one place', () => {
  before(async () => {
    root = await tempDir(ctx, 'onnx-mme-overview-');
    source = path.join(root, 'models');
    await writeModelDir(source, 'good', addSub());
    await writeModelDir(source, 'also_good', addSub());
    await writeModelDir(source, 'bad_config', { onnx: addSub().onnx, config: `${addSub().config!}max_batch_sise: 8\n` });
    await writeModelDir(source, 'no_file', { config: addSub().config! });
    await writeModelDir(path.join(root, 'work'), 'packed', addSub());
    await packTarGz(path.join(root, 'work', 'packed'), path.join(source, 'packed.tar.gz'), { prefix: 'packed' });
    await writeModelDir(path.join(root, 'sagemaker'), 'model', addSub());
    server = await startServe({
      MME_MODEL_SOURCE: source,
      MME_CACHE_DIR: path.join(root, 'cache'),
      SAGEMAKER_MULTI_MODEL: 'true',
      MME_MODEL_URL_ROOTS: path.join(root, 'sagemaker'),
      MME_GRPC_PORT: '0',
    });
    ctx.after(() => server.kill());
  });

  it('start-up lists every model of the source with its state, broken ones with the reason, no host path', async () => {
    const summary = await until('the survey summary', () => server.lines.find((l) => String(l['msg']).startsWith('model source surveyed')));
    assert.equal(summary['models'], 5);
    assert.equal(summary['readyToLoad'], 2);
    assert.equal(summary['archives'], 1);
    assert.equal(summary['broken'], 2);
    const state = new Map(server.lines.filter((l) => String(l['msg']).startsWith('model source: model')).map((l) => [l['model'], l]));
    assert.equal(state.get('good')?.['state'], 'ready to load');
    assert.equal(state.get('also_good')?.['state'], 'ready to load');
    assert.equal(state.get('packed.tar.gz')?.['state'], 'archive (checked when loaded)');
    assert.equal(state.get('bad_config')?.['state'], 'broken');
    assert.match(String(state.get('bad_config')?.['reason']), /max_batch_sise/);
    assert.match(String(state.get('no_file')?.['reason']), /has no model\.onnx/);
    for (const l of state.values()) assert.ok(!JSON.stringify(l).includes(root), `no host path in ${JSON.stringify(l)}`);
    // Surveyed, not loaded: nothing is resident.
    const index = (await request(`${server.url}/v2/repository/index`, { method: 'POST', json: {} })).body as IndexRow[];
    assert.ok(index.every((r) => r.state === 'UNAVAILABLE' && r.reason === 'not loaded'));
  });

  it('the repository index shows every model: loaded, failed with its load error, never tried, and SageMaker-loaded', async () => {
    assert.equal((await request(`${server.url}/v2/models/good/infer`, { method: 'POST', json: addSubBody })).status, 200);
    const failed = await request(`${server.url}/v2/models/bad_config/infer`, { method: 'POST', json: addSubBody });
    assert.equal(failed.status, 400);
    const loaded = await request(`${server.url}/models`, { method: 'POST', json: { model_name: 'sm', url: path.join(root, 'sagemaker', 'model') } });
    assert.equal(loaded.status, 200, loaded.text);

    const res = await request(`${server.url}/v2/repository/index`, { method: 'POST', json: {} });
    assert.equal(res.status, 200);
    assert.ok(!res.text.includes(root), 'no host path in the index');
    const rows = new Map((res.body as IndexRow[]).map((r) => [r.name, r]));
    assert.deepEqual([...rows.keys()].sort(), ['also_good', 'bad_config', 'good', 'no_file', 'packed.tar.gz', 'sm']);

    const good = rows.get('good')!;
    assert.equal(good.state, 'READY');
    assert.equal(good.reason, '');
    assert.equal(good.version, '1');
    assert.ok((good.reserved_bytes ?? 0) > 0, 'memory booked');
    assert.ok(Math.abs(Date.parse(good.last_used!) - Date.now()) < 60_000, `last use ${good.last_used}`);

    const bad = rows.get('bad_config')!;
    assert.equal(bad.state, 'UNAVAILABLE');
    assert.match(bad.reason, /max_batch_sise/, "Triton's reason: the load error");
    assert.equal(bad.last_error?.code, 'INVALID_MODEL');
    assert.equal(bad.last_error?.message, bad.reason);

    assert.deepEqual({ state: rows.get('no_file')!.state, reason: rows.get('no_file')!.reason }, { state: 'UNAVAILABLE', reason: 'not loaded' });

    // gRPC's RepositoryIndex: Triton's four fields, the same reason.
    const grpcPort = server.lines.find((l) => l['msg'] === 'onnx-mme listening')!['grpcPort'] as number;
    const clients = connect(`127.0.0.1:${grpcPort}`);
    try {
      const models = (await call(clients.inference, 'RepositoryIndex', { repository_name: '', ready: false })).response.models as IndexRow[];
      assert.equal(models.find((m) => m.name === 'bad_config')?.reason, bad.reason);
    } finally {
      clients.close();
    }
    assert.equal(rows.get('sm')!.state, 'READY');

    // Unloaded after a load: Triton's "unloaded".
    assert.equal((await request(`${server.url}/v2/repository/models/good/unload`, { method: 'POST' })).status, 200);
    const again = new Map(((await request(`${server.url}/v2/repository/index`, { method: 'POST' })).body as IndexRow[]).map((r) => [r.name, r]));
    assert.deepEqual({ state: again.get('good')!.state, reason: again.get('good')!.reason }, { state: 'UNAVAILABLE', reason: 'unloaded' });
  });

  it('onnx-mme models prints the table; exit 1 when the server cannot be reached', async () => {
    const r = await runCli(['models', '--url', server.url]);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split('\n');
    assert.match(lines[0]!, /^MODEL +VERSION +STATE +MEMORY +LAST USED +REASON$/);
    const row = (name: string): string => lines.find((l) => l.startsWith(`${name} `)) ?? '';
    assert.match(row('sm'), /^sm +1 +READY +\d/);
    assert.match(row('bad_config'), /UNAVAILABLE .*max_batch_sise/);
    assert.match(row('no_file'), /UNAVAILABLE .*not loaded$/);
    assert.match(lines.at(-1)!, /^6 models: 1 ready, 0 loading, 1 failed to load$/);

    const json = await runCli(['models', '--url', server.url, '--ready', '--json']);
    assert.deepEqual(
      (JSON.parse(json.stdout) as IndexRow[]).map((m) => m.name),
      ['sm'],
    );

    const closed = await runCli(['models', '--url', 'http://127.0.0.1:1']);
    assert.equal(closed.code, 1);
    assert.match(closed.stderr, /^models: http:\/\/127\.0\.0\.1:1\/v2\/repository\/index: /);
    assert.equal((await runCli(['models', 'extra'])).code, 2);
  });
});
