/**
 * @module test/unit/backends/image-step
 * The image step against an independent computation: PNGs written by the
 * test's own encoder (test/support/png.ts) from pixel arrays the test knows,
 * and the expected tensor computed here from those arrays with the formula
 * (p / 255 − mean) / std, in the asked layout and channel order. Resizing is
 * checked where the result does not depend on the kernel (same size, a
 * uniform image upscaled, a shorter-side crop at scale 1). Also: BYTES
 * (base64) input, a batch of two, zero-padded UINT8 rows, a corrupt image
 * failing with the model and row named, and config errors.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Tensor } from '../../../src/protocol/tensor.js';
import { encodePng } from '../../support/png.js';
import { assertClose, loadError, loadStepFromText, numbers } from './step-harness.js';

/** A 4×3 RGB image whose every pixel differs: R = 10x + 1, G = 50y + 2, B = 200 − 7(x + y). */
const W = 4;
const H = 3;
const RGB = Uint8Array.from({ length: W * H * 3 }, (_, i) => {
  const p = Math.floor(i / 3);
  const [x, y, c] = [p % W, Math.floor(p / W), i % 3];
  return c === 0 ? 10 * x + 1 : c === 1 ? 50 * y + 2 : 200 - 7 * (x + y);
});
const PNG = encodePng(W, H, 3, RGB);

function uint8Row(...images: Uint8Array[]): Tensor {
  const len = Math.max(...images.map((b) => b.length));
  const data = new Uint8Array(len * images.length);
  images.forEach((b, i) => data.set(b, i * len)); // shorter images are zero-padded, as a client batching them would
  return { datatype: 'UINT8', shape: [images.length, len], data };
}

function config(dims: string, params: Record<string, string>, input = 'data_type: TYPE_UINT8 dims: [ -1 ]'): string {
  return [
    'backend: "image"',
    'max_batch_size: 4',
    `input [ { name: "IMAGE" ${input} } ]`,
    `output [ { name: "PIXELS" data_type: TYPE_FP32 dims: [ ${dims} ] } ]`,
    ...Object.entries(params).map(([k, v]) => `parameters { key: "${k}" value: { string_value: "${v}" } }`),
  ].join('\n');
}

/** The expected tensor, computed from the pixel array directly. */
function expected(pixels: Uint8Array, w: number, h: number, opts: { layout: 'NCHW' | 'NHWC'; bgr: boolean; mean: number[]; std: number[] }): number[] {
  const out: number[] = [];
  const value = (x: number, y: number, c: number): number => {
    const src = opts.bgr ? 2 - c : c;
    return (pixels[(y * w + x) * 3 + src]! / 255 - opts.mean[c]!) / opts.std[c]!;
  };
  if (opts.layout === 'NCHW') {
    for (let c = 0; c < 3; c++) for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) out.push(value(x, y, c));
  } else {
    for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) for (let c = 0; c < 3; c++) out.push(value(x, y, c));
  }
  return out;
}

