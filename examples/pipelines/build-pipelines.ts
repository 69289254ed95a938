/**
 * @module examples/pipelines/build-pipelines
 * Builds both example pipelines offline, from code only:
 *
 *   node dist/examples/pipelines/build-pipelines.js [outDir]     (npm run pipelines)
 *
 * writes to outDir (default examples/pipelines/out):
 * - `image_classifier.tar.gz`: encoded image → image step → classifier → top-k with labels;
 * - `text_embedding.tar.gz`: sentences → tokenizer → encoder → mean pooling → L2 normalization;
 * - `repositories/`: the same as directories;
 * - `sample.jpg`, `sample.png`: generated test images;
 * - `image-request.json`, `text-request.json`: KServe v2 requests for each target.
 *
 * Then `node dist/examples/pipelines/try-pipelines.js [outDir]` uploads both
 * tarballs to a local S3-compatible server and invokes them on one running
 * server with two target-model headers.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { packTarGz } from '../models/zoo.js';
import { IMAGE_ENSEMBLE, imagePipelineRepository } from './image-pipeline.js';
import { TEXT_ENSEMBLE, textPipelineRepository } from './text-pipeline.js';
import { writePipelineRepository } from './write-repository.js';

const here = path.dirname(fileURLToPath(import.meta.url));
/** examples/pipelines/out in the repository, whether running from dist/ or not. */
export const DEFAULT_OUT_DIR = path.resolve(
  here,
  ...(here.includes(`${path.sep}dist${path.sep}`) ? ['..', '..', '..'] : ['..', '..']),
  'examples',
  'pipelines',
  'out',
);

export interface BuiltPipelines {
  readonly outDir: string;
  readonly imageTarball: string;
  readonly textTarball: string;
  readonly sampleJpeg: string;
  readonly samplePng: string;
}

/** A smooth colour gradient with a few shapes: something a decoder and a resizer have to work on. */
export async function sampleImage(width: number, height: number, format: 'jpeg' | 'png' | 'webp'): Promise<Buffer> {
  const raw = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 3;
      const inCircle = (x - width / 2) ** 2 + (y - height / 2) ** 2 < (Math.min(width, height) / 4) ** 2;
      raw[i] = inCircle ? 230 : Math.round((255 * x) / width);
      raw[i + 1] = inCircle ? 40 : Math.round((255 * y) / height);
      raw[i + 2] = (x >> 4) % 2 === (y >> 4) % 2 ? 200 : 60;
    }
  }
  return sharp(raw, { raw: { width, height, channels: 3 } })
    .toFormat(format)
    .toBuffer();
}

export function imageRequest(bytes: Uint8Array): Record<string, unknown> {
  return { inputs: [{ name: 'IMAGE', datatype: 'UINT8', shape: [1, bytes.length], data: Array.from(bytes) }] };
}

export function textRequest(sentences: readonly string[]): Record<string, unknown> {
  return { inputs: [{ name: 'TEXT', datatype: 'BYTES', shape: [sentences.length, 1], data: [...sentences] }] };
}

export const SAMPLE_SENTENCES: readonly string[] = Object.freeze(['The quick brown dog jumped over the lazy cat.', 'Hello, world!']);

export async function buildPipelines(outDir: string = DEFAULT_OUT_DIR): Promise<BuiltPipelines> {
  const repos = path.join(outDir, 'repositories');
  const imageRepo = await writePipelineRepository(path.join(repos, IMAGE_ENSEMBLE), imagePipelineRepository());
  const textRepo = await writePipelineRepository(path.join(repos, TEXT_ENSEMBLE), textPipelineRepository());
  const imageTarball = path.join(outDir, `${IMAGE_ENSEMBLE}.tar.gz`);
  const textTarball = path.join(outDir, `${TEXT_ENSEMBLE}.tar.gz`);
  await packTarGz(imageRepo, imageTarball);
  await packTarGz(textRepo, textTarball);
  await mkdir(outDir, { recursive: true });
  const sampleJpeg = path.join(outDir, 'sample.jpg');
  const samplePng = path.join(outDir, 'sample.png');
  await writeFile(sampleJpeg, await sampleImage(400, 300, 'jpeg'));
  await writeFile(samplePng, await sampleImage(320, 320, 'png'));
  await writeFile(path.join(outDir, 'image-request.json'), JSON.stringify(imageRequest(await readFile(sampleJpeg))));
  await writeFile(path.join(outDir, 'text-request.json'), JSON.stringify(textRequest(SAMPLE_SENTENCES)));
  return { outDir, imageTarball, textTarball, sampleJpeg, samplePng };
}

const self = fileURLToPath(import.meta.url);
if (process.argv[1] && path.resolve(process.argv[1]) === self) {
  const built = await buildPipelines(process.argv[2] ? path.resolve(process.argv[2]) : DEFAULT_OUT_DIR);
  for (const f of [built.imageTarball, built.textTarball, built.sampleJpeg, built.samplePng])
    process.stdout.write(`wrote ${path.relative(process.cwd(), f)}\n`);
}
