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
 * bucket and prefix are the server's own; log lines carry the s3:// URI); 401/403 is ACCESS_DENIED; unreachable, 5xx, throttling, request timeouts
 * and a connection cut (or stalled) mid-stream are retried with exponential
 * backoff, at most `retry.attempts` attempts and at most `retry.maxTotalMs`
 * without progress, then UPSTREAM_UNAVAILABLE with the cause; corrupt or hostile
 * archives are ARCHIVE_REJECTED; a full disk is INSUFFICIENT_STORAGE. Whatever
 * fails, no half-written entry is left in the cache.
 *
 * Revalidation: `head(target)` returns the object's current ETag; a resident
 * model whose `LocalModel.version` differs is stale, and `localize` (which
 * always asks S3 for the current ETag) fetches the new version.
 *
 * No environment reads here: the composition root passes `region`/`endpoint`
 * (the SDK's default credential chain still applies to the default client).
 */

import { Readable, Transform, type TransformCallback } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  S3Client,
  type GetObjectCommandOutput,
  type ListObjectsV2CommandOutput,
} from '@aws-sdk/client-s3';
import type { Logger } from 'pino';
import { ServingError } from '../errors.js';
import { DiskCache } from './disk-cache.js';
import { createS3Client } from './s3-client.js';
import { PinnedFlights, type PinnedResult } from './pinned-flights.js';
import { extractArchive } from './extract-archive.js';
import type { ExtractLimits } from './extract-limits.js';
import { targetNotFound, type LocalModel, type ModelSource, type SourceEntry } from './model-source.js';
import { parseS3Uri, s3ObjectUri } from '../config/s3-uri.js';
import { archiveCandidates, isArchiveName, normalizeTarget } from './target-path.js';
import { cancelled } from './abort.js';
import { errorCode, messageOf } from './node-error.js';
import { TransferProgress, type TransferSnapshot } from './transfer-progress.js';

export interface S3RetryOptions {
  /** Most attempts per operation (1 = no retry). */
  readonly attempts: number;
  /** First backoff delay; doubled each retry (with jitter). */
  readonly baseDelayMs: number;
  /**
   * Longest time spent failing: no retry starts, and no request waits for an
   * answer, past this many ms after the first attempt (or after the last
   * attempt that received data, so a long healthy download is never cut short).
   */
  readonly maxTotalMs: number;
}

export const DEFAULT_S3_RETRY: S3RetryOptions = Object.freeze({ attempts: 3, baseDelayMs: 200, maxTotalMs: 10_000 });
/** A body that sends nothing for this long is treated as a cut connection (and retried). */
export const DEFAULT_S3_IDLE_TIMEOUT_MS = 60_000;

/**
 * The least a download must deliver: `bytesPerSecond` averaged over every
 * `windowMs` window. An idle timeout alone cannot catch a trickle (any byte
 * resets it): a body at 4 B/s would keep a request and shutdown waiting for
 * ever. 0 bytes per second disables the check.
 */
export interface S3MinimumProgress {
  readonly bytesPerSecond: number;
  readonly windowMs: number;
}

/** 16 KiB/s over 20 s: far below any working link to S3, far above a stuck one. */
export const DEFAULT_S3_MIN_PROGRESS: S3MinimumProgress = Object.freeze({ bytesPerSecond: 16 * 1024, windowMs: 20_000 });
/** Connection timeout of the default client (the request phase is also bounded by retry.maxTotalMs). */
const DEFAULT_CONNECTION_TIMEOUT_MS = 5_000;
/** Even the last attempt gets this long to be answered. */
const MIN_REQUEST_MS = 250;

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

export interface S3ObjectInfo {
  readonly target: string;
  readonly key: string;
  readonly uri: string;
  /** The ETag without quotes. */
  readonly etag: string;
  /** Same as `etag`: what `LocalModel.version` of a copy of this object holds (compare the two to revalidate). */
  readonly version: string;
  readonly sizeBytes: number | undefined;
  readonly lastModified: Date | undefined;
}

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
  readonly logger?: Logger;
  readonly onDownload?: (event: S3DownloadEvent) => void;
}

