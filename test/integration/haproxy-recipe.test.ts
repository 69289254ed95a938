/**
 * examples/haproxy/haproxy.cfg, run for real: three `serve` instances on
 * loopback, one S3-compatible server with the models, HAProxy from Debian's
 * package in front. Model-affine routing loads each requested model about
 * once in the fleet; a rolling restart of every instance loses no request
 * even when HAProxy retries nothing but connection failures (the drain does
 * it: /ping turns 503 while the instance still serves); an instance killed
 * with SIGKILL loses no request once the recipe's L7 retries are on.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { addSub, packTarGz, seededRandom, writeModelDir } from '../../examples/models/zoo.js';
import { readFile } from 'node:fs/promises';
import { drive, freePort, haproxyBinary, loadsOf, sleep, startHaproxy, startInstance, type Haproxy, type Instance } from '../support/haproxy-fleet.js';
import { s3rverEnv, startLoopbackS3, type LoopbackS3 } from '../support/s3rver.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';

const ctx = new Cleanups();
const MODELS = 24;
const seq16 = Array.from({ length: 16 }, (_, i) => i);
const body = Buffer.from(
  JSON.stringify({
    inputs: [
      { name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: seq16 },
      { name: 'INPUT1', datatype: 'FP32', shape: [1, 16], data: seq16 },
    ],
  }),
);

let root: string;
let s3: LoopbackS3;
let env: (name: string) => Record<string, string>;

/** Zipf(1.1)-like popularity over the models, seeded: a few hot models, a long tail. */
function zipfTargets(seed: number): (i: number) => string {
  const rand = seededRandom(seed);
  const weights = Array.from({ length: MODELS }, (_, k) => 1 / Math.pow(k + 1, 1.1));
  const total = weights.reduce((a, b) => a + b, 0);
  const picks: string[] = [];
  for (let i = 0; i < 4096; i++) {
    let u = rand() * total;
    let k = 0;
    while (k < MODELS - 1 && u > weights[k]!) u -= weights[k++]!;
    picks.push(`m${k}.tar.gz`);
  }
  return (i) => picks[i % picks.length]!;
}

before(async () => {
  haproxyBinary();
  root = await tempDir(ctx);
  s3 = await startLoopbackS3(['models']);
  await writeModelDir(path.join(root, 'work'), 'add_sub', addSub());
  await packTarGz(path.join(root, 'work'), path.join(root, 'add_sub.tar.gz'));
  const archive = await readFile(path.join(root, 'add_sub.tar.gz'));
  for (let i = 0; i < MODELS; i++) await s3.upload(`fleet/m${i}.tar.gz`, archive);
  env = (name) => ({
    MME_MODEL_SOURCE: 's3://models/fleet/',
    MME_CACHE_DIR: path.join(root, `cache-${name}`),
    ...s3rverEnv(s3.endpoint),
    MME_RUNTIME_WORKERS: '1',
    MME_INTRA_OP_THREADS: '1',
  });
});

after(async () => {
  await ctx.run();
  await s3?.close();
});

async function fleet(retries: 'recipe' | 'conn-failure'): Promise<{ instances: Instance[]; lb: Haproxy }> {
  const instances: Instance[] = [];
  for (const name of ['mme1', 'mme2', 'mme3']) {
    const inst = await startInstance(name, await freePort(), env(name));
    ctx.after(() => inst.process.kill());
    instances.push(inst);
  }
  const lb = await startHaproxy(root, { port: await freePort(), servers: instances, statsSocket: path.join(root, `haproxy-${retries}.sock`), retries });
  ctx.after(() => lb.stop());
  await lb.waitFor(
    instances.map((i) => i.name),
    true,
    15_000,
  );
  return { instances, lb };
}

describe('the HAProxy recipe (examples/haproxy/haproxy.cfg)', () => {
  it('routes by model (loads ~1x the distinct models) and a rolling restart without L7 retries loses no request', async () => {
    const { instances, lb } = await fleet('conn-failure');
    const target = zipfTargets(7);
    // One client: the bounded load never binds (it spills only past 1.5x the average in flight, which
    // bench/cluster.bench.ts measures under concurrency), so each model goes to its hashed instance.
    const warm = await drive({ url: lb.url, concurrency: 1, target, body, count: 300 });
    assert.deepEqual(warm.failures, []);
    const distinct = new Set(Array.from({ length: 300 }, (_, i) => target(i))).size;
    const loads = instances.reduce((n, i) => n + loadsOf(i), 0);
    // Round robin would load most models on all three instances.
    assert.equal(loads, distinct, `${loads} loads for ${distinct} distinct models`);

    // Traffic all along while each instance in turn gets SIGTERM, exits, starts again and is back UP.
    let done = false;
    const traffic = drive({ url: lb.url, concurrency: 4, target, body, stop: () => done });
    try {
      for (const inst of instances) {
        const exited = inst.process.exited;
        inst.process.proc.kill('SIGTERM');
        assert.equal(await exited, 0);
        await startInstance(inst.name, inst.port, env(inst.name), inst);
        await lb.waitFor([inst.name], true, 15_000);
      }
    } finally {
      done = true;
    }
    const outcome = await traffic;
    assert.ok(outcome.sent > 100, `only ${outcome.sent} requests during the restart`);
    assert.deepEqual(outcome.failures, [], `${outcome.failures.length} of ${outcome.sent} requests failed`);
    // Every instance did drain: its log says so, with the default period.
    for (const inst of instances) {
      const drained = inst.lines[0]!.find((l) => l['msg'] === 'draining: not ready, still serving');
      assert.equal(drained?.['drainMs'], 5000, inst.name);
    }
  });

  it("an instance killed with SIGKILL loses no request with the recipe's retries", async () => {
    const { instances, lb } = await fleet('recipe');
    const target = zipfTargets(11);
    assert.deepEqual((await drive({ url: lb.url, concurrency: 4, target, body, count: 300 })).failures, []);
    let done = false;
    const traffic = drive({ url: lb.url, concurrency: 4, target, body, stop: () => done });
    await sleep(500);
    const victim = instances[0]!;
    victim.process.proc.kill('SIGKILL');
    await victim.process.exited;
    // Until HAProxy's checks mark it down, requests hashed to it meet a refused connection and are redispatched.
    await lb.waitFor([victim.name], false, 10_000);
    await sleep(1000);
    done = true;
    const outcome = await traffic;
    assert.ok(outcome.sent > 50, `only ${outcome.sent} requests around the kill`);
    assert.deepEqual(outcome.failures, [], `${outcome.failures.length} of ${outcome.sent} requests failed`);
  });
});
