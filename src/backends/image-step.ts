/**
 * @module backends/image-step
 * `backend: "image"`: encoded images (JPEG, PNG, WebP, and whatever else
 * libvips reads: GIF, TIFF, AVIF) → one FP32 tensor ready for a vision model,
 * what DALI does in front of a Triton classifier:
 *
 *   decode (EXIF orientation applied) → drop alpha → RGB or grayscale
 *   → resize (stretch to H×W, or cover/shorter-side then centre crop)
 *   → channel order RGB/BGR → (pixel · scale − mean) / std → NCHW or NHWC.
 *
 * Input: one tensor per image row, either UINT8 (the file's bytes; rows of a
 * batch share a length, so clients may zero-pad, which JPEG, PNG and WebP
 * decoders ignore) or BYTES (one base64 string, optionally a `data:` URL,
 * per row: KServe JSON has no raw bytes and BYTES here are text).
 * Output: FP32 `[C, H, W]` (NCHW) or `[H, W, C]` (NHWC) per row; H, W and C
 * come from the output's dims, the layout from parameter `layout`.
 *
 * Decoding and resizing run in libvips on libuv's thread pool (sharp is
 * asynchronous), every image of a batch at once, so the event loop stays
 * free; only the final uint8 → float loop (H·W·C multiply-adds) runs on the
 * main thread.
 */
import sharp from 'sharp';
import type { TensorConfig } from '../config/model-config-types.js';
import { formatShape, type Tensor } from '../protocol/tensor.js';
import type { LoadedStep, StepLoadContext } from './step-backend.js';
import { configShape, invalidInput, requireInput, StepParameters, throwIfProblems, wanted } from './step-support.js';

// libvips' operation cache holds decoded images between calls; a server sees each image once.
sharp.cache(false);

type Layout = 'NCHW' | 'NHWC';
type ColorFormat = 'RGB' | 'BGR' | 'GRAY';
type ResizeMode = 'stretch' | 'cover' | 'shorter_side';
const KERNELS = ['nearest', 'linear', 'cubic', 'mitchell', 'lanczos2', 'lanczos3'] as const;
type Kernel = (typeof KERNELS)[number];

export interface ImageStepSettings {
  readonly width: number;
  readonly height: number;
  readonly channels: 1 | 3;
  readonly layout: Layout;
  readonly colorFormat: ColorFormat;
  readonly resize: ResizeMode;
  /** shorter_side: the shorter side after resizing, before the centre crop. */
  readonly resizeShorter: number;
  readonly kernel: Kernel;
  readonly scale: number;
  readonly mean: readonly number[];
  readonly std: readonly number[];
  readonly autoOrient: boolean;
  readonly maxInputPixels: number;
}

/** Per channel: a single value applies to every channel. */
function perChannel(values: readonly number[], channels: number, key: string, problems: string[]): number[] {
  if (values.length === 1) return Array.from({ length: channels }, () => values[0]!);
  if (values.length !== channels) problems.push(`parameter ${key} needs ${channels === 1 ? '1 value' : `1 or ${channels} values`}, got ${values.length}`);
  return Array.from({ length: channels }, (_, i) => values[i] ?? values[0] ?? 0);
}

export async function loadImageStep(ctx: StepLoadContext): Promise<LoadedStep> {
  const { config } = ctx;
  const params = new StepParameters(config.parameters, 'image');
  const problems = params.problems;
  if (config.input.length !== 1) problems.push(`needs exactly 1 input (the encoded image), got ${config.input.length}`);
  if (config.output.length !== 1) problems.push(`needs exactly 1 output (the pixels), got ${config.output.length}`);
  const inp = config.input[0];
  const out = config.output[0];
  if (inp) checkImageInput(inp, problems);
  const settings = imageSettings(params, out);
  params.checkUnknown();
  throwIfProblems('image', problems);
  const inCfg = inp!;
  const outCfg = out!;
  const inShape = configShape(inCfg, config);
  const batching = config.maxBatchSize > 0;

  return {
    release: async () => {},
    execute: async (inputs, outputNames) => {
      const result = new Map<string, Tensor>();
      if (!wanted(outputNames, outCfg.name)) return result;
      const t = requireInput(inputs, inCfg.name);
      if (t.shape.length !== inShape.length) throw invalidInput(`input '${inCfg.name}' has shape ${formatShape(t.shape)}, expected ${formatShape(inShape)}`);
      result.set(outCfg.name, await preprocessImages(t, inCfg.name, settings, batching));
      return result;
    },
  };
}

