/**
 * @module test/unit/runtime/runtime-pool-placement
 * Where the real RuntimePool puts sessions: the least-loaded worker, except
 * that a model's further instances avoid the workers holding its others (two
 * instances on one worker would only take turns), even when those workers are
 * less loaded; with every worker avoided it falls back to the least loaded.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { identity } from '../../../examples/models/zoo.js';
import { RuntimePool, type PooledSession } from '../../../src/runtime/runtime-pool.js';
import type { CreateSessionOptions } from '../../../src/runtime/worker-protocol.js';

const OPTIONS: CreateSessionOptions = { providers: ['cpu'], deviceId: 0, graphOptimizationLevel: 'all', intraOpThreads: 1, interOpThreads: 1 };

let dir: string;
let file: string;
let pool: RuntimePool;
const created: PooledSession[] = [];

before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'pool-placement-'));
  file = path.join(dir, 'identity.onnx');
  await writeFile(file, identity('FP32', [2]).onnx);
  pool = new RuntimePool(2);
});

after(async () => {
  await Promise.allSettled(created.map((s) => s.release()));
  await pool.close();
  await rm(dir, { recursive: true, force: true });
});

async function create(avoid?: ReadonlySet<number>): Promise<PooledSession> {
  const s = await pool.createSession(file, OPTIONS, avoid);
  created.push(s);
  return s;
}

test('instances avoid their siblings’ workers; least-loaded otherwise', async () => {
  // Load worker 1 with three sessions of other models, worker 0 with none.
  const a = await create(); // least loaded: worker 0
  assert.equal(a.worker, 0);
  for (let i = 0; i < 3; i++) assert.equal((await create(new Set([0]))).worker, 1);
  await a.release();
  created.splice(created.indexOf(a), 1);
  // Worker 0: 0 sessions, worker 1: 3. A model with two instances:
  const first = await create();
  assert.equal(first.worker, 0, 'least loaded');
  const second = await create(new Set([first.worker]));
  assert.equal(second.worker, 1, 'on the other worker, although it holds more sessions');
  const third = await create(new Set([first.worker, second.worker]));
  assert.equal(third.worker, 0, 'every worker avoided: the least loaded');
  // Each runs where it lives.
  const feeds = new Map([['INPUT0', { datatype: 'FP32' as const, shape: [1, 2], data: Float32Array.from([1, 2]) }]]);
  for (const s of [first, second, third]) assert.deepEqual(Array.from((await s.run(feeds, ['OUTPUT0'])).get('OUTPUT0')!.data as Float32Array), [1, 2]);
});
