/**
 * Overload without collapse (docs/operations.md#overload-and-retry-storms),
 * from outside, on real sockets:
 * - one admission for every route: a request whose headers arrived holds its
 *   place on HTTP, and with MME_MAX_INFLIGHT_REQUESTS=1 a SageMaker request
 *   gets 429 with Retry-After, a KServe v2 one 503, and a gRPC ModelInfer
 *   UNAVAILABLE with grpc-retry-pushback-ms (which a grpc-js retry policy
 *   waits before its retry), all naming the setting; once the place frees all
 *   three run;
 * - a retry storm (a `serve` process, 512 connections each retrying every
 *   refusal at once, from another process) against MME_MAX_INFLIGHT_REQUESTS
 *   keeps goodput at 0.3 of what 32 connections get in the same run at least
 *   (collapse is 0.02-0.06), refusals come faster than answers or under
 *   100 ms (medians), every one says Retry-After, and /ping from a new
 *   connection answers within 2 s;
 * - refusals are counted by reason and model, and announced once in the log;
 * - a busy model keeps its batches in its runtime worker, at 16 HTTP
 *   connections or 16 gRPC calls at a time, and flooded beside another
 *   model: requests admitted together or waiting for an event-loop turn
 *   count as a busy server, so its main-thread copy stays idle (CPU per
 *   thread from /proc).
 * How a light model fares beside a flooded one is measured by
 * bench/overload.bench.ts on a quiet machine (issue 37's goal is not met
 * yet); the round robin across models is unit-tested
 * (test/unit/service/event-loop-turns.test.ts).
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, it } from 'node:test';
import { status } from '@grpc/grpc-js';
import { mlp, tiny, writeModelDir } from '../../examples/models/zoo.js';
import type { StormResult } from '../../bench/lib/storm-client.js';
import { namedThreadsCpuUs } from '../../bench/lib/proc-cpu.js';
import { pingMs as ping, runStorm } from '../../bench/lib/storm.js';
import { call, connect, inferRequest } from '../support/grpc-client.js';
import { sample } from '../support/metric-value.js';
import { startServe } from '../support/serve-process.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { startTestServer } from '../support/test-server.js';

const ctx = new Cleanups();
after(() => ctx.run());

const tinyBody = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: Array.from({ length: 16 }, (_, i) => i / 16) }] });

it('one admission on every route: HTTP SageMaker 429 with Retry-After, KServe 503, gRPC UNAVAILABLE; all run once the place frees', async () => {
  const root = await tempDir(ctx);
  await writeModelDir(path.join(root, 'models'), 'tiny', tiny({ in: 16, out: 4 }));
  const server = await startTestServer({
    modelSource: path.join(root, 'models'),
    cacheDir: path.join(root, 'cache'),
    env: { MME_GRPC_PORT: '0', MME_MAX_INFLIGHT_REQUESTS: '1' },
  });
  ctx.after(() => server.close());
  const grpc = connect(`127.0.0.1:${server.running.grpcPort}`);
  ctx.after(async () => grpc.close());
  const invoke = (route: string): Promise<Response> =>
    fetch(`${server.url}${route}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-amzn-sagemaker-target-model': 'tiny' },
      body: tinyBody,
    });
  assert.equal((await invoke('/invocations')).status, 200, 'the model loads');

  // Headers with a body still to come: admitted when the headers arrive, the place is held until the answer.
  const holder = net.connect(Number(new URL(server.url).port), '127.0.0.1');
  await new Promise((r) => holder.once('connect', r));
  const answered = new Promise<string>((resolve) => {
    let text = '';
    holder.on('data', (d: Buffer) => {
      text += d.toString();
      if (text.includes('\r\n\r\n')) resolve(text);
    });
  });
  holder.write(
    `POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Amzn-SageMaker-Target-Model: tiny\r\nContent-Length: ${Buffer.byteLength(tinyBody)}\r\n\r\n`,
  );
  await new Promise((r) => setTimeout(r, 200));

  const sagemaker = await invoke('/invocations');
  assert.equal(sagemaker.status, 429);
  assert.equal(sagemaker.headers.get('retry-after'), '1');
  const body = (await sagemaker.json()) as { code: string; message: string; details: { reason: string } };
  assert.equal(body.code, 'OVERLOADED');
  assert.match(body.message, /MME_MAX_INFLIGHT_REQUESTS/);
  assert.equal(body.details.reason, 'inflight_requests');
  const kserve = await invoke('/v2/models/tiny/infer');
  assert.equal(kserve.status, 503);
  assert.equal(kserve.headers.get('retry-after'), '1');
  const rpc = await call(
    grpc.inference,
    'ModelInfer',
    inferRequest('tiny', [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], values: Array.from({ length: 16 }, () => 1) }]),
  );
  assert.equal(rpc.error?.code, status.UNAVAILABLE);
  assert.match(rpc.error?.details ?? '', /MME_MAX_INFLIGHT_REQUESTS/);
  // gRFC A6: the same Retry-After, as the pushback a client's retry policy waits.
  assert.deepEqual(rpc.error?.metadata.get('grpc-retry-pushback-ms'), ['1000']);
  // A grpc-js client whose retry policy would retry after 10 ms waits the pushback instead: its one retry comes after
  // the place freed (300 ms from now) and is served. Without the pushback it would be refused again, and fail.
  const retrying = connect(`127.0.0.1:${server.running.grpcPort}`, undefined, {
    'grpc.service_config': JSON.stringify({
      methodConfig: [
        {
          name: [{ service: 'inference.GRPCInferenceService' }],
          retryPolicy: { maxAttempts: 2, initialBackoff: '0.01s', maxBackoff: '0.01s', backoffMultiplier: 1, retryableStatusCodes: ['UNAVAILABLE'] },
        },
      ],
    }),
  });
  ctx.after(async () => retrying.close());
  const retryStarted = performance.now();
  const retried = call(
    retrying.inference,
    'ModelInfer',
    inferRequest('tiny', [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], values: Array.from({ length: 16 }, () => 1) }]),
  );
  await new Promise((r) => setTimeout(r, 300));

  holder.write(tinyBody);
  assert.match(await answered, /^HTTP\/1\.1 200/);
  const afterPushback = await retried;
  assert.equal(afterPushback.error, null, String(afterPushback.error));
  assert.ok(performance.now() - retryStarted >= 950, `answered after ${Math.round(performance.now() - retryStarted)} ms: the pushback was not waited`);
  holder.destroy();
  await new Promise((r) => setTimeout(r, 100));
  const v2 = await invoke('/v2/models/tiny/infer');
  assert.equal(v2.status, 200, await v2.text());
  await new Promise((r) => setTimeout(r, 100));
  const ok = await call(
    grpc.inference,
    'ModelInfer',
    inferRequest('tiny', [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], values: Array.from({ length: 16 }, () => 1) }]),
  );
  assert.equal(ok.error, null, String(ok.error));

  const metrics = await (await fetch(`${server.url}/metrics`)).text();
  assert.ok(sample(metrics, 'onnx_mme_admission_refusals_total', { reason: 'inflight_requests', model: 'tiny' })! >= 3, metrics);
  assert.equal(server.logs.filter((l) => String(l['msg']).startsWith('refusing inference requests for overload')).length, 1);
});

/** A storm from another process: `connections` connections, each sending again the moment any answer arrives. */
async function storm(port: number, connections: number, seconds: number, bodyFile: string, target = 'mlp'): Promise<StormResult> {
  return (await runStorm(port, { connections, seconds, route: '/invocations', target, bodyFile })).storm;
}

