/**
 * @module grpc/protos
 * Loads the .proto files of src/grpc/proto (the KServe v2 service, Triton's
 * ModelConfig, grpc.health.v1, ModelMesh's mmesh.ModelRuntime) with
 * @grpc/proto-loader. `npm run build`
 * copies them beside the compiled code (dist/src/grpc/proto), which is what
 * the image carries; a checkout without that copy reads them from src/.
 * Clients in other languages generate their stubs from the same files.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadPackageDefinition, type GrpcObject, type ServiceDefinition } from '@grpc/grpc-js';
import { loadSync, type Options } from '@grpc/proto-loader';

const here = path.dirname(fileURLToPath(import.meta.url));

/** Where the .proto files are: beside this module after a build, else in the source tree (dist/src/grpc → src/grpc). */
export function protoDir(): string {
  const candidates = [path.join(here, 'proto'), path.resolve(here, '../../../src/grpc/proto')];
  const found = candidates.find((d) => existsSync(path.join(d, 'grpc_service.proto')));
  if (found === undefined) throw new Error(`the gRPC .proto files are missing (looked in ${candidates.join(', ')}); run 'npm run build'`);
  return found;
}

/**
 * How messages look in JS, for the server and the tests' client alike:
 * proto field names, 64-bit integers as decimal strings (exact), enums by
 * name, every field present with its default, and `parameter_choice` naming
 * the member a oneof holds.
 */
export const LOADER_OPTIONS: Options = Object.freeze({ keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });

export interface Protos {
  readonly inference: ServiceDefinition;
  readonly health: ServiceDefinition;
  /** ModelMesh's runtime SPI (mmesh.ModelRuntime). */
  readonly modelMesh: ServiceDefinition;
  /** The loaded packages (clients are made from these). */
  readonly packages: GrpcObject;
}

/** The service files (model_config.proto comes in through grpc_service.proto's import). */
export const PROTO_FILES = ['grpc_service.proto', 'health.proto', 'model-runtime.proto'];

let loaded: Protos | undefined;

export function loadProtos(): Protos {
  if (loaded) return loaded;
  const dir = protoDir();
  const definition = loadSync(
    PROTO_FILES.map((f) => path.join(dir, f)),
    { ...LOADER_OPTIONS, includeDirs: [dir] },
  );
  const packages = loadPackageDefinition(definition);
  const service = (pkg: string, name: string): ServiceDefinition => {
    let node: unknown = packages;
    for (const part of pkg.split('.')) node = (node as Record<string, unknown>)[part];
    return (node as Record<string, { service: ServiceDefinition }>)[name]!.service;
  };
  loaded = {
    inference: service('inference', 'GRPCInferenceService'),
    health: service('grpc.health.v1', 'Health'),
    modelMesh: service('mmesh', 'ModelRuntime'),
    packages,
  };
  return loaded;
}
