/**
 * Stateful models (sequence_batching with implicit state) end to end: the
 * real server, real onnxruntime sessions, real HTTP. Many interleaved
 * sequences at once, each answer compared with the sequence run by hand;
 * an order-dependent model under `oldest`; every control form; the
 * sequence parameters on JSON, the binary extension and /invocations; the
 * 400s; idle timeout; an ensemble with a stateful step; a model with live
 * sequences under eviction pressure (pinned, then evicted once they end,
 * its sequences ended clearly); MME_MAX_SEQUENCES; a restart ends sequences
 * cleanly; a sequence_start on a live id restarts it (HTTP and gRPC); and the
 * metrics.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { accumulator, controls, decay, runByHand } from '../../examples/models/stateful-zoo.js';
import { scale, writeRepository } from '../../examples/models/zoo.js';
import { asValues, call, connect, inferRequest } from '../support/grpc-client.js';
import { metricValue } from '../support/metric-value.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer, type JsonReply, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();
const FEATURES = 4;
const LONG = 60_000_000;
let root: string;
let source: string;
let server: TestServer;

const PIPELINE = `name: "acc_pipe"
platform: "ensemble"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling { step [
  { model_name: "double" model_version: -1 input_map { key: "INPUT0" value: "X" } output_map { key: "OUTPUT0" value: "D" } },
  { model_name: "acc" model_version: -1 input_map { key: "INPUT" value: "D" } output_map { key: "OUTPUT" value: "Y" } }
] }
`;

type Params = Record<string, unknown>;

function infer(srv: TestServer, model: string, x: readonly number[], parameters: Params): Promise<JsonReply> {
  return request(`${srv.url}/v2/models/${model}/infer`, { method: 'POST', json: { inputs: [input('INPUT', 'FP32', [1, x.length], [...x])], parameters } });
}

/** The same request with the tensor as binary data after a JSON header (Inference-Header-Content-Length). */
async function inferBinary(srv: TestServer, model: string, x: readonly number[], parameters: Params): Promise<JsonReply> {
  const header = Buffer.from(
    JSON.stringify({ inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, x.length], parameters: { binary_data_size: x.length * 4 } }], parameters }),
  );
  const body = Buffer.concat([header, Buffer.from(Float32Array.from(x).buffer)]);
  return request(`${srv.url}/v2/models/${model}/infer`, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(header.length) },
  });
}

/** /invocations with the SageMaker target header: the same v2 JSON body. */
function invocations(srv: TestServer, model: string, x: readonly number[], parameters: Params): Promise<JsonReply> {
  return request(`${srv.url}/invocations`, {
    method: 'POST',
    headers: { 'X-Amzn-SageMaker-Target-Model': model },
    json: { inputs: [input('INPUT', 'FP32', [1, x.length], [...x])], parameters },
  });
}

function step(seq: number, k: number): Float32Array {
  return Float32Array.from({ length: FEATURES }, (_, i) => Math.fround(Math.sin(seq * 3.7 + k * 1.3 + i) * 10));
}

function assertClose(actual: readonly number[], expected: Float32Array, what: string): void {
  assert.equal(actual.length, expected.length, what);
  actual.forEach((v, i) => assert.ok(Math.abs(v - expected[i]!) <= 1e-4 * Math.max(1, Math.abs(expected[i]!)), `${what}[${i}]: ${v} vs ${expected[i]}`));
}

/**
 * `n` sequences of `steps` steps each, all in flight at once (each sequence
 * sends its next step when the previous answer arrives), every answer checked
 * against the sequence run by hand.
 */
async function interleaved(
  srv: TestServer,
  model: string,
  kind: 'accumulator' | 'decay',
  n: number,
  steps: number,
  firstId: number,
  send = infer,
): Promise<void> {
  await Promise.all(
    Array.from({ length: n }, async (_, s) => {
      const id = firstId + s;
      const xs = Array.from({ length: steps }, (_, k) => step(id, k));
      const expected = runByHand(kind, xs);
      for (let k = 0; k < steps; k++) {
        const r = await send(srv, model, [...xs[k]!], {
          sequence_id: id,
          ...(k === 0 ? { sequence_start: true } : {}),
          ...(k === steps - 1 ? { sequence_end: true } : {}),
        });
        assert.equal(r.status, 200, `sequence ${id} step ${k}: ${r.text}`);
        assert.deepEqual(
          r.body.outputs.map((o: { name: string }) => o.name),
          ['OUTPUT'],
          'the state output stays in the server',
        );
        assertClose(r.body.outputs[0].data, expected[k]!, `sequence ${id} step ${k}`);
      }
    }),
  );
}