/** The input holds encoded images: UINT8 file bytes per row, or BYTES base64 text, one per row. */
function checkImageInput(inp: TensorConfig, problems: string[]): void {
  if (inp.dataType === 'UINT8') {
    if (inp.dims.length !== 1)
      problems.push(`UINT8 input '${inp.name}' holds the file's bytes: dims must be [ -1 ] (or one fixed length), got ${formatShape(inp.dims)}`);
  } else if (inp.dataType === 'BYTES') {
    if (inp.dims.length !== 1 || inp.dims[0] !== 1)
      problems.push(`BYTES input '${inp.name}' holds one base64 image per row: dims must be [ 1 ], got ${formatShape(inp.dims)}`);
  } else {
    problems.push(`input '${inp.name}' must be UINT8 (encoded bytes) or BYTES (base64), got ${inp.dataType}`);
  }
}

/** The parameters, and H, W and C from the output's dims in the chosen layout; problems go to `params.problems`. */
function imageSettings(params: StepParameters, out: TensorConfig | undefined): ImageStepSettings {
  const problems = params.problems;
  const layout = params.choice<Layout>('layout', ['NCHW', 'NHWC'], 'NCHW');
  const colorFormat = params.choice<ColorFormat>('color_format', ['RGB', 'BGR', 'GRAY'], 'RGB');
  const resize = params.choice<ResizeMode>('resize', ['stretch', 'cover', 'shorter_side'], 'stretch');
  const kernel = params.choice<Kernel>('interpolation', KERNELS, 'linear');
  const scale = params.number('scale', 1 / 255);
  const autoOrient = params.bool('auto_orient', true);
  const maxInputPixels = params.int('max_input_pixels', 40_000_000, 1);
  const channels: 1 | 3 = colorFormat === 'GRAY' ? 1 : 3;
  const mean = perChannel(params.numbers('mean', [0]), channels, 'mean', problems);
  const std = perChannel(params.numbers('std', [1]), channels, 'std', problems);
  if (std.some((s) => s === 0)) problems.push('parameter std must not contain 0');
  let width = 0;
  let height = 0;
  if (out) {
    if (out.dataType !== 'FP32') problems.push(`output '${out.name}' must be FP32, got ${out.dataType}`);
    if (out.dims.length !== 3 || out.dims.some((d) => d < 1)) {
      problems.push(`output '${out.name}' dims must be fixed ${layout === 'NCHW' ? '[C, H, W]' : '[H, W, C]'}, got ${formatShape(out.dims)}`);
    } else {
      const [a, b, c] = out.dims as [number, number, number];
      const c0 = layout === 'NCHW' ? a : c;
      [height, width] = layout === 'NCHW' ? [b, c] : [a, b];
      if (c0 !== channels)
        problems.push(`output '${out.name}' ${formatShape(out.dims)} in ${layout} has ${c0} channels but color_format ${colorFormat} gives ${channels}`);
    }
  }
  const resizeShorter = params.int('resize_shorter', Math.max(width, height), 1);
  if (resize === 'shorter_side' && resizeShorter < Math.max(width, height)) {
    problems.push(`parameter resize_shorter ${resizeShorter} must be at least the crop size ${Math.max(width, height)}`);
  } else if (resize !== 'shorter_side' && params.has('resize_shorter')) {
    problems.push('parameter resize_shorter applies only to resize: shorter_side');
  }
  return { width, height, channels, layout, colorFormat, resize, resizeShorter, kernel, scale, mean, std, autoOrient, maxInputPixels };
}

/** Every row's image decoded and resized at once (libvips' threads), then normalised into one FP32 tensor. */
async function preprocessImages(t: Tensor, name: string, settings: ImageStepSettings, batching: boolean): Promise<Tensor> {
  const images = encodedImages(t, name, batching);
  const per = settings.width * settings.height * settings.channels;
  const data = new Float32Array(images.length * per);
  await Promise.all(
    images.map(async (bytes, i) => {
      const pixels = await decodeImage(bytes, settings).catch((err: unknown) => {
        const why = err instanceof Error ? err.message : String(err);
        throw invalidInput(`input '${name}'${images.length > 1 ? ` row ${i}` : ''} is not an image it can decode (${why})`);
      });
      normalizeInto(pixels, settings, data, i * per);
    }),
  );
  const inner = settings.layout === 'NCHW' ? [settings.channels, settings.height, settings.width] : [settings.height, settings.width, settings.channels];
  return { datatype: 'FP32', shape: batching ? [images.length, ...inner] : inner, data };
}