interface Attempt {
  readonly number: number;
  /** performance.now() after which a request is no longer waited for. */
  readonly deadline: number;
  /** Set when the attempt received body bytes: the next retry gets a fresh time budget. */
  progressed: boolean;
}

/** ServingErrors worth another attempt (network, 5xx, throttling, a cut stream). */
const retryable = new WeakSet<ServingError>();

export class S3ModelSource implements ModelSource {
  readonly description: string;
  /** The bucket and prefix are the server's own: clients read "the model source". */
  readonly publicDescription = 'the model source';
  readonly bucket: string;
  readonly prefix: string;
  private readonly client: S3Client;
  readonly cache: DiskCache;
  private readonly limits: ExtractLimits;
  private readonly retry: S3RetryOptions;
  private readonly idleTimeoutMs: number;
  private readonly minProgress: S3MinimumProgress;
  private readonly listPageSize: number | undefined;
  private readonly logger: Logger | undefined;
  private readonly onDownload: ((event: S3DownloadEvent) => void) | undefined;
  /** In-flight localizations keyed by normalised target. */
  private readonly flights: PinnedFlights;
  private downloaded = 0;
  /** The download running per target (the localization's current attempt). */
  private readonly transfers = new Map<string, TransferProgress>();

  constructor(options: S3ModelSourceOptions) {
    const location = parseS3Uri(options.uri);
    this.bucket = location.bucket;
    this.prefix = location.prefix;
    this.description = location.uri;
    this.cache = options.cache ?? new DiskCache({ dir: options.cacheDir, logger: options.logger });
    this.flights = new PinnedFlights(this.cache);
    this.limits = options.limits;
    this.retry = resolveRetry(options.retry);
    this.idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_S3_IDLE_TIMEOUT_MS;
    this.minProgress = options.minProgress ?? DEFAULT_S3_MIN_PROGRESS;
    if (!(this.minProgress.bytesPerSecond >= 0) || !(this.minProgress.windowMs > 0)) {
      throw new RangeError('minProgress.bytesPerSecond must be >= 0 and minProgress.windowMs > 0');
    }
    if (options.listPageSize !== undefined && !(Number.isInteger(options.listPageSize) && options.listPageSize >= 1)) {
      throw new RangeError(`listPageSize must be a positive integer, got ${options.listPageSize}`);
    }
    this.listPageSize = options.listPageSize;
    this.logger = options.logger;
    this.onDownload = options.onDownload;
    this.client =
      options.client ??
      createS3Client(
        { region: options.region, endpoint: options.endpoint },
        // Our retry loop is the one policy, so the total time stays bounded.
        { maxAttempts: 1, requestHandler: { connectionTimeout: DEFAULT_CONNECTION_TIMEOUT_MS } },
      );
  }