it('a retry storm of 512 connections against MME_MAX_INFLIGHT_REQUESTS=32: goodput holds, refusals are prompt and say Retry-After, /ping answers', async (t) => {
  const root = await tempDir(ctx);
  await writeModelDir(path.join(root, 'models'), 'mlp', mlp({ in: 256, hidden: [256, 256], out: 16 }));
  const bodyFile = path.join(root, 'body.json');
  await writeFile(
    bodyFile,
    JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 256], data: Array.from({ length: 256 }, (_, i) => (i % 7) / 7) }] }),
  );
  const served = await startServe({ MME_MODEL_SOURCE: path.join(root, 'models'), MME_CACHE_DIR: path.join(root, 'cache'), MME_MAX_INFLIGHT_REQUESTS: '32' });
  ctx.after(() => served.kill());
  await storm(served.port, 8, 1, bodyFile);
  const calm = await storm(served.port, 32, 3, bodyFile);
  const pings: number[] = [];
  let stormDone = false;
  const stormRun = storm(served.port, 512, 4, bodyFile).finally(() => (stormDone = true));
  await new Promise((r) => setTimeout(r, 500));
  while (!stormDone) {
    pings.push(await ping(served.port));
    await new Promise((r) => setTimeout(r, 100));
  }
  const stormed = await stormRun;
  const ok = (r: StormResult): number => r.statuses['200'] ?? 0;
  const refused = stormed.statuses['429'] ?? 0;
  const report = `calm ${JSON.stringify(calm)}; storm ${JSON.stringify(stormed)}; /ping ms ${pings.map(Math.round).join(',')}`;
  t.diagnostic(report);
  assert.deepEqual(Object.keys(stormed.statuses).sort(), ['200', '429'], report);
  // Collapse is 3-6% of the calm goodput (issue 37); bench/overload.bench.ts measures the real ratio on a quiet machine.
  assert.ok(ok(stormed) / 4 >= 0.3 * (ok(calm) / 3), `goodput under the storm at least 0.3 of the calm one: ${report}`);
  assert.equal(stormed.retryAfter, refused, `every refusal says Retry-After: ${report}`);
  // Held connections keep the answers prompt too, so the bound is either.
  assert.ok(
    stormed.latencyMs['429']!.p50 < Math.max(stormed.latencyMs['200']!.p50, 100),
    `refusals come faster than answers, or under 100 ms (medians): ${report}`,
  );
  assert.ok(pings.length >= 3 && Math.max(...pings) < 2_000, `/ping within 2 s: ${report}`);
  // Held connections: far fewer refusals than a storm that is read again at once would get (one per retry).
  assert.ok(refused < 3 * ok(stormed) + 512 * 5, `refusals bounded by answers and Retry-After: ${report}`);
});