/** The encoded bytes of each row. */
function encodedImages(t: Tensor, name: string, batching: boolean): Buffer[] {
  const rows = batching ? (t.shape[0] ?? 0) : 1;
  if (t.datatype === 'UINT8' && t.data instanceof Uint8Array) {
    const bytes = t.data;
    const len = rows === 0 ? 0 : bytes.length / rows;
    return Array.from({ length: rows }, (_, r) => Buffer.from(bytes.buffer, bytes.byteOffset + r * len, len));
  }
  if (t.datatype === 'BYTES' && Array.isArray(t.data)) {
    if (t.data.length !== rows) throw invalidInput(`input '${name}' must hold one base64 image per row, got ${t.data.length} for ${rows} rows`);
    return t.data.map((s) => {
      const comma = s.startsWith('data:') ? s.indexOf(',') : -1;
      return Buffer.from(comma >= 0 ? s.slice(comma + 1) : s, 'base64');
    });
  }
  throw invalidInput(`input '${name}' must be UINT8 or BYTES, got ${t.datatype}`);
}

/** Decode and resize one image; raw interleaved uint8 of exactly height × width × channels. */
export async function decodeImage(bytes: Buffer, s: ImageStepSettings): Promise<Buffer> {
  if (bytes.length === 0) throw new Error('empty input');
  let img = sharp(bytes, { limitInputPixels: s.maxInputPixels, failOn: 'error' });
  if (s.autoOrient) img = img.rotate();
  img = img.removeAlpha();
  img = s.channels === 1 ? img.grayscale() : img.toColourspace('srgb');
  if (s.resize === 'shorter_side') {
    const meta = await sharp(bytes, { limitInputPixels: s.maxInputPixels }).metadata();
    let w = meta.width ?? 0;
    let h = meta.height ?? 0;
    // EXIF orientations 5-8 turn the image by 90°.
    if (s.autoOrient && (meta.orientation ?? 1) >= 5) [w, h] = [h, w];
    if (w < 1 || h < 1) throw new Error('the image has no size');
    const f = s.resizeShorter / Math.min(w, h);
    const rw = Math.max(s.width, Math.round(w * f));
    const rh = Math.max(s.height, Math.round(h * f));
    img = img
      .resize(rw, rh, { fit: 'fill', kernel: s.kernel })
      .extract({ left: Math.floor((rw - s.width) / 2), top: Math.floor((rh - s.height) / 2), width: s.width, height: s.height });
  } else {
    img = img.resize(s.width, s.height, { fit: s.resize === 'cover' ? 'cover' : 'fill', position: 'centre', kernel: s.kernel });
  }
  const { data, info } = await img.raw().toBuffer({ resolveWithObject: true });
  if (info.width !== s.width || info.height !== s.height || info.channels !== s.channels) {
    throw new Error(`decoded to ${info.width}×${info.height}×${info.channels}, expected ${s.width}×${s.height}×${s.channels}`);
  }
  return data;
}

/** Interleaved uint8 (RGB or gray) → normalized floats in the output layout and channel order. */
export function normalizeInto(pixels: Uint8Array, s: ImageStepSettings, out: Float32Array, offset: number): void {
  const { width, height, channels, layout, scale } = s;
  const plane = width * height;
  for (let c = 0; c < channels; c++) {
    // BGR: output channel c reads source channel 2 - c.
    const src = s.colorFormat === 'BGR' ? 2 - c : c;
    const mul = scale / s.std[c]!;
    const add = -s.mean[c]! / s.std[c]!;
    if (layout === 'NCHW') {
      const base = offset + c * plane;
      for (let p = 0; p < plane; p++) out[base + p] = pixels[p * channels + src]! * mul + add;
    } else {
      for (let p = 0; p < plane; p++) out[offset + p * channels + c] = pixels[p * channels + src]! * mul + add;
    }
  }
}