  transferProgress(target: string): TransferSnapshot | undefined {
    return this.transfers.get(target)?.snapshot();
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
    for (const uri of this.candidateUris(target)) {
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
    return info.key.slice(this.prefix.length);
  }

  async currentVersion(rawTarget: string, signal?: AbortSignal): Promise<string | undefined> {
    const target = normalizeTarget(rawTarget);
    const info = await this.head(target, signal);
    if (info === undefined) {
      // Deleted from the prefix: its cached copies go as soon as nothing uses them.
      for (const uri of this.candidateUris(target)) await this.cache.retireOthers(uri, undefined);
    }
    return info?.etag;
  }

  /**
   * The object's current identity, or undefined when it does not exist. For
   * revalidation: a resident model whose `version` differs from `etag` is stale.
   */
  async head(rawTarget: string, signal?: AbortSignal): Promise<S3ObjectInfo | undefined> {
    const target = normalizeTarget(rawTarget);
    return this.withRetry(target, this.describeTarget(target), (attempt) => this.headTarget(target, attempt, signal), signal);
  }

  async list(): Promise<readonly SourceEntry[]> {
    await this.cache.open();
    const found: SourceEntry[] = [];
    let token: string | undefined;
    const what = 'listing the model source';
    do {
      const continuation = token;
      const page = await this.withRetry(undefined, what, (attempt) =>
        this.request(
          attempt,
          undefined,
          (abortSignal) =>
            this.client.send(
              new ListObjectsV2Command({
                Bucket: this.bucket,
                ...(this.prefix === '' ? {} : { Prefix: this.prefix }),
                ...(continuation === undefined ? {} : { ContinuationToken: continuation }),
                ...(this.listPageSize === undefined ? {} : { MaxKeys: this.listPageSize }),
              }),
              { abortSignal },
            ),
          (err) => s3Failure(err, { action: what, bucket: this.bucket }),
        ),
      );
      collect(page, this.prefix, found, (key, etag) => etag !== undefined && this.cache.has(s3ObjectUri(this.bucket, key), etag));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token !== undefined && token !== '');
    return found.sort((a, b) => (a.target < b.target ? -1 : a.target > b.target ? 1 : 0));
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

  private describeTarget(target: string): string {
    return `model '${target}'`;
  }

  private async localizeObject(target: string): Promise<PinnedResult> {
    const startedAt = performance.now();
    let received = 0;
    let attempts = 0;
    let info: S3ObjectInfo | undefined;
    await this.cache.open();
    const published = await this.withRetry(target, this.describeTarget(target), async (attempt) => {
      attempts = attempt.number;
      let found: S3ObjectInfo;
      let response: Promise<GetObjectCommandOutput>;
      if (this.candidateUris(target).some((uri) => this.cache.hasAny(uri))) {
        // A copy is cached: HeadObject says whether it is still current, and a current one costs no GetObject.
        const head = await this.headTarget(target, attempt, undefined);
        if (!head) throw notFound(target, archiveCandidates(target));
        found = head;
        info = found;
        const cached = await this.cache.lookup(found.uri, found.etag);
        if (cached) return { pin: cached, reused: true, files: 0 };
        // GetObject is sent now, so its round trip overlaps the cache's room-making and temporary directory
        // (about a millisecond of file-system calls); the body is read only once the directory is ready.
        response = this.getObject(found, attempt);
      } else {
        // Nothing of it cached: no HeadObject, the GetObject's own headers say what the object is (its ETag, its
        // size), one round trip less on every first load (4-5 ms of a ~20 ms cold request on loopback, more on S3).
        const got = await this.getTarget(target, attempt);
        if (!got) throw notFound(target, archiveCandidates(target));
        found = got.info;
        info = found;
        response = Promise.resolve(got.response);
      }
      this.logger?.info(
        { model: target, uri: found.uri, etag: found.etag, bytes: found.sizeBytes, attempt: attempt.number },
        'downloading model archive from S3',
      );
      const cacheId = found.uri;
      let filled = false;
      try {
        const result = await this.cache.publish({
          target: cacheId,
          model: target,
          version: found.etag,
          expectedBytes: found.sizeBytes,
          fill: (contentDir, storageBytes) => {
            filled = true;
            return this.download(found, response, contentDir, attempt, storageBytes, (bytes) => {
              received += bytes;
            });
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
    });
    if (!info) {
      published.pin.release();
      throw new ServingError('INTERNAL', `model '${target}': no object information`, { model: target });
    }
    const { key, etag, uri } = info;
    if (!published.reused) {
      const durationMs = performance.now() - startedAt;
      this.logger?.info({ model: target, uri, etag, bytes: received, files: published.files, attempts, durationMs }, 'downloaded and extracted model archive');
      this.onDownload?.({
        target,
        key,
        etag,
        bytes: received,
        durationMs,
        attempts,
        files: published.files,
        dir: published.pin.entry.contentDir,
      });
    }
    // Older versions go as soon as no loaded model uses them (requests in flight finish on their files).
    await this.cache.retireOthers(uri, published.pin.entry.dir);
    return { pin: published.pin, version: etag };
  }

  private candidateKeys(target: string): string[] {
    const names = archiveCandidates(target);
    return names.map((name) => this.prefix + name);
  }

  private candidateUris(target: string): string[] {
    return this.candidateKeys(target).map((key) => s3ObjectUri(this.bucket, key));
  }

  /** HeadObject on each candidate key; undefined when none exists. */
  private async headTarget(target: string, attempt: Attempt, signal: AbortSignal | undefined): Promise<S3ObjectInfo | undefined> {
    const found = await this.firstCandidate(target, attempt, signal, 'reading', (key, abortSignal) =>
      this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }), { abortSignal }),
    );
    return found?.info;
  }

  /**
   * GetObject on each candidate key until one exists: its headers and what
   * they say of the object (the body is read by download); undefined when
   * none exists.
   */
  private getTarget(target: string, attempt: Attempt): Promise<{ info: S3ObjectInfo; response: GetObjectCommandOutput } | undefined> {
    return this.firstCandidate(
      target,
      attempt,
      undefined,
      'downloading',
      async (key, abortSignal) => {
        const response = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }), { abortSignal });
        listenEarly(response.Body);
        return response;
      },
      (response) => destroyBody(response.Body),
    );
  }

