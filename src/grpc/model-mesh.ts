/**
 * @module grpc/model-mesh
 * ModelMesh's runtime SPI (`mmesh.ModelRuntime`, MME_MODEL_MESH=true) over
 * the SageMaker-managed mode, which it mirrors: model-mesh decides which pod
 * holds which model and tells the runtime to load a model from a local path
 * under an id, exactly as SageMaker's `POST /models {model_name, url}` does.
 * So loadModel is a managed load (modelId = model_name, modelPath = url),
 * unloadModel a managed unload, and inference reaches the model by its id
 * through inference.GRPCInferenceService, where model-mesh writes the id into
 * field 1 (`model_name` / `name`) as runtimeStatus tells it.
 *
 * ModelMesh's rules kept here: an unload of a model that is not loaded
 * succeeds; a load cancelled by model-mesh is followed by an unload, which
 * waits for that load to settle so nothing stays loaded behind its back; a
 * repeated load of the same id and path succeeds; runtimeStatus purges every
 * managed model before it answers READY (a model-mesh restart must find the
 * runtime empty).
 */
import type { UntypedServiceImplementation, ServerUnaryCall, sendUnaryData } from '@grpc/grpc-js';
import { ServingError, shuttingDown, type HostRedactor } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { InferenceService } from '../service/inference-service.js';
import { SERVER_VERSION } from '../service/server-identity.js';
import type { AccessPolicy } from '../service/access-policy.js';
import { rpcRefusal } from './access.js';
import { grpcErrorReply, statusName } from './status-codes.js';

export interface ModelMeshOptions {
  readonly service: InferenceService;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /** The memory budget models live in (capacityInBytes: model-mesh then never asks for more than the LRU can hold). */
  readonly capacityBytes: number;
  /** Loads model-mesh may run at once. */
  readonly maxLoadingConcurrency: number;
  readonly isShuttingDown: () => boolean;
  /** MME_GRPC_RESTRICTED_PROTOCOL and MME_MODEL_CONTROL (grpc/access.ts). */
  readonly access: AccessPolicy;
  readonly redactor?: HostRedactor;
}

/** How long model-mesh waits for a load before giving up on it. */
export const MODEL_LOADING_TIMEOUT_MS = 120_000;
/** model-mesh's guess for a model it has not sized yet: most ONNX models served this way are smaller. */
export const DEFAULT_MODEL_SIZE_BYTES = 64 * 1024 * 1024;

/** The inference RPCs model-mesh may forward, and where the model id goes: field 1 of each request (model_name / name). */
export const MODEL_MESH_METHODS = ['ModelInfer', 'ModelMetadata', 'ModelReady', 'ModelConfig', 'ModelStatistics'] as const;

interface LoadRequest {
  readonly modelId: string;
  readonly modelType: string;
  readonly modelPath: string;
  readonly modelKey: string;
}

function modelId(raw: string | undefined): string {
  if (raw === undefined || raw === '') throw new ServingError('INVALID_REQUEST', "'modelId' is empty");
  return raw;
}

export function modelMeshImplementation(options: ModelMeshOptions): UntypedServiceImplementation {
  const runtime = new ModelMeshRuntime(options);
  return {
    loadModel: unaryHandler(options, 'mmesh.loadModel', (r: LoadRequest) => runtime.loadModel(r)),
    unloadModel: unaryHandler(options, 'mmesh.unloadModel', (r: { modelId: string }) => runtime.unloadModel(r)),
    predictModelSize: unaryHandler(options, 'mmesh.predictModelSize', (r: LoadRequest) => runtime.predictModelSize(r)),
    modelSize: unaryHandler(options, 'mmesh.modelSize', (r: { modelId: string }) => runtime.modelSize(r)),
    runtimeStatus: unaryHandler(options, 'mmesh.runtimeStatus', () => runtime.runtimeStatus()),
  };
}

/** A unary RPC: the access check, then `run`; the answer or the error reply counted, a failure logged. */
function unaryHandler<Req, Res>(options: ModelMeshOptions, method: string, run: (request: Req) => Promise<Res>) {
  const { metrics, logger } = options;
  return (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>): void => {
    Promise.resolve()
      .then(() => {
        const refused = rpcRefusal(options.access, method, call.metadata);
        if (refused !== undefined) throw refused;
        return run(call.request);
      })
      .then(
        (answer) => {
          metrics.grpcRequests.cell({ method, code: 'OK' }).inc();
          callback(null, answer);
        },
        (err: unknown) => {
          const reply = grpcErrorReply(err, options.redactor);
          metrics.grpcRequests.cell({ method, code: statusName(reply.grpcError.code!) }).inc();
          logger.warn({ method, code: reply.error.code, model: reply.error.model, err: reply.error.message }, 'model-mesh call failed');
          callback(reply.grpcError);
        },
      );
  };
}

