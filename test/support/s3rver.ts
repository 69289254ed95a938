/**
 * @module test/support/s3rver
 * A real S3-compatible server on loopback for tests: s3rver speaks the S3
 * REST protocol, so the real @aws-sdk/client-s3 talks to it unchanged.
 */
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DeleteObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';

export interface S3rverInstance {
  run(): Promise<AddressInfo>;
  close(): Promise<void>;
}
type S3rverConstructor = new (options: Record<string, unknown>) => S3rverInstance;
// s3rver ships no type declarations.
export const S3rver = createRequire(import.meta.url)('s3rver') as S3rverConstructor;

export const S3RVER_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

/**
 * A client of the s3rver at `endpoint` for uploading test and bench objects.
 * WHEN_REQUIRED: no aws-chunked streaming checksums, which s3rver would store verbatim.
 */
export function s3rverClient(endpoint: string): S3Client {
  return new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true, credentials: S3RVER_CREDENTIALS, requestChecksumCalculation: 'WHEN_REQUIRED' });
}

/**
 * Points this test process's AWS SDK at s3rver's credentials (the in-process
 * S3 sources and clients read them from the environment); returns the undo,
 * which puts back what the runner had.
 */
export function useS3rverCredentials(): () => void {
  const saved = { AWS_ACCESS_KEY_ID: process.env['AWS_ACCESS_KEY_ID'], AWS_SECRET_ACCESS_KEY: process.env['AWS_SECRET_ACCESS_KEY'] };
  process.env['AWS_ACCESS_KEY_ID'] = S3RVER_CREDENTIALS.accessKeyId;
  process.env['AWS_SECRET_ACCESS_KEY'] = S3RVER_CREDENTIALS.secretAccessKey;
  return () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
}

/** The environment a server process (or the CLI) needs to use the s3rver at `endpoint` through the real AWS SDK. */
export function s3rverEnv(endpoint: string): Record<string, string> {
  return {
    AWS_ENDPOINT_URL_S3: endpoint,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
  };
}

export interface LoopbackS3 {
  readonly endpoint: string;
  upload(key: string, body: Buffer): Promise<void>;
  remove(key: string): Promise<void>;
  close(): Promise<void>;
}

/** Start s3rver on 127.0.0.1 with a free port, a temp directory and the given buckets. */
export async function startLoopbackS3(buckets: readonly string[]): Promise<LoopbackS3> {
  const restore = allowS3rverContinuationTokens();
  const dir = await mkdtemp(path.join(tmpdir(), 'onnx-mme-s3rver-'));
  const server = new S3rver({ port: 0, address: '127.0.0.1', directory: dir, silent: true, configureBuckets: buckets.map((name) => ({ name })) });
  const address = await server.run();
  const endpoint = `http://127.0.0.1:${address.port}`;
  const admin = new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true, credentials: S3RVER_CREDENTIALS });
  const bucket = buckets[0]!;
  return {
    endpoint,
    upload: async (key, body) => {
      await admin.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
    },
    remove: async (key) => {
      await admin.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
    },
    close: async () => {
      admin.destroy();
      await server.close();
      await rm(dir, { recursive: true, force: true });
      restore();
    },
  };
}

/**
 * s3rver encrypts ListObjectsV2 continuation tokens with DES, which OpenSSL 3
 * (Node >= 17) only offers through its legacy provider, so every truncated
 * listing is a 500. Where DES is unavailable, `des` ciphers become the identity
 * function for this test process (s3rver is the only user of DES here): tokens
 * are then opaque base64 of the IV and the key, and pagination works.
 */
export function allowS3rverContinuationTokens(): () => void {
  interface PassThroughCipher {
    update(data: string | Buffer, encoding?: BufferEncoding): Buffer;
    final(): Buffer;
  }
  type Factory = (algorithm: string, ...rest: unknown[]) => unknown;
  const crypto = createRequire(import.meta.url)('node:crypto') as Record<'createCipheriv' | 'createDecipheriv', Factory>;
  try {
    crypto.createCipheriv('des', Buffer.alloc(8), Buffer.alloc(8));
    return () => undefined; // DES works: nothing to do
  } catch {
    // ERR_OSSL_EVP_UNSUPPORTED
  }
  const identity = (): PassThroughCipher => ({
    update: (data, encoding) => (typeof data === 'string' ? Buffer.from(data, encoding ?? 'utf8') : Buffer.from(data)),
    final: () => Buffer.alloc(0),
  });
  const { createCipheriv, createDecipheriv } = crypto;
  crypto.createCipheriv = (algorithm, ...rest) => (algorithm === 'des' ? identity() : createCipheriv(algorithm, ...rest));
  crypto.createDecipheriv = (algorithm, ...rest) => (algorithm === 'des' ? identity() : createDecipheriv(algorithm, ...rest));
  return () => {
    crypto.createCipheriv = createCipheriv;
    crypto.createDecipheriv = createDecipheriv;
  };
}
