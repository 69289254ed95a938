/**
 * @module store/s3-client
 * The one rule for building an S3 client from the server's settings, shared by
 * the S3 model source and the `onnx-mme push` command, so what the server can
 * read, push can write: the configured region, else us-east-1 when an
 * S3-compatible endpoint is set (such stores ignore it, the SDK needs one),
 * else the SDK's own resolution (AWS_REGION, profile, instance metadata); an
 * endpoint turns on path-style addressing. Credentials always come from the
 * SDK's default chain.
 */
import { S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';

export interface S3Location {
  readonly region?: string | undefined;
  readonly endpoint?: string | undefined;
}

export function s3ClientConfig(location: S3Location): S3ClientConfig {
  const region = location.region ?? (location.endpoint ? 'us-east-1' : undefined);
  return {
    ...(region === undefined ? {} : { region }),
    ...(location.endpoint === undefined ? {} : { endpoint: location.endpoint, forcePathStyle: true }),
  };
}

export function createS3Client(location: S3Location, extra: S3ClientConfig = {}): S3Client {
  return new S3Client({ ...s3ClientConfig(location), ...extra });
}
