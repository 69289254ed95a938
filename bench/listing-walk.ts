/**
 * @module bench/listing-walk
 * A full paginated walk of SageMaker's `GET /models` (pages of 100) over 500
 * and 2,000 SageMaker-managed models, in process (the registry and service on
 * the fake loader of the unit tests: no sessions, only the listing's own
 * cost). Prints the median CPU time of a walk of each (CPU, not wall time:
 * on a shared machine a walk's wall time is mostly other processes) and their
 * ratio; issue 28 asks for ≤ 5× for 4× the models. Run:
 * `node dist/bench/listing-walk.js`.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { InferenceService } from '../src/service/inference-service.js';
import { registryFixture } from '../test/unit/registry/fake-loader.js';

const PAGE = 100;
const WALKS = 9;

async function walkMs(count: number, base: string): Promise<number> {
  const fixture = registryFixture({ budgetBytes: Number.MAX_SAFE_INTEGER / 2, bytesOf: () => 1 });
  const service = new InferenceService({ registry: fixture.registry, metrics: fixture.metrics, maxInflight: 8 });
  const root = path.join(base, String(count));
  await mkdir(root);
  for (let i = 0; i < count; i++) {
    const dir = path.join(root, `m${i}`);
    await mkdir(dir);
    await service.registerModel(`model-${String(i).padStart(5, '0')}`, dir, undefined);
  }
  const times: number[] = [];
  for (let w = 0; w < WALKS + 2; w++) {
    const started = process.cpuUsage();
    let seen = 0;
    let after: string | undefined;
    do {
      const page = service.listModels(PAGE, after);
      seen += page.models.length;
      after = page.next;
    } while (after !== undefined);
    if (seen !== count) throw new Error(`walk saw ${seen} of ${count}`);
    const used = process.cpuUsage(started);
    if (w >= 2) times.push((used.user + used.system) / 1000);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

const base = await mkdtemp(path.join(os.tmpdir(), 'listing-walk-'));
try {
  const small = await walkMs(500, base);
  const large = await walkMs(2000, base);
  console.log(
    `walk of GET /models, pages of ${PAGE}, CPU time: 500 models ${small.toFixed(2)} ms, 2000 models ${large.toFixed(2)} ms, ratio ${(large / small).toFixed(2)}x`,
  );
} finally {
  await rm(base, { recursive: true, force: true });
}