  /**
   * `send` on each candidate key until one exists (a missing key is the next
   * candidate's turn): the response and the object it describes; undefined
   * when none exists. `discard` frees a response without an ETag.
   */
  private async firstCandidate<R extends { ETag?: string | undefined; ContentLength?: number | undefined; LastModified?: Date | undefined }>(
    target: string,
    attempt: Attempt,
    signal: AbortSignal | undefined,
    action: 'reading' | 'downloading',
    send: (key: string, abortSignal: AbortSignal) => Promise<R>,
    discard: (response: R) => void = () => undefined,
  ): Promise<{ info: S3ObjectInfo; response: R } | undefined> {
    for (const key of this.candidateKeys(target)) {
      const uri = s3ObjectUri(this.bucket, key);
      const name = key.slice(this.prefix.length);
      let response: R;
      try {
        response = await this.request(
          attempt,
          signal,
          (abortSignal) => send(key, abortSignal),
          (err) => s3Failure(err, { target, action: `${action} '${name}'`, name, bucket: this.bucket }),
        );
      } catch (err) {
        if (err instanceof ServingError && err.code === 'MODEL_NOT_FOUND') continue;
        throw err;
      }
      const etag = unquoteEtag(response.ETag);
      if (etag === undefined) {
        discard(response);
        throw new ServingError('UPSTREAM_UNAVAILABLE', `model '${target}': the object '${name}' has no ETag`, { model: target });
      }
      return { info: { target, key, uri, etag, version: etag, sizeBytes: response.ContentLength, lastModified: response.LastModified }, response };
    }
    return undefined;
  }

