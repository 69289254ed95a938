/**
 * @module server/background
 * Start-up work that runs after listening and never holds up /ping: the
 * check of an S3 source, the choice of the default model, the survey of a
 * local source, and the preloads of MME_PRELOAD.
 */
import { cancellationOf } from '../cancellation.js';
import type { ServerConfig } from '../config/server-config.js';
import { isS3Uri } from '../config/s3-uri.js';
import type { Logger } from '../observability/logger.js';
import type { ModelRegistry } from '../registry/model-registry.js';
import type { Core } from './core.js';
import { probeS3Source, surveySource } from './model-source.js';

/** Starts the background work; what it returns stops the preloads and the survey (shutdown does, when the drain begins). */
export function startBackgroundWork(config: ServerConfig, core: Core, logger: Logger): AbortController {
  const { source, registry, modules } = core;
  const stopped = new AbortController();
  if (modules.s3 !== undefined && source instanceof modules.s3.S3ModelSource) probeS3Source(source, logger);
  if (config.ortTelemetry) {
    logger.warn("MME_ORT_TELEMETRY=true: onnxruntime's telemetry is on; it stores events under $HOME/.cache/Microsoft and uploads them to Microsoft");
  }
  // Which model answers requests without a target is decided once, here (registry/default-model.ts).
  registry.chooseDefault().then(
    (choice) =>
      logger.info(
        { defaultModel: choice.kind === 'target' ? choice.target : choice.kind === 'repository' ? choice.label : undefined, kind: choice.kind },
        choice.kind === 'none' ? 'no default model: requests without a target model are answered 404' : 'default model chosen',
      ),
    (err: unknown) =>
      logger.warn({ err: (err as Error).message }, 'could not choose the default model at start-up; the first request without a target tries again'),
  );
  // Triton's model table for a local source: after listening and in the background, so /ping never waits for it.
  if (!isS3Uri(config.modelSource)) surveySource(source, config, logger, stopped.signal);
  preload(config.preload, registry, logger, stopped.signal);
  return stopped;
}

/** Most preloads in progress at once: enough to overlap downloads, few enough not to starve requests. */
const PRELOAD_CONCURRENCY = 2;

/**
 * MME_PRELOAD: fetch and load targets in the background after listening, so
 * /ping answers at once (SageMaker's health check) while the first requests for
 * these models find them warm. A failure is logged and the target is simply
 * loaded on demand later.
 */
function preload(targets: readonly string[], registry: ModelRegistry, logger: Logger, stopped: AbortSignal): void {
  const queue = [...targets];
  const next = async (): Promise<void> => {
    for (let target = queue.shift(); target !== undefined && !stopped.aborted; target = queue.shift()) {
      const started = performance.now();
      try {
        const lease = await registry.resolve({ kind: 'target', target }).acquire(cancellationOf(stopped));
        lease.release();
        logger.info({ model: target, durationMs: Math.round(performance.now() - started) }, 'preloaded model');
      } catch (err) {
        if (stopped.aborted) return;
        logger.warn({ model: target, err: (err as Error).message }, 'preloading model failed; it will be loaded on first use');
      }
    }
  };
  for (let i = 0; i < Math.min(PRELOAD_CONCURRENCY, queue.length); i++) void next();
}
