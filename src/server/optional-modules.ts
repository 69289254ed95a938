/**
 * @module server/optional-modules
 * The parts of the server only some configurations use, loaded only by
 * those: the S3 model source with the AWS SDK (an `s3://` MME_MODEL_SOURCE)
 * and the gRPC listener with grpc-js and its protos (MME_GRPC_PORT).
 *
 * Why: a server that serves a local directory over HTTP, as on SageMaker,
 * where the platform copies the models to the disk, would otherwise load and
 * keep both. Measured on the 2-core bench box, each imported after the
 * server's other main packages (express, pino, prom-client,
 * onnxruntime-node, tar): the AWS S3 client 72 ms and 8 MB of resident
 * memory, grpc-js and proto-loader 67 ms and 4 MB.
 *
 * Loaded while the core is built, before the idle figure that model memory
 * is measured above (server/core.ts), so what they hold never counts as a
 * model's.
 */
import type { ServerConfig } from '../config/server-config.js';
import { isS3Uri } from '../config/s3-uri.js';

export interface OptionalModules {
  /** store/s3-source.ts, where MME_MODEL_SOURCE is an S3 prefix. */
  readonly s3: typeof import('../store/s3-source.js') | undefined;
  /** grpc/grpc-server.ts, where MME_GRPC_PORT is set. */
  readonly grpc: typeof import('../grpc/grpc-server.js') | undefined;
}

export async function loadOptionalModules(config: ServerConfig): Promise<OptionalModules> {
  const [s3, grpc] = await Promise.all([
    isS3Uri(config.modelSource) ? import('../store/s3-source.js') : undefined,
    config.grpcPort === undefined ? undefined : import('../grpc/grpc-server.js'),
  ]);
  return Object.freeze({ s3, grpc });
}