  /** GetObject for exactly the ETag we cache it under: its headers (the body is read by download). */
  private getObject(info: S3ObjectInfo, attempt: Attempt): Promise<GetObjectCommandOutput> {
    const { target, key } = info;
    const name = key.slice(this.prefix.length);
    const context = { target, action: `downloading '${name}'`, name, bucket: this.bucket };
    const response = this.request(
      attempt,
      undefined,
      (abortSignal) =>
        this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key, IfMatch: `"${info.etag}"` }), {
          abortSignal,
        }),
      (err) => s3Failure(err, context),
    );
    // Awaited by download (or closed unread): never an unhandled rejection meanwhile, nor an unheard body error.
    response.then(
      (r) => listenEarly(r.Body),
      () => undefined,
    );
    return response;
  }

  /** The object's body (`pending`: its GetObject) streamed into `contentDir`. */
  private async download(
    info: S3ObjectInfo,
    pending: Promise<GetObjectCommandOutput>,
    contentDir: string,
    attempt: Attempt,
    storageBytes: number,
    onBytes: (bytes: number) => void,
  ): Promise<{ bytes: number; files: number }> {
    const { target } = info;
    const object = `'${info.key.slice(this.prefix.length)}'`;
    const response = await pending;
    const body: unknown = response.Body;
    if (!(body instanceof Readable)) {
      throw new ServingError('INTERNAL', `model '${target}': the S3 client returned no Node.js stream for ${object}`, {
        model: target,
      });
    }
    const etag = unquoteEtag(response.ETag);
    if (etag !== undefined && etag !== info.etag) {
      body.destroy();
      throw markRetryable(
        new ServingError('UPSTREAM_UNAVAILABLE', `model '${target}': ${object} changed during the download`, {
          model: target,
        }),
      );
    }
    if (body.destroyed) {
      // The connection closed while the body waited to be read (the cache was preparing its directory): a stream
      // destroyed before anyone listened says so only here, piping it would wait for the idle timeout.
      const cause = body.errored ?? undefined;
      throw markRetryable(
        new ServingError(
          'UPSTREAM_UNAVAILABLE',
          `model '${target}': downloading ${object} failed: the connection closed before the body was read${cause ? ` (${messageOf(cause)})` : ''}`,
          { model: target, ...(cause ? { cause } : {}) },
        ),
      );
    }
    const progress = new TransferProgress(response.ContentLength);
    this.transfers.set(target, progress);
    const meter = new DownloadMeter(response.ContentLength, this.idleTimeoutMs, this.minProgress, (bytes) => {
      attempt.progressed = true;
      this.downloaded += bytes;
      progress.add(bytes);
      onBytes(bytes);
    });
    // A cut before the extraction has attached to `meter` (it opens its files first) would otherwise leave the error
    // unheard once `pipe` lets go of it: an uncaught exception. The extraction still sees it (meter.failure, a destroyed stream).
    meter.on('error', () => undefined);
    // A trickle is not progress: the retry budget must not restart because a few bytes came.
    meter.once('slow', () => {
      attempt.progressed = false;
    });
    // Not stream.pipeline: an error the extraction destroys `meter` with must
    // not look like an upstream failure. Body errors (a cut connection) do.
    body.on('error', (err: Error) => meter.fail(err));
    meter.on('close', () => {
      if (!body.readableEnded && !body.destroyed) body.destroy();
    });
    body.pipe(meter);
    try {
      return await extractArchive(meter, contentDir, { ...this.limits, storageBytes });
    } catch (err) {
      if (err instanceof ServingError && err.code === 'UPSTREAM_UNAVAILABLE') {
        throw markRetryable(prefixed(err, target, `downloading ${object} failed: `));
      }
      if (meter.failure && !(err instanceof ServingError && err.code !== 'INTERNAL')) {
        // The stream broke first; whatever the extraction said is a consequence.
        throw markRetryable(
          new ServingError('UPSTREAM_UNAVAILABLE', `model '${target}': downloading ${object} failed: ${messageOf(meter.failure)}`, {
            model: target,
            cause: meter.failure,
          }),
        );
      }
      throw err instanceof ServingError ? prefixed(err, target, '') : err;
    } finally {
      if (this.transfers.get(target) === progress) this.transfers.delete(target);
      if (!meter.destroyed) meter.destroy();
      if (!body.readableEnded && !body.destroyed) body.destroy();
    }
  }

  /**
   * One S3 call, answered before the attempt's deadline (the call is aborted
   * then; a streamed body is not: only the headers are waited for here).
   */
  private async request<T>(
    attempt: Attempt,
    signal: AbortSignal | undefined,
    call: (abortSignal: AbortSignal) => Promise<T>,
    failure: (err: unknown) => ServingError,
  ): Promise<T> {
    const controller = new AbortController();
    const budget = Math.max(attempt.deadline - performance.now(), MIN_REQUEST_MS);
    const timer = setTimeout(() => controller.abort(), budget);
    const onAbort = (): void => controller.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      return await call(controller.signal);
    } catch (err) {
      if (signal?.aborted) throw cancelled(undefined, signal);
      if (controller.signal.aborted) {
        const timeout = new Error(`S3 did not answer within ${Math.round(budget)} ms`);
        timeout.name = 'TimeoutError';
        throw failure(timeout);
      }
      throw failure(err);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /**
   * Runs `op` until it succeeds, fails for good, or the retry budget is spent.
   * `op` throws ServingErrors; those in `retryable` are tried again.
   */
  private async withRetry<T>(model: string | undefined, what: string, op: (attempt: Attempt) => Promise<T>, signal?: AbortSignal): Promise<T> {
    const { attempts, baseDelayMs, maxTotalMs } = this.retry;
    const firstStart = performance.now();
    let windowStart = firstStart;
    for (let number = 1; ; number++) {
      if (signal?.aborted) throw cancelled(model, signal);
      const attempt: Attempt = { number, deadline: windowStart + maxTotalMs, progressed: false };
      let failure: ServingError;
      try {
        return await op(attempt);
      } catch (err) {
        if (!(err instanceof ServingError)) {
          throw new ServingError('INTERNAL', `${what}: ${messageOf(err)}`, { cause: err, ...(model ? { model } : {}) });
        }
        if (!retryable.has(err)) throw err;
        failure = err;
      }
      if (attempt.progressed) windowStart = performance.now();
      const delay = backoffDelay(baseDelayMs, number);
      const spent = performance.now() - windowStart;
      if (number >= attempts || spent + delay >= maxTotalMs) {
        const elapsed = Math.round(performance.now() - firstStart);
        throw new ServingError('UPSTREAM_UNAVAILABLE', `${failure.message} (gave up after ${number} attempt${number === 1 ? '' : 's'} in ${elapsed} ms)`, {
          cause: failure,
          ...(model ? { model } : {}),
          details: { attempts: number, elapsedMs: elapsed },
        });
      }
      this.logger?.warn({ model, attempt: number, delayMs: Math.round(delay), err: failure.message }, `${what}: S3 request failed, retrying`);
      try {
        await sleep(delay, undefined, signal ? { signal } : undefined);
      } catch {
        throw cancelled(model, signal);
      }
    }
  }
}

