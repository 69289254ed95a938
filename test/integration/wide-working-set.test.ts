/**
 * A hit costs about the same whatever the number of models in use: a real
 * server started by `./serve`, its CPU time read from /proc, answering
 * requests spread over many resident models against requests to two of them,
 * in the same test. With few main-thread copies (MME_MAIN_THREAD_COPIES=4)
 * and many small models used in turn, a copy made and dropped per request
 * (what a most-recently-used choice of copies did: 7 ms of server CPU a hit
 * over 2,000 models) shows as many times the CPU per request; the copies
 * going to the models that run most often (runtime/main-thread-copies.ts)
 * keeps it near the narrow figure, the rest being the hop to a worker.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { FEATURES, invokeTarget, startServeAt, writeDensityModels } from '../support/density-scenario.js';
import { tempDir } from '../support/temp-dir.js';

const cleanups: (() => Promise<void>)[] = [];
const ctx = { after: (fn: () => Promise<void>) => cleanups.push(fn) };
after(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

/** User + system CPU time of a process, ms, from /proc/<pid>/stat (all its threads). */
async function cpuMs(pid: number): Promise<number> {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  // utime and stime are fields 14 and 15 of the whole line, in clock ticks (100 a second on Linux).
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

describe('many models in use', { skip: process.platform !== 'linux' }, () => {
  it('server CPU per request over 60 models used in turn stays within 2.5x of that over 2 models (copies are not made and dropped per request)', async () => {
    const root = await tempDir(ctx);
    const names = await writeDensityModels(root, 'tiny', 60);
    const server = await startServeAt({ MME_MODEL_SOURCE: root, MME_CACHE_DIR: path.join(await tempDir(ctx), 'cache'), MME_MAIN_THREAD_COPIES: '4' });
    ctx.after(() => server.stop());
    const send = async (name: string) => assert.equal(await invokeTarget(server.url, name, FEATURES.tiny), 200, name);
    // Every model loaded and used a few times, so both phases below are hits only.
    for (let round = 0; round < 3; round++) for (const name of names) await send(name);
    // One at a time: the server is quiet, when copies are made.
    const phase = async (models: readonly string[], requests: number): Promise<number> => {
      const before = await cpuMs(server.pid);
      for (let i = 0; i < requests; i++) await send(models[i % models.length]!);
      return ((await cpuMs(server.pid)) - before) / requests;
    };
    const requests = 1200;
    const narrow: number[] = [];
    const wide: number[] = [];
    // Alternated, so both see the same machine; medians.
    for (let i = 0; i < 3; i++) {
      narrow.push(await phase(names.slice(0, 2), requests / 3));
      wide.push(await phase(names, requests / 3));
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[1]!;
    const ratio = median(wide) / median(narrow);
    assert.ok(
      ratio <= 2.5,
      `server CPU per request: ${median(wide).toFixed(3)} ms over 60 models, ${median(narrow).toFixed(3)} ms over 2 (${ratio.toFixed(2)}x; runs ${wide.map((x) => x.toFixed(2))} / ${narrow.map((x) => x.toFixed(2))})`,
    );
  });
});
