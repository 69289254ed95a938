/**
 * @module server/model-source
 * Where models come from and where they are cached, as start-up sees them:
 * the source for MME_MODEL_SOURCE (a directory or an S3 prefix), the disk
 * cache opened and swept, what no client answer may name, and the checks of
 * the source that run in the background once the server listens.
 */
import { realpathSync } from 'node:fs';
import { DEFAULT_MODEL_SOURCE, type ServerConfig } from '../config/server-config.js';
import { isS3Uri, parseS3Uri } from '../config/s3-uri.js';
import { HostRedactor, ServingError, StartupError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { logSurvey, surveyLocalSource } from '../registry/package-survey.js';
import { DiskCache } from '../store/disk-cache.js';
import { LocalModelSource } from '../store/local-source.js';
import type { ModelSource } from '../store/model-source.js';
import type { S3ModelSource } from '../store/s3-source.js';
import { checkCacheDir, checkLocalSource } from '../store/startup-checks.js';
import type { OptionalModules } from './optional-modules.js';

/** What no client answer may name: the source root and cache directory (as configured and as resolved), the bucket, prefix and S3 endpoint. */
export function hostRedactor(config: ServerConfig): HostRedactor {
  const resolved = (p: string): string[] => {
    try {
      const real = realpathSync(p);
      return real === p ? [p] : [p, real];
    } catch {
      return [p];
    }
  };
  if (isS3Uri(config.modelSource)) {
    const { bucket, prefix } = parseS3Uri(config.modelSource);
    return new HostRedactor({ paths: [], cacheDir: config.cacheDir, bucket, prefix, endpoint: config.s3Endpoint });
  }
  return new HostRedactor({ paths: resolved(config.modelSource), cacheDir: config.cacheDir });
}

interface SourceParts {
  readonly logger: Logger;
  readonly cache: DiskCache;
  readonly metrics: Metrics;
  /** Loaded where the source is an S3 prefix. */
  readonly s3: OptionalModules['s3'];
}

export function createModelSource(config: ServerConfig, { logger, cache, metrics, s3 }: SourceParts): ModelSource {
  const limits = { maxBytes: config.archiveMaxBytes, maxEntries: config.archiveMaxEntries, maxRatio: config.archiveMaxRatio };
  if (!isS3Uri(config.modelSource)) return new LocalModelSource({ root: config.modelSource, cacheDir: config.cacheDir, cache, limits, logger });
  if (s3 === undefined) throw new Error('an S3 model source needs store/s3-source.js loaded (server/optional-modules.ts)');
  return new s3.S3ModelSource({
    uri: config.modelSource,
    cacheDir: config.cacheDir,
    cache,
    limits,
    logger,
    minProgress: { bytesPerSecond: config.s3MinBytesPerSecond, windowMs: config.s3ProgressWindowMs },
    onDownload: (event) => {
      metrics.modelDownloads.inc({ outcome: 'success' });
      metrics.modelDownloadBytes.inc(event.bytes);
    },
    ...(config.awsRegion === undefined ? {} : { region: config.awsRegion }),
    ...(config.s3Endpoint === undefined ? {} : { endpoint: config.s3Endpoint }),
  });
}

/**
 * Whether the local source exists; one that is missing or unreadable stops start-up (StartupError)
 * unless a platform loads the models (config.modelSourceOptional), which is logged.
 */
export async function localSourcePresent(config: ServerConfig, logger: Logger): Promise<boolean> {
  if (await checkLocalSource(config.modelSource, config.modelSourceOptional)) return true;
  // Expected with the default where a platform loads the models; a source the operator named and that is missing deserves a warning.
  logger[config.modelSource === DEFAULT_MODEL_SOURCE ? 'info' : 'warn'](
    { source: config.modelSource, setting: 'MME_MODEL_SOURCE' },
    `no model source: ${config.modelSource} does not exist; ${config.multiModel ? 'SageMaker loads models through POST /models (SAGEMAKER_MULTI_MODEL=true)' : 'model-mesh loads models through loadModel (MME_MODEL_MESH=true)'}, so start-up goes on`,
  );
  return false;
}

/** The disk cache, writable and open: what a crash left half-written swept, complete entries indexed for reuse. */
export async function openCache(config: ServerConfig, logger: Logger, metrics: Metrics): Promise<DiskCache> {
  await checkCacheDir(config.cacheDir);
  const cache = new DiskCache({ dir: config.cacheDir, maxBytes: config.cacheMaxBytes, logger, metrics });
  try {
    await cache.open();
  } catch (err) {
    const why = `the cache directory ${config.cacheDir} cannot be used (${(err as Error).message}): set MME_CACHE_DIR to a writable directory`;
    throw new StartupError('MME_CACHE_DIR', why, { cause: err });
  }
  return cache;
}

/** How long start-up's check of an S3 source waits for its answer; it never holds up serving. */
const S3_PROBE_TIMEOUT_MS = 5_000;

/**
 * An S3 source that denies or does not answer gets one warning at start naming the bucket and prefix
 * and the problem, instead of the first request finding it. In the background: /ping and models
 * already cached are served meanwhile, and a source that recovers needs no restart.
 */
export function probeS3Source(source: S3ModelSource, logger: Logger): void {
  const signal = AbortSignal.timeout(S3_PROBE_TIMEOUT_MS);
  source.probe(signal).then(
    () => logger.debug({ source: source.description }, 'model source answers'),
    (err: unknown) => {
      const problem = signal.aborted ? `listing ${source.description} got no answer within ${S3_PROBE_TIMEOUT_MS / 1000} s` : (err as Error).message;
      // A role with s3:GetObject alone (least privilege) is denied the listing and still loads models by name.
      const denied = !signal.aborted && err instanceof ServingError && err.code === 'ACCESS_DENIED';
      logger.warn(
        { source: source.description, bucket: source.bucket, prefix: source.prefix, setting: 'MME_MODEL_SOURCE', err: problem },
        denied
          ? `MME_MODEL_SOURCE cannot be listed: ${problem}. Models still load by name where s3:GetObject is allowed; the repository index needs s3:ListBucket on the prefix. Check the bucket and prefix and the credentials`
          : `MME_MODEL_SOURCE does not answer: ${problem}. Check the bucket and prefix, the credentials and AWS_ENDPOINT_URL_S3; models not yet loaded cannot load until it answers`,
      );
    },
  );
}

/** Every model of a local source with its state at start-up (registry/package-survey.ts); never rejects. */
export function surveySource(source: ModelSource, config: ServerConfig, logger: Logger, stopped: AbortSignal): void {
  source
    .list()
    .then((entries) => surveyLocalSource(config.modelSource, entries, { configMaxBytes: config.configMaxBytes }))
    .then(
      (rows) => {
        // A server already stopping has no use for the table, and its lines would follow the shutdown's.
        if (!stopped.aborted) logSurvey(rows, logger);
      },
      (err: unknown) => logger.warn({ err: (err as Error).message }, 'could not list the model source at start-up; models are checked when loaded'),
    );
}
