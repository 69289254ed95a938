/**
 * `onnx-mme perf` as a user runs it (the built command, a child process)
 * against the real server on loopback: every request it sends is counted by
 * the server (compared with /metrics), errors are reported by the status the
 * target answered (a bare node:http server answering 429/500/503 on a known
 * schedule, and the real server's own 429 when a queue is full), the JSON,
 * CSV and SVG it writes parse, and the SageMaker SDK path reaches the
 * server's /endpoints/{e}/invocations route with fake credentials.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { tiny, writeModelDir } from '../../examples/models/zoo.js';
import { runCli } from '../support/cli.js';
import { slowModel } from '../support/slow-model.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { request, startTestServer, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();
after(() => ctx.run());

/** Sum of every series of `name` whose labels include `labels` (other labels, e.g. a target label, may be present). */
async function metricSum(baseUrl: string, name: string, labels: Record<string, string>): Promise<number> {
  const text = (await request(`${baseUrl}/metrics`)).text;
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = new Map([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1]!, x[2]!]));
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) sum += Number(m[3]);
  }
  return sum;
}

interface StepJson {
  mode: string;
  concurrency: number;
  rate_rps: number | null;
  throughput_rps: number;
  p50_ms: number | null;
  p90_ms: number | null;
  p99_ms: number | null;
  requests: number;
  errors: number;
  errors_by_status: Record<string, number>;
  requests_sent: number;
  server: { source: string; requests: number; compute_infer_ms: number | null; batch_size: number | null } | null;
}