before(async () => {
  root = await tempDir(ctx);
  source = path.join(root, 'source');
  await writeRepository(source, {
    // Idle limits far above any pause of this shared, slow machine; acc_idle tests the idle end itself.
    acc: accumulator({ idleUs: LONG }),
    acc_oldest: accumulator({ strategy: 'oldest', idleUs: LONG }),
    decay_oldest: decay({ strategy: 'oldest { max_candidate_sequences: 16 preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 2000 }', idleUs: LONG }),
    decay_direct: decay({
      strategy: 'direct { max_queue_delay_microseconds: 1000 minimum_slot_utilization: 0.5 }',
      idleUs: LONG,
      topLevel: 'instance_group [ { count: 2 kind: KIND_CPU } ]',
    }),
    acc_unbatched: accumulator({ maxBatchSize: 0, idleUs: LONG }),
    acc_idle: accumulator({ idleUs: 200_000 }),
    acc_long: accumulator({ idleUs: LONG }),
    ctl: controls(),
    double: scale(2, FEATURES),
  });
  // An ensemble is one package: a repository holding it and its steps.
  await writeRepository(path.join(source, 'acc_pipe'), { acc_pipe: { config: PIPELINE }, double: scale(2, FEATURES), acc: accumulator({ idleUs: LONG }) });
  server = await startTestServer({
    modelSource: source,
    cacheDir: path.join(root, 'cache'),
    env: { MME_LOG_LEVEL: 'info', MME_RUNTIME_WORKERS: '2', MME_GRPC_PORT: '0' },
  });
});

after(async () => {
  await server?.close();
  await ctx.run();
});

