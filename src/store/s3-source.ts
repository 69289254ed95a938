/**
 * @module store/s3-source
 * A model source backed by S3 (MME_MODEL_SOURCE=s3://bucket/prefix/). A target
 * (`model_a.tar.gz`, `team/b.tar.gz`) is the object `prefix + target`; a target
 * without an archive suffix is looked up as `target.tar.gz`, then `target.tgz`.
 *
 * Localizing: the object's ETag is the cache `version`. With a copy of the
 * target cached, HeadObject gives the current ETag, and a complete cache entry
 * for it is reused with no GetObject; with none cached, no HeadObject: the
 * GetObject's headers give the ETag and size. A download is streamed
 * GetObject → gunzip → untar → temporary directory → atomic rename
 * (publishDirectory), so memory stays flat whatever the archive size, and
 * entries of older ETags are removed. Concurrent calls for one target share one
 * lookup, one GetObject and one extraction (single flight); a caller's
 * AbortSignal only stops that caller waiting (SageMaker retries a slow load, and
 * the retry must find the work done, not restarted).
 *
 * Failures: a missing object is MODEL_NOT_FOUND naming the target and the
 * object names tried (relative to the prefix: messages reach clients, and the
 * bucket and prefix are the server's own; log lines carry the s3:// URI);
 * 401/403 is ACCESS_DENIED (store/s3-errors.ts classifies S3's errors);
 * unreachable, 5xx, throttling, request timeouts and a connection cut (or
 * stalled) mid-stream are retried with exponential backoff, at most
 * `retry.attempts` attempts and at most `retry.maxTotalMs` without progress,
 * then UPSTREAM_UNAVAILABLE with the cause (the retry loop, the deadlines and
 * the stream guard are store/remote-fetch.ts's, shared by any remote source);
 * corrupt or hostile archives are ARCHIVE_REJECTED; a full disk is
 * INSUFFICIENT_STORAGE. Whatever fails, no half-written entry is left in the
 * cache.
 *
 * Revalidation: `head(target)` returns the object's current ETag; a resident
 * model whose `LocalModel.version` differs is stale, and `localize` (which
 * always asks S3 for the current ETag) fetches the new version.
 *
 * No environment reads here: the composition root passes `region`/`endpoint`
 * (the SDK's default credential chain still applies to the default client).
 */

import { Readable } from 'node:stream';
import { ListObjectsV2Command, S3Client, type GetObjectCommandOutput } from '@aws-sdk/client-s3';
import type { Logger } from 'pino';
import { systemClock, type Clock } from '../clock.js';
import { ServingError } from '../errors.js';
import { DiskCache } from './disk-cache.js';
import { createS3Client } from './s3-client.js';
import { PinnedFlights, type PinnedResult } from './pinned-flights.js';
import { extractArchive, type ExtractResult } from './extract-archive.js';
import type { ExtractLimits } from './extract-limits.js';
import type { LocalModel, ModelSource, SourceEntry } from './model-source.js';
import { parseS3Uri, s3ObjectUri } from '../config/s3-uri.js';
import { archiveCandidates, isArchiveName, normalizeTarget } from './target-path.js';
import { ActiveTransfers, type TransferSnapshot } from './transfer-progress.js';
import { notFound, s3Failure } from './s3-errors.js';
import { S3Objects, type S3ObjectInfo } from './s3-objects.js';
import { listObjects, unquoteEtag } from './s3-listing.js';
import {
  checkMinimumProgress,
  DEFAULT_RETRY_POLICY,
  destroyBody,
  guardedTransfer,
  markRetryable,
  nowMs,
  resolveRetryPolicy,
  withRetry,
  type FetchAttempt,
  type MinimumProgress,
  type RetryPolicy,
} from './remote-fetch.js';

