/**
 * @module test/support/grpc-client
 * A KServe v2 gRPC client made from the server's own .proto files (what any
 * language's generated stubs are), used the way tritonclient.grpc uses its
 * stubs: every input's bytes in `raw_input_contents` (little-endian,
 * row-major; BYTES as a 4-byte length and the bytes per element; FP16 as
 * its 16-bit patterns), `model_version` "" for the latest, classification
 * as an int64 output parameter, and each output read back from
 * `raw_output_contents` by its index in `outputs` (tritonclient's as_numpy).
 */
import {
  credentials,
  Metadata,
  type ChannelCredentials,
  type Client,
  type ServiceError,
  type ClientDuplexStream,
  type ClientReadableStream,
} from '@grpc/grpc-js';
import { loadPackageDefinition } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import path from 'node:path';
import { protoDir } from '../../src/grpc/protos.js';

type Unary = (
  request: unknown,
  metadata: Metadata,
  options: { deadline?: number },
  callback: (err: ServiceError | null, res: any) => void,
) => { cancel(): void };

export interface GrpcClients {
  readonly inference: Client & Record<string, Unary> & { ModelStreamInfer(): ClientDuplexStream<unknown, any> };
  readonly health: Client & Record<string, Unary> & { Watch(request: unknown): ClientReadableStream<any> };
  /** ModelMesh's runtime SPI (served with MME_MODEL_MESH=true). */
  readonly modelMesh: Client & Record<string, Unary>;
  close(): void;
}

/** The stubs, from the .proto files exactly as shipped (no server code involved beyond finding them). */
export function connect(target: string, creds: ChannelCredentials = credentials.createInsecure(), options: Record<string, unknown> = {}): GrpcClients {
  const dir = protoDir();
  const definition = loadSync([path.join(dir, 'grpc_service.proto'), path.join(dir, 'health.proto'), path.join(dir, 'model-runtime.proto')], {
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
    includeDirs: [dir],
  });
  const pkgs = loadPackageDefinition(definition) as any;
  const opts = { 'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1, ...options };
  const inference = new pkgs.inference.GRPCInferenceService(target, creds, opts);
  const health = new pkgs.grpc.health.v1.Health(target, creds, opts);
  const modelMesh = new pkgs.mmesh.ModelRuntime(target, creds, opts);
  return { inference, health, modelMesh, close: () => (inference.close(), health.close(), modelMesh.close()) };
}

export interface CallResult {
  readonly error: ServiceError | null;
  readonly response: any;
}

/** One unary call; never throws (tests look at `error.code`). */
export function call(
  client: Record<string, Unary>,
  method: string,
  request: unknown,
  options: { metadata?: Metadata; deadlineMs?: number } = {},
): Promise<CallResult> & { cancel(): void } {
  let handle: { cancel(): void } | undefined;
  const p = new Promise<CallResult>((resolve) => {
    handle = client[method]!(
      request,
      options.metadata ?? new Metadata(),
      options.deadlineMs === undefined ? {} : { deadline: Date.now() + options.deadlineMs },
      (error, response) => resolve({ error, response }),
    );
  }) as Promise<CallResult> & { cancel(): void };
  p.cancel = () => handle?.cancel();
  return p;
}

// ------------------------------------------------------------ tritonclient's tensor bytes

// The raw tensor bytes both transports' tests build and read (test/support/raw-tensor.ts).
import { rawBytes, readRaw, type Value } from './raw-tensor.js';
export { rawBytes, readRaw, type Value };

export interface ClientInput {
  readonly name: string;
  readonly datatype: string;
  readonly shape: readonly number[];
  readonly values: readonly Value[];
}

/** _get_inference_request: tensors described in `inputs`, their bytes in raw_input_contents. */
export function inferRequest(
  model: string,
  inputs: readonly ClientInput[],
  options: { version?: string; id?: string; outputs?: readonly { name: string; classCount?: number }[]; parameters?: Record<string, unknown> } = {},
): Record<string, unknown> {
  return {
    model_name: model,
    model_version: options.version ?? '',
    id: options.id ?? '',
    inputs: inputs.map((i) => ({ name: i.name, datatype: i.datatype, shape: i.shape, parameters: {} })),
    raw_input_contents: inputs.map((i) => rawBytes(i.datatype, i.values)),
    outputs: (options.outputs ?? []).map((o) => ({ name: o.name, parameters: o.classCount ? { classification: { int64_param: o.classCount } } : {} })),
    parameters: options.parameters ?? {},
  };
}

/** InferResult.as_numpy(name): the output's datatype, shape and values (raw first, typed contents otherwise). */
export function asValues(response: any, name: string): { datatype: string; shape: number[]; values: Value[] } | undefined {
  const outputs = response.outputs as any[];
  const index = outputs.findIndex((o) => o.name === name);
  if (index < 0) return undefined;
  const o = outputs[index];
  const shape = (o.shape as string[]).map(Number);
  const raw = (response.raw_output_contents as Buffer[])[index];
  if (raw === undefined) throw new Error(`output '${name}' has no raw_output_contents entry`);
  return { datatype: o.datatype, shape, values: readRaw(o.datatype, raw) };
}