/** Well-formed enough for a browser: one <svg> root, every element closed in order. */
function assertWellFormedSvg(text: string): void {
  assert.match(text, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  const stack: string[] = [];
  for (const m of text.matchAll(/<(\/?)([a-zA-Z]+)[^>]*?(\/?)>/g)) {
    if (m[3] === '/') continue;
    if (m[1] === '/') assert.equal(stack.pop(), m[2], `</${m[2]}> closes the wrong element`);
    else stack.push(m[2]!);
  }
  assert.deepEqual(stack, []);
  assert.doesNotMatch(text, /NaN|undefined|Infinity/);
}

const FAST = ['--duration-s', '0.6', '--window-s', '0.2'];

describe('onnx-mme perf', () => {
  let server: TestServer;
  let work = '';

  before(async () => {
    work = await tempDir(ctx, 'onnx-mme-cli-perf-');
    await writeModelDir(path.join(work, 'models'), 'tiny', tiny());
    server = await startTestServer({ modelSource: path.join(work, 'models'), cacheDir: path.join(work, 'cache'), env: { MME_LOG_LEVEL: 'warn' } });
    ctx.after(() => server.close());
  });

  it('sweeps concurrency over KServe v2; the server counts exactly the requests perf reports sending; JSON, CSV and SVG are valid', async () => {
    const json = path.join(work, 'sweep.json');
    const csv = path.join(work, 'sweep.csv');
    const chart = path.join(work, 'sweep.svg');
    const before = await metricSum(server.url, 'onnx_mme_http_requests_total', { route: '/v2/models/:model/infer' });
    const r = await runCli(['perf', server.url, '--model', 'tiny', '--concurrency', '1:4:x2', ...FAST, '--json', json, '--csv', csv, '--chart', chart]);
    assert.equal(r.code, 0, r.stderr);
    const steps = JSON.parse(await readFile(json, 'utf8')) as StepJson[];
    assert.deepEqual(
      steps.map((s) => s.concurrency),
      [1, 2, 4],
    );
    const sent = steps.reduce((n, s) => n + s.requests_sent, 0);
    const counted = (await metricSum(server.url, 'onnx_mme_http_requests_total', { route: '/v2/models/:model/infer' })) - before;
    assert.equal(counted, sent, 'every request perf sent reached the server, and nothing else');
    assert.match(r.stdout, new RegExp(`${sent} inference requests sent in all`));
    for (const s of steps) {
      assert.equal(s.mode, 'concurrency');
      assert.ok(s.requests > 0 && s.requests <= s.requests_sent, JSON.stringify(s));
      assert.equal(s.errors, 0);
      assert.ok(s.throughput_rps > 0);
      assert.ok(s.p50_ms! > 0 && s.p50_ms! <= s.p90_ms! && s.p90_ms! <= s.p99_ms!, JSON.stringify(s));
      // The server's own split, from its metrics (or the statistics route once it exists).
      assert.ok(s.server !== null, 'server split present against onnx-mme');
      assert.ok(s.server.requests > 0 && s.server.compute_infer_ms! >= 0 && s.server.batch_size! >= 1, JSON.stringify(s.server));
    }
    // The table: a row per step with the figures.
    for (const c of [1, 2, 4]) assert.match(r.stdout, new RegExp(`^\\s+${c}\\s+\\d+\\.\\d`, 'm'));
    assert.match(r.stderr, /concurrency 4: window 1:/, 'progress on stderr');

    const lines = (await readFile(csv, 'utf8')).trim().split('\n');
    assert.equal(lines.length, 4);
    const header = lines[0]!.split(',');
    assert.ok(['concurrency', 'throughput_rps', 'p50_ms', 'p99_ms', 'requests', 'errors'].every((c) => header.includes(c)));
    for (const line of lines.slice(1)) assert.equal(line.split(',').length, header.length);
    assert.equal(Number(lines[3]!.split(',')[header.indexOf('concurrency')]), 4);
    assertWellFormedSvg(await readFile(chart, 'utf8'));
  });

  it('runs an open-loop request rate, with binary tensors on SageMaker /invocations', async () => {
    const json = path.join(work, 'rate.json');
    const before = await metricSum(server.url, 'nv_inference_request_success', { model: 'tiny' });
    const r = await runCli(['perf', server.url, '--target-model', 'tiny', '--rate', '40:80:x2', '--binary', ...FAST, '--json', json]);
    assert.equal(r.code, 0, r.stderr);
    const steps = JSON.parse(await readFile(json, 'utf8')) as StepJson[];
    assert.deepEqual(
      steps.map((s) => [s.mode, s.rate_rps]),
      [
        ['rate', 40],
        ['rate', 80],
      ],
    );
    const counted = (await metricSum(server.url, 'nv_inference_request_success', { model: 'tiny' })) - before;
    assert.equal(
      counted,
      steps.reduce((n, s) => n + s.requests_sent, 0),
    );
    assert.match(r.stdout, /X-Amzn-SageMaker-Target-Model: tiny/);
  });

  it('sends real requests from a JSON-lines file', async () => {
    const file = path.join(work, 'requests.jsonl');
    const row = (v: number): string =>
      JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: Array.from({ length: 16 }, () => v) }] });
    await writeFile(file, `${row(1)}\n\n${row(2)}\n`);
    const r = await runCli(['perf', server.url, '--model', 'tiny', '--concurrency', '2', ...FAST, '--input-data', file]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /2 distinct requests/);
    const bad = path.join(work, 'bad.jsonl');
    await writeFile(bad, 'not json\n');
    const b = await runCli(['perf', server.url, '--model', 'tiny', '--concurrency', '1', ...FAST, '--input-data', bad]);
    assert.equal(b.code, 1);
    assert.match(b.stderr, /bad\.jsonl:1: not JSON/);
  });

  it('reaches /endpoints/{e}/invocations through the SageMaker Runtime SDK (fake credentials), counted exactly', async () => {
    const json = path.join(work, 'sdk.json');
    const route = { route: '/endpoints/:endpoint/invocations' };
    const before = await metricSum(server.url, 'onnx_mme_http_requests_total', route);
    const env = {
      AWS_ACCESS_KEY_ID: 'AKIDFAKE',
      AWS_SECRET_ACCESS_KEY: 'fake',
      AWS_REGION: 'us-east-1',
      AWS_PROFILE: undefined,
      AWS_CONFIG_FILE: '/nonexistent',
      AWS_SHARED_CREDENTIALS_FILE: '/nonexistent',
    };
    const r = await runCli(['perf', server.url, '--endpoint-name', 'my-endpoint', '--target-model', 'tiny', '--concurrency', '2', ...FAST, '--json', json], {
      env,
    });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /SageMaker InvokeEndpoint my-endpoint \(TargetModel tiny\)/);
    const steps = JSON.parse(await readFile(json, 'utf8')) as StepJson[];
    const counted = (await metricSum(server.url, 'onnx_mme_http_requests_total', route)) - before;
    assert.equal(counted, steps[0]!.requests_sent);
    assert.ok(steps[0]!.requests > 0 && steps[0]!.errors === 0);
  });

  it("reports the server's own 429s by status when a model queue is full (SageMaker route; KServe says 503), and exits 1", async () => {
    const dir = path.join(work, 'slow-models');
    await writeModelDir(dir, 'slow', slowModel({ width: 128, rows: 512, layers: 8 }));
    const slow = await startTestServer({ modelSource: dir, cacheDir: path.join(work, 'slow-cache'), env: { MME_LOG_LEVEL: 'warn', MME_MAX_QUEUE_SIZE: '1' } });
    ctx.after(() => slow.close());
    const json = path.join(work, 'queue.json');
    const r = await runCli(['perf', slow.url, '--target-model', 'slow', '--concurrency', '8', ...FAST, '--json', json]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    const [step] = JSON.parse(await readFile(json, 'utf8')) as StepJson[];
    assert.ok((step!.errors_by_status['429'] ?? 0) > 0, JSON.stringify(step));
    assert.equal(step!.errors, step!.errors_by_status['429']);
    assert.match(r.stdout, /429:\d+/);
    assert.match(r.stdout, /first 429 answer: .*slow/);
    const refused = await metricSum(slow.url, 'onnx_mme_http_requests_total', { route: '/invocations', status: '429' });
    assert.ok(refused >= step!.errors_by_status['429']!);
  });
});