/** The retry budget of every S3 call (store/remote-fetch.ts's policy). */
export type S3RetryOptions = RetryPolicy;
export const DEFAULT_S3_RETRY: S3RetryOptions = DEFAULT_RETRY_POLICY;
/** A body that sends nothing for this long is treated as a cut connection (and retried). */
export const DEFAULT_S3_IDLE_TIMEOUT_MS = 60_000;
/** The least a download must deliver (MME_S3_MIN_BYTES_PER_SECOND over MME_S3_PROGRESS_WINDOW_SECONDS). */
export type S3MinimumProgress = MinimumProgress;
/** 16 KiB/s over 20 s: far below any working link to S3, far above a stuck one. */
export const DEFAULT_S3_MIN_PROGRESS: S3MinimumProgress = Object.freeze({ bytesPerSecond: 16 * 1024, windowMs: 20_000 });
/** Connection timeout of the default client (the request phase is also bounded by retry.maxTotalMs). */
const DEFAULT_CONNECTION_TIMEOUT_MS = 5_000;
/** Reported after each download and extraction (not on cache reuse): for metrics and tests. */
export interface S3DownloadEvent {
  readonly target: string;
  readonly key: string;
  readonly etag: string;
  /** Body bytes received for this localization, over every attempt. */
  readonly bytes: number;
  readonly durationMs: number;
  /** GetObject/HeadObject attempts it took (1 = no retry). */
  readonly attempts: number;
  readonly files: number;
  readonly dir: string;
}

export type { S3ObjectInfo };

export interface S3ModelSourceOptions {
  /** `s3://bucket/prefix/` (prefix may be empty). */
  readonly uri: string;
  readonly cacheDir: string;
  /** The disk cache (with its byte budget); default: one over `cacheDir` with the default budget. */
  readonly cache?: DiskCache;
  readonly limits: ExtractLimits;
  /** A ready client; otherwise one is built from `region`/`endpoint` and the default credential chain. */
  readonly client?: S3Client;
  /** For the default client; when absent the SDK's own resolution (AWS_REGION, profile) applies. */
  readonly region?: string;
  /** S3-compatible endpoint (e.g. from AWS_ENDPOINT_URL_S3); enables path-style addressing. */
  readonly endpoint?: string;
  readonly retry?: Partial<S3RetryOptions>;
  /** Body idle timeout in ms (0 disables); default DEFAULT_S3_IDLE_TIMEOUT_MS. */
  readonly idleTimeoutMs?: number;
  /** Slowest download not treated as stalled; default DEFAULT_S3_MIN_PROGRESS. */
  readonly minProgress?: S3MinimumProgress;
  /** ListObjectsV2 MaxKeys (page size); default the server's (1000 on S3). */
  readonly listPageSize?: number;
  /** Time for the retry delays, request deadlines and stall windows; default the system's. */
  readonly clock?: Clock;
  readonly logger?: Logger;
  readonly onDownload?: (event: S3DownloadEvent) => void;
}

/** What one localization has received and tried so far, over its attempts. */
interface Tally {
  bytes: number;
  attempts: number;
  info: S3ObjectInfo | undefined;
}

interface Fetched {
  readonly pin: PinnedResult['pin'];
  readonly reused: boolean;
  readonly files: number;
}

export class S3ModelSource implements ModelSource {
  readonly description: string;
  /** The bucket and prefix are the server's own: clients read "the model source". */
  readonly publicDescription = 'the model source';
  readonly bucket: string;
  readonly prefix: string;
  private readonly client: S3Client;
  private readonly objects: S3Objects;
  readonly cache: DiskCache;
  private readonly limits: ExtractLimits;
  private readonly retry: S3RetryOptions;
  private readonly idleTimeoutMs: number;
  private readonly minProgress: S3MinimumProgress;
  private readonly listPageSize: number | undefined;
  private readonly clock: Clock;
  private readonly logger: Logger | undefined;
  private readonly onDownload: ((event: S3DownloadEvent) => void) | undefined;
  /** In-flight localizations keyed by normalised target. */
  private readonly flights: PinnedFlights;
  private downloaded = 0;
  /** The download running per target (the localization's current attempt). */
  private readonly transfers: ActiveTransfers;

