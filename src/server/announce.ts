/**
 * @module server/announce
 * What start-up tells the operator: settings that were misspelt or are
 * foreign, how models are controlled, and, once listening, every effective
 * setting (one JSON line for tools, one line for a person).
 */
import type { ServerConfig } from '../config/server-config.js';
import { isS3Uri } from '../config/s3-uri.js';
import type { Logger } from '../observability/logger.js';
import { startSummary } from '../observability/start-summary.js';
import type { Core } from './core.js';
import type { Listeners } from './listeners.js';

/** Before anything starts: the environment's notices and the model-control mode, with the warning an open API deserves. */
export function logStartNotices(config: ServerConfig, logger: Logger): void {
  // Nothing silently ignored: a misspelt or foreign setting is named once, with what it probably meant.
  for (const n of config.environmentNotices) logger[n.level]({ env: n.name }, n.message);
  logger.info(
    { modelControl: config.modelControl.mode, modelControlFrom: config.modelControl.reason },
    config.modelControl.mode === 'explicit'
      ? `model control explicit (${config.modelControl.reason}): models are loaded and unloaded through the API, from directories under MME_MODEL_URL_ROOTS`
      : `model control none (${config.modelControl.reason}): every load and unload API is refused; models of MME_MODEL_SOURCE load on first use (MME_MODEL_CONTROL=explicit turns the API on)`,
  );
  if (config.modelControl.mode === 'explicit' && !config.multiModel && !config.httpRestrictedApi.some((r) => r.groups.includes('model-repository'))) {
    // Off SageMaker the port may be reachable by anything in the cluster: loading a model runs its code.
    logger.warn(
      'model control explicit without a key on the model-repository group: anyone who reaches the port may load models from MME_MODEL_URL_ROOTS (MME_HTTP_RESTRICTED_API=model-repository:<header>=<value> restricts it)',
    );
  }
}

/** `onnx-mme listening` with every effective setting, then the same facts for a person. */
export function logListening(config: ServerConfig, logger: Logger, core: Core, listeners: Listeners, maxInflightBytes: number): void {
  const { host, pool, budget, source } = core;
  const { port, metricsPort, grpc } = listeners;
  logger.info(
    {
      port,
      metricsPort,
      grpcPort: grpc?.port,
      grpcTls: grpc?.tls,
      modelMesh: config.modelMesh,
      source: source.description,
      cacheDir: config.cacheDir,
      multiModel: config.multiModel,
      modelControl: config.modelControl.mode,
      modelControlFrom: config.modelControl.reason,
      modelUrlRoots: config.modelUrlRoots,
      // Group names only: the values are never logged.
      restrictedHttpApis: core.httpAccess.restrictedGroups,
      ...(grpc === undefined ? {} : { restrictedGrpcProtocols: core.grpcAccess.restrictedGroups }),
      defaultModel: config.defaultModel,
      providers: config.executionProviders ?? 'auto',
      ortTelemetry: config.ortTelemetry,
      cpuCount: config.cpuCount,
      runtimeWorkers: pool.size,
      runtimeWorkerNice: config.runtimeWorkerNice,
      loadConcurrency: config.loadConcurrency,
      mainThreadCopies: config.mainThreadCopies,
      memoryBudgetBytes: budget.bytes,
      memoryBudgetFrom: budget.from,
      maxLoadedModels: config.maxLoadedModels,
      intraOpThreads: config.intraOpThreads ?? 'onnxruntime default',
      dynamicBatching: config.dynamicBatching,
      mainThreadMaxRunUs: config.mainThreadMaxRunUs,
      mainThreadOnlyMaxRunUs: config.mainThreadOnlyMaxRunUs,
      responseCacheBytes: config.responseCacheBytes,
      maxInflightBytes,
      maxConnections: config.maxConnections,
      gpuVisible: host.gpuVisible,
      installedProviders: [...host.installed],
    },
    'onnx-mme listening',
  );
  // The same facts for a person: one line, bytes in MiB/GiB (the line above keeps raw counts for tools).
  logger.info(
    startSummary({
      host: config.host,
      port,
      grpcPort: grpc?.port,
      grpcTls: grpc?.tls ?? false,
      metricsPort,
      source: source.description,
      sourceKind: !core.sourcePresent ? 'absent' : isS3Uri(config.modelSource) ? 's3' : 'local',
      cacheDir: config.cacheDir,
      cacheBytes: core.cache.maxBytes,
      budgetBytes: budget.bytes,
      budgetFrom: budget.from,
      runtimeWorkers: pool.size,
      providers: config.executionProviders ?? 'auto',
      gpuVisible: host.gpuVisible,
      logLevel: config.logLevel,
      modelControl: config.modelControl,
    }),
  );
}