describe('onnx-mme perf against a bare node:http target', () => {
  it('counts each status the target answered (429, 500, 503), and what it received equals what perf sent', async () => {
    const received = new Map<string, number>();
    let n = 0;
    const metadata = JSON.stringify({ name: 'm', versions: ['1'], platform: 'x', inputs: [{ name: 'X', datatype: 'INT64', shape: [-1, 3] }], outputs: [] });
    const bare = createServer((req, res) => {
      if (req.method === 'GET' && req.url === '/v2/models/m') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(metadata);
        return;
      }
      if (req.method !== 'POST' || req.url !== '/v2/models/m/infer') {
        res.writeHead(404).end();
        return;
      }
      req.resume();
      req.once('end', () => {
        const i = n++;
        const status = i % 5 === 1 ? 503 : i % 5 === 2 ? 429 : i % 5 === 3 ? 500 : 200;
        received.set(String(status), (received.get(String(status)) ?? 0) + 1);
        res.writeHead(status, { 'content-type': 'application/json' }).end(status === 200 ? '{"outputs":[]}' : `{"error":"status ${status} on purpose"}`);
      });
    });
    bare.listen(0, '127.0.0.1');
    await once(bare, 'listening');
    ctx.after(() => new Promise<void>((r) => bare.close(() => r())));
    const url = `http://127.0.0.1:${(bare.address() as AddressInfo).port}`;
    const work = await tempDir(ctx, 'onnx-mme-cli-perf-bare-');
    const json = path.join(work, 'bare.json');

    const r = await runCli(['perf', url, '--model', 'm', '--concurrency', '1:2:1', ...FAST, '--json', json]);
    assert.equal(r.code, 1, 'failed requests fail the measurement');
    const steps = JSON.parse(await readFile(json, 'utf8')) as StepJson[];
    assert.equal(
      steps.reduce((s, x) => s + x.requests_sent, 0),
      n,
      'the target received exactly what perf sent',
    );
    for (const s of steps) {
      for (const status of ['429', '500', '503']) assert.ok((s.errors_by_status[status] ?? 0) > 0, `${status} in ${JSON.stringify(s)}`);
      assert.equal(s.errors, s.errors_by_status['429']! + s.errors_by_status['500']! + s.errors_by_status['503']!);
      assert.equal(s.server, null, 'no server split from a target without statistics or metrics');
    }
    // Measured windows are a part of all answers: never more of a status than the target sent.
    for (const status of ['429', '500', '503']) assert.ok(steps.reduce((a, s) => a + (s.errors_by_status[status] ?? 0), 0) <= received.get(status)!);
    assert.match(r.stdout, /first 503 answer: \{"error":"status 503 on purpose"\}/);
    const allowed = await runCli(['perf', url, '--model', 'm', '--concurrency', '1', ...FAST, '--allow-errors']);
    assert.equal(allowed.code, 0, allowed.stderr);
  });

  it('exits 2 on a bad command line and 1 when the endpoint cannot be reached', async () => {
    for (const args of [
      ['perf'],
      ['perf', 'http://127.0.0.1:1'],
      ['perf', 'not-a-url', '--model', 'm'],
      ['perf', 'http://127.0.0.1:1', '--model', 'm', '--concurrency', '8:1'],
      ['perf', 'http://127.0.0.1:1', '--model', 'm', '--rate', '5', '--concurrency', '2'],
      ['perf', 'http://127.0.0.1:1', '--model', 'm', '--bogus'],
    ]) {
      const r = await runCli(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /onnx-mme perf: .*\nRun 'onnx-mme perf --help'/);
    }
    const r = await runCli(['perf', 'http://127.0.0.1:1', '--model', 'm', '--concurrency', '1', '--duration-s', '0.2']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /no metadata for model 'm'/);
    const help = await runCli(['perf', '--help']);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /--concurrency SPEC/);
  });
});
