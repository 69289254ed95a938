/**
 * @module grpc/inference-handlers
 * inference.GRPCInferenceService over InferenceService: the same use cases,
 * models, limits and error vocabulary as the HTTP routes (http/v2-routes.ts),
 * only the wire differs. Each RPC: count the call in flight (the drain waits
 * for it), tie the client's cancellation to the request (a cancelled call
 * leaves the batcher queue), run, answer, and count the call by method and
 * status code. Errors become gRPC statuses in grpc/status-codes.ts.
 */
import { randomUUID } from 'node:crypto';
import type { Metadata, ServerDuplexStream, ServerUnaryCall, UntypedServiceImplementation, sendUnaryData } from '@grpc/grpc-js';
import { CancelSource } from '../cancellation.js';
import { inModel, ServingError, shuttingDown, type HostRedactor } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Admission, RequestTicket } from '../service/admission.js';
import type { InferenceCall } from '../service/inference-call.js';
import { EdgeInferenceCall, type InferenceService, type ModelHandle } from '../service/inference-service.js';
import { RequestStats } from '../service/request-stats.js';
import { SERVER_NAME, SERVER_VERSION, V2_EXTENSIONS, parseVersion } from '../service/server-identity.js';
import { decodeModelInferRequest, encodeModelInferResponse, type ModelInferRequestMessage, type ModelInferResponseMessage } from './infer-codec.js';
import type { AccessPolicy } from '../service/access-policy.js';
import { rpcRefusal } from './access.js';
import type { InferRequest, InferResponse } from '../protocol/infer-types.js';
import { binaryBytesBound } from '../protocol/response-size.js';
import { grpcErrorReply, statusName } from './status-codes.js';

export interface HandlerDeps {
  readonly service: InferenceService;
  /** The HTTP front's admission: one count of requests in flight and on their way to each model's queue. */
  readonly admission: Admission;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /** True once the drain period is over: new calls are refused (UNAVAILABLE). */
  readonly isShuttingDown: () => boolean;
  /** True from SIGTERM on: ServerReady answers false while calls are still served. */
  readonly isDraining: () => boolean;
  /** Shared with the HTTP listener: the drain waits until no request of either is running. */
  readonly inflight: { count: number };
  /** MME_GRPC_RESTRICTED_PROTOCOL and MME_MODEL_CONTROL, checked on every call before its request is used (grpc/access.ts). */
  readonly access: AccessPolicy;
  /** Cuts the server's own paths, bucket and prefix out of error answers (errors.ts HostRedactor). */
  readonly redactor?: HostRedactor;
}

/** gRPC also serves the statistics extension (ModelStatistics). */
export const GRPC_EXTENSIONS = Object.freeze([...new Set([...V2_EXTENSIONS, 'statistics'])]);

interface CallContext {
  readonly id: string;
  readonly cancel: CancelSource;
  readonly log: Logger;
}

/** Only a printable, short client id is echoed into logs (as X-Request-Id on HTTP). */
const PRINTABLE_ID = /^[\x21-\x7e]{1,128}$/;

function requestId(metadata: Metadata): string {
  const given = metadata.get('x-request-id')[0];
  return typeof given === 'string' && PRINTABLE_ID.test(given) ? given : randomUUID();
}

function modelName(raw: string | undefined, field: string): string {
  if (raw === undefined || raw === '') throw new ServingError('INVALID_REQUEST', `'${field}' is empty: name the model`);
  return raw;
}

function versionOf(raw: string | undefined): number | undefined {
  return raw === undefined || raw === '' ? undefined : parseVersion(raw);
}

/** A ModelInferResponse carries every output as raw bytes: its size is exact but for the message's own fields. */
function grpcAnswerBound(response: InferResponse): number {
  let bytes = 0;
  for (const [name, t] of response.outputs) bytes += binaryBytesBound(name, t);
  return bytes;
}

function refusedWhileDraining(deps: HandlerDeps): void {
  if (deps.isShuttingDown()) throw shuttingDown();
}

/** A call's id, its cancellation, and its logger (made on first use), for a unary call and a stream alike. */
function callContext(id: string, logs: { readonly log: Logger }): CallContext {
  return {
    id,
    cancel: new CancelSource(id),
    get log() {
      return logs.log;
    },
  };
}

