/**
 * The KServe v2 gRPC protocol end to end: the real server with MME_GRPC_PORT
 * on loopback, a client made from the shipped .proto files doing what
 * tritonclient.grpc does (test/support/grpc-client.ts), real onnxruntime
 * sessions. Every RPC; raw and typed tensors of every datatype (BYTES and
 * FP16 included) compared with what was sent; answers compared with a direct
 * onnxruntime-node run; nested targets; errors as gRPC status codes; a
 * message over 4 MiB and one over the body limit; a cancelled call leaving
 * the batcher queue; 64 concurrent calls each getting its own answer;
 * grpc.health.v1; and the drain.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { credentials, status } from '@grpc/grpc-js';
import * as ort from 'onnxruntime-node';
import { configText, denseForward, identity, IDENTITY_TYPES, writeModelDir } from '../../examples/models/zoo.js';
import { buildModelSource, type SourceFixture } from '../support/model-source-fixture.js';
import { asValues, call, connect, inferRequest, rawBytes, type GrpcClients, type Value } from '../support/grpc-client.js';
import { metricValue } from '../support/metric-value.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();

let server: TestServer;
let fixture: SourceFixture;
let clients: GrpcClients;

/** Sample values of each datatype for a [2, 3] identity request (FP16 as bit patterns: 1.0, -2.0, 0.5, ...). */
function samples(dt: string): Value[] {
  switch (dt) {
    case 'BOOL':
      return [true, false, true, true, false, false];
    case 'BYTES':
      return ['a', '', 'héllo', 'x'.repeat(300), '0', 'z'];
    case 'FP16':
      return [0x3c00, 0xc000, 0x3800, 0x0000, 0x7bff, 0x8001];
    case 'FP32':
      return [1.5, -2.25, 0, 3.75, 1e-3, -1e6];
    case 'FP64':
      return [1.5, -2.25, 0, 3.75, 1e-300, -1e300];
    case 'INT8':
      return [-128, 127, 0, -1, 5, 6];
    case 'UINT8':
      return [0, 255, 1, 2, 3, 4];
    case 'INT16':
      return [-32768, 32767, 0, -1, 5, 6];
    case 'UINT16':
      return [0, 65535, 1, 2, 3, 4];
    case 'INT32':
      return [-2147483648, 2147483647, 0, -1, 5, 6];
    case 'UINT32':
      return [0, 4294967295, 1, 2, 3, 4];
    case 'INT64':
      return [-(2n ** 63n), 2n ** 63n - 1n, 0n, -1n, 5n, 6n];
    case 'UINT64':
      return [0n, 2n ** 64n - 1n, 1n, 2n, 3n, 4n];
    default:
      throw new Error(dt);
  }
}

/** The same values as InferTensorContents (the typed form). */
function typedContents(dt: string, values: readonly Value[]): Record<string, unknown> {
  switch (dt) {
    case 'BOOL':
      return { bool_contents: values };
    case 'BYTES':
      return { bytes_contents: values.map((v) => Buffer.from(String(v), 'utf8')) };
    case 'FP32':
      return { fp32_contents: values };
    case 'FP64':
      return { fp64_contents: values };
    case 'INT8':
    case 'INT16':
    case 'INT32':
      return { int_contents: values };
    case 'UINT8':
    case 'UINT16':
    case 'UINT32':
      return { uint_contents: values };
    case 'INT64':
      return { int64_contents: values.map(String) };
    case 'UINT64':
      return { uint64_contents: values.map(String) };
    default:
      throw new Error(dt);
  }
}

function mlpInput(i: number, rows: number): Float32Array {
  return Float32Array.from({ length: rows * 32 }, (_, k) => Math.sin(i * 7.31 + k * 0.37) + i / 64);
}

function assertClose(actual: readonly Value[], expected: Float32Array, what: string): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  actual.forEach((v, k) =>
    assert.ok(Math.abs(Number(v) - expected[k]!) <= 1e-5 * Math.max(1, Math.abs(expected[k]!)), `${what}[${k}]: ${String(v)} vs ${expected[k]}`),
  );
}