/**
 * Counts body bytes, detects a body shorter than Content-Length (a connection
 * closed early) and a body that stops sending, and fails the stream for both.
 */
class DownloadMeter extends Transform {
  bytes = 0;
  failure: Error | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Checks the minimum progress once per window; undefined when the check is off. */
  private readonly progressTimer: NodeJS.Timeout | undefined;
  private bytesAtWindowStart = 0;

  constructor(
    private readonly expected: number | undefined,
    private readonly idleMs: number,
    minProgress: S3MinimumProgress,
    private readonly onBytes: (bytes: number) => void,
  ) {
    super();
    this.arm();
    if (minProgress.bytesPerSecond > 0) {
      const needed = (minProgress.bytesPerSecond * minProgress.windowMs) / 1000;
      this.progressTimer = setInterval(() => {
        const got = this.bytes - this.bytesAtWindowStart;
        this.bytesAtWindowStart = this.bytes;
        if (got >= needed) return;
        this.emit('slow');
        const rate = Math.round((got * 1000) / minProgress.windowMs);
        this.fail(
          Object.assign(
            new Error(
              `the download delivered ${got} bytes in ${minProgress.windowMs} ms (${rate} B/s), below the minimum of ${minProgress.bytesPerSecond} B/s (MME_S3_MIN_BYTES_PER_SECOND)`,
            ),
            { code: 'ETIMEDOUT' },
          ),
        );
      }, minProgress.windowMs);
      this.progressTimer.unref();
    }
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.bytes += chunk.length;
    this.onBytes(chunk.length);
    this.arm();
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    this.disarm();
    if (this.progressTimer !== undefined) clearInterval(this.progressTimer);
    if (this.expected !== undefined && this.bytes !== this.expected) {
      const err = Object.assign(new Error(`the connection closed after ${this.bytes} of ${this.expected} bytes`), { code: 'ECONNRESET' });
      this.failure ??= err;
      callback(err);
      return;
    }
    callback();
  }