/** Where a lazily made child logger would cost more than the line: one bound logger per call, made only when something logs. */
function lazyLog(root: Logger, id: string): { readonly log: Logger } {
  let child: Logger | undefined;
  return {
    get log() {
      return (child ??= root.child({ reqId: id }));
    },
  };
}

/** The one validated value the service gets: the message decoded (tensors in raw_input_contents), the stats started before it. */
function inferenceCall(
  handle: ModelHandle,
  message: ModelInferRequestMessage,
  version: number | undefined,
  ctx: CallContext,
  arrival: RequestTicket,
): InferenceCall {
  const stats = new RequestStats();
  let request: InferRequest;
  try {
    request = decodeModelInferRequest(message, handle.label);
  } catch (err) {
    throw inModel(err, handle.label);
  }
  return new EdgeInferenceCall(handle, request, version, ctx, arrival, undefined, stats);
}

function finish(deps: HandlerDeps, method: string, code: string): void {
  deps.metrics.grpcRequests.cell({ method, code }).inc();
}

/** The failed call's status, logged (a client's fault as a warning, the server's as an error) and counted. */
function fail(deps: HandlerDeps, method: string, ctx: CallContext, err: unknown, started: number): ReturnType<typeof grpcErrorReply> {
  const reply = grpcErrorReply(err, deps.redactor);
  const code = statusName(reply.grpcError.code!);
  const fields = {
    method,
    grpcCode: code,
    code: reply.error.code,
    model: reply.error.model,
    durationMs: performance.now() - started,
    err: reply.error.message,
  };
  if (reply.error.isClientFault || reply.error.code === 'OVERLOADED' || reply.error.code === 'SHUTTING_DOWN') ctx.log.warn(fields, 'grpc call rejected');
  else ctx.log.error({ ...fields, stack: reply.error.cause instanceof Error ? reply.error.cause.stack : undefined }, 'grpc call failed');
  finish(deps, method, code);
  return reply;
}

/** A unary RPC: `run` gets the request and the call's context; its result is the answer. */
function unary<Req, Res>(deps: HandlerDeps, method: string, run: (request: Req, ctx: CallContext) => Res | Promise<Res>) {
  return (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>): void => {
    const started = performance.now();
    deps.inflight.count++;
    const id = requestId(call.metadata);
    const ctx = callContext(id, lazyLog(deps.logger, id));
    const { cancel } = ctx;
    call.once('cancelled', () => cancel.cancel());
    let done = false;
    const end = (): void => {
      if (done) return;
      done = true;
      deps.inflight.count--;
    };
    Promise.resolve()
      .then(() => {
        const refused = rpcRefusal(deps.access, method, call.metadata);
        if (refused !== undefined) throw refused;
        return run(call.request, ctx);
      })
      .then(
        (answer) => {
          end();
          finish(deps, method, cancel.aborted ? 'CANCELLED' : 'OK');
          callback(null, answer);
        },
        (err: unknown) => {
          end();
          const reason = cancel.aborted ? new ServingError('CANCELLED', `the client cancelled the call (${(err as Error).message ?? String(err)})`) : err;
          callback(fail(deps, method, ctx, reason, started).grpcError);
        },
      );
  };
}

function handleOf(deps: HandlerDeps, name: string): ModelHandle {
  return deps.service.resolve({ kind: 'named', name });
}

/** ModelInfer (and each request of ModelStreamInfer): the same admission and InferenceCall as the HTTP front's. */
async function modelInfer(deps: HandlerDeps, request: ModelInferRequestMessage, ctx: CallContext): Promise<ModelInferResponseMessage> {
  const { service } = deps;
  refusedWhileDraining(deps);
  const name = modelName(request.model_name, 'model_name');
  const version = versionOf(request.model_version);
  const handle = handleOf(deps, name);
  // The same admission as the HTTP front (service/admission.ts): in-flight requests and the model's queue.
  const ticket = deps.admission.admit(service.queueOf(handle));
  try {
    const response = await service.infer(inferenceCall(handle, request, version, ctx, ticket));
    service.checkAnswerSize(grpcAnswerBound(response), response.modelName);
    return encodeModelInferResponse(response);
  } finally {
    ticket.release();
  }
}

interface RepositoryRequest {
  readonly repository_name: string;
  readonly model_name: string;
  readonly parameters: Record<string, unknown>;
}