  constructor(options: S3ModelSourceOptions) {
    const location = parseS3Uri(options.uri);
    this.bucket = location.bucket;
    this.prefix = location.prefix;
    this.description = location.uri;
    this.cache = options.cache ?? new DiskCache({ dir: options.cacheDir, logger: options.logger });
    this.flights = new PinnedFlights(this.cache);
    this.limits = options.limits;
    this.retry = resolveRetryPolicy(options.retry);
    this.idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_S3_IDLE_TIMEOUT_MS;
    this.minProgress = checkMinimumProgress(options.minProgress ?? DEFAULT_S3_MIN_PROGRESS);
    if (options.listPageSize !== undefined && !(Number.isInteger(options.listPageSize) && options.listPageSize >= 1)) {
      throw new RangeError(`listPageSize must be a positive integer, got ${options.listPageSize}`);
    }
    this.listPageSize = options.listPageSize;
    this.clock = options.clock ?? systemClock;
    this.transfers = new ActiveTransfers(() => nowMs(this.clock));
    this.logger = options.logger;
    this.onDownload = options.onDownload;
    this.client =
      options.client ??
      createS3Client(
        { region: options.region, endpoint: options.endpoint },
        // Our retry loop is the one policy, so the total time stays bounded.
        { maxAttempts: 1, requestHandler: { connectionTimeout: DEFAULT_CONNECTION_TIMEOUT_MS } },
      );
    this.objects = new S3Objects(this.client, this.bucket, this.prefix, this.clock);
  }

  transferProgress(target: string): TransferSnapshot | undefined {
    return this.transfers.snapshot(target);
  }

  /** Body bytes received from S3 since this source was created (every attempt). */
  get bytesDownloaded(): number {
    return this.downloaded;
  }

  async localize(rawTarget: string, signal?: AbortSignal): Promise<LocalModel> {
    const target = normalizeTarget(rawTarget);
    return this.flights.run(target, target, signal, () => this.localizeObject(target).catch((err: unknown) => this.cachedWhileUnreachable(target, err)));
  }

  /**
   * S3 cannot be reached (retries spent): a copy of the target already in the disk cache is served, the
   * newest, with a warning; its version is checked again once S3 answers (revalidation). A denial, a
   * missing object or a bad archive are answers, not outages: they stand.
   */
  private async cachedWhileUnreachable(target: string, err: unknown): Promise<PinnedResult> {
    if (!(err instanceof ServingError) || err.code !== 'UPSTREAM_UNAVAILABLE') throw err;
    for (const uri of this.objects.candidateUris(target)) {
      const pin = await this.cache.lookupNewest(uri);
      if (pin === undefined) continue;
      this.logger?.warn(
        { model: target, uri, version: pin.entry.metadata.version, err: err.message },
        'S3 cannot be reached: serving the copy in the disk cache',
      );
      return { pin, version: pin.entry.metadata.version };
    }
    throw err;
  }

  async canonicalTarget(rawTarget: string, signal?: AbortSignal): Promise<string> {
    const target = normalizeTarget(rawTarget);
    if (isArchiveName(target)) return target;
    const info = await this.head(target, signal);
    if (info === undefined) throw notFound(target, archiveCandidates(target));
    return this.objects.nameOf(info.key);
  }

  async currentVersion(rawTarget: string, signal?: AbortSignal): Promise<string | undefined> {
    const target = normalizeTarget(rawTarget);
    const info = await this.head(target, signal);
    if (info === undefined) {
      // Deleted from the prefix: its cached copies go as soon as nothing uses them.
      for (const uri of this.objects.candidateUris(target)) await this.cache.retireOthers(uri, undefined);
    }
    return info?.etag;
  }

