/**
 * @module store/extract-limits
 * Bounds on what one model archive may expand to on disk. They exist because
 * archives come from clients' buckets: a gzip bomb or a million tiny files must
 * be refused before it fills the cache volume, not after.
 */

import { DEFAULT_MAX_ENTRIES, DEFAULT_MAX_RATIO } from '../config/archive-limits.js';

export { DEFAULT_MAX_ENTRIES, DEFAULT_MAX_RATIO, RATIO_GRACE_BYTES } from '../config/archive-limits.js';

export interface ExtractLimits {
  /** Largest total of extracted file bytes; also the largest single file. */
  readonly maxBytes: number;
  /** Most archive entries (files, directories, links, skipped junk) accepted. */
  readonly maxEntries: number;
  /**
   * Largest ratio of decompressed tar bytes to compressed archive bytes,
   * checked while streaming once the tar stream passes RATIO_GRACE_BYTES;
   * 0 or undefined = no ratio check.
   */
  readonly maxRatio?: number;
  /**
   * Room the disk cache can give this model (its budget minus what is in use),
   * in disk bytes (blocks, see store/disk-usage.ts). Past it extraction stops with
   * INSUFFICIENT_STORAGE (507), not ARCHIVE_REJECTED: the archive is fine, the
   * cache is too small for it.
   */
  readonly storageBytes?: number;
}

/** Generous enough for large ONNX models with external data, small enough to stop a bomb. */
export const DEFAULT_EXTRACT_LIMITS: ExtractLimits = Object.freeze({
  maxBytes: 16 * 1024 ** 3,
  maxEntries: DEFAULT_MAX_ENTRIES,
  maxRatio: DEFAULT_MAX_RATIO,
});
