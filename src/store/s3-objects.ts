/**
 * @module store/s3-objects
 * The S3 calls a source makes for one target: HeadObject and GetObject on
 * each of its candidate keys (`x` → `x.tar.gz`, `x.tgz`) until one exists,
 * GetObject pinned to an ETag, and one ListObjectsV2 page; each bounded by its
 * attempt's deadline (store/remote-fetch.ts) and its failures classified by
 * store/s3-errors.ts. What the answers mean for the cache is s3-source's.
 */
import {
  GetObjectCommand,
  HeadObjectCommand,
  type GetObjectCommandOutput,
  type ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  type S3Client,
} from '@aws-sdk/client-s3';
import type { Clock } from '../clock.js';
import { ServingError } from '../errors.js';
import { s3ObjectUri } from '../config/s3-uri.js';
import { archiveCandidates } from './target-path.js';
import { s3Failure } from './s3-errors.js';
import { unquoteEtag } from './s3-listing.js';
import { callWithDeadline, destroyBody, listenEarly, type FetchAttempt } from './remote-fetch.js';

/** Even the last attempt gets this long to be answered. */
const MIN_REQUEST_MS = 250;

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

type ObjectHeaders = { ETag?: string | undefined; ContentLength?: number | undefined; LastModified?: Date | undefined };

export class S3Objects {
  constructor(
    private readonly client: S3Client,
    readonly bucket: string,
    readonly prefix: string,
    private readonly clock: Clock,
  ) {}

  candidateKeys(target: string): string[] {
    return archiveCandidates(target).map((name) => this.prefix + name);
  }

  candidateUris(target: string): string[] {
    return this.candidateKeys(target).map((key) => s3ObjectUri(this.bucket, key));
  }

  /** The object's name as clients read it: relative to the prefix. */
  nameOf(key: string): string {
    return key.slice(this.prefix.length);
  }

  /** HeadObject on each candidate key; undefined when none exists. */
  async head(target: string, attempt: FetchAttempt, signal: AbortSignal | undefined): Promise<S3ObjectInfo | undefined> {
    const found = await this.firstCandidate(target, attempt, signal, 'reading', (key, abortSignal) =>
      this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }), { abortSignal }),
    );
    return found?.info;
  }

  /**
   * GetObject on each candidate key until one exists: its headers and what
   * they say of the object (the body is left unread, heard for errors);
   * undefined when none exists.
   */
  getFirst(target: string, attempt: FetchAttempt): Promise<{ info: S3ObjectInfo; response: GetObjectCommandOutput } | undefined> {
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

  /** GetObject for exactly the ETag we cache it under: its headers (the body is left unread, heard for errors). */
  getMatching(info: S3ObjectInfo, attempt: FetchAttempt): Promise<GetObjectCommandOutput> {
    const { target, key } = info;
    const name = this.nameOf(key);
    const response = callWithDeadline({
      ...this.deadline(attempt, undefined),
      call: (abortSignal) => this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key, IfMatch: `"${info.etag}"` }), { abortSignal }),
      failure: (err) => s3Failure(err, { target, action: `downloading '${name}'`, name, bucket: this.bucket }),
    });
    // Awaited later (or closed unread): never an unhandled rejection meanwhile, nor an unheard body error.
    response.then(
      (r) => listenEarly(r.Body),
      () => undefined,
    );
    return response;
  }

  /** One ListObjectsV2 page. */
  listPage(command: ListObjectsV2Command, attempt: FetchAttempt, action: string): Promise<ListObjectsV2CommandOutput> {
    return callWithDeadline({
      ...this.deadline(attempt, undefined),
      call: (abortSignal) => this.client.send(command, { abortSignal }),
      failure: (err) => s3Failure(err, { action, bucket: this.bucket }),
    });
  }

  private deadline(attempt: FetchAttempt, signal: AbortSignal | undefined) {
    return { clock: this.clock, attempt, signal, minMs: MIN_REQUEST_MS, peer: 'S3' };
  }

  /**
   * `send` on each candidate key until one exists (a missing key is the next
   * candidate's turn): the response and the object it describes; undefined
   * when none exists. `discard` frees a response without an ETag.
   */
  private async firstCandidate<R extends ObjectHeaders>(
    target: string,
    attempt: FetchAttempt,
    signal: AbortSignal | undefined,
    action: 'reading' | 'downloading',
    send: (key: string, abortSignal: AbortSignal) => Promise<R>,
    discard: (response: R) => void = () => undefined,
  ): Promise<{ info: S3ObjectInfo; response: R } | undefined> {
    for (const key of this.candidateKeys(target)) {
      const name = this.nameOf(key);
      let response: R;
      try {
        response = await callWithDeadline({
          ...this.deadline(attempt, signal),
          call: (abortSignal) => send(key, abortSignal),
          failure: (err) => s3Failure(err, { target, action: `${action} '${name}'`, name, bucket: this.bucket }),
        });
      } catch (err) {
        if (err instanceof ServingError && err.code === 'MODEL_NOT_FOUND') continue;
        throw err;
      }
      const etag = unquoteEtag(response.ETag);
      if (etag === undefined) {
        discard(response);
        throw new ServingError('UPSTREAM_UNAVAILABLE', `model '${target}': the object '${name}' has no ETag`, { model: target });
      }
      const uri = s3ObjectUri(this.bucket, key);
      return { info: { target, key, uri, etag, version: etag, sizeBytes: response.ContentLength, lastModified: response.LastModified }, response };
    }
    return undefined;
  }
}
