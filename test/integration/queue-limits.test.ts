/**
 * Issue 29, one meaning for queue limits: under a flood, a request over
 * MME_MAX_QUEUE_SIZE (counting the requests on their way to the model, not
 * only those in its batcher) or over MME_MAX_INFLIGHT_REQUESTS is refused at
 * once. The server is `serve` as a process, the flood a separate client
 * process (keep-alive connections sending back to back, every answer timed),
 * /ping timed from this process on a new connection each time, as a health
 * check connects. Bounds are ratios within the same run, or generous:
 * - 429s come, and the client waits less for them than for a 200, or under
 *   100 ms (medians);
 * - in the server's own log lines (durationMs: from the request's arrival to
 *   its answer, which the machine's load outside the server does not stretch
 *   as it stretches the client's clock), a refusal's median is under 1/20
 *   of an accepted request's: refused when its headers arrive, not after a
 *   turn, its body and its decode (before: the queue never filled, and the
 *   refusals that came waited like everyone else);
 * - every /ping answers 200 within 2 s.
 * The flood's connections are held after a refusal (MME_HOLD_REFUSED_CONNECTIONS,
 * on by default): refusals stay prompt because a held connection's retry is
 * given the place that freed for it.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, it } from 'node:test';
import { addSub, writeModelDir } from '../../examples/models/zoo.js';
import { pingUnderFlood } from '../support/ping-under-flood.js';
import { startServe, type ServeProcess } from '../support/serve-process.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { addSubBody } from '../support/v2-json.js';

const ctx = new Cleanups();
after(() => ctx.run());

/** Moderate: the machine is shared; enough that many requests are on their way at once. */
const CONNECTIONS = 128;
const FLOOD_SECONDS = 5;
const body = JSON.stringify(addSubBody());

interface Latency {
  readonly n: number;
  readonly p50: number;
  readonly p99: number;
}

interface FloodResult {
  /** durationMs of the server's log lines during the flood: refusals (429) and answers (200). */
  readonly serverMs: { readonly rejected: number[]; readonly accepted: number[] };
  readonly statuses: Record<string, number>;
  readonly latencyMs: Record<string, Latency>;
  readonly pingsMs: readonly number[];
  readonly pingStatuses: readonly string[];
}

/** Floods /invocations for FLOOD_SECONDS, timing every answer, and pings every 200 ms meanwhile. */
async function flood(served: ServeProcess): Promise<FloodResult> {
  const url = served.url;
  const firstLine = served.lines.length;
  const { pings, result } = await pingUnderFlood(url, { connections: CONNECTIONS, seconds: FLOOD_SECONDS, target: 'add_sub', body, timed: true });
  const { latencyMs, ...statuses } = result as Record<string, number> & { latencyMs: Record<string, Latency> };
  // The last lines may still be in the pipe.
  await new Promise((r) => setTimeout(r, 500));
  const lines = served.lines.slice(firstLine);
  const durations = (msg: string, status: number): number[] =>
    lines.filter((l) => l['msg'] === msg && l['status'] === status).map((l) => Number(l['durationMs']));
  const serverMs = { rejected: durations('request rejected', 429), accepted: durations('request', 200) };
  assert.ok(
    lines.some((l) => l['level'] === 'warn' && String(l['msg']).startsWith('refusing inference requests for overload')),
    'refusals are announced at warn, once, when they start',
  );
  return { serverMs, statuses, latencyMs, pingsMs: pings.map((p) => p.ms), pingStatuses: pings.map((p) => p.status) };
}

function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

/** The flood's figures, or the assertion that fails, with every figure in its message. */
function assertPromptRejections(r: FloodResult): string {
  const server = { rejected: median(r.serverMs.rejected), accepted: median(r.serverMs.accepted) };
  const report =
    `statuses ${JSON.stringify(r.statuses)}; client latency ms ${JSON.stringify(r.latencyMs)}; ` +
    `server durationMs medians: 429 ${server.rejected} (${r.serverMs.rejected.length}), 200 ${server.accepted} (${r.serverMs.accepted.length}); /ping ms ${r.pingsMs.map(Math.round).join(',')}`;
  const accepted = r.latencyMs['200'];
  const rejected = r.latencyMs['429'];
  assert.ok(accepted !== undefined && accepted.n > 0, `requests were served: ${report}`);
  assert.ok(rejected !== undefined && rejected.n > 0, `the limit refused requests: ${report}`);
  // Held connections (MME_HOLD_REFUSED_CONNECTIONS) keep the answers prompt too, so the bound is either.
  assert.ok(rejected.p50 < Math.max(accepted.p50, 100), `the client waits less for a refusal than for an answer, or under 100 ms (medians): ${report}`);
  assert.ok(r.serverMs.rejected.length > 0 && r.serverMs.accepted.length > 0, `the server logged both: ${report}`);
  // A refusal is a parse and a write when the headers arrive: under 1/20 of an answer's server time, or, where answers
  // themselves take a fraction of a millisecond (add_sub runs on the main thread), under a generous 1 ms.
  assert.ok(
    server.rejected < Math.max(0.05 * server.accepted, 1),
    `refused on arrival: the server's median for a 429 under 1/20 of a 200's, or under 1 ms: ${report}`,
  );
  for (const status of Object.keys(r.statuses)) assert.ok(['200', '429', 'sockets'].includes(status), report);
  assert.ok(r.pingsMs.length >= 3, report);
  for (const s of r.pingStatuses) assert.equal(s, 'HTTP/1.1 200 OK', report);
  assert.ok(Math.max(...r.pingsMs) < 2_000, `slowest /ping under 2 s: ${report}`);
  return report;
}

async function serveAddSub(env: Record<string, string>): Promise<ServeProcess> {
  const root = await tempDir(ctx);
  await writeModelDir(path.join(root, 'models'), 'add_sub', addSub());
  // MME_ACCESS_LOG: the accepted requests' durationMs come from their request lines, written by default only for errors and slow ones;
  // a refusal's own line is at debug (the default log has one summary line for them: observability/refusal-summary.ts).
  const child = await startServe({
    MME_MODEL_SOURCE: path.join(root, 'models'),
    MME_CACHE_DIR: path.join(root, 'cache'),
    MME_ACCESS_LOG: 'true',
    MME_LOG_LEVEL: 'debug',
    ...env,
  });
  ctx.after(() => child.kill());
  const warm = await fetch(`${child.url}/invocations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-amzn-sagemaker-target-model': 'add_sub' },
    body,
  });
  assert.equal(warm.status, 200);
  return child;
}

it(`MME_MAX_QUEUE_SIZE holds under ${CONNECTIONS} keep-alive connections: requests on their way count, rejections are answered at once, /ping within 2 s`, async (t) => {
  const served = await serveAddSub({ MME_MAX_QUEUE_SIZE: '16' });
  t.diagnostic(assertPromptRejections(await flood(served)));
});

it(`MME_MAX_INFLIGHT_REQUESTS holds under ${CONNECTIONS} keep-alive connections: the requests over it are answered at once, /ping within 2 s`, async (t) => {
  const served = await serveAddSub({ MME_MAX_INFLIGHT_REQUESTS: '64' });
  t.diagnostic(assertPromptRejections(await flood(served)));
});
