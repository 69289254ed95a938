/**
 * A server killed without unloading its models (SIGKILL, the OOM killer)
 * leaves its js steps' sandboxes in the temp directory: host files, scratch,
 * and the model's files (hard links into the disk cache, which keep an
 * evicted entry's bytes on disk). The next server started in the same pid
 * namespace removes them and says so; it leaves every directory whose owner
 * may still be running or is not its to judge: its own user's sandboxes of a
 * live server, those named for another pid namespace, those of the name used
 * before owners were named, and (as root) one another user owns.
 * Real `serve` processes with TMPDIR pointed at a directory of this test.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { chmod, chown, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, it } from 'node:test';
import { startServe, type ServeProcess } from '../support/serve-process.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { input, request } from '../support/test-server.js';

const ctx = new Cleanups();
after(() => ctx.run());

const CONFIG = `name: "sq"
backend: "js"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
`;
const MJS = `export async function execute({ inputs }) {
  const x = inputs.x;
  return { y: { datatype: 'FP32', shape: x.shape, data: x.data.map((v) => v * v + 1) } };
}
`;

/** This test process's pid namespace and start time, read as the server reads its own. */
function owner(pid: number | 'self'): { ns: string; start: string } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  const ns = /\[(\d+)\]/.exec(readlinkSync(`/proc/${pid}/ns/pid`))![1]!;
  return { ns, start: stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]! };
}

async function squared(server: ServeProcess): Promise<void> {
  const reply = await request(`${server.url}/invocations`, {
    method: 'POST',
    headers: { 'X-Amzn-SageMaker-Target-Model': 'sq' },
    json: { inputs: [input('x', 'FP32', [1, 4], [1, 2, 3, 4])] },
    signal: AbortSignal.timeout(30_000),
  });
  assert.equal(reply.status, 200, reply.text);
  assert.deepEqual(reply.body.outputs[0].data, [2, 5, 10, 17]);
}

it(
  "a killed server's js-step sandboxes are removed by the next start, and nobody else's",
  { skip: process.platform !== 'linux' && 'pid namespaces and /proc are Linux' },
  async () => {
    const root = await tempDir(ctx);
    // The step runs as uid 65534 under root: every directory down to its sandbox must let it pass.
    await chmod(root, 0o711);
    const tmp = path.join(root, 'tmp');
    await mkdir(tmp, { mode: 0o711 });
    await chmod(tmp, 0o711);
    const models = path.join(root, 'models');
    await mkdir(path.join(models, 'sq', '1'), { recursive: true });
    await writeFile(path.join(models, 'sq', 'config.pbtxt'), CONFIG);
    await writeFile(path.join(models, 'sq', '1', 'model.mjs'), MJS);

    const me = owner('self');
    const kept = [
      `onnx-mme-js-${me.ns}-${process.pid}-${me.start}-alive1`, // a live server's (this process stands for it)
      `onnx-mme-js-1-2-3-otherns`, // another pid namespace: its pid says nothing here
      'onnx-mme-js-Ab12Cd', // the name before owners were named
    ];
    const asRoot = process.getuid?.() === 0;
    // Another user's directory with the name of a dead owner (pid 2^22 + 1 is above any pid_max).
    if (asRoot) kept.push(`onnx-mme-js-${me.ns}-4194305-1-notmine`);
    for (const name of kept) await mkdir(path.join(tmp, name, 'scratch'), { recursive: true });
    if (asRoot) await chown(path.join(tmp, kept[3]!), 65533, 65533);

    const env = { MME_MODEL_SOURCE: models, MME_CACHE_DIR: path.join(root, 'cache'), MME_RUNTIME_WORKERS: '1', TMPDIR: tmp };
    const first = await startServe(env);
    ctx.after(() => first.kill());
    await squared(first);
    const firstOwner = owner(first.proc.pid!);
    const leftover = readdirSync(tmp).filter((n) => n.startsWith(`onnx-mme-js-${firstOwner.ns}-${first.proc.pid}-${firstOwner.start}-`));
    assert.equal(leftover.length, 1, `the first server's sandbox, named after it: ${readdirSync(tmp).join(', ')}`);
    assert.ok(existsSync(path.join(tmp, leftover[0]!, 'host', 'js-step-host.js')));
    await first.kill();
    assert.ok(existsSync(path.join(tmp, leftover[0]!)), 'SIGKILL leaves the sandbox behind');

    const second = await startServe(env);
    ctx.after(() => second.kill());
    const line = second.lines.find((l) => /js-step sandbox/.test(String(l['msg'])));
    assert.equal(line?.['removed'], 1, JSON.stringify(line));
    assert.ok(!existsSync(path.join(tmp, leftover[0]!)), "the dead server's sandbox is gone");
    for (const name of kept) assert.ok(existsSync(path.join(tmp, name, 'scratch')), `${name} is not the second server's to remove`);
    await squared(second);
    await second.kill();
  },
);