before(async () => {
  const dir = await tempDir(ctx, 'onnx-mme-grpc-');
  fixture = await buildModelSource(path.join(dir, 'models'), path.join(dir, 'work'));
  // A 5 MiB request: FP32 [1, 1310720].
  await writeModelDir(fixture.root, 'big', identity('FP32', [1310720]));
  // A queue that holds requests for 2 s and takes one at a time: cancellation and a full queue.
  const slow = identity('FP32', [3]);
  await writeModelDir(fixture.root, 'slow', {
    onnx: slow.onnx,
    config: configText({
      maxBatchSize: 8,
      inputs: [{ name: 'INPUT0', dataType: 'FP32', dims: [3] }],
      outputs: [{ name: 'OUTPUT0', dataType: 'FP32', dims: [3] }],
      extra: 'dynamic_batching { max_queue_delay_microseconds: 2000000 preferred_batch_size: [ 8 ] default_queue_policy { max_queue_size: 1 } }',
    }),
  });
  server = await startTestServer({ modelSource: fixture.root, cacheDir: path.join(dir, 'cache'), env: { MME_GRPC_PORT: '0' } });
  ctx.after(() => server.close());
  assert.ok(server.running.grpcPort !== undefined && server.running.grpcPort > 0);
  clients = connect(`127.0.0.1:${server.running.grpcPort}`);
});

after(async () => {
  clients?.close();
  await ctx.run();
});

describe('gRPC: server RPCs and health', () => {
  it('ServerLive, ServerReady, ServerMetadata', async () => {
    assert.deepEqual((await call(clients.inference, 'ServerLive', {})).response, { live: true });
    assert.deepEqual((await call(clients.inference, 'ServerReady', {})).response, { ready: true });
    const meta = (await call(clients.inference, 'ServerMetadata', {})).response;
    assert.equal(meta.name, 'onnx-mme');
    assert.match(meta.version, /^\d+\.\d+\.\d+/);
    assert.ok(meta.extensions.includes('model_repository') && meta.extensions.includes('statistics'));
  });

  it('grpc.health.v1 Check: SERVING for the server and the inference service, NOT_FOUND for others', async () => {
    assert.equal((await call(clients.health, 'Check', { service: '' })).response.status, 'SERVING');
    assert.equal((await call(clients.health, 'Check', { service: 'inference.GRPCInferenceService' })).response.status, 'SERVING');
    assert.equal((await call(clients.health, 'Check', { service: 'nope' })).error?.code, status.NOT_FOUND);
  });

  it('the same listener serves TLS-less HTTP/2 only: HTTP/1 clients on the gRPC port get no answer', async () => {
    await assert.rejects(fetch(`http://127.0.0.1:${server.running.grpcPort}/v2/health/live`, { signal: AbortSignal.timeout(5000) }));
  });
});