async function repositoryLoad(deps: HandlerDeps, r: RepositoryRequest, ctx: CallContext): Promise<Record<string, never>> {
  const name = modelName(r.model_name, 'model_name');
  refusedWhileDraining(deps);
  const keys = Object.keys(r.parameters ?? {});
  const overrides = keys.filter((k) => k === 'config' || k.startsWith('file:'));
  if (overrides.length > 0) {
    throw new ServingError(
      'UNSUPPORTED',
      `model '${name}': load parameters ${overrides.map((k) => `'${k}'`).join(', ')} are not supported: models load from the model source as they are`,
      { model: name },
    );
  }
  if (keys.length > 0) ctx.log.warn({ model: name, parameters: keys }, 'load parameters ignored: none of them changes how a model loads here');
  ctx.log.info({ model: name }, 'load requested (gRPC repository)');
  await deps.service.load(handleOf(deps, name), ctx.cancel);
  return {};
}

async function repositoryUnload(deps: HandlerDeps, r: RepositoryRequest, ctx: CallContext): Promise<Record<string, never>> {
  const name = modelName(r.model_name, 'model_name');
  // unload_dependents is what always happens here: a package's step models go with it.
  const ignored = Object.keys(r.parameters ?? {}).filter((k) => k !== 'unload_dependents');
  if (ignored.length > 0) ctx.log.warn({ model: name, parameters: ignored }, 'unload parameters ignored');
  ctx.log.info({ model: name }, 'unload requested (gRPC repository)');
  await deps.service.unload(handleOf(deps, name));
  return {};
}

const unsupported = (what: string) => () => {
  throw new ServingError('UNSUPPORTED', `${what} is not supported by onnx-mme: send tensors in raw_input_contents`);
};

/** The RPC table: each entry one line, or a few, over the service. */
export function inferenceImplementation(deps: HandlerDeps): UntypedServiceImplementation {
  const { service } = deps;
  const named = (name: string): ModelHandle => handleOf(deps, modelName(name, 'name'));
  const infer = (request: ModelInferRequestMessage, ctx: CallContext) => modelInfer(deps, request, ctx);
  return {
    ServerLive: unary(deps, 'ServerLive', () => ({ live: true })),
    ServerReady: unary(deps, 'ServerReady', () => ({ ready: !deps.isDraining() })),
    ServerMetadata: unary(deps, 'ServerMetadata', () => ({ name: SERVER_NAME, version: SERVER_VERSION, extensions: GRPC_EXTENSIONS })),
    // Readiness never loads anything (as GET /v2/models/{m}/ready).
    ModelReady: unary(deps, 'ModelReady', (r: { name: string; version: string }) => ({
      ready: service.modelReady(named(r.name), versionOf(r.version)),
    })),
    ModelMetadata: unary(deps, 'ModelMetadata', async (r: { name: string; version: string }, ctx) =>
      service.modelMetadata(named(r.name), versionOf(r.version), ctx.cancel),
    ),
    ModelConfig: unary(deps, 'ModelConfig', async (r: { name: string; version: string }, ctx) => ({
      config: await service.modelConfig(named(r.name), versionOf(r.version), ctx.cancel),
    })),
    ModelInfer: unary(deps, 'ModelInfer', infer),
    ModelStreamInfer: (call: ServerDuplexStream<ModelInferRequestMessage, unknown>) =>
      streamInfer(deps, call, infer, (method, code) => finish(deps, method, code)),
    ModelStatistics: unary(deps, 'ModelStatistics', async (r: { name: string; version: string }) => ({
      // The statistics extension's JSON has the message's field names (one source for HTTP and gRPC).
      model_stats: service.modelStatistics(r.name === '' ? undefined : handleOf(deps, r.name), versionOf(r.version)).model_stats,
    })),
    RepositoryIndex: unary(deps, 'RepositoryIndex', async (r: { repository_name: string; ready: boolean }) => {
      if (r.repository_name !== '')
        throw new ServingError(
          'INVALID_REQUEST',
          `onnx-mme has one model repository (MME_MODEL_SOURCE): repository_name must be empty, got '${r.repository_name.slice(0, 100)}'`,
        );
      const rows = await service.repositoryIndex(r.ready);
      return { models: rows.map((m) => ({ name: m.name, version: m.version ?? '', state: m.state, reason: m.reason })) };
    }),
    RepositoryModelLoad: unary(deps, 'RepositoryModelLoad', (r: RepositoryRequest, ctx) => repositoryLoad(deps, r, ctx)),
    RepositoryModelUnload: unary(deps, 'RepositoryModelUnload', (r: RepositoryRequest, ctx) => repositoryUnload(deps, r, ctx)),
    SystemSharedMemoryStatus: unary(deps, 'SystemSharedMemoryStatus', unsupported('system shared memory')),
    SystemSharedMemoryRegister: unary(deps, 'SystemSharedMemoryRegister', unsupported('system shared memory')),
    SystemSharedMemoryUnregister: unary(deps, 'SystemSharedMemoryUnregister', unsupported('system shared memory')),
    CudaSharedMemoryStatus: unary(deps, 'CudaSharedMemoryStatus', unsupported('CUDA shared memory')),
    CudaSharedMemoryRegister: unary(deps, 'CudaSharedMemoryRegister', unsupported('CUDA shared memory')),
    CudaSharedMemoryUnregister: unary(deps, 'CudaSharedMemoryUnregister', unsupported('CUDA shared memory')),
    TraceSetting: unary(deps, 'TraceSetting', () => {
      throw new ServingError('UNSUPPORTED', 'trace settings are not supported by onnx-mme (request logs carry reqId and traceparent instead)');
    }),
    LogSettings: unary(deps, 'LogSettings', () => {
      throw new ServingError('UNSUPPORTED', 'log settings cannot be changed at run time: set MME_LOG_LEVEL');
    }),
  };
}

