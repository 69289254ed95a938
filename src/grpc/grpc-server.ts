/**
 * @module grpc/grpc-server
 * The gRPC listener (MME_GRPC_PORT): inference.GRPCInferenceService and
 * grpc.health.v1.Health on @grpc/grpc-js, plaintext or TLS from PEM files.
 *
 * Limits: a request message may be as large as an HTTP body
 * (MME_MAX_BODY_BYTES); gRPC refuses a bigger one with RESOURCE_EXHAUSTED
 * from its length prefix, before reading it. Answers are not capped (as on
 * HTTP). Inference requests count against the same in-flight cap as HTTP's
 * (InferenceService).
 *
 * Drain (server.ts): health turns NOT_SERVING and new inferences are refused
 * UNAVAILABLE while running calls finish; then `close` lets the last calls
 * end within the deadline and cuts what is left.
 */
import { readFile } from 'node:fs/promises';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { StartupError } from '../errors.js';
import { HealthState } from './health.js';
import { inferenceImplementation, type HandlerDeps } from './inference-handlers.js';
import { modelMeshImplementation } from './model-mesh.js';
import { loadProtos } from './protos.js';

export interface GrpcTlsFiles {
  readonly certFile: string;
  readonly keyFile: string;
  readonly caFile: string | undefined;
}

export interface GrpcListenerOptions extends HandlerDeps {
  readonly host: string;
  readonly port: number;
  readonly maxMessageBytes: number;
  readonly tls: GrpcTlsFiles | undefined;
  /** MME_MODEL_MESH: also serve mmesh.ModelRuntime, with these limits. */
  readonly modelMesh: { readonly capacityBytes: number; readonly maxLoadingConcurrency: number } | undefined;
}

export interface GrpcListener {
  readonly port: number;
  readonly tls: boolean;
  /** The drain began: health says NOT_SERVING (calls are served until the handlers' isShuttingDown). */
  stopServing(): void;
  /** Stop the listener: running calls get until `deadlineMs` (epoch ms), then are cut. */
  close(deadlineMs: number): Promise<void>;
}

async function credentials(tls: GrpcTlsFiles | undefined): Promise<ServerCredentials> {
  if (tls === undefined) return ServerCredentials.createInsecure();
  // A file that cannot be read or used stops start-up naming its setting (main.ts: one line, exit 2).
  const read = async (file: string, what: string, setting: string): Promise<Buffer> => {
    try {
      return await readFile(file);
    } catch (err) {
      throw new StartupError(setting, `gRPC TLS: cannot read the ${what} (${file}): ${(err as Error).message}; set ${setting} to a readable PEM file`, {
        cause: err,
      });
    }
  };
  const reads = [
    read(tls.certFile, 'certificate (MME_GRPC_TLS_CERT)', 'MME_GRPC_TLS_CERT'),
    read(tls.keyFile, 'key (MME_GRPC_TLS_KEY)', 'MME_GRPC_TLS_KEY'),
    tls.caFile === undefined ? Promise.resolve(undefined) : read(tls.caFile, 'client CA (MME_GRPC_TLS_CA)', 'MME_GRPC_TLS_CA'),
  ] as const;
  // Read together, reported in this order: with several unreadable, the message names the same one every time.
  const failed = (await Promise.allSettled(reads)).find((r) => r.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
  const [cert, key, ca] = await Promise.all(reads);
  try {
    return ServerCredentials.createSsl(ca ?? null, [{ cert_chain: cert, private_key: key }], ca !== undefined);
  } catch (err) {
    throw new StartupError('MME_GRPC_TLS_CERT', `gRPC TLS: the certificate or key is not usable PEM: ${(err as Error).message}`, { cause: err });
  }
}

export async function startGrpcListener(options: GrpcListenerOptions): Promise<GrpcListener> {
  const protos = loadProtos();
  const health = new HealthState();
  const server = new Server({
    'grpc.max_receive_message_length': options.maxMessageBytes,
    'grpc.max_send_message_length': -1,
  });
  server.addService(protos.inference, inferenceImplementation(options));
  server.addService(protos.health, health.implementation());
  if (options.modelMesh !== undefined) server.addService(protos.modelMesh, modelMeshImplementation({ ...options, ...options.modelMesh }));
  const creds = await credentials(options.tls);
  // IPv6 literals need brackets in a gRPC target.
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${host}:${options.port}`, creds, (err, bound) =>
      err ? reject(new Error(`gRPC listener on ${options.host}:${options.port}: ${err.message}`)) : resolve(bound),
    );
  });
  let closing: Promise<void> | undefined;
  return {
    port,
    tls: options.tls !== undefined,
    stopServing: () => health.stopServing(),
    close: (deadlineMs) =>
      (closing ??= new Promise<void>((resolve) => {
        health.stopServing();
        health.closeWatchers();
        const timer = setTimeout(
          () => {
            server.forceShutdown();
            resolve();
          },
          Math.max(0, deadlineMs - Date.now()),
        );
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      })),
  };
}