describe('gRPC: model RPCs', () => {
  it('ModelReady is false before a load, RepositoryModelLoad loads, then ModelMetadata / ModelConfig describe it', async () => {
    assert.equal((await call(clients.inference, 'ModelReady', { name: 'add_sub.tar.gz', version: '' })).response.ready, false);
    const load = await call(clients.inference, 'RepositoryModelLoad', { repository_name: '', model_name: 'add_sub.tar.gz', parameters: {} });
    assert.equal(load.error, null);
    assert.equal((await call(clients.inference, 'ModelReady', { name: 'add_sub.tar.gz', version: '' })).response.ready, true);
    assert.equal((await call(clients.inference, 'ModelReady', { name: 'add_sub.tar.gz', version: '7' })).response.ready, false);
    const meta = (await call(clients.inference, 'ModelMetadata', { name: 'add_sub.tar.gz', version: '' })).response;
    assert.equal(meta.name, 'add_sub');
    assert.deepEqual(meta.versions, ['1']);
    assert.equal(meta.platform, 'onnxruntime_onnx');
    assert.deepEqual(
      meta.inputs.map((t: any) => [t.name, t.datatype, t.shape]),
      [
        ['INPUT0', 'FP32', ['-1', '16']],
        ['INPUT1', 'FP32', ['-1', '16']],
      ],
    );
    const config = (await call(clients.inference, 'ModelConfig', { name: 'add_sub.tar.gz', version: '' })).response.config;
    assert.equal(config.name, 'add_sub');
    assert.equal(config.max_batch_size, 8);
    assert.equal(config.input[0].data_type, 'TYPE_FP32');
    assert.deepEqual(config.input[0].dims, ['16']);
    assert.equal(config.backend, 'onnxruntime');
    assert.ok(config.instance_group.length >= 1);
  });

  it('ModelConfig carries the same fields as GET /v2/models/{m}/config', async () => {
    const viaHttp = (await (await fetch(`${server.url}/v2/models/add_sub.tar.gz/config`)).json()) as Record<string, any>;
    const viaGrpc = (await call(clients.inference, 'ModelConfig', { name: 'add_sub.tar.gz', version: '' })).response.config;
    assert.equal(viaGrpc.name, viaHttp['name']);
    assert.equal(viaGrpc.max_batch_size, viaHttp['max_batch_size']);
    assert.deepEqual(
      viaGrpc.output.map((o: any) => o.name),
      viaHttp['output'].map((o: any) => o.name),
    );
    assert.equal(viaGrpc.version_policy.latest?.num_versions, viaHttp['version_policy'].latest.num_versions);
  });

  it('RepositoryIndex lists targets with their state, ready=true only the ready ones; a repository name is refused', async () => {
    const all = (await call(clients.inference, 'RepositoryIndex', { repository_name: '', ready: false })).response.models;
    const addSub = all.find((m: any) => m.name === 'add_sub.tar.gz');
    assert.equal(addSub?.state, 'READY');
    assert.equal(addSub?.version, '1');
    assert.ok(all.some((m: any) => m.name === 'team/pipeline.tar.gz' && m.state === 'UNAVAILABLE'));
    const ready = (await call(clients.inference, 'RepositoryIndex', { repository_name: '', ready: true })).response.models;
    assert.ok(ready.length >= 1 && ready.every((m: any) => m.state === 'READY'));
    assert.equal((await call(clients.inference, 'RepositoryIndex', { repository_name: 'other', ready: false })).error?.code, status.INVALID_ARGUMENT);
  });

  it('RepositoryModelLoad refuses config overrides (UNIMPLEMENTED); unknown models are NOT_FOUND', async () => {
    const r = await call(clients.inference, 'RepositoryModelLoad', {
      repository_name: '',
      model_name: 'add_sub.tar.gz',
      parameters: { config: { string_param: '{}' } },
    });
    assert.equal(r.error?.code, status.UNIMPLEMENTED);
    assert.match(r.error!.details, /'config'/);
    const missing = await call(clients.inference, 'RepositoryModelLoad', { repository_name: '', model_name: 'no_such_model', parameters: {} });
    assert.equal(missing.error?.code, status.NOT_FOUND);
    assert.equal(missing.error?.metadata.get('onnx-mme-error-code')[0], 'MODEL_NOT_FOUND');
  });

  it('RepositoryModelUnload unloads; ModelReady is false again', async () => {
    await call(clients.inference, 'RepositoryModelLoad', { repository_name: '', model_name: 'identity_fp32', parameters: {} });
    assert.equal((await call(clients.inference, 'ModelReady', { name: 'identity_fp32', version: '' })).response.ready, true);
    const r = await call(clients.inference, 'RepositoryModelUnload', {
      repository_name: '',
      model_name: 'identity_fp32',
      parameters: { unload_dependents: { bool_param: true } },
    });
    assert.equal(r.error, null);
    assert.equal((await call(clients.inference, 'ModelReady', { name: 'identity_fp32', version: '' })).response.ready, false);
    assert.equal(
      (await call(clients.inference, 'RepositoryModelUnload', { repository_name: '', model_name: 'identity_fp32', parameters: {} })).error?.code,
      status.NOT_FOUND,
    );
  });

  it('shared memory and trace RPCs answer UNIMPLEMENTED with the reason', async () => {
    const r = await call(clients.inference, 'SystemSharedMemoryRegister', { name: 'r', key: '/k', offset: 0, byte_size: 8 });
    assert.equal(r.error?.code, status.UNIMPLEMENTED);
    assert.match(r.error!.details, /raw_input_contents/);
    assert.equal((await call(clients.inference, 'CudaSharedMemoryStatus', { name: '' })).error?.code, status.UNIMPLEMENTED);
  });
});