describe('stateful models through HTTP', () => {
  it('24 interleaved sequences of the accumulator (direct), each equal to its sequence run by hand', async () => {
    await interleaved(server, 'acc', 'accumulator', 24, 5, 1000);
    assert.equal(await metricValue(server.url, 'onnx_mme_sequences_live', { target: 'acc', model: 'acc', version: '1' }), 0, 'every sequence ended');
    assert.equal(await metricValue(server.url, 'onnx_mme_sequence_ends_total', { target: 'acc', model: 'acc', version: '1', reason: 'end' }), 24);
    // 24 sequences on 8 slots (max_batch_size 8, one instance): most waited for a slot.
    assert.ok(((await metricValue(server.url, 'onnx_mme_sequence_slot_waits_total', { target: 'acc', model: 'acc', version: '1' })) ?? 0) >= 1);
  });

  it('an order-dependent model under oldest and under direct with two instances: every step in order', async () => {
    await Promise.all([interleaved(server, 'decay_oldest', 'decay', 16, 5, 2000), interleaved(server, 'decay_direct', 'decay', 12, 5, 3000)]);
    const execs = (await metricValue(server.url, 'nv_inference_exec_count', { model: 'decay_oldest', version: '1' })) ?? 0;
    assert.ok(execs < 16 * 5, `oldest batched across sequences (${execs} executions for ${16 * 5} requests)`);
  });

  it('the sequence parameters work on the binary extension and on /invocations, and without batching', async () => {
    await interleaved(server, 'acc_oldest', 'accumulator', 8, 4, 4000, inferBinary);
    await interleaved(server, 'acc_oldest', 'accumulator', 8, 4, 5000, invocations);
    await interleaved(server, 'acc_unbatched', 'accumulator', 4, 4, 6000, (srv, model, x, p) =>
      request(`${srv.url}/v2/models/${model}/infer`, { method: 'POST', json: { inputs: [input('INPUT', 'FP32', [x.length], [...x])], parameters: p } }),
    );
  });

  it('string ids, and the control inputs in every form (fp32 START, int32 END, bool READY, int64 CORRID)', async () => {
    const ctl = async (x: number, p: Params): Promise<number[]> => {
      const r = await request(`${server.url}/v2/models/ctl/infer`, { method: 'POST', json: { inputs: [input('INPUT', 'FP32', [1, 1], [x])], parameters: p } });
      assert.equal(r.status, 200, r.text);
      return r.body.outputs.map((o: { data: number[] }) => o.data[0]);
    };
    assert.deepEqual(await ctl(1, { sequence_id: 77, sequence_start: true }), [1101, 77], 'READY 1000 + START 100, CORRID 77');
    assert.deepEqual(await ctl(2, { sequence_id: 77 }), [1002, 77], 'READY only');
    assert.deepEqual(await ctl(3, { sequence_id: 77, sequence_end: true }), [1013, 77], 'READY + END');
    assert.deepEqual(await ctl(4, { sequence_id: 78, sequence_start: true, sequence_end: true }), [1114, 78]);
    const r = await infer(server, 'ctl', [1], { sequence_id: 'abc', sequence_start: true });
    assert.equal(r.status, 400);
    assert.match(r.body.error, /sequence_id "abc" is a string but the model's CONTROL_SEQUENCE_CORRID input 'CORRID' is INT64/);
    const a = await infer(server, 'acc', [1, 1, 1, 1], { sequence_id: 'stream-a', sequence_start: true });
    const b = await infer(server, 'acc', [2, 2, 2, 2], { sequence_id: 'stream-a', sequence_end: true });
    assert.deepEqual([a.status, b.status, b.body.outputs[0].data], [200, 200, [3, 3, 3, 3]]);
  });

  it('clear 400s: a continuation without a live sequence, a missing id, bad parameter types, batch > 1', async () => {
    const cases: [Params, RegExp][] = [
      [{ sequence_id: 9001 }, /sequence 9001 must specify the START flag on the first request/],
      [{}, /must specify a non-zero or non-empty correlation ID/],
      [{ sequence_start: true }, /must specify a non-zero or non-empty correlation ID/],
      [{ sequence_id: -3, sequence_start: true }, /'sequence_id' must be a non-negative integer or a string/],
      [{ sequence_id: 5, sequence_start: 'yes' }, /'sequence_start' must be true or false/],
    ];
    for (const [p, pattern] of cases) {
      const r = await infer(server, 'acc', [1, 2, 3, 4], p);
      assert.equal(r.status, 400, r.text);
      assert.match(r.body.error, pattern);
      assert.match(r.body.error, /model 'acc'/);
    }
    assert.equal((await infer(server, 'acc', [1, 2, 3, 4], { sequence_id: 9002, sequence_start: true })).status, 200);
    const two = await request(`${server.url}/v2/models/acc/infer`, {
      method: 'POST',
      json: { inputs: [input('INPUT', 'FP32', [2, 4], Array(8).fill(1))], parameters: { sequence_id: 9002 } },
    });
    assert.equal(two.status, 400);
    assert.match(two.body.error, /batch-size 1/);
    const state = await request(`${server.url}/v2/models/acc/infer`, {
      method: 'POST',
      json: { inputs: [input('INPUT', 'FP32', [1, 4], [1, 1, 1, 1]), input('STATE', 'FP32', [1, 4], [9, 9, 9, 9])], parameters: { sequence_id: 9002 } },
    });
    assert.equal(state.status, 400, 'the client cannot send the state input');
    const end = await infer(server, 'acc', [1, 1, 1, 1], { sequence_id: 9002, sequence_end: true });
    assert.deepEqual(end.body.outputs[0].data, [2, 3, 4, 5], 'the refused requests left the sequence as it was');
  });

  it('a sequence_start on a live id restarts it from the initial state, as Triton does: direct and oldest, over HTTP and gRPC', async () => {
    const grpc = connect(`127.0.0.1:${server.running.grpcPort}`);
    ctx.after(async () => grpc.close());
    /** ModelInfer with the parameters as tritonclient sends them (int64_param id, bool_param flags). */
    const grpcInfer = async (_srv: TestServer, model: string, x: readonly number[], p: Params): Promise<JsonReply> => {
      const parameters: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(p)) parameters[k] = typeof v === 'boolean' ? { bool_param: v } : { int64_param: String(v) };
      const { error, response } = await call(
        grpc.inference,
        'ModelInfer',
        inferRequest(model, [{ name: 'INPUT', datatype: 'FP32', shape: [1, x.length], values: [...x] }], { parameters }),
      );
      if (error !== null) return { status: 400, headers: new Headers(), body: { error: error.details }, text: error.details };
      return { status: 200, headers: new Headers(), body: { outputs: [{ name: 'OUTPUT', data: asValues(response, 'OUTPUT')!.values }] }, text: '' };
    };
    const restarts = async (model: string): Promise<number> =>
      (await metricValue(server.url, 'onnx_mme_sequence_ends_total', { target: model, model, version: '1', reason: 'restart' })) ?? 0;
    const before = { acc: await restarts('acc'), acc_oldest: await restarts('acc_oldest') };
    let id = 9100;
    for (const [transport, send] of [
      ['HTTP', infer],
      ['gRPC', grpcInfer],
    ] as const) {
      for (const model of ['acc', 'acc_oldest']) {
        id++;
        const what = `${model} over ${transport}, sequence ${id}`;
        const data = async (x: number, p: Params): Promise<unknown> => {
          const r = await send(server, model, [x, x, x, x], { sequence_id: id, ...p });
          assert.equal(r.status, 200, `${what}: ${r.text}`);
          return r.body.outputs[0].data;
        };
        assert.deepEqual(await data(1, { sequence_start: true }), [1, 1, 1, 1], what);
        assert.deepEqual(await data(2, {}), [3, 3, 3, 3], what);
        // The stream reconnects under the same id: a fresh sequence, not 3 + 5.
        assert.deepEqual(await data(5, { sequence_start: true }), [5, 5, 5, 5], `${what}: the restarted sequence starts from the initial state`);
        assert.deepEqual(await data(1, {}), [6, 6, 6, 6], what);
        assert.deepEqual(await data(1, { sequence_end: true }), [7, 7, 7, 7], what);
        const warned = server.logs.filter(
          (l) =>
            l['level'] === 'warn' &&
            String(l['msg']).includes(
              `sequence ${id} for model '${model}' has a conflict. The previous sequence did not end before this sequence start. Previous sequence will be terminated early.`,
            ),
        );
        assert.equal(warned.length, 1, `${what}: Triton's warning, once`);
        assert.equal(warned[0]!['model'], model);
      }
    }
    assert.equal((await restarts('acc')) - before.acc, 2);
    assert.equal((await restarts('acc_oldest')) - before.acc_oldest, 2);
    assert.equal(
      await metricValue(server.url, 'onnx_mme_sequences_live', { target: 'acc', model: 'acc', version: '1' }),
      0,
      'restarts leave no sequence behind',
    );
    assert.equal(await metricValue(server.url, 'onnx_mme_sequences_live', { target: 'acc_oldest', model: 'acc_oldest', version: '1' }), 0);
  });

  it('a sequence idle for max_sequence_idle_microseconds ends; its next request is told why', async () => {
    assert.equal((await infer(server, 'acc_idle', [1, 1, 1, 1], { sequence_id: 1, sequence_start: true })).status, 200);
    await new Promise((r) => setTimeout(r, 700));
    const r = await infer(server, 'acc_idle', [1, 1, 1, 1], { sequence_id: 1 });
    assert.equal(r.status, 400);
    assert.match(r.body.error, /sequence 1 ended after 200000 µs without a request/);
    assert.equal(await metricValue(server.url, 'onnx_mme_sequence_ends_total', { model: 'acc_idle', version: '1', reason: 'idle' }), 1);
    const again = await infer(server, 'acc_idle', [5, 5, 5, 5], { sequence_id: 1, sequence_start: true, sequence_end: true });
    assert.deepEqual(again.body.outputs[0].data, [5, 5, 5, 5], 'started again from the initial state');
  });

  it('an ensemble with a stateful step passes the sequence parameters to it', async () => {
    const accEnds = await metricValue(server.url, 'onnx_mme_sequence_ends_total', { target: 'acc', model: 'acc', version: '1', reason: 'end' });
    const xs = [step(1, 0), step(1, 1), step(1, 2)];
    const expected = runByHand(
      'accumulator',
      xs.map((x) => Float32Array.from(x, (v) => v * 2)),
    );
    for (let k = 0; k < 3; k++) {
      const r = await request(`${server.url}/v2/models/acc_pipe/infer`, {
        method: 'POST',
        json: {
          inputs: [input('X', 'FP32', [1, 4], [...xs[k]!])],
          parameters: { sequence_id: 'pipe-1', ...(k === 0 ? { sequence_start: true } : {}), ...(k === 2 ? { sequence_end: true } : {}) },
        },
      });
      assert.equal(r.status, 200, r.text);
      assertClose(r.body.outputs[0].data, expected[k]!, `ensemble step ${k}`);
    }
    const lost = await request(`${server.url}/v2/models/acc_pipe/infer`, { method: 'POST', json: { inputs: [input('X', 'FP32', [1, 4], [1, 1, 1, 1])] } });
    assert.equal(lost.status, 400);
    assert.match(lost.body.error, /correlation ID/);
    // The pipeline's own 'acc' is another tenant's model of the same name: counted apart, by target.
    assert.equal(await metricValue(server.url, 'onnx_mme_sequence_ends_total', { target: 'acc_pipe', model: 'acc', version: '1', reason: 'end' }), 1);
    assert.equal(await metricValue(server.url, 'onnx_mme_sequence_ends_total', { target: 'acc', model: 'acc', version: '1', reason: 'end' }), accEnds);
    assert.equal(await metricValue(server.url, 'onnx_mme_sequences_live', { target: 'acc_pipe', model: 'acc', version: '1' }), 0);
    // A stateless model has no sequence series.
    assert.equal(await metricValue(server.url, 'onnx_mme_sequences_live', { target: 'acc_pipe', model: 'double' }), undefined);
  });
});

