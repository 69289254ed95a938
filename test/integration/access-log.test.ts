/**
 * Logs for operators: with MME_ACCESS_LOG=true, one `request` line per request at info with the
 * field vocabulary (method, path, route, status, target, model, version,
 * durationMs rounded to the µs, reqId), W3C traceparent accepted, logged as
 * traceId/spanId and echoed on the answer (success and error alike, lean
 * path and express); an invalid traceparent is neither logged nor echoed;
 * by default (and with MME_ACCESS_LOG=false) a fast answered request gets no
 * line at info; misspelt settings are named once at start-up.
 * test/integration/request-logging.test.ts has errors, slow requests and
 * SIGTERM on a real process.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { scale, writeModelDir } from '../../examples/models/zoo.js';
import { tempDir } from '../support/temp-dir.js';
import { input, request, startTestServer, type TestServer } from '../support/test-server.js';

const ctx = {
  cleanups: [] as (() => Promise<void>)[],
  after(fn: () => Promise<void>) {
    this.cleanups.push(fn);
  },
};
let root: string;
let server: TestServer;
const TRACE = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const body = { inputs: [input('INPUT0', 'FP32', [1, 4], [1, 2, 3, 4])] };

function lines(s: TestServer, reqId: string): Record<string, unknown>[] {
  return s.logs.filter((l) => l['reqId'] === reqId && l['msg'] === 'request');
}

async function until(cond: () => boolean): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!cond() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
}

before(async () => {
  root = await tempDir(ctx);
  await writeModelDir(path.join(root, 'models'), 'scaled', scale(2));
  server = await startTestServer({
    modelSource: path.join(root, 'models'),
    cacheDir: path.join(root, 'cache'),
    env: { MME_LOG_LEVEL: 'info', MME_ACCESS_LOG: 'true', MME_MEMORY_BUDGET: '1', SAGEMAKER_TRITON_LOG_VERBOSE: 'true' },
  });
});

after(async () => {
  await server.close();
  for (const c of ctx.cleanups.reverse()) await c();
});

describe('access log and trace context', () => {
  it('one info line per request with the vocabulary; traceparent logged and echoed (lean path)', async () => {
    const r = await request(`${server.url}/v2/models/scaled/infer`, { method: 'POST', headers: { traceparent: TRACE, 'x-request-id': 'req-1' }, json: body });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('traceparent'), TRACE);
    await until(() => lines(server, 'req-1').length > 0);
    const got = lines(server, 'req-1');
    assert.equal(got.length, 1);
    const line = got[0]!;
    assert.equal(line['level'], 'info');
    assert.equal(line['method'], 'POST');
    assert.equal(line['path'], '/v2/models/scaled/infer');
    assert.equal(line['route'], '/v2/models/:model/infer');
    assert.equal(line['status'], 200);
    assert.equal(line['target'], 'scaled');
    assert.equal(line['model'], 'scaled');
    assert.equal(line['version'], '1');
    assert.equal(line['traceId'], '4bf92f3577b34da6a3ce929d0e0e4736');
    assert.equal(line['spanId'], '00f067aa0ba902b7');
    const ms = line['durationMs'] as number;
    assert.ok(ms > 0 && Math.abs(ms * 1000 - Math.round(ms * 1000)) < 1e-6, `durationMs rounded to the µs: ${ms}`);
  });

  it('errors and express routes echo it too; an invalid traceparent is ignored', async () => {
    const e = await request(`${server.url}/v2/models/missing/infer`, { method: 'POST', headers: { traceparent: TRACE }, json: body });
    assert.equal(e.status, 404);
    assert.equal(e.headers.get('traceparent'), TRACE);
    const m = await request(`${server.url}/v2/models/scaled`, { headers: { traceparent: TRACE, 'x-request-id': 'req-meta' } });
    assert.equal(m.status, 200);
    assert.equal(m.headers.get('traceparent'), TRACE);
    await until(() => lines(server, 'req-meta').length > 0);
    assert.equal(lines(server, 'req-meta')[0]!['route'], '/v2/models/:model');
    for (const bad of ['00-00000000000000000000000000000000-00f067aa0ba902b7-01', 'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', 'garbage']) {
      const r = await request(`${server.url}/v2/models/scaled/infer`, { method: 'POST', headers: { traceparent: bad, 'x-request-id': 'req-bad' }, json: body });
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('traceparent'), null, bad);
    }
    await until(() => lines(server, 'req-bad').length === 3);
    assert.ok(lines(server, 'req-bad').every((l) => !('traceId' in l)));
  });

  it('misspelt and foreign settings were named once at start-up', () => {
    const warned = server.logs.filter((l) => l['env'] === 'MME_MEMORY_BUDGET');
    assert.equal(warned.length, 1);
    assert.equal(warned[0]!['level'], 'warn');
    assert.match(warned[0]!['msg'] as string, /did you mean MME_MEMORY_BUDGET_BYTES/);
    const ignored = server.logs.filter((l) => l['env'] === 'SAGEMAKER_TRITON_LOG_VERBOSE');
    assert.equal(ignored.length, 1);
    assert.match(ignored[0]!['msg'] as string, /MME_LOG_LEVEL/);
  });

  for (const setting of [undefined, 'false']) {
    it(`MME_ACCESS_LOG ${setting === undefined ? 'unset (the default)' : `=${setting}`}: no request line at info for a fast answer, one at warn for an error`, async () => {
      const quiet = await startTestServer({
        modelSource: path.join(root, 'models'),
        cacheDir: path.join(root, `cache-${setting ?? 'default'}`),
        env: { MME_LOG_LEVEL: 'info', ...(setting === undefined ? {} : { MME_ACCESS_LOG: setting }) },
      });
      try {
        const r = await request(`${quiet.url}/v2/models/scaled/infer`, { method: 'POST', headers: { 'x-request-id': 'req-q' }, json: body });
        assert.equal(r.status, 200);
        // An unknown route: its `request rejected` line, at warn.
        const e = await request(`${quiet.url}/no/such/route`, { headers: { 'x-request-id': 'req-e' } });
        assert.equal(e.status, 404);
        await until(() => quiet.logs.some((l) => l['reqId'] === 'req-e'));
        const errs = quiet.logs.filter((l) => l['reqId'] === 'req-e');
        assert.ok(
          errs.some((l) => l['level'] === 'warn' && l['status'] === 404),
          JSON.stringify(errs),
        );
        assert.deepEqual(
          lines(quiet, 'req-q').filter((l) => l['slow'] !== true),
          [],
        );
      } finally {
        await quiet.close();
      }
    });
  }
});