describe('gRPC: ModelInfer tensors', () => {
  for (const dt of IDENTITY_TYPES) {
    it(`${dt}: raw_input_contents round-trips through identity, raw_output_contents carries it back`, async () => {
      const values = samples(dt);
      const { error, response } = await call(
        clients.inference,
        'ModelInfer',
        inferRequest(`identity_${dt.toLowerCase()}`, [{ name: 'INPUT0', datatype: dt, shape: [2, 3], values }], { id: `req-${dt}` }),
      );
      assert.equal(error, null, error?.details);
      assert.equal(response.id, `req-${dt}`);
      assert.equal(response.model_name, `identity_${dt.toLowerCase()}`);
      assert.equal(response.model_version, '1');
      const out = asValues(response, 'OUTPUT0')!;
      assert.equal(out.datatype, dt);
      assert.deepEqual(out.shape, [2, 3]);
      if (dt === 'FP32')
        assert.deepEqual(
          out.values,
          values.map((v) => Math.fround(Number(v))),
        );
      else assert.deepEqual(out.values, values);
    });

    if (dt === 'FP16') {
      it('FP16: typed contents are refused (the protocol carries FP16 only as raw bytes)', async () => {
        const r = await call(clients.inference, 'ModelInfer', {
          model_name: 'identity_fp16',
          inputs: [{ name: 'INPUT0', datatype: 'FP16', shape: [1, 3], contents: { fp32_contents: [1, 2, 3] } }],
        });
        assert.equal(r.error?.code, status.INVALID_ARGUMENT);
        assert.match(r.error!.details, /raw_input_contents/);
      });
      continue;
    }
    it(`${dt}: typed contents give the same answer as raw`, async () => {
      const values = samples(dt);
      const { error, response } = await call(clients.inference, 'ModelInfer', {
        model_name: `identity_${dt.toLowerCase()}`,
        inputs: [{ name: 'INPUT0', datatype: dt, shape: [2, 3], contents: typedContents(dt, values) }],
      });
      assert.equal(error, null, error?.details);
      const out = asValues(response, 'OUTPUT0')!;
      if (dt === 'FP32')
        assert.deepEqual(
          out.values,
          values.map((v) => Math.fround(Number(v))),
        );
      else assert.deepEqual(out.values, values);
    });
  }

  it('an MLP answers what onnxruntime-node answers for the same input; requested outputs and classification', async () => {
    const x = mlpInput(1, 2);
    const expected = denseForward(fixture.mlp.layers, x, 2);
    const { error, response } = await call(
      clients.inference,
      'ModelInfer',
      inferRequest('mlp.tar.gz', [{ name: 'INPUT0', datatype: 'FP32', shape: [2, 32], values: [...x] }], { outputs: [{ name: 'OUTPUT0' }] }),
    );
    assert.equal(error, null, error?.details);
    assertClose(asValues(response, 'OUTPUT0')!.values, expected, 'mlp');
    const direct = await runDirectMlp(x, 2);
    assertClose(asValues(response, 'OUTPUT0')!.values, direct, 'mlp vs onnxruntime-node');
    // classification: the top 3 of each row as "score:index" BYTES, as Triton answers.
    const top = await call(
      clients.inference,
      'ModelInfer',
      inferRequest('mlp.tar.gz', [{ name: 'INPUT0', datatype: 'FP32', shape: [2, 32], values: [...x] }], { outputs: [{ name: 'OUTPUT0', classCount: 3 }] }),
    );
    assert.equal(top.error, null, top.error?.details);
    const classes = asValues(top.response, 'OUTPUT0')!;
    assert.equal(classes.datatype, 'BYTES');
    assert.deepEqual(classes.shape, [2, 3]);
    const row0 = [...direct.subarray(0, 8)]
      .map((v, i) => ({ v, i }))
      .sort((a, b) => b.v - a.v)
      .slice(0, 3)
      .map((e) => e.i);
    assert.deepEqual(
      (classes.values.slice(0, 3) as string[]).map((s) => Number(s.split(':')[1])),
      row0,
    );
  });

  it('a nested target (team/pipeline.tar.gz, an ensemble) is addressed by its plain name', async () => {
    const x = Float32Array.from([1, 2, 3, 4]);
    const { error, response } = await call(
      clients.inference,
      'ModelInfer',
      inferRequest('team/pipeline.tar.gz', [{ name: 'INPUT', datatype: 'FP32', shape: [1, 4], values: [...x] }]),
    );
    assert.equal(error, null, error?.details);
    assert.equal(response.model_name, 'pipeline');
    const { ensemble } = fixture;
    const expected = denseForward(
      ensemble.classifier.layers,
      x.map((v) => v * ensemble.factor),
      1,
    );
    assertClose(asValues(response, 'OUTPUT')!.values, expected, 'pipeline');
  });

  it('a request over 4 MiB (5 MiB of FP32) is answered in full; one over the body limit is RESOURCE_EXHAUSTED', async () => {
    const n = 1310720;
    const values = Array.from({ length: n }, (_, i) => (i % 1000) / 8);
    const { error, response } = await call(clients.inference, 'ModelInfer', inferRequest('big', [{ name: 'INPUT0', datatype: 'FP32', shape: [1, n], values }]));
    assert.equal(error, null, error?.details);
    const raw = (response.raw_output_contents as Buffer[])[0]!;
    assert.equal(raw.length, n * 4);
    assert.ok(raw.equals(rawBytes('FP32', values)));
    // SAGEMAKER_MAX_PAYLOAD_IN_MB defaults to 6: 7 MiB is over it, refused before it is read.
    const tooBig = await call(
      clients.inference,
      'ModelInfer',
      inferRequest('big', [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 7 * 262144], values: new Array(7 * 262144).fill(0) }]),
    );
    assert.equal(tooBig.error?.code, status.RESOURCE_EXHAUSTED);
    assert.equal((await call(clients.inference, 'ServerLive', {})).response.live, true);
  });

  it('64 concurrent calls with different inputs each get their own answer', async () => {
    const calls = Array.from({ length: 64 }, (_, i) => {
      const rows = 1 + (i % 3);
      const x = mlpInput(100 + i, rows);
      return {
        x,
        rows,
        reply: call(
          clients.inference,
          'ModelInfer',
          inferRequest('mlp.tar.gz', [{ name: 'INPUT0', datatype: 'FP32', shape: [rows, 32], values: [...x] }], { id: `c${i}` }),
        ),
      };
    });
    for (const [i, c] of calls.entries()) {
      const { error, response } = await c.reply;
      assert.equal(error, null, error?.details);
      assert.equal(response.id, `c${i}`);
      assertClose(asValues(response, 'OUTPUT0')!.values, denseForward(fixture.mlp.layers, c.x, c.rows), `call ${i}`);
    }
  });

  it('ModelStreamInfer: one answer per request on the stream, failures as error_message', async () => {
    const stream = clients.inference.ModelStreamInfer();
    const answers: any[] = [];
    const done = new Promise<void>((resolve, reject) => {
      stream.on('data', (a: any) => answers.push(a));
      stream.on('end', () => resolve());
      stream.on('error', reject);
    });
    for (let i = 0; i < 4; i++)
      stream.write(inferRequest('identity_int32', [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 3], values: [i, i + 1, i + 2] }], { id: `s${i}` }));
    stream.write(inferRequest('no_such_model', [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 3], values: [0, 0, 0] }], { id: 'bad' }));
    stream.end();
    await done;
    assert.equal(answers.length, 5);
    for (let i = 0; i < 4; i++) {
      const a = answers.find((x) => x.infer_response?.id === `s${i}`);
      assert.equal(a.error_message, '');
      assert.deepEqual(asValues(a.infer_response, 'OUTPUT0')!.values, [i, i + 1, i + 2]);
    }
    assert.match(answers.find((x) => x.infer_response?.id === 'bad').error_message, /no_such_model/);
  });

  it('ModelStatistics counts what was served, like /metrics', async () => {
    const before = (await call(clients.inference, 'ModelStatistics', { name: 'identity_int8', version: '' })).response.model_stats[0];
    for (let i = 0; i < 3; i++)
      await call(
        clients.inference,
        'ModelInfer',
        inferRequest('identity_int8', [{ name: 'INPUT0', datatype: 'INT8', shape: [2, 3], values: [1, 2, 3, 4, 5, 6] }]),
      );
    const stats = (await call(clients.inference, 'ModelStatistics', { name: 'identity_int8', version: '' })).response.model_stats;
    assert.equal(stats.length, 1);
    assert.equal(stats[0].name, 'identity_int8');
    assert.equal(stats[0].version, '1');
    assert.equal(Number(stats[0].inference_stats.success.count) - Number(before.inference_stats.success.count), 3);
    assert.equal(Number(stats[0].inference_count) - Number(before.inference_count), 6);
    assert.ok(Number(stats[0].inference_stats.success.ns) > 0);
    assert.ok(Number(stats[0].last_inference) >= Date.now() - 60_000);
    assert.equal(
      Number(stats[0].inference_stats.success.count),
      await metricValue(server.url, 'nv_inference_request_success', { model: 'identity_int8', version: '1' }),
    );
    const all = (await call(clients.inference, 'ModelStatistics', { name: '', version: '' })).response.model_stats;
    // Listed under the name a client addresses each by (the target: mlp.tar.gz), as the HTTP statistics route does.
    assert.ok(all.some((s: any) => s.name === 'mlp.tar.gz') && all.some((s: any) => s.name === 'identity_int8'));
    assert.equal((await call(clients.inference, 'ModelStatistics', { name: 'never_loaded_model', version: '' })).error?.code, status.NOT_FOUND);
  });
});

