/**
 * @module examples/pipelines/try-pipelines
 * The two example pipelines end to end, the way a SageMaker multi-model
 * endpoint runs them, on this machine and offline:
 *
 *   npm run build && npm run pipelines && node dist/examples/pipelines/try-pipelines.js
 *
 * 1. starts an S3-compatible server on loopback (s3rver, a dev dependency)
 *    and uploads `image_classifier.tar.gz` and `text_embedding.tar.gz` under
 *    `s3://models/prefix/`;
 * 2. starts one onnx-mme server with MME_MODEL_SOURCE=s3://models/prefix/;
 * 3. POSTs /invocations twice, with `X-Amzn-SageMaker-Target-Model:
 *    image_classifier.tar.gz` (the sample JPEG's bytes) and
 *    `text_embedding.tar.gz` (two sentences), and prints both answers.
 *
 * test/integration/pipelines.test.ts runs the same steps and checks the numbers.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadServerConfig } from '../../src/config/server-config.js';
import { createLogger } from '../../src/observability/logger.js';
import { startServer } from '../../src/server.js';
import { S3RVER_CREDENTIALS, startLoopbackS3 } from '../../test/support/s3rver.js';
import { buildPipelines, DEFAULT_OUT_DIR, imageRequest, SAMPLE_SENTENCES, textRequest } from './build-pipelines.js';

export interface PipelineReplies {
  readonly image: unknown;
  readonly text: unknown;
}

export async function tryPipelines(outDir: string = DEFAULT_OUT_DIR): Promise<PipelineReplies> {
  const built = await buildPipelines(outDir);
  const s3 = await startLoopbackS3(['models']);
  const cacheDir = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-pipelines-'));
  try {
    await s3.upload('prefix/image_classifier.tar.gz', await readFile(built.imageTarball));
    await s3.upload('prefix/text_embedding.tar.gz', await readFile(built.textTarball));
    process.env['AWS_ACCESS_KEY_ID'] ??= S3RVER_CREDENTIALS.accessKeyId;
    process.env['AWS_SECRET_ACCESS_KEY'] ??= S3RVER_CREDENTIALS.secretAccessKey;
    const config = loadServerConfig({
      ...process.env,
      MME_HOST: '127.0.0.1',
      SAGEMAKER_BIND_TO_PORT: '0',
      MME_MODEL_SOURCE: 's3://models/prefix/',
      AWS_ENDPOINT_URL_S3: s3.endpoint,
      MME_CACHE_DIR: cacheDir,
      MME_LOG_LEVEL: process.env['MME_LOG_LEVEL'] ?? 'warn',
    });
    const server = await startServer(config, createLogger(config.logLevel));
    try {
      const invoke = async (target: string, body: unknown): Promise<unknown> => {
        const res = await fetch(`http://127.0.0.1:${server.port}/invocations`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'X-Amzn-SageMaker-Target-Model': target },
          body: JSON.stringify(body),
        });
        const json: unknown = await res.json();
        if (!res.ok) throw new Error(`${target}: HTTP ${res.status}: ${JSON.stringify(json)}`);
        return json;
      };
      const image = await invoke('image_classifier.tar.gz', imageRequest(await readFile(built.sampleJpeg)));
      const text = await invoke('text_embedding.tar.gz', textRequest(SAMPLE_SENTENCES));
      return { image, text };
    } finally {
      await server.shutdown('example finished');
    }
  } finally {
    await s3.close();
    await rm(cacheDir, { recursive: true, force: true });
  }
}

const self = fileURLToPath(import.meta.url);
if (process.argv[1] && path.resolve(process.argv[1]) === self) {
  const replies = await tryPipelines(process.argv[2] ? path.resolve(process.argv[2]) : DEFAULT_OUT_DIR);
  process.stdout.write(`image_classifier.tar.gz → ${JSON.stringify(replies.image)}\n`);
  process.stdout.write(`text_embedding.tar.gz → ${JSON.stringify(replies.text)}\n`);
}
