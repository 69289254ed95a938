/**
 * `onnx-mme invoke` against the real server on loopback (JSON, CSV and .npy
 * requests; the answer printed as received), through both SageMaker routes, and on the wire
 * (a recording HTTP listener) for every body format: the target header, the
 * content type, the bytes.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { addSub, tiny, writeModelDir } from '../../examples/models/zoo.js';
import { runCli } from '../support/cli.js';
import { Cleanups, tempDir } from '../support/temp-dir.js';
import { addSubBody, input, request, startTestServer, type TestServer } from '../support/test-server.js';

const ctx = new Cleanups();
after(() => ctx.run());

let server: TestServer;
let work = '';
let requestFile = '';
const seq16 = Array.from({ length: 16 }, (_, i) => i);
const body = addSubBody(3);

interface Recorded {
  readonly method: string | undefined;
  readonly url: string | undefined;
  readonly headers: IncomingMessage['headers'];
  readonly body: Buffer;
}

describe('onnx-mme invoke', () => {
  before(async () => {
    work = await tempDir(ctx, 'onnx-mme-cli-invoke-');
    await writeModelDir(path.join(work, 'models'), 'add_sub', addSub());
    await writeModelDir(path.join(work, 'models'), 'tiny', tiny());
    server = await startTestServer({ modelSource: path.join(work, 'models'), cacheDir: path.join(work, 'cache') });
    ctx.after(() => server.close());
    requestFile = path.join(work, 'request.json');
    await writeFile(requestFile, JSON.stringify(body));
  });

  it('sends the JSON with the target header and prints the answer', async () => {
    const r = await runCli(['invoke', '--url', server.url, '--target', 'add_sub', '--json', requestFile]);
    assert.equal(r.code, 0, r.stderr);
    const answer = JSON.parse(r.stdout) as { model_name: string; outputs: { name: string; data: number[] }[] };
    assert.equal(answer.model_name, 'add_sub');
    assert.deepEqual(
      answer.outputs[0]!.data,
      seq16.map((v) => v + 3),
    );
    assert.deepEqual(
      answer.outputs[1]!.data,
      seq16.map((v) => v - 3),
    );
    assert.ok(r.stdout.endsWith('\n'));
  });

  it('reads the body from stdin with -, and finds the server from SAGEMAKER_BIND_TO_PORT', async () => {
    const port = new URL(server.url).port;
    const r = await runCli(['invoke', '--target', 'add_sub', '--json', '-'], { stdin: JSON.stringify(body), env: { SAGEMAKER_BIND_TO_PORT: port } });
    assert.equal(r.code, 0, r.stderr);
    assert.equal((JSON.parse(r.stdout) as { model_name: string }).model_name, 'add_sub');
  });

  it("SageMaker's MME route with --model-name: /models/<name>/invoke", async () => {
    const loaded = await request(`${server.url}/models`, { method: 'POST', json: { model_name: 'hash-1234', url: path.join(work, 'models', 'add_sub') } });
    assert.equal(loaded.status, 200, loaded.text);
    const r = await runCli(['invoke', '--url', server.url, '--model-name', 'hash-1234', '--json', requestFile]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(
      (JSON.parse(r.stdout) as { outputs: { data: number[] }[] }).outputs[0]!.data,
      seq16.map((v) => v + 3),
    );
  });

  it('CSV and .npy bodies for a one-input model: the same answer as JSON; --accept picks the answer format', async () => {
    const x = Array.from({ length: 16 }, (_, i) => (i - 8) / 4);
    await writeFile(path.join(work, 'tiny.json'), JSON.stringify({ inputs: [input('INPUT0', 'FP32', [1, 16], x)] }));
    await writeFile(path.join(work, 'tiny.csv'), `${x.join(',')}\n`);
    // NumPy's format by hand: magic, version 1.0, header length, the header dict padded to 64 bytes, little-endian float32.
    const header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 16), }";
    const padded = header.padEnd(64 * Math.ceil((10 + header.length + 1) / 64) - 10 - 1, ' ') + '\n';
    const npy = Buffer.concat([
      Buffer.from('\x93NUMPY\x01\x00', 'latin1'),
      Buffer.from([padded.length & 0xff, padded.length >> 8]),
      Buffer.from(padded, 'latin1'),
      Buffer.from(new Float32Array(x).buffer),
    ]);
    await writeFile(path.join(work, 'tiny.npy'), npy);

    const viaJson = await runCli(['invoke', '--url', server.url, '--target', 'tiny', '--json', path.join(work, 'tiny.json')]);
    assert.equal(viaJson.code, 0, viaJson.stderr);
    const expected = (JSON.parse(viaJson.stdout) as { outputs: { data: number[] }[] }).outputs[0]!.data;
    assert.equal(expected.length, 4);
    for (const [flag, file] of [
      ['--csv', 'tiny.csv'],
      ['--npy', 'tiny.npy'],
    ] as const) {
      const r = await runCli(['invoke', '--url', server.url, '--target', 'tiny', flag, path.join(work, file)]);
      assert.equal(r.code, 0, `${flag}: ${r.stderr}`);
      assert.deepEqual((JSON.parse(r.stdout) as { outputs: { data: number[] }[] }).outputs[0]!.data, expected, flag);
    }
    const csv = await runCli(['invoke', '--url', server.url, '--target', 'tiny', '--csv', path.join(work, 'tiny.csv'), '--accept', 'text/csv']);
    assert.equal(csv.code, 0, csv.stderr);
    assert.deepEqual(csv.stdout.trim().split(',').map(Number), expected);
  });

  it("an error answer: the server's JSON error on stderr, exit 1", async () => {
    const r = await runCli(['invoke', '--url', server.url, '--target', 'missing.tar.gz', '--json', requestFile]);
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /^invoke: HTTP 404 from http:\/\/127\.0\.0\.1:\d+\/invocations$/m);
    assert.match(r.stderr, /"code":"MODEL_NOT_FOUND"/);
    const bad = await runCli(['invoke', '--url', server.url, '--target', 'add_sub', '--json', '-'], { stdin: '{"inputs":[{"name":"INPUT0"}]}' });
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /HTTP 400/);
  });

  it('on the wire: path, target header, content type and bytes for --json, --npy and --csv', async () => {
    const recorded: Recorded[] = [];
    const listener = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        recorded.push({ method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks) });
        res.setHeader('content-type', 'application/json');
        res.end('{"ok":true}');
      });
    });
    listener.listen(0, '127.0.0.1');
    await once(listener, 'listening');
    ctx.after(() => new Promise<void>((resolve) => listener.close(() => resolve())));
    const url = `http://127.0.0.1:${(listener.address() as AddressInfo).port}`;

    const npy = Buffer.concat([Buffer.from('\x93NUMPY\x01\x00', 'latin1'), Buffer.from([0, 1, 2, 255])]);
    const csv = '1,2,3,4\n5,6,7,8\n';
    await writeFile(path.join(work, 'x.npy'), npy);
    await writeFile(path.join(work, 'x.csv'), csv);
    const cases = [
      { args: ['--json', requestFile], type: 'application/json', bytes: Buffer.from(JSON.stringify(body)) },
      { args: ['--npy', path.join(work, 'x.npy')], type: 'application/x-npy', bytes: npy },
      { args: ['--csv', path.join(work, 'x.csv')], type: 'text/csv', bytes: Buffer.from(csv) },
    ];
    for (const c of cases) {
      const r = await runCli(['invoke', '--url', `${url}/`, '--target', 'team/b.tar.gz', ...c.args]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, '{"ok":true}\n');
      const got = recorded[recorded.length - 1]!;
      assert.equal(got.method, 'POST');
      assert.equal(got.url, '/invocations');
      assert.equal(got.headers['x-amzn-sagemaker-target-model'], 'team/b.tar.gz');
      assert.equal(got.headers['content-type'], c.type);
      assert.deepEqual(got.body, c.bytes);
    }
    const r = await runCli([
      'invoke',
      '--url',
      url,
      '--csv',
      path.join(work, 'x.csv'),
      '--content-type',
      'text/csv;header=present',
      '--accept',
      'application/json',
    ]);
    assert.equal(r.code, 0, r.stderr);
    const last = recorded[recorded.length - 1]!;
    assert.equal(last.headers['content-type'], 'text/csv;header=present');
    assert.equal(last.headers['accept'], 'application/json');
    assert.equal(last.headers['x-amzn-sagemaker-target-model'], undefined, 'no --target, no header: the default model');
  });

  it('an unreachable server: exit 1 naming the URL; usage mistakes: exit 2', async () => {
    const probe = createServer();
    probe.listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const down = await runCli(['invoke', '--url', `http://127.0.0.1:${port}`, '--json', requestFile]);
    assert.equal(down.code, 1);
    assert.match(down.stderr, new RegExp(`invoke: http://127\\.0\\.0\\.1:${port}/invocations: .*ECONNREFUSED`));

    const none = await runCli(['invoke', '--url', server.url]);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /give the request body with --json, --npy or --csv/);
    const two = await runCli(['invoke', '--url', server.url, '--json', requestFile, '--csv', requestFile]);
    assert.equal(two.code, 2);
    const missing = await runCli(['invoke', '--url', server.url, '--json', path.join(work, 'nope.json')]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /no such file/);
  });
});