  /**
   * The object's current identity, or undefined when it does not exist. For
   * revalidation: a resident model whose `version` differs from `etag` is stale.
   */
  async head(rawTarget: string, signal?: AbortSignal): Promise<S3ObjectInfo | undefined> {
    const target = normalizeTarget(rawTarget);
    return withRetry(this.retryRun(target, `model '${target}'`, signal), (attempt) => this.objects.head(target, attempt, signal));
  }

  async list(): Promise<readonly SourceEntry[]> {
    await this.cache.open();
    const what = 'listing the model source';
    return listObjects(
      { bucket: this.bucket, prefix: this.prefix, pageSize: this.listPageSize },
      (command) => withRetry(this.retryRun(undefined, what), (attempt) => this.objects.listPage(command, attempt, what)),
      (key, etag) => etag !== undefined && this.cache.has(s3ObjectUri(this.bucket, key), etag),
    );
  }

  /**
   * One ListObjectsV2 of at most one key under the prefix, in one attempt: start-up's check that the
   * bucket and prefix answer (server.ts warns when not). Rejects with the ServingError a request would get.
   */
  async probe(signal: AbortSignal): Promise<void> {
    const action = `listing ${this.description}`;
    try {
      await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, ...(this.prefix === '' ? {} : { Prefix: this.prefix }), MaxKeys: 1 }), {
        abortSignal: signal,
      });
    } catch (err) {
      throw s3Failure(err, { action, bucket: this.bucket });
    }
  }

  private retryRun(model: string | undefined, what: string, signal?: AbortSignal): Parameters<typeof withRetry>[0] {
    return {
      clock: this.clock,
      policy: this.retry,
      what,
      model,
      signal,
      onRetry: ({ attempt, delayMs, error }) => this.logger?.warn({ model, attempt, delayMs, err: error.message }, `${what}: S3 request failed, retrying`),
    };
  }

  private async localizeObject(target: string): Promise<PinnedResult> {
    const startedAt = nowMs(this.clock);
    const tally: Tally = { bytes: 0, attempts: 0, info: undefined };
    await this.cache.open();
    const fetched = await withRetry(this.retryRun(target, `model '${target}'`), (attempt) => this.fetchOnce(target, attempt, tally));
    const info = tally.info;
    if (!info) {
      fetched.pin.release();
      throw new ServingError('INTERNAL', `model '${target}': no object information`, { model: target });
    }
    if (!fetched.reused) this.reportDownload(info, tally, fetched, nowMs(this.clock) - startedAt);
    // Older versions go as soon as no loaded model uses them (requests in flight finish on their files).
    await this.cache.retireOthers(info.uri, fetched.pin.entry.dir);
    return { pin: fetched.pin, version: info.etag };
  }

  /** One attempt: the object's identity, then the cached copy of it or a download into the cache. */
  private async fetchOnce(target: string, attempt: FetchAttempt, tally: Tally): Promise<Fetched> {
    tally.attempts = attempt.number;
    let response: Promise<GetObjectCommandOutput>;
    let staged: Promise<string> | undefined;
    if (this.objects.candidateUris(target).some((uri) => this.cache.hasAny(uri))) {
      // A copy is cached: HeadObject says whether it is still current, and a current one costs no GetObject.
      const head = await this.objects.head(target, attempt, undefined);
      if (!head) throw notFound(target, archiveCandidates(target));
      tally.info = head;
      const cached = await this.cache.lookup(head.uri, head.etag);
      if (cached) return { pin: cached, reused: true, files: 0 };
      // GetObject is sent now, so its round trip overlaps the cache's room-making and temporary directory
      // (about a millisecond of file-system calls); the body is read only once the directory is ready.
      response = this.objects.getMatching(head, attempt);
    } else {
      // Nothing of it cached: no HeadObject, the GetObject's own headers say what the object is (its ETag, its
      // size), one round trip less on every first load (4-5 ms of a ~20 ms cold request on loopback, more on S3).
      // The entry's temporary directory is made while the GetObject is in flight (it names nothing until the
      // headers are in): 1-2 ms of file-system calls off a tiny model's cold request.
      const pending = this.cache.stage();
      let got: Awaited<ReturnType<S3Objects['getFirst']>>;
      try {
        got = await this.objects.getFirst(target, attempt);
        if (!got) throw notFound(target, archiveCandidates(target));
      } catch (err) {
        await this.cache.discard(pending);
        throw err;
      }
      staged = pending;
      tally.info = got.info;
      response = Promise.resolve(got.response);
    }
    const found = tally.info;
    this.logger?.info(
      { model: target, uri: found.uri, etag: found.etag, bytes: found.sizeBytes, attempt: attempt.number },
      'downloading model archive from S3',
    );
    return this.publish(found, response, attempt, tally, staged);
  }

  /** Downloads and extracts the object into a new cache entry (or finds it published meanwhile). */
  private async publish(
    found: S3ObjectInfo,
    response: Promise<GetObjectCommandOutput>,
    attempt: FetchAttempt,
    tally: Tally,
    staged: Promise<string> | undefined,
  ): Promise<Fetched> {
    let filled = false;
    try {
      const result = await this.cache.publish({
        target: found.uri,
        model: found.target,
        version: found.etag,
        expectedBytes: found.sizeBytes,
        ...(staged === undefined ? {} : { staged }),
        fill: (contentDir, storageBytes) => {
          filled = true;
          return this.download(found, response, contentDir, attempt, storageBytes, tally);
        },
      });
      return { pin: result.pin, reused: result.reused, files: result.metadata.files };
    } finally {
      // The cache refused the entry before reading it (no room): the response's body is closed unread.
      if (!filled)
        void response.then(
          (r) => destroyBody(r.Body),
          () => undefined,
        );
    }
  }

  private reportDownload(info: S3ObjectInfo, tally: Tally, fetched: Fetched, durationMs: number): void {
    const { target, key, etag, uri } = info;
    const { bytes, attempts } = tally;
    this.logger?.info({ model: target, uri, etag, bytes, files: fetched.files, attempts, durationMs }, 'downloaded and extracted model archive');
    this.onDownload?.({ target, key, etag, bytes, durationMs, attempts, files: fetched.files, dir: fetched.pin.entry.contentDir });
  }

  /** The object's body (`pending`: its GetObject) streamed into `contentDir`. */
  private async download(
    info: S3ObjectInfo,
    pending: Promise<GetObjectCommandOutput>,
    contentDir: string,
    attempt: FetchAttempt,
    storageBytes: number,
    tally: Tally,
  ): Promise<ExtractResult> {
    const { target } = info;
    const object = `'${this.objects.nameOf(info.key)}'`;
    const response = await pending;
    const body: unknown = response.Body;
    if (!(body instanceof Readable)) {
      throw new ServingError('INTERNAL', `model '${target}': the S3 client returned no Node.js stream for ${object}`, { model: target });
    }
    const etag = unquoteEtag(response.ETag);
    if (etag !== undefined && etag !== info.etag) {
      body.destroy();
      throw markRetryable(new ServingError('UPSTREAM_UNAVAILABLE', `model '${target}': ${object} changed during the download`, { model: target }));
    }
    const progress = this.transfers.start(target, response.ContentLength);
    try {
      return await guardedTransfer({
        body,
        attempt,
        model: target,
        action: `downloading ${object}`,
        guard: {
          clock: this.clock,
          expectedBytes: response.ContentLength,
          idleMs: this.idleTimeoutMs,
          minProgress: this.minProgress,
          peer: 'S3',
          minProgressSetting: 'MME_S3_MIN_BYTES_PER_SECOND',
          onBytes: (bytes) => {
            this.downloaded += bytes;
            progress.add(bytes);
            tally.bytes += bytes;
          },
        },
        consume: (stream) => extractArchive(stream, contentDir, { ...this.limits, storageBytes }),
      });
    } finally {
      this.transfers.end(target, progress);
    }
  }
}
