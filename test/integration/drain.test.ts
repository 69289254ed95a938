/**
 * The drain after SIGTERM, seen from outside the process as a balancer and
 * its clients see it: readiness turns 503 (/ping, /v2/health/ready, gRPC
 * health and ServerReady) at once while every request is still served, on
 * new connections too, each answer with `Connection: close` (the one in
 * flight when the signal came included); liveness stays 200; only after
 * MME_DRAIN_SECONDS does the listener close, and the process exits 0 within
 * MME_SHUTDOWN_TIMEOUT_SECONDS.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { addSub, writeModelDir } from '../../examples/models/zoo.js';
import { call, connect } from '../support/grpc-client.js';
import { startServe } from '../support/serve-process.js';
import { slowModel } from '../support/slow-model.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';

const ctx = new Cleanups();
after(() => ctx.run());

interface Answer {
  readonly status: number;
  readonly connection: string | undefined;
  readonly body: string;
}

/** One request over `agent` (keep-alive) or a fresh connection; the raw Connection header kept. */
function send(port: number, method: string, urlPath: string, options: { agent?: http.Agent; target?: string; body?: unknown } = {}): Promise<Answer> {
  const payload = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body));
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path: urlPath,
        agent: options.agent ?? false,
        headers: {
          ...(payload ? { 'content-type': 'application/json', 'content-length': payload.length } : {}),
          ...(options.target ? { 'x-amzn-sagemaker-target-model': options.target } : {}),
        },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers['connection'], body: text }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

const seq16 = Array.from({ length: 16 }, (_, i) => i);
const addSubBody = {
  inputs: [
    { name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: seq16 },
    { name: 'INPUT1', datatype: 'FP32', shape: [1, 16], data: seq16 },
  ],
};
const slowBody = { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 512], data: new Array(512).fill(1) }] };

describe('drain after SIGTERM', () => {
  it('not ready at once, still serving (Connection: close) for MME_DRAIN_SECONDS, then closed, exit 0 in time', async () => {
    const root = await tempDir(ctx);
    await writeModelDir(path.join(root, 'models'), 'slow', slowModel({ layers: 64 }));
    await writeModelDir(path.join(root, 'models'), 'add_sub', addSub());
    const child = await startServe({
      MME_MODEL_SOURCE: path.join(root, 'models'),
      MME_CACHE_DIR: path.join(root, 'cache'),
      MME_LOG_LEVEL: 'debug',
      MME_GRPC_PORT: '0',
      MME_DRAIN_SECONDS: '2',
      MME_SHUTDOWN_TIMEOUT_SECONDS: '8',
    });
    ctx.after(() => child.kill());
    const port = child.port;
    const grpcPort = child.lines.find((l) => l['msg'] === 'onnx-mme listening')!['grpcPort'] as number;
    const grpc = connect(`127.0.0.1:${grpcPort}`);
    ctx.after(async () => grpc.close());
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    ctx.after(async () => agent.destroy());

    // Before: keep-alive answers, ready everywhere; both models loaded so requests below only run.
    const before = await send(port, 'POST', '/invocations', { agent, target: 'add_sub', body: addSubBody });
    assert.equal(before.status, 200, before.body);
    assert.equal(before.connection, 'keep-alive');
    assert.equal((await send(port, 'POST', '/invocations', { target: 'slow', body: slowBody })).status, 200);
    assert.equal((await call(grpc.health, 'Check', { service: '' })).response?.status, 'SERVING');

    // A request in flight on a keep-alive connection when the signal comes.
    const slowAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    ctx.after(async () => slowAgent.destroy());
    const inflight = send(port, 'POST', '/invocations', { agent: slowAgent, target: 'slow', body: slowBody });
    while (child.lines.filter((l) => l['msg'] === 'request received' && l['path'] === '/invocations').length < 3) await new Promise((r) => setTimeout(r, 5));
    const signalled = performance.now();
    child.proc.kill('SIGTERM');
    while (!child.lines.some((l) => l['msg'] === 'draining: not ready, still serving')) await new Promise((r) => setTimeout(r, 5));

    // Not ready: /ping and the KServe ready route say 503, gRPC health NOT_SERVING and ServerReady false.
    const ping = await send(port, 'GET', '/ping');
    assert.equal(ping.status, 503);
    assert.equal(JSON.parse(ping.body).code, 'SHUTTING_DOWN');
    assert.equal(ping.connection, 'close');
    assert.notEqual((await send(port, 'GET', '/v2/health/ready')).status, 200);
    assert.equal((await send(port, 'GET', '/v2/health/live')).status, 200, 'liveness stays: the process is fine');
    assert.equal((await call(grpc.health, 'Check', { service: '' })).response?.status, 'NOT_SERVING');
    assert.equal((await call(grpc.inference, 'ServerReady', {})).response?.ready, false);
    // Still serving: on the open keep-alive connection and on a new one, each answer closing its connection.
    const onKeptConnection = await send(port, 'POST', '/invocations', { agent, target: 'add_sub', body: addSubBody });
    assert.equal(onKeptConnection.status, 200, onKeptConnection.body);
    assert.equal(onKeptConnection.connection, 'close');
    const onNewConnection = await send(port, 'POST', '/invocations', { target: 'add_sub', body: addSubBody });
    assert.equal(onNewConnection.status, 200, onNewConnection.body);
    assert.equal(onNewConnection.connection, 'close');
    const grpcLive = await call(grpc.inference, 'ServerLive', {});
    assert.equal(grpcLive.response?.live, true);
    // The answer in flight at the signal closes its connection too.
    const first = await inflight;
    assert.equal(first.status, 200, first.body);
    assert.equal(first.connection, 'close');

    // After the drain period the listener closes: a new connection is refused.
    let refusedAt: number | undefined;
    while (refusedAt === undefined && performance.now() - signalled < 8_000) {
      try {
        await send(port, 'GET', '/v2/health/live');
        await new Promise((r) => setTimeout(r, 50));
      } catch {
        refusedAt = performance.now();
      }
    }
    assert.ok(refusedAt !== undefined, 'the listener never closed');
    assert.ok(refusedAt - signalled >= 2_000, `refused ${Math.round(refusedAt - signalled)} ms after SIGTERM, before the 2 s drain ended`);
    const code = await child.exited;
    assert.equal(code, 0);
    // The deadline covers the drain: exit within MME_SHUTDOWN_TIMEOUT_SECONDS (+ process teardown on a loaded machine).
    assert.ok(performance.now() - signalled < 8_000 + 1_500, `exited ${Math.round(performance.now() - signalled)} ms after SIGTERM`);
    // The exit can be seen before the last lines are read from the pipe.
    for (let i = 0; i < 100 && child.lines.at(-1)?.['msg'] !== 'shutdown complete'; i++) await new Promise((r) => setTimeout(r, 20));
    const msgs = child.lines.map((l) => l['msg']);
    assert.ok(msgs.indexOf('draining: not ready, still serving') < msgs.indexOf('shutting down: draining in-flight requests'));
    assert.equal(msgs.at(-1), 'shutdown complete');
  });
});
