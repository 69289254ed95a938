/**
 * What the server logs per request, as an operator gets it: `serve` as a
 * child process writing to a pipe. With the defaults, a fast answered request
 * writes no line, an error and a slow request (MME_SLOW_REQUEST_MS) do;
 * MME_ACCESS_LOG=true writes the `request` line for every request; and the
 * asynchronous destination loses nothing at SIGTERM: every answered request's
 * line, those drained after the signal included, is on the pipe when the
 * process has exited.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { scale, writeModelDir } from '../../examples/models/zoo.js';
import { startServe, type ServeProcess } from '../support/serve-process.js';
import { slowModel } from '../support/slow-model.js';
import { tempDir } from '../support/temp-dir.js';
import { input, request } from '../support/test-server.js';

const ctx = {
  cleanups: [] as (() => Promise<void>)[],
  after(fn: () => Promise<void>) {
    this.cleanups.push(fn);
  },
};
const SLOW_MS = 50;
const fastBody = { inputs: [input('INPUT0', 'FP32', [1, 4], [1, 2, 3, 4])] };
// 2048 rows through 8 MatMuls of 512×512: about 8.6 GFLOP, far over 50 ms on any CPU.
const slowBody = { inputs: [input('INPUT0', 'FP32', [1, 512], new Array(512).fill(1)), input('SHAPE', 'INT64', [2], [2048, 512])] };
let root: string;
const running: ServeProcess[] = [];

function requestLines(s: ServeProcess, reqId: string): Record<string, unknown>[] {
  return s.lines.filter((l) => l['reqId'] === reqId && l['msg'] === 'request');
}

async function until(cond: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}

async function serve(env: Record<string, string>): Promise<ServeProcess> {
  const s = await startServe({ MME_MODEL_SOURCE: path.join(root, 'models'), MME_CACHE_DIR: path.join(root, `cache-${running.length}`), ...env });
  running.push(s);
  return s;
}

before(async () => {
  root = await tempDir(ctx);
  await writeModelDir(path.join(root, 'models'), 'scaled', scale(2));
  await writeModelDir(path.join(root, 'models'), 'slow', slowModel({ rowsInput: true, layers: 8 }));
});

after(async () => {
  for (const s of running) await s.kill();
  for (const c of ctx.cleanups.reverse()) await c();
});

describe('per-request logging', () => {
  it('defaults: no line for a fast answer; errors and slow requests always get one', async () => {
    const s = await serve({ MME_SLOW_REQUEST_MS: String(SLOW_MS) });
    const ok = await request(`${s.url}/v2/models/scaled/infer`, { method: 'POST', headers: { 'x-request-id': 'fast-1' }, json: fastBody });
    assert.equal(ok.status, 200);
    const missing = await request(`${s.url}/v2/models/missing/infer`, { method: 'POST', headers: { 'x-request-id': 'err-1' }, json: fastBody });
    assert.equal(missing.status, 404);
    const slow = await request(`${s.url}/v2/models/slow/infer`, { method: 'POST', headers: { 'x-request-id': 'slow-1' }, json: slowBody });
    assert.equal(slow.status, 200, JSON.stringify(slow.body));

    await until(() => requestLines(s, 'slow-1').length > 0 && s.lines.some((l) => l['reqId'] === 'err-1'));
    const slowLine = requestLines(s, 'slow-1');
    assert.equal(slowLine.length, 1, 'one line for the slow request');
    assert.equal(slowLine[0]!['level'], 'warn');
    assert.equal(slowLine[0]!['slow'], true);
    assert.equal(slowLine[0]!['model'], 'slow');
    assert.ok((slowLine[0]!['durationMs'] as number) >= SLOW_MS);
    const errLines = s.lines.filter((l) => l['reqId'] === 'err-1');
    assert.ok(
      errLines.some((l) => l['level'] === 'warn' && l['status'] === 404 && l['code'] !== undefined),
      JSON.stringify(errLines),
    );
    // The fast answer: nothing at info. (On a host so loaded that it took SLOW_MS, it was slow, and says so.)
    for (const l of requestLines(s, 'fast-1')) {
      assert.equal(l['slow'], true, JSON.stringify(l));
      assert.ok((l['durationMs'] as number) >= SLOW_MS);
    }
    assert.equal(s.lines.filter((l) => l['msg'] === 'request' && l['level'] === 'info').length, 0, 'no info request lines by default');
  });

  it('MME_ACCESS_LOG=true: one line per request; SIGTERM in the middle of a burst loses none of them', async () => {
    const s = await serve({ MME_ACCESS_LOG: 'true' });
    const answered = new Map<string, number>();
    let next = 0;
    let stopped = false;
    const client = async (): Promise<void> => {
      while (!stopped) {
        const id = `burst-${next++}`;
        try {
          const r = await request(`${s.url}/invocations`, {
            method: 'POST',
            headers: { 'X-Amzn-SageMaker-Target-Model': 'scaled', 'x-request-id': id },
            json: fastBody,
          });
          answered.set(id, r.status);
        } catch {
          stopped = true; // the listener has closed
        }
      }
    };
    const clients = Promise.all(Array.from({ length: 8 }, client));
    // SIGTERM while requests are in flight: they are drained, and their lines are the last the process writes.
    await until(() => answered.size >= 200);
    s.proc.kill('SIGTERM');
    assert.equal(await s.exited, 0);
    stopped = true;
    await clients;
    const logged = (): Set<unknown> => new Set(s.lines.filter((l) => l['msg'] === 'request' && String(l['reqId']).startsWith('burst-')).map((l) => l['reqId']));
    // The process has exited; what it wrote may still be on its way through the pipe to this side.
    await until(() => [...answered.keys()].every((id) => logged().has(id)) || s.proc.stdout!.readableEnded, 5000);
    const missing = [...answered.keys()].filter((id) => !logged().has(id));
    assert.deepEqual(missing, [], `answered requests without a request line after exit: ${missing.length} of ${answered.size}`);
    assert.ok([...answered.values()].filter((st) => st === 200).length >= 200);
    const one = s.lines.find((l) => l['reqId'] === 'burst-0' && l['msg'] === 'request')!;
    assert.equal(one['level'], 'info');
    assert.equal(one['route'], '/invocations');
    assert.equal(one['status'], 200);
  });
});