describe('image step: pixels', () => {
  test('RGB, NCHW, mean/std per channel, no resize: every value equals the formula', async () => {
    const mean = [0.485, 0.456, 0.406];
    const std = [0.229, 0.224, 0.225];
    const f = await loadStepFromText('img', config(`3, ${H}, ${W}`, { mean: mean.join(','), std: std.join(',') }));
    try {
      const out = (await f.run({ IMAGE: uint8Row(PNG) })).get('PIXELS')!;
      assert.equal(out.datatype, 'FP32');
      assert.deepEqual(out.shape, [1, 3, H, W]);
      assertClose(numbers(out), expected(RGB, W, H, { layout: 'NCHW', bgr: false, mean, std }), 1e-5);
    } finally {
      await f.close();
    }
  });

  test('BGR, NHWC, a single mean/std for every channel', async () => {
    const f = await loadStepFromText('img', config(`${H}, ${W}, 3`, { layout: 'NHWC', color_format: 'BGR', mean: '0.5', std: '0.5' }));
    try {
      const out = (await f.run({ IMAGE: uint8Row(PNG) })).get('PIXELS')!;
      assert.deepEqual(out.shape, [1, H, W, 3]);
      assertClose(numbers(out), expected(RGB, W, H, { layout: 'NHWC', bgr: true, mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5] }), 1e-5);
    } finally {
      await f.close();
    }
  });

  test('a uniform image upscaled stays uniform at every pixel, whatever the kernel', async () => {
    const colour = [17, 130, 250];
    const small = encodePng(
      2,
      2,
      3,
      Uint8Array.from({ length: 12 }, (_, i) => colour[i % 3]!),
    );
    const f = await loadStepFromText('img', config('3, 5, 7', { interpolation: 'cubic', scale: '1' }));
    try {
      const out = (await f.run({ IMAGE: uint8Row(small) })).get('PIXELS')!;
      assert.deepEqual(out.shape, [1, 3, 5, 7]);
      assertClose(numbers(out), [...Array(35).fill(17), ...Array(35).fill(130), ...Array(35).fill(250)]);
    } finally {
      await f.close();
    }
  });

  test('shorter_side at scale 1 then a centre crop keeps the middle columns', async () => {
    // 8×4: column x has R = 30x; the centre 4×4 crop is columns 2..5.
    const wide = Uint8Array.from({ length: 8 * 4 * 3 }, (_, i) => (i % 3 === 0 ? 30 * (Math.floor(i / 3) % 8) : 9));
    const f = await loadStepFromText('img', config('4, 4, 3', { layout: 'NHWC', resize: 'shorter_side', resize_shorter: '4', scale: '1' }));
    try {
      const out = numbers((await f.run({ IMAGE: uint8Row(encodePng(8, 4, 3, wide)) })).get('PIXELS'));
      const red = out.filter((_, i) => i % 3 === 0);
      assert.deepEqual(
        red,
        [0, 1, 2, 3].flatMap(() => [60, 90, 120, 150]),
      );
    } finally {
      await f.close();
    }
  });

  test('GRAY: one channel; a gray image keeps its values', async () => {
    const gray = Uint8Array.from({ length: W * H }, (_, i) => i * 20);
    const f = await loadStepFromText('img', config(`1, ${H}, ${W}`, { color_format: 'GRAY', scale: '1' }));
    try {
      assertClose(numbers((await f.run({ IMAGE: uint8Row(encodePng(W, H, 1, gray)) })).get('PIXELS')), Array.from(gray));
    } finally {
      await f.close();
    }
  });

  test('a batch of two zero-padded UINT8 rows and the same images as base64 BYTES give the same tensors', async () => {
    const other = encodePng(
      W,
      H,
      3,
      Uint8Array.from(RGB, (v) => 255 - v),
    );
    const uint8 = await loadStepFromText('img', config(`3, ${H}, ${W}`, {}));
    const bytes = await loadStepFromText('img', config(`3, ${H}, ${W}`, {}, 'data_type: TYPE_STRING dims: [ 1 ]'));
    try {
      const a = (await uint8.run({ IMAGE: uint8Row(PNG, other) })).get('PIXELS')!;
      const b = (
        await bytes.run({ IMAGE: { datatype: 'BYTES', shape: [2, 1], data: [PNG.toString('base64'), `data:image/png;base64,${other.toString('base64')}`] } })
      ).get('PIXELS')!;
      assert.deepEqual(a.shape, [2, 3, H, W]);
      assert.deepEqual(numbers(a), numbers(b));
      const inverted = Uint8Array.from(RGB, (v) => 255 - v);
      assertClose(numbers(a).slice(3 * H * W), expected(inverted, W, H, { layout: 'NCHW', bgr: false, mean: [0, 0, 0], std: [1, 1, 1] }), 1e-6);
    } finally {
      await uint8.close();
      await bytes.close();
    }
  });

  test('a corrupt image is a 400 naming the model, the input and the row', async () => {
    const f = await loadStepFromText('img', config(`3, ${H}, ${W}`, {}));
    try {
      await assert.rejects(f.run({ IMAGE: uint8Row(PNG, Uint8Array.from([1, 2, 3, 4])) }), (err: Error & { code?: string }) => {
        assert.equal(err.code, 'INVALID_INPUT');
        assert.match(err.message, /^model 'img': input 'IMAGE' row 1 is not an image it can decode/);
        return true;
      });
    } finally {
      await f.close();
    }
  });
});

describe('image step: config', () => {
  test('every problem in one load error', async () => {
    const err = await loadError('img', config('3, 224', { color_format: 'GRAY', std: '0', mean: '1,2', kernel: 'x' }, 'data_type: TYPE_FP32 dims: [ -1 ]'));
    assert.equal(err.code, 'INVALID_MODEL');
    assert.match(err.message, /^model 'img': backend 'image': /);
    for (const p of [
      "input 'IMAGE' must be UINT8 (encoded bytes) or BYTES (base64), got FP32",
      'parameter mean needs 1 value, got 2',
      'parameter std must not contain 0',
      "output 'PIXELS' dims must be fixed [C, H, W], got [3,224]",
      "unknown parameter 'kernel' for backend 'image'",
    ]) {
      assert.ok(err.message.includes(p), `missing: ${p}\nin: ${err.message}`);
    }
  });

  test('channels that do not match the colour format', async () => {
    const err = await loadError('img', config('1, 8, 8', {}));
    assert.match(err.message, /output 'PIXELS' \[1,8,8\] in NCHW has 1 channels but color_format RGB gives 3/);
  });
});
