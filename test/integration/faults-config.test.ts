/**
 * Issue 19, a huge config.pbtxt: one over MME_CONFIG_MAX_BYTES is refused from
 * its size before it is read (400 INVALID_MODEL naming the model and the
 * limit), and one at the limit is parsed in the config thread, so /ping keeps
 * answering while it loads. Measured from outside: `serve` as a process, /ping
 * timed back to back on a real socket during the load.
 */
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { addSub } from '../../examples/models/zoo.js';
import { startServe, type ServeProcess } from '../support/serve-process.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request } from '../support/test-server.js';

const ctx = new Cleanups();
const seq16 = Array.from({ length: 16 }, (_, i) => i);
const body = { inputs: [input('INPUT0', 'FP32', [1, 16], seq16), input('INPUT1', 'FP32', [1, 16], seq16)] };
const LIMIT = 1024 * 1024; // MME_CONFIG_MAX_BYTES's default
let root: string;
let child: ServeProcess;

/** add_sub's config padded to `bytes` with comments or with long string parameters (logged as ignored keys). */
function paddedConfig(bytes: number, filler: 'comments' | 'strings'): string {
  let text = `${addSub().config}\n`;
  const chunk = 'x'.repeat(16 * 1024);
  for (let i = 0; text.length < bytes; i++) {
    const line = filler === 'comments' ? `# ${chunk}\n` : `parameters { key: "note${i}" value: { string_value: "${chunk}" } }\n`;
    text += text.length + line.length > bytes ? `#${'y'.repeat(Math.max(0, bytes - text.length - 2))}\n` : line;
  }
  return text;
}

async function writeModel(name: string, config: string): Promise<void> {
  await mkdir(path.join(root, name, '1'), { recursive: true });
  await writeFile(path.join(root, name, 'config.pbtxt'), config);
  await writeFile(path.join(root, name, '1', 'model.onnx'), addSub().onnx);
}

before(async () => {
  root = await tempDir(ctx);
  await writeModel('huge', paddedConfig(52 * 1024 * 1024, 'comments')); // the 52 MB
  await writeModel('at_limit', paddedConfig(LIMIT - 1024, 'strings'));
  child = await startServe({ MME_MODEL_SOURCE: root, MME_CACHE_DIR: path.join(root, '.cache'), MME_RUNTIME_WORKERS: '1' });
  ctx.after(() => child.kill());
});

after(() => ctx.run());

const invoke = (target: string) => request(`${child.url}/invocations`, { method: 'POST', headers: { 'X-Amzn-SageMaker-Target-Model': target }, json: body });

/** Runs `work` while timing /ping back to back; the slowest /ping in ms. */
async function slowestPingDuring<T>(work: Promise<T>): Promise<{ result: T; maxMs: number; pings: number }> {
  let done = false;
  let maxMs = 0;
  let pings = 0;
  const pinger = (async () => {
    while (!done) {
      const started = performance.now();
      const r = await fetch(`${child.url}/ping`);
      await r.arrayBuffer();
      maxMs = Math.max(maxMs, performance.now() - started);
      pings++;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();
  try {
    return { result: await work, maxMs, pings };
  } finally {
    done = true;
    await pinger;
  }
}

describe('a huge config.pbtxt', () => {
  it('over MME_CONFIG_MAX_BYTES: refused at once from its size, 400 INVALID_MODEL naming the model and the limit', async (t) => {
    const started = performance.now();
    const r = await invoke('huge');
    const elapsed = performance.now() - started;
    t.diagnostic(`52 MB config answered ${r.status} in ${Math.round(elapsed)} ms`);
    assert.equal(r.status, 400, r.text);
    assert.equal(r.body.code, 'INVALID_MODEL');
    assert.match(r.body.error, /model 'huge'.*huge\/config\.pbtxt is 5\d{7} bytes, over the limit of 1048576 bytes .*MME_CONFIG_MAX_BYTES/);
    assert.doesNotMatch(r.body.error, new RegExp(root.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')), 'no host path in the message');
    // Not read, not parsed: far less than the seconds a parse of 52 MB takes (about 4 s before).
    assert.ok(elapsed < 2_000, `answered after ${Math.round(elapsed)} ms`);
  });

  it('at the limit: parsed off the main thread, /ping keeps answering while it loads, and the model serves', async (t) => {
    const { result, maxMs, pings } = await slowestPingDuring(invoke('at_limit'));
    t.diagnostic(`/ping slowest ${Math.round(maxMs)} ms over ${pings} pings while a ${LIMIT - 1024}-byte config loaded`);
    assert.equal(result.status, 200, result.text);
    assert.deepEqual(
      result.body.outputs[0].data,
      seq16.map((v) => v + v),
    );
    assert.ok(pings >= 2, `only ${pings} pings during the load`);
    // Generous: a parse on the main thread held /ping for 1.5 s here before.
    assert.ok(maxMs < 500, `/ping took ${Math.round(maxMs)} ms while the config was parsed`);
  });
});