  /** The download failed upstream (cut, stalled, truncated): fail the stream with it. */
  fail(err: Error): void {
    this.failure ??= err;
    this.destroy(err);
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    this.disarm();
    if (this.progressTimer !== undefined) clearInterval(this.progressTimer);
    callback(err);
  }

  private arm(): void {
    this.disarm();
    if (this.idleMs <= 0) return;
    this.timer = setTimeout(() => {
      this.fail(Object.assign(new Error(`no data received from S3 for ${this.idleMs} ms`), { code: 'ETIMEDOUT' }));
    }, this.idleMs);
    this.timer.unref();
  }

  private disarm(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

// ---------------------------------------------------------------------------
// Error classification

const NOT_FOUND_NAMES = new Set(['NoSuchKey', 'NotFound']);
const DENIED_NAMES = new Set([
  'AccessDenied',
  'Forbidden',
  'InvalidAccessKeyId',
  'SignatureDoesNotMatch',
  'ExpiredToken',
  'InvalidToken',
  'TokenRefreshRequired',
  'AllAccessDisabled',
  'AccountProblem',
]);
const RETRYABLE_NAMES = new Set([
  'SlowDown',
  'Throttling',
  'ThrottlingException',
  'ThrottledException',
  'RequestThrottled',
  'RequestThrottledException',
  'TooManyRequestsException',
  'RequestLimitExceeded',
  'BandwidthLimitExceeded',
  'RequestTimeout',
  'RequestTimeoutException',
  'InternalError',
  'ServiceUnavailable',
  'PreconditionFailed', // the object was replaced between HeadObject and GetObject
  'TimeoutError',
]);
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ERR_STREAM_PREMATURE_CLOSE',
]);

interface FailureContext {
  readonly target?: string;
  /** e.g. `downloading 'team/a.tar.gz'` */
  readonly action: string;
  /** The object's name relative to the prefix. */
  readonly name?: string;
  readonly bucket: string;
}

/** Maps an SDK or network error to a ServingError; transient ones are marked retryable. */
function s3Failure(err: unknown, context: FailureContext): ServingError {
  if (err instanceof ServingError) return err;
  const { target, action, name: objectName, bucket } = context;
  const status = httpStatusOf(err);
  const name = err instanceof Error ? err.name : 'Error';
  const about = target === undefined ? '' : `model '${target}': `;
  const options = { cause: err, ...(target === undefined ? {} : { model: target }) };
  const cause = describe(err, status);

  if (name === 'NoSuchBucket') {
    return new ServingError('UPSTREAM_UNAVAILABLE', `${about}${action} failed: the bucket '${bucket}' does not exist`, options);
  }
  if (NOT_FOUND_NAMES.has(name) || status === 404) {
    if (target === undefined) return new ServingError('UPSTREAM_UNAVAILABLE', `${action} failed: ${cause}`, options);
    return targetNotFound(target, 'S3 prefix', { tried: [objectName ?? target], cause: err, details: { uris: [objectName ?? target] } });
  }
  if (DENIED_NAMES.has(name) || status === 401 || status === 403) {
    return new ServingError('ACCESS_DENIED', `${about}access denied ${action}: ${cause}`, options);
  }
  const transient =
    (status !== undefined && (status >= 500 || status === 429 || status === 412 || status === 408)) ||
    RETRYABLE_NAMES.has(name) ||
    (status === undefined && (NETWORK_CODES.has(errorCode(err) ?? '') || isMarkedRetryable(err)));
  const failure = new ServingError('UPSTREAM_UNAVAILABLE', `${about}${action} failed: ${cause}`, options);
  return transient ? markRetryable(failure) : failure;
}

function markRetryable(err: ServingError): ServingError {
  retryable.add(err);
  return err;
}

function isMarkedRetryable(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { $retryable?: unknown }).$retryable !== undefined;
}

function httpStatusOf(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const status = (err as { $metadata?: { httpStatusCode?: unknown } }).$metadata?.httpStatusCode;
  return typeof status === 'number' ? status : undefined;
}