/** The runtime SPI's calls as managed loads and unloads of the inference service. */
class ModelMeshRuntime {
  /** Loads in progress by model id: an unload waits for the load it follows. */
  private readonly loading = new Map<string, Promise<unknown>>();

  constructor(private readonly options: ModelMeshOptions) {}

  async loadModel(r: LoadRequest): Promise<{ sizeInBytes: number; maxConcurrency: number }> {
    const { service, logger } = this.options;
    const id = modelId(r.modelId);
    if (this.options.isShuttingDown()) throw shuttingDown();
    // Registered before the first await, so an unload that follows (model-mesh cancelled this load) always finds it.
    const attempt = (async () => {
      const dir = await service.modelPathDir(id, r.modelPath);
      try {
        await service.registerModel(id, dir, undefined);
      } catch (err) {
        // model-mesh retries: the same id from the same place is already what it asks for.
        if (!(err instanceof ServingError && err.code === 'MODEL_ALREADY_LOADED' && service.describeModel(id).modelUrl === dir)) throw err;
      }
    })();
    this.loading.set(id, attempt);
    try {
      await attempt;
    } finally {
      if (this.loading.get(id) === attempt) this.loading.delete(id);
    }
    logger.info({ model: id, modelType: r.modelType, bytes: this.sizeOf(id) }, 'model-mesh load');
    return { sizeInBytes: this.sizeOf(id), maxConcurrency: 0 };
  }

  async unloadModel(r: { modelId: string }): Promise<Record<string, never>> {
    await this.unload(modelId(r.modelId));
    return {};
  }

  async predictModelSize(r: LoadRequest): Promise<{ sizeInBytes: number }> {
    const { service } = this.options;
    const id = modelId(r.modelId);
    return { sizeInBytes: await service.predictModelBytes(id, await service.modelPathDir(id, r.modelPath)) };
  }

  async modelSize(r: { modelId: string }): Promise<{ sizeInBytes: number }> {
    const id = modelId(r.modelId);
    this.options.service.describeModel(id); // MODEL_NOT_FOUND when model-mesh asks about a model it never loaded here
    return { sizeInBytes: this.sizeOf(id) };
  }

  async runtimeStatus(): Promise<Record<string, unknown>> {
    const { service, logger } = this.options;
    // A model-mesh (re)start must find the runtime empty: what it loaded before is gone from its view.
    const stale = service.listModels(Number.MAX_SAFE_INTEGER, undefined).models.map((m) => m.modelName);
    await Promise.all(stale.map((id) => this.unload(id)));
    if (stale.length > 0) logger.warn({ models: stale }, 'model-mesh runtimeStatus: unloaded the models loaded before it (re)started');
    return {
      status: this.options.isShuttingDown() ? 'STARTING' : 'READY',
      capacityInBytes: this.options.capacityBytes,
      maxLoadingConcurrency: this.options.maxLoadingConcurrency,
      modelLoadingTimeoutMs: MODEL_LOADING_TIMEOUT_MS,
      defaultModelSizeInBytes: DEFAULT_MODEL_SIZE_BYTES,
      runtimeVersion: SERVER_VERSION,
      numericRuntimeVersion: 0,
      methodInfos: Object.fromEntries(MODEL_MESH_METHODS.map((m) => [`inference.GRPCInferenceService/${m}`, { idInjectionPath: [1] }])),
      limitModelConcurrency: false,
      allowAnyMethod: false,
    };
  }

  private sizeOf(id: string): number {
    return this.options.service.managedModelBytes(id) ?? 0;
  }

  /** A managed unload, after the load it follows has settled; a model not loaded is already unloaded. */
  private async unload(id: string): Promise<void> {
    const { service, logger } = this.options;
    await this.loading.get(id)?.catch(() => undefined);
    try {
      await service.unload(service.resolve({ kind: 'managed', name: id, targetHeader: undefined }));
      logger.info({ model: id }, 'model-mesh unload');
    } catch (err) {
      if (!(err instanceof ServingError && err.code === 'MODEL_NOT_FOUND')) throw err;
    }
  }
}
