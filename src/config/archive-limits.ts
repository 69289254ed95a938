/**
 * @module config/archive-limits
 * The defaults of the archive limits (MME_ARCHIVE_MAX_ENTRIES,
 * MME_ARCHIVE_MAX_RATIO) and why they are what they are; store/extract-limits
 * applies them.
 */

/**
 * Most entries by default. A Triton package holds tens of files; a large model
 * exported with one external-data file per tensor holds hundreds to a few
 * thousand. Each entry costs an inode and at least one block however small it
 * is, and creating it holds the load: 10,000 is generous for real packages and
 * keeps a junk-file archive to a second or two of work.
 */
export const DEFAULT_MAX_ENTRIES = 10_000;

/**
 * Largest decompressed:compressed ratio by default. Real ONNX weights are
 * floats that gzip barely shrinks (1.1-1.5:1); even a 99%-sparse model is
 * about 100:1; deflate's ceiling is about 1032:1, which a bomb of zeros
 * reaches. 200:1 sits between the two. An archive whose tar stream stays
 * under RATIO_GRACE_BYTES is never checked, so small all-zero test models pass.
 */
export const DEFAULT_MAX_RATIO = 200;

/** The ratio applies once this much tar data has come out: below it a bomb cannot do harm. */
export const RATIO_GRACE_BYTES = 16 * 1024 * 1024;