async function runDirectMlp(x: Float32Array, rows: number): Promise<Float32Array> {
  const session = await ort.InferenceSession.create(Buffer.from(fixture.mlpOnnx));
  try {
    const out = await session.run({ INPUT0: new ort.Tensor('float32', x, [rows, 32]) });
    return out['OUTPUT0']!.data as Float32Array;
  } finally {
    await session.release();
  }
}

describe('gRPC: errors as status codes', () => {
  it('NOT_FOUND: unknown model, unknown version', async () => {
    const r = await call(
      clients.inference,
      'ModelInfer',
      inferRequest('no_such_model', [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 3], values: [1, 2, 3] }]),
    );
    assert.equal(r.error?.code, status.NOT_FOUND);
    assert.match(
      r.error!.details,
      /^model 'no_such_model' not found in the model source \(local directory\); .*\(gRPC: RepositoryIndex\) lists the models it holds$/,
    );
    const v = await call(
      clients.inference,
      'ModelInfer',
      inferRequest('identity_int16', [{ name: 'INPUT0', datatype: 'INT16', shape: [1, 3], values: [1, 2, 3] }], { version: '9' }),
    );
    assert.equal(v.error?.code, status.NOT_FOUND);
    assert.match(v.error!.details, /version 9/);
  });

  it('INVALID_ARGUMENT: wrong shape, wrong datatype, byte count off, raw/input count mismatch, bad version, empty name', async () => {
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ['shape', inferRequest('identity_int16', [{ name: 'INPUT0', datatype: 'INT16', shape: [1, 4], values: [1, 2, 3, 4] }]), /INPUT0/],
      ['datatype', inferRequest('identity_int16', [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 3], values: [1, 2, 3] }]), /INT32|INT16/],
      [
        'bytes',
        { ...inferRequest('identity_int16', [{ name: 'INPUT0', datatype: 'INT16', shape: [1, 3], values: [1, 2, 3] }]), raw_input_contents: [Buffer.alloc(5)] },
        /5 bytes/,
      ],
      [
        'count',
        {
          ...inferRequest('identity_int16', [{ name: 'INPUT0', datatype: 'INT16', shape: [1, 3], values: [1, 2, 3] }]),
          raw_input_contents: [Buffer.alloc(6), Buffer.alloc(6)],
        },
        /2 entries/,
      ],
      [
        'version',
        inferRequest('identity_int16', [{ name: 'INPUT0', datatype: 'INT16', shape: [1, 3], values: [1, 2, 3] }], { version: 'latest' }),
        /positive integer/,
      ],
      ['name', inferRequest('', [{ name: 'INPUT0', datatype: 'INT16', shape: [1, 3], values: [1, 2, 3] }]), /model_name/],
      ['bytes utf8', inferRequest('identity_bytes', [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 3], values: ['a', 'b'] }]), /BYTES/],
    ];
    for (const [what, req, message] of cases) {
      const r = await call(clients.inference, 'ModelInfer', req);
      assert.equal(r.error?.code, status.INVALID_ARGUMENT, `${what}: ${r.error?.details}`);
      assert.match(r.error!.details, message, what);
      assert.deepEqual(r.error!.metadata.get('grpc-retry-pushback-ms'), [], `${what}: a client fault says no time to retry`);
    }
  });

  it('UNAVAILABLE when the queue is full; a cancelled call leaves the batcher queue at once', async () => {
    await call(clients.inference, 'RepositoryModelLoad', { repository_name: '', model_name: 'slow', parameters: {} });
    const req = (v: number) => inferRequest('slow', [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 3], values: [v, v, v] }]);
    const first = call(clients.inference, 'ModelInfer', req(1));
    // The first waits in the queue for its 2 s delay; the queue holds one.
    const deadline = Date.now() + 5000;
    while (((await metricValue(server.url, 'nv_inference_pending_request_count', { model: 'slow', version: '1' })) ?? 0) < 1 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    const full = await call(clients.inference, 'ModelInfer', req(2));
    assert.equal(full.error?.code, status.UNAVAILABLE, full.error?.details);
    // gRFC A6: when a client's retry policy may try again (the Retry-After an HTTP client gets).
    assert.deepEqual(full.error?.metadata.get('grpc-retry-pushback-ms'), ['1000']);
    const cancelledAt = Date.now();
    first.cancel();
    const r = await first;
    assert.equal(r.error?.code, status.CANCELLED);
    // It left the queue: pending is back to 0 long before the 2 s delay, and the batch never ran.
    while (((await metricValue(server.url, 'nv_inference_pending_request_count', { model: 'slow', version: '1' })) ?? 0) > 0 && Date.now() < cancelledAt + 1500)
      await new Promise((res) => setTimeout(res, 20));
    assert.equal(await metricValue(server.url, 'nv_inference_pending_request_count', { model: 'slow', version: '1' }), 0);
    assert.ok(Date.now() - cancelledAt < 1500, 'the cancelled request waited for the batch');
    assert.equal((await metricValue(server.url, 'nv_inference_exec_count', { model: 'slow', version: '1' })) ?? 0, 0);
    // The queue is free again.
    const again = call(clients.inference, 'ModelInfer', req(3));
    const ok = await again;
    assert.equal(ok.error, null, ok.error?.details);
    assert.deepEqual(asValues(ok.response, 'OUTPUT0')!.values, [3, 3, 3]);
  });

  it('calls are counted by method and code in /metrics', async () => {
    assert.ok(((await metricValue(server.url, 'onnx_mme_grpc_requests_total', { method: 'ModelInfer', code: 'OK' })) ?? 0) > 10);
    assert.ok(((await metricValue(server.url, 'onnx_mme_grpc_requests_total', { method: 'ModelInfer', code: 'NOT_FOUND' })) ?? 0) >= 1);
  });
});

