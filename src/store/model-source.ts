/**
 * @module store/model-source
 * The narrow interface between "where model packages live" (a local directory,
 * S3) and the registry that loads them. A source turns a target (the relative
 * path a client names in X-Amzn-SageMaker-Target-Model, e.g. `team/b.tar.gz`)
 * into a local directory holding the extracted Triton-layout repository.
 * Only `store/` touches archives, the disk cache and remote stores.
 */
import type { TransferSnapshot } from './transfer-progress.js';
import { ServingError } from '../errors.js';

/** How a client lists the models a source holds; a missing model's 404 points there rather than listing them (they may be other tenants'). */
export const LIST_MODELS_HINT = 'POST /v2/repository/index (gRPC: RepositoryIndex) lists the models it holds';

/** A source's kind as messages to clients name it: never a host path or a bucket. */
export type SourceKind = 'local directory' | 'S3 prefix';

/**
 * MODEL_NOT_FOUND for a target the source does not hold: where it looked (the
 * source's kind and, when they differ from the target, the names it tried
 * relative to the source) and how to list what exists.
 */
export function targetNotFound(
  target: string,
  kind: SourceKind,
  options: { readonly tried?: readonly string[]; readonly details?: Record<string, unknown>; readonly cause?: unknown } = {},
): ServingError {
  const tried = options.tried ?? [];
  const names = tried.length === 0 || (tried.length === 1 && tried[0] === target) ? '' : `; tried ${tried.join(', ')}`;
  return new ServingError('MODEL_NOT_FOUND', `model '${target}' not found in the model source (${kind}${names}); ${LIST_MODELS_HINT}`, {
    model: target,
    ...(options.details === undefined ? {} : { details: options.details }),
    ...(options.cause === undefined ? {} : { cause: options.cause }),
  });
}

export interface LocalModel {
  /** The normalised target this directory was resolved from. */
  readonly target: string;
  /** Absolute path of the extracted model repository (or single model directory). */
  readonly dir: string;
  /**
   * Identity of the source object this copy was made from (an S3 ETag, or
   * size+mtime for local files). Changes when the object is replaced.
   */
  readonly version: string;
  /**
   * Lets go of the directory: until then the disk cache keeps it (a model
   * loaded from it may still read files). Idempotent; a no-op for directories
   * used in place.
   */
  release(): void;
}

export interface SourceEntry {
  readonly target: string;
  readonly sizeBytes: number | undefined;
  readonly lastModified: Date | undefined;
  /** Whether the disk cache holds the current version (in-place directories: always). */
  readonly cached: boolean;
}

export interface ModelSource {
  /** Human-readable location for logs, e.g. `file:///models` or `s3://bucket/prefix/`. */
  readonly description: string;
  /**
   * How messages that reach clients name the source: never a host path, a
   * bucket or a prefix ("the model source", docs/security.md). Omitted:
   * `description`.
   */
  readonly publicDescription?: string;
  /**
   * Make `target` available on local disk. Concurrent calls for the same target
   * share one download/extraction. Throws ServingError MODEL_NOT_FOUND,
   * INVALID_TARGET, ARCHIVE_REJECTED, INSUFFICIENT_STORAGE, UPSTREAM_UNAVAILABLE.
   */
  localize(target: string, signal?: AbortSignal): Promise<LocalModel>;
  /**
   * The current `version` of the object behind `target` (one HeadObject, or a
   * stat), or undefined when it no longer exists; then its cached copies are
   * retired. For revalidating loaded models.
   */
  currentVersion(target: string, signal?: AbortSignal): Promise<string | undefined>;
  /**
   * The one spelling of `target` that names its object, whichever spelling
   * reached it: `team/x` → `team/x.tar.gz` when that is the archive found
   * (`team/x.tar.gz` and `./team/x.tar.gz` are already it). The registry keys
   * models by it, so every spelling shares one load, one reservation and one
   * metrics series. Throws MODEL_NOT_FOUND like `localize`. Optional: without
   * it the normalised target is the key.
   */
  canonicalTarget?(target: string, signal?: AbortSignal): Promise<string>;
  /** Targets available in the source (archives and model directories). */
  list(): Promise<readonly SourceEntry[]>;
  /** How far the download of `target` has come, while one runs (store/transfer-progress.ts); optional: a local source has none. */
  transferProgress?(target: string): TransferSnapshot | undefined;
}