/**
 * ModelStreamInfer: each request on the stream is one inference, answered
 * on the stream when it completes (so answers may come back out of order;
 * clients match them by `id`, as with Triton). A failed inference is an
 * answer with `error_message`; the stream stays open. The stream ends when
 * the client has half-closed it and every answer is written.
 */
function streamInfer(
  deps: HandlerDeps,
  call: ServerDuplexStream<ModelInferRequestMessage, unknown>,
  infer: (request: ModelInferRequestMessage, ctx: CallContext) => Promise<ModelInferResponseMessage>,
  finish: (method: string, code: string) => void,
): void {
  const id = requestId(call.metadata);
  const logs = lazyLog(deps.logger, id);
  const refused = rpcRefusal(deps.access, 'ModelStreamInfer', call.metadata);
  if (refused !== undefined) {
    // The whole stream is refused with the call's status, before any of its messages is read.
    const reply = grpcErrorReply(refused);
    logs.log.warn({ method: 'ModelStreamInfer', code: reply.error.code, err: reply.error.message }, 'grpc call rejected');
    finish('ModelStreamInfer', statusName(reply.grpcError.code!));
    call.emit('error', reply.grpcError);
    return;
  }
  const ctx = callContext(id, logs);
  const { cancel } = ctx;
  let pending = 0;
  let ended = false;
  let closed = false;
  const close = (code: string): void => {
    if (closed) return;
    closed = true;
    finish('ModelStreamInfer', code);
  };
  call.once('cancelled', () => {
    cancel.cancel();
    close('CANCELLED');
  });
  const maybeEnd = (): void => {
    if (ended && pending === 0 && !closed) {
      close('OK');
      call.end();
    }
  };
  call.on('data', (request: ModelInferRequestMessage) => {
    pending++;
    deps.inflight.count++;
    infer(request, ctx)
      .then(
        (answer) => {
          if (!cancel.aborted) call.write({ error_message: '', infer_response: answer });
        },
        (err: unknown) => {
          const reply = grpcErrorReply(err, deps.redactor);
          ctx.log.warn(
            { method: 'ModelStreamInfer', code: reply.error.code, model: reply.error.model, err: reply.error.message },
            'grpc stream inference failed',
          );
          if (!cancel.aborted)
            call.write({
              error_message: reply.grpcError.details,
              infer_response: { id: request.id ?? '', model_name: request.model_name ?? '', model_version: request.model_version ?? '' },
            });
        },
      )
      .finally(() => {
        pending--;
        deps.inflight.count--;
        maybeEnd();
      });
  });
  call.on('end', () => {
    ended = true;
    maybeEnd();
  });
}