/** SDK errors for bodiless responses (HEAD) say only "UnknownError": show name and status too. */
function describe(err: unknown, status: number | undefined): string {
  if (status !== undefined && ['UnknownError', 'Unknown', ''].includes(messageOf(err))) {
    const name = err instanceof Error && !['Unknown', 'UnknownError', 'Error'].includes(err.name) ? ` ${err.name}` : '';
    return `HTTP ${status}${name}`;
  }
  const message = messageOf(err);
  const name = err instanceof Error ? err.name : '';
  const code = errorCode(err);
  const parts = [name && name !== 'Error' && !message.includes(name) ? `${name}: ${message}` : message];
  if (status !== undefined) parts.push(`(HTTP ${status})`);
  else if (code !== undefined && !message.includes(code)) parts.push(`(${code})`);
  return parts.join(' ');
}

/** `tried`: the object names looked up, relative to the prefix (the bucket and prefix are the server's own); `details.uris` keeps its name. */
function notFound(target: string, tried: readonly string[]): ServingError {
  return targetNotFound(target, 'S3 prefix', { tried, details: { uris: tried } });
}

/** Extraction errors do not know the target: prefix it so logs and clients see which model failed. */
function prefixed(err: ServingError, target: string, context: string): ServingError {
  if (err.message.startsWith(`model '${target}'`)) return err;
  return new ServingError(err.code, `model '${target}': ${context}${err.message}`, {
    model: target,
    cause: err,
    ...(err.details === undefined ? {} : { details: err.details }),
  });
}

// ---------------------------------------------------------------------------
// Helpers

function resolveRetry(partial: Partial<S3RetryOptions> | undefined): S3RetryOptions {
  const retry = { ...DEFAULT_S3_RETRY, ...partial };
  if (!Number.isInteger(retry.attempts) || retry.attempts < 1) {
    throw new RangeError(`retry.attempts must be a positive integer, got ${retry.attempts}`);
  }
  if (!(retry.baseDelayMs >= 0) || !(retry.maxTotalMs > 0)) {
    throw new RangeError('retry.baseDelayMs must be >= 0 and retry.maxTotalMs > 0');
  }
  return Object.freeze(retry);
}

/** Exponential backoff with jitter: base·2^(n-1) scaled by [0.5, 1). */
function backoffDelay(baseDelayMs: number, attempt: number): number {
  return baseDelayMs * 2 ** (attempt - 1) * (0.5 + Math.random() / 2);
}

function unquoteEtag(etag: string | undefined): string | undefined {
  if (etag === undefined) return undefined;
  const trimmed = etag.trim().replace(/^W\//, '');
  const bare = trimmed.startsWith('"') && trimmed.endsWith('"') && trimmed.length >= 2 ? trimmed.slice(1, -1) : trimmed;
  return bare === '' ? undefined : bare;
}

function collect(page: ListObjectsV2CommandOutput, prefix: string, out: SourceEntry[], isCached: (key: string, etag: string | undefined) => boolean): void {
  for (const object of page.Contents ?? []) {
    const key = object.Key;
    if (key === undefined || !key.startsWith(prefix)) continue;
    const rel = key.slice(prefix.length);
    if (!isArchiveName(rel) || !isValidTarget(rel)) continue;
    const cached = isCached(key, unquoteEtag(object.ETag));
    out.push({ target: rel, sizeBytes: object.Size, lastModified: object.LastModified, cached });
  }
}

function isValidTarget(rel: string): boolean {
  try {
    return normalizeTarget(rel) === rel;
  } catch {
    return false;
  }
}

/**
 * A body waits unread while the cache prepares its directory; a connection
 * cut then errors it with no listener yet, which would be an uncaught
 * exception. Heard here; download sees it as `destroyed` and `errored`.
 */
function listenEarly(body: unknown): void {
  if (body instanceof Readable) body.on('error', () => undefined);
}

/** Close a response body that will not be read (its connection goes back to the pool or is dropped). */
function destroyBody(body: unknown): void {
  if (body instanceof Readable && !body.destroyed) body.destroy();
}