describe('gRPC: drain', () => {
  it('health turns NOT_SERVING, new inferences are UNAVAILABLE (HTTP 503) with when to retry, a call in progress finishes, then the port closes', async () => {
    const dir = await tempDir(ctx, 'onnx-mme-grpc-drain-');
    const root = path.join(dir, 'models');
    const slow = identity('FP32', [3]);
    await writeModelDir(root, 'slow', {
      onnx: slow.onnx,
      config: configText({
        maxBatchSize: 8,
        inputs: [{ name: 'INPUT0', dataType: 'FP32', dims: [3] }],
        outputs: [{ name: 'OUTPUT0', dataType: 'FP32', dims: [3] }],
        extra: 'dynamic_batching { max_queue_delay_microseconds: 1000000 preferred_batch_size: [ 8 ] }',
      }),
    });
    const s = await startTestServer({ modelSource: root, cacheDir: path.join(dir, 'cache'), env: { MME_GRPC_PORT: '0' } });
    const c = connect(`127.0.0.1:${s.running.grpcPort}`);
    try {
      await call(c.inference, 'RepositoryModelLoad', { repository_name: '', model_name: 'slow', parameters: {} });
      const watch = c.health.Watch({ service: '' });
      const seen: string[] = [];
      watch.on('data', (m: any) => seen.push(m.status));
      watch.on('error', () => undefined);
      const inProgress = call(c.inference, 'ModelInfer', inferRequest('slow', [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 3], values: [4, 5, 6] }]));
      // An HTTP keep-alive connection with a request in flight too: the listener closes, this connection stays.
      const http = net.connect(Number(new URL(s.url).port), '127.0.0.1');
      await new Promise((r) => http.once('connect', r));
      let received = '';
      http.on('data', (d: Buffer) => (received += d.toString()));
      const v2Infer = (values: number[]): string => {
        const json = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 3], data: values }] });
        return `POST /v2/models/slow/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${json.length}\r\n\r\n${json}`;
      };
      http.write(v2Infer([7, 8, 9]));
      await new Promise((r) => setTimeout(r, 200));
      const stopping = s.close();
      await new Promise((r) => setTimeout(r, 50));
      assert.equal((await call(c.inference, 'ServerReady', {})).response?.ready, false);
      assert.equal((await call(c.health, 'Check', { service: '' })).response?.status, 'NOT_SERVING');
      const refused = await call(c.inference, 'ModelInfer', inferRequest('slow', [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 3], values: [1, 1, 1] }]));
      assert.equal(refused.error?.code, status.UNAVAILABLE);
      // Another instance takes the retry: the smallest pushback, 1 s (gRFC A6), not the time this one has left.
      assert.deepEqual(refused.error?.metadata.get('onnx-mme-error-code'), ['SHUTTING_DOWN']);
      assert.deepEqual(refused.error?.metadata.get('grpc-retry-pushback-ms'), ['1000']);
      // The same over HTTP, on the connection that is still open: 503 SHUTTING_DOWN with Retry-After: 1.
      const closed = new Promise((r) => http.once('close', r));
      http.write(v2Infer([1, 1, 1]));
      await closed;
      const [first, second] = received.split(/(?=HTTP\/1\.1 )/);
      assert.match(first ?? '', /^HTTP\/1\.1 200 /, received);
      assert.match(second ?? '', /^HTTP\/1\.1 503 /, received);
      assert.match(second!, /\r\nRetry-After: 1\r\n/i, second);
      assert.match(second!, /"code":"SHUTTING_DOWN"/, second);
      const finished = await inProgress;
      assert.equal(finished.error, null, finished.error?.details);
      assert.deepEqual(asValues(finished.response, 'OUTPUT0')!.values, [4, 5, 6]);
      await stopping;
      assert.deepEqual(seen.slice(0, 2), ['SERVING', 'NOT_SERVING']);
      const after = await call(c.inference, 'ServerLive', {}, { deadlineMs: 2000 });
      assert.ok(after.error !== null, 'the port is closed after the drain');
    } finally {
      c.close();
    }
  });
});

