/**
 * Issue 35: a hot heavy model uses the cores. Each session runs with one
 * intra-op thread on one runtime worker, so a model whose config sets no
 * instance_group would run on one core however many workers idle. A real
 * `serve` with two runtime workers serves a model whose batch costs more than
 * the main thread may spend, under 32 concurrent clients: its second
 * instance is added (logged), and both workers run it, counted per thread
 * from /proc; with MME_HOT_MODEL_MAX_INSTANCES=1, one worker does all the
 * work. Answers stay those of the model.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import path from 'node:path';
import { after, it } from 'node:test';
import { configText, denseForward, mlp, writeModelDir } from '../../examples/models/zoo.js';
import { namedThreadsCpuUs, threadShares } from '../../bench/lib/proc-cpu.js';
import { startServe, type ServeProcess } from '../support/serve-process.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';

const ctx = new Cleanups();
after(() => ctx.run());

const IN = 64;
/** 64 → 2048 → 2048 → 4: a batch of 8 is estimated at about 1.7 ms, over MME_MAIN_THREAD_MAX_RUN_US's 1 ms, so it runs in the workers only. */
const model = mlp({ in: IN, hidden: [2048, 2048], out: 4, seed: 3 });
const row = Array.from({ length: IN }, (_, i) => (i % 7) / 7);
const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, IN], data: row }] });

/** CPU of each runtime worker thread of `pid`, by thread id. */
const workerCpu = (pid: number): Map<number, number> => namedThreadsCpuUs(pid, 'onnx-mme-runtim');

/** `clients` keep-alive clients, each sending its next request when its answer came, for `ms`; returns the answers' first outputs. */
async function flood(server: ServeProcess, clients: number, ms: number): Promise<number[][]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: clients });
  const end = Date.now() + ms;
  const outputs: number[][] = [];
  const one = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const req = http.request(
        `${server.url}/invocations`,
        { method: 'POST', agent, headers: { 'content-type': 'application/json', 'x-amzn-sagemaker-target-model': 'heavy' } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString();
            if (res.statusCode !== 200) reject(new Error(`${res.statusCode}: ${text}`));
            else {
              if (outputs.length < 50) outputs.push((JSON.parse(text) as { outputs: { data: number[] }[] }).outputs[0]!.data);
              resolve();
            }
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (Date.now() < end) await one();
    }),
  );
  agent.destroy();
  return outputs;
}

async function measure(maxInstances: string): Promise<{ shares: number[]; server: ServeProcess; outputs: number[][] }> {
  const root = await tempDir(ctx);
  await writeModelDir(path.join(root, 'models'), 'heavy', {
    onnx: model.onnx,
    config: configText({
      maxBatchSize: 8,
      inputs: [{ name: 'INPUT0', dataType: 'FP32', dims: [IN] }],
      outputs: [{ name: 'OUTPUT0', dataType: 'FP32', dims: [4] }],
    }),
  });
  const server = await startServe({
    MME_MODEL_SOURCE: path.join(root, 'models'),
    MME_CACHE_DIR: path.join(root, 'cache'),
    MME_RUNTIME_WORKERS: '2',
    // The default leaves a core to the main thread, so it never grows on a 2-CPU machine: the test sets it.
    MME_HOT_MODEL_MAX_INSTANCES: maxInstances,
  });
  ctx.after(() => server.kill());
  await flood(server, 2, 300); // loaded and placed
  const pid = server.proc.pid!;
  const before = workerCpu(pid);
  const outputs = await flood(server, 32, 3000);
  const after = workerCpu(pid);
  const { total, shares } = threadShares(before, after);
  assert.ok(total > 0, 'the workers ran the model');
  return { shares, server, outputs };
}

it('a hot model placed in the workers gets a second instance and both workers run it; with MME_HOT_MODEL_MAX_INSTANCES=1 one worker does', async (t) => {
  const expected = [...denseForward(model.layers, Float32Array.from(row), 1)];
  const grown = await measure('2');
  const added = grown.server.lines.find((l) => String(l['msg']).startsWith('model is hot'));
  assert.ok(added, 'the second instance is logged');
  assert.equal(added['model'], 'heavy');
  assert.equal(added['instances'], 2);
  const metrics = await (await fetch(`${grown.server.url}/metrics`)).text();
  assert.match(metrics, /^onnx_mme_model_instances_added\{target="heavy",model="heavy",version="1"\} 1$/m);
  // After the half second it takes to grow, both run it: the second worker does a fair part of the work.
  assert.ok(grown.shares[1]! > 0.2, `both workers run the hot model: shares ${grown.shares.map((s) => s.toFixed(2)).join(', ')}`);
  const fixed = await measure('1');
  t.diagnostic(
    `runtime workers' shares of the work: ${grown.shares.map((s) => s.toFixed(2)).join(' / ')} grown, ${fixed.shares.map((s) => s.toFixed(2)).join(' / ')} with one instance`,
  );
  assert.ok(!fixed.server.lines.some((l) => String(l['msg']).startsWith('model is hot')));
  assert.ok(fixed.shares[0]! > 0.95, `one instance, one worker: shares ${fixed.shares.map((s) => s.toFixed(2)).join(', ')}`);
  for (const out of [...grown.outputs, ...fixed.outputs]) {
    out.forEach((v, i) => assert.ok(Math.abs(v - expected[i]!) <= 1e-4 * Math.max(1, Math.abs(expected[i]!)), `output ${i}: ${v} against ${expected[i]}`));
  }
});
