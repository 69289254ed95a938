/**
 * @module grpc/access
 * The API group of every RPC (Triton's grouping for --grpc-restricted-protocol)
 * and whether it loads or unloads models, declared once; the check itself is
 * the access policy's (service/access-policy.ts), fed from the call's
 * metadata. grpc.health.v1 has no entry: like /ping it stays open
 * (Kubernetes' gRPC probes send no metadata).
 */
import type { Metadata } from '@grpc/grpc-js';
import type { AccessPolicy, AccessTarget } from '../service/access-policy.js';
import type { ServingError } from '../errors.js';

const CONTROLS = true;

function target(group: AccessTarget['group'], controls = false): AccessTarget {
  return Object.freeze(controls ? { group, controls } : { group });
}

/** Triton's gRPC clients send a restricted key as metadata `triton-grpc-protocol-<key>`; the bare key is accepted too. */
export function tritonMetadataAliases(header: string): readonly string[] {
  return [`triton-grpc-protocol-${header}`];
}

export const RPC_ACCESS: Readonly<Record<string, AccessTarget>> = Object.freeze({
  ServerLive: target('health'),
  ServerReady: target('health'),
  ModelReady: target('health'),
  ServerMetadata: target('metadata'),
  ModelMetadata: target('metadata'),
  ModelConfig: target('model-config'),
  ModelInfer: target('inference'),
  ModelStreamInfer: target('inference'),
  ModelStatistics: target('statistics'),
  RepositoryIndex: target('model-repository'),
  RepositoryModelLoad: target('model-repository', CONTROLS),
  RepositoryModelUnload: target('model-repository', CONTROLS),
  SystemSharedMemoryStatus: target('shared-memory'),
  SystemSharedMemoryRegister: target('shared-memory'),
  SystemSharedMemoryUnregister: target('shared-memory'),
  CudaSharedMemoryStatus: target('shared-memory'),
  CudaSharedMemoryRegister: target('shared-memory'),
  CudaSharedMemoryUnregister: target('shared-memory'),
  TraceSetting: target('trace'),
  LogSettings: target('logging'),
  // ModelMesh's SPI manages models: the model-repository group, and model control (runtimeStatus unloads every model).
  'mmesh.loadModel': target('model-repository', CONTROLS),
  'mmesh.unloadModel': target('model-repository', CONTROLS),
  'mmesh.predictModelSize': target('model-repository', CONTROLS),
  'mmesh.modelSize': target('model-repository'),
  'mmesh.runtimeStatus': target('model-repository', CONTROLS),
});

function reader(metadata: Metadata): (name: string) => string | undefined {
  return (name) => {
    const v = metadata.get(name)[0];
    return v === undefined ? undefined : typeof v === 'string' ? v : v.toString('utf8');
  };
}

/** The refusal of a call to `method`, or undefined; a method without an entry is refused (nothing is open by omission). */
export function rpcRefusal(policy: AccessPolicy, method: string, metadata: Metadata): ServingError | undefined {
  const access = RPC_ACCESS[method] ?? target('model-repository', CONTROLS);
  return policy.refusal(access, reader(metadata));
}