/** A self-signed certificate and key for `cn` (also valid for 127.0.0.1), made with the openssl CLI. */
function selfSigned(dir: string, name: string, cn: string): { cert: string; key: string } {
  const cert = path.join(dir, `${name}.pem`);
  const key = path.join(dir, `${name}.key`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '1',
      '-subj',
      `/CN=${cn}`,
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  return { cert, key };
}

const hasOpenssl = (() => {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

describe('gRPC: TLS', { skip: hasOpenssl ? false : 'the openssl CLI is not installed (it makes the test certificates)' }, () => {
  it('MME_GRPC_TLS_CERT/KEY: TLS clients trusting the certificate are served, plaintext clients are not; MME_GRPC_TLS_CA requires a client certificate', async () => {
    const dir = await tempDir(ctx, 'onnx-mme-grpc-tls-');
    const root = path.join(dir, 'models');
    await writeModelDir(root, 'identity_int32', identity('INT32', [3]));
    const serverCert = selfSigned(dir, 'server', 'localhost');
    const clientCert = selfSigned(dir, 'client', 'client');
    const s = await startTestServer({
      modelSource: root,
      cacheDir: path.join(dir, 'cache'),
      env: { MME_GRPC_PORT: '0', MME_GRPC_TLS_CERT: serverCert.cert, MME_GRPC_TLS_KEY: serverCert.key, MME_GRPC_TLS_CA: clientCert.cert },
    });
    const target = `127.0.0.1:${s.running.grpcPort}`;
    const ca = readFileSync(serverCert.cert);
    const mutual = connect(target, credentials.createSsl(ca, readFileSync(clientCert.key), readFileSync(clientCert.cert)));
    const noClientCert = connect(target, credentials.createSsl(ca));
    const plaintext = connect(target);
    try {
      const r = await call(
        mutual.inference,
        'ModelInfer',
        inferRequest('identity_int32', [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 3], values: [7, 8, 9] }]),
      );
      assert.equal(r.error, null, r.error?.details);
      assert.deepEqual(asValues(r.response, 'OUTPUT0')!.values, [7, 8, 9]);
      assert.equal((await call(mutual.health, 'Check', { service: '' })).response.status, 'SERVING');
      assert.equal((await call(noClientCert.inference, 'ServerLive', {}, { deadlineMs: 5000 })).error?.code, status.UNAVAILABLE);
      assert.equal((await call(plaintext.inference, 'ServerLive', {}, { deadlineMs: 5000 })).error?.code, status.UNAVAILABLE);
    } finally {
      mutual.close();
      noClientCert.close();
      plaintext.close();
      await s.close();
    }
  });

  it('a certificate file that cannot be read stops startup with a message naming the setting', async () => {
    const dir = await tempDir(ctx, 'onnx-mme-grpc-tls-bad-');
    await assert.rejects(
      startTestServer({
        modelSource: dir,
        cacheDir: path.join(dir, 'cache'),
        env: { MME_GRPC_PORT: '0', MME_GRPC_TLS_CERT: path.join(dir, 'missing.pem'), MME_GRPC_TLS_KEY: path.join(dir, 'missing.key') },
      }),
      /MME_GRPC_TLS_CERT/,
    );
  });
});