describe('stateful models and the server around them', () => {
  it('live sequences pin their model against eviction; once they end it is evicted, and an operator unload ends them clearly', async () => {
    const srv = await startTestServer({
      modelSource: source,
      cacheDir: path.join(root, 'cache-evict'),
      env: { MME_MAX_LOADED_MODELS: '1', MME_MEMORY_WAIT_SECONDS: '1', MME_LOG_LEVEL: 'warn' },
    });
    try {
      assert.equal((await infer(srv, 'acc_long', [1, 1, 1, 1], { sequence_id: 1, sequence_start: true })).status, 200);
      // Another model needs the only slot: the live sequence pins acc_long, so the load waits and gives up (507).
      const other = await request(`${srv.url}/v2/models/double/infer`, { method: 'POST', json: { inputs: [input('INPUT0', 'FP32', [1, 4], [1, 2, 3, 4])] } });
      assert.equal(other.status, 507, other.text);
      const cont = await infer(srv, 'acc_long', [1, 1, 1, 1], { sequence_id: 1, sequence_end: true });
      assert.deepEqual(cont.body.outputs[0].data, [2, 2, 2, 2], 'the sequence kept its state through the pressure');
      // No live sequence now: acc_long is evicted for the other model.
      const loaded = await request(`${srv.url}/v2/models/double/infer`, { method: 'POST', json: { inputs: [input('INPUT0', 'FP32', [1, 4], [1, 2, 3, 4])] } });
      assert.equal(loaded.status, 200, loaded.text);
      // An operator unload of a model with a live sequence ends it with a clear error.
      assert.equal((await infer(srv, 'acc_long', [1, 1, 1, 1], { sequence_id: 2, sequence_start: true })).status, 200);
      const unload = await request(`${srv.url}/v2/repository/models/acc_long/unload`, { method: 'POST' });
      assert.equal(unload.status, 200, unload.text);
      const after = await infer(srv, 'acc_long', [1, 1, 1, 1], { sequence_id: 2 });
      assert.equal(after.status, 400);
      assert.match(after.body.error, /sequence 2 ended when the model was unloaded/);
    } finally {
      await srv.close();
    }
  });

  it('MME_MAX_SEQUENCES bounds live sequences (429 beyond); a restart ends sequences cleanly', async () => {
    const cacheDir = path.join(root, 'cache-restart');
    const env = { MME_MAX_SEQUENCES: '3', MME_LOG_LEVEL: 'warn' };
    let srv = await startTestServer({ modelSource: source, cacheDir, env });
    try {
      for (const id of [1, 2, 3]) assert.equal((await infer(srv, 'acc_long', [id, id, id, id], { sequence_id: id, sequence_start: true })).status, 200);
      // /invocations answers 429; the KServe v2 routes answer Triton's 503 for the same OVERLOADED.
      const over = await invocations(srv, 'acc_oldest', [1, 1, 1, 1], { sequence_id: 4, sequence_start: true });
      assert.equal(over.status, 429, over.text);
      assert.match(over.body.error, /maximum of 3 live sequences \(MME_MAX_SEQUENCES\)/);
      const overV2 = await infer(srv, 'acc_oldest', [1, 1, 1, 1], { sequence_id: 4, sequence_start: true });
      assert.deepEqual([overV2.status, overV2.body.code], [503, 'OVERLOADED']);
      // Like every refusal for overload, both say when to come back.
      assert.deepEqual([over.headers.get('retry-after'), overV2.headers.get('retry-after')], ['1', '1']);
      assert.equal((await infer(srv, 'acc_long', [1, 1, 1, 1], { sequence_id: 3, sequence_end: true })).status, 200);
      assert.equal((await infer(srv, 'acc_oldest', [1, 1, 1, 1], { sequence_id: 4, sequence_start: true })).status, 200, 'an end made room');
    } finally {
      await srv.close();
    }
    srv = await startTestServer({ modelSource: source, cacheDir, env });
    try {
      const lost = await infer(srv, 'acc_long', [1, 1, 1, 1], { sequence_id: 1 });
      assert.equal(lost.status, 400, 'no state survives a restart, and no request silently runs on a fresh one');
      assert.match(lost.body.error, /must specify the START flag/);
      const fresh = await infer(srv, 'acc_long', [7, 7, 7, 7], { sequence_id: 1, sequence_start: true });
      assert.deepEqual(fresh.body.outputs[0].data, [7, 7, 7, 7]);
    } finally {
      await srv.close();
    }
  });
});