it('a busy model runs its batches in its runtime worker, not on the main thread: 16 connections alone, 16 gRPC calls, then 128 connections beside another model', async (t) => {
  const root = await tempDir(ctx);
  const models = path.join(root, 'models');
  // The MLP's run is short enough for a main-thread copy (docs/batching-and-performance.md#where-a-model-runs).
  await writeModelDir(models, 'mlp', mlp({ in: 256, hidden: [1024, 1024], out: 16 }));
  await writeModelDir(models, 'light', tiny({ in: 16, out: 4 }));
  const mlpBody = path.join(root, 'mlp.json');
  const lightBody = path.join(root, 'light.json');
  await writeFile(
    mlpBody,
    JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 256], data: Array.from({ length: 256 }, (_, i) => (i % 7) / 7) }] }),
  );
  await writeFile(lightBody, tinyBody);
  const served = await startServe({ MME_MODEL_SOURCE: models, MME_CACHE_DIR: path.join(root, 'cache'), MME_GRPC_PORT: '0' });
  ctx.after(() => served.kill());
  const pid = served.proc.pid!;
  const grpcPort = served.lines.find((l) => l['msg'] === 'onnx-mme listening')?.['grpcPort'];
  // Lone requests while the server is quiet: the MLP gets its main-thread copy and uses it.
  const quietRuns = async (): Promise<void> => {
    for (let i = 0; i < 6; i++) {
      await storm(served.port, 1, 0.2, mlpBody);
      await new Promise((r) => setTimeout(r, 60));
    }
  };
  // Threads started from the main thread bear its name (the copy's intra-op threads); the main thread itself is the process's id.
  const copyThreads = (): Map<number, number> => {
    const threads = namedThreadsCpuUs(pid, 'MainThread');
    threads.delete(pid);
    return threads;
  };
  const spent = (before: Map<number, number>, after: Map<number, number>): number =>
    [...after].reduce((sum, [tid, us]) => sum + us - (before.get(tid) ?? 0), 0);
  /** CPU of the copy's threads and of the runtime workers while `load` runs. */
  const measured = async <T>(load: () => Promise<T>): Promise<{ copies: number; workers: number; result: T }> => {
    const copiesBefore = copyThreads();
    const workersBefore = namedThreadsCpuUs(pid, 'onnx-mme-runtim');
    const result = await load();
    return { copies: spent(copiesBefore, copyThreads()), workers: spent(workersBefore, namedThreadsCpuUs(pid, 'onnx-mme-runtim')), result };
  };
  const ms = (us: number): number => Math.round(us / 1000);
  // The fault runs every batch on the copy: its threads 2.4-2.9 s in 3 s, the workers none. Without it the copy's
  // threads read 0-60 ms beside 0.8-2 s in the workers; on a shared machine a slowed client's lone requests may find a
  // quiet moment and use the copy as designed (90 ms beside 460 ms once in CI), so the bound is only that the workers
  // did most of the work.
  const mostlyInWorkers = (m: { copies: number; workers: number }): boolean => m.copies < m.workers;

  await quietRuns();
  // The copy runs with min(4, CPUs) intra-op threads: the main thread and, on 2 CPUs or more, pool threads whose
  // CPU tells where batches ran. With none the measure would say nothing.
  if (copyThreads().size === 0) {
    t.skip(`no intra-op thread beside the main-thread copy to measure (${os.availableParallelism()} CPU)`);
    return;
  }
  const alone = await measured(() => storm(served.port, 16, 3, mlpBody));
  const aloneReport = `16 connections: main-thread copy threads ${ms(alone.copies)} ms, runtime workers ${ms(alone.workers)} ms; ${JSON.stringify(alone.result)}`;
  t.diagnostic(aloneReport);
  assert.deepEqual(Object.keys(alone.result.statuses), ['200'], aloneReport);
  // Before, each request was read, batched alone and run on the copy before the next was read, so no batch ever
  // had company and the copy ran all of them at a third of the worker's throughput.
  assert.ok(mostlyInWorkers(alone), `16 connections' batches ran in the worker: ${aloneReport}`);

  // gRPC requests are admitted without an HTTP turn: 16 calls at a time, each on a connection of its own.
  await quietRuns();
  const grpcRequest = inferRequest('mlp', [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 256], values: Array.from({ length: 256 }, (_, i) => (i % 7) / 7) }]);
  const channels = Array.from({ length: 16 }, () => connect(`127.0.0.1:${String(grpcPort)}`, undefined, { 'grpc.use_local_subchannel_pool': 1 }));
  ctx.after(async () => channels.forEach((c) => c.close()));
  const grpcLoad = await measured(async () => {
    const until = performance.now() + 3000;
    const answers = await Promise.all(
      channels.map(async (c) => {
        let n = 0;
        while (performance.now() < until) {
          const r = await call(c.inference, 'ModelInfer', grpcRequest);
          assert.equal(r.error, null, String(r.error));
          n++;
        }
        return n;
      }),
    );
    return answers.reduce((a, b) => a + b, 0);
  });
  const grpcReport = `16 gRPC calls at a time: main-thread copy threads ${ms(grpcLoad.copies)} ms, runtime workers ${ms(grpcLoad.workers)} ms; ${grpcLoad.result} answers`;
  t.diagnostic(grpcReport);
  assert.ok(mostlyInWorkers(grpcLoad), `16 gRPC calls' batches ran in the worker: ${grpcReport}`);

  await quietRuns();
  await storm(served.port, 1, 0.5, lightBody, 'light');
  const beside = await measured(() => Promise.all([storm(served.port, 128, 3, mlpBody), storm(served.port, 1, 3, lightBody, 'light')]));
  const [heavy, light] = beside.result;
  const report = `main-thread copy threads ${ms(beside.copies)} ms, runtime workers ${ms(beside.workers)} ms; heavy ${JSON.stringify(heavy)}; light ${JSON.stringify(light)}`;
  t.diagnostic(report);
  assert.deepEqual(Object.keys(heavy.statuses), ['200'], report);
  assert.deepEqual(Object.keys(light.statuses), ['200'], report);
  // Before, a turn started 4 requests while two models were in use, no batch had company, and the copy's threads
  // took 0.8 of a core while the worker idled; now they take about 0.02.
  assert.ok(mostlyInWorkers(beside), `the flooded model's batches ran in its worker: ${report}`);
});
