/**
 * The main thread goes first (docs/batching-and-performance.md#threads): a
 * real `serve` on Linux, each thread's nice value read from /proc. The
 * runtime workers and the onnxruntime threads they start (a model whose
 * config asks for two intra-op threads has a pool thread in its worker) run
 * at MME_RUNTIME_WORKER_NICE, 10 by default (or the process's own, if
 * that is lower still); the main thread keeps the process's. With 0 every
 * thread runs at the process's priority.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, it } from 'node:test';
import { mlp, writeModelDir } from '../../examples/models/zoo.js';
import { parseStat } from '../../bench/lib/proc-cpu.js';
import { startServe } from '../support/serve-process.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';

const ctx = new Cleanups();
after(() => ctx.run());

/** Each thread of `pid`: its name (comm) and nice value, from /proc/<pid>/task/<tid>/stat. */
function threads(pid: number): { tid: number; name: string; nice: number }[] {
  const out: { tid: number; name: string; nice: number }[] = [];
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      // nice is field 19.
      const { name, fields } = parseStat(readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8'));
      out.push({ tid: Number(tid), name, nice: Number(fields[16]) });
    } catch {
      // the thread ended
    }
  }
  return out;
}

/** A served MLP whose config asks onnxruntime for two intra-op threads, answered once. */
async function serveAndRun(env: Record<string, string>): Promise<{ pid: number; list: ReturnType<typeof threads> }> {
  const root = await tempDir(ctx);
  const models = path.join(root, 'models');
  await writeModelDir(models, 'mlp', mlp({ in: 64, hidden: [2048, 2048], out: 4 }));
  const config = path.join(models, 'mlp', 'config.pbtxt');
  await writeFile(config, `${readFileSync(config, 'utf8')}\nparameters { key: "intra_op_thread_count" value: { string_value: "2" } }\n`);
  const served = await startServe({ MME_MODEL_SOURCE: models, MME_CACHE_DIR: path.join(root, 'cache'), ...env });
  ctx.after(() => served.kill());
  const res = await fetch(`${served.url}/invocations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-amzn-sagemaker-target-model': 'mlp' },
    body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 64], data: Array.from({ length: 64 }, () => 0.5) }] }),
  });
  assert.equal(res.status, 200, await res.text());
  return { pid: served.proc.pid!, list: threads(served.proc.pid!) };
}

it(
  "the runtime workers and their onnxruntime threads run at nice 10 (or the process's, if lower), the main thread at the process priority",
  { skip: process.platform !== 'linux' },
  async () => {
    const { pid, list } = await serveAndRun({});
    const report = JSON.stringify(list);
    // The server inherits this process's nice value (0 unless the suite was started under `nice`).
    const inherited = os.getPriority();
    const main = list.find((t) => t.tid === pid)!;
    assert.equal(main.nice, inherited, `main thread: ${report}`);
    const workers = list.filter((t) => t.name.startsWith('onnx-mme-runtim'));
    // Two runtime workers (the default on a 2-CPU machine, more on larger ones) and the model's intra-op pool thread.
    assert.ok(workers.length >= 3, `the workers and onnxruntime's pool thread: ${report}`);
    for (const t of workers) assert.equal(t.nice, Math.max(10, inherited), `thread ${t.tid} (${t.name}): ${report}`);
    for (const t of list.filter((t) => !t.name.startsWith('onnx-mme-runtim'))) assert.equal(t.nice, inherited, `thread ${t.tid} (${t.name}): ${report}`);
  },
);

it('MME_RUNTIME_WORKER_NICE=0: every thread at the process priority', { skip: process.platform !== 'linux' }, async () => {
  const { list } = await serveAndRun({ MME_RUNTIME_WORKER_NICE: '0' });
  for (const t of list) assert.equal(t.nice, os.getPriority(), `thread ${t.tid} (${t.name}): ${JSON.stringify(list)}`);
});
