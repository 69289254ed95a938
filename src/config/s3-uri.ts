/**
 * @module store/s3-uri
 * Parsing of `s3://bucket/prefix/` model-source locations (MME_MODEL_SOURCE).
 * The prefix is taken literally (S3 keys are not URL-encoded in an s3:// URI,
 * as with the AWS CLI); a non-empty prefix is normalised to end with `/` so
 * that `prefix + target` is always the object key.
 */

export interface S3Location {
  readonly bucket: string;
  /** `''` or a key prefix ending with `/`. */
  readonly prefix: string;
  /** Canonical form: `s3://bucket/prefix/` (or `s3://bucket/`). */
  readonly uri: string;
}

const SCHEME = /^s3:\/\//i;
/** S3 general-purpose bucket naming rules (3–63 chars, lowercase, digits, dots, hyphens). */
const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const IP_ADDRESS = /^\d{1,3}(\.\d{1,3}){3}$/;
const CONTROL = /\p{Cc}/u;
/** S3 keys are at most 1024 bytes; leave room for the target after the prefix. */
const MAX_PREFIX_BYTES = 900;

export function isS3Uri(raw: string): boolean {
  return SCHEME.test(raw.trim());
}

/** Parses `s3://bucket[/prefix]`; throws an Error saying what is wrong (for config errors). */
export function parseS3Uri(raw: string): S3Location {
  const text = raw.trim();
  const fail = (reason: string): never => {
    throw new Error(`invalid S3 location ${JSON.stringify(raw)}: ${reason}`);
  };
  if (!SCHEME.test(text)) {
    const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(text)?.[1];
    return fail(scheme ? `unsupported scheme '${scheme}:' (expected s3://bucket/prefix/)` : 'expected s3://bucket/prefix/');
  }
  const rest = text.slice('s3://'.length);
  const slash = rest.indexOf('/');
  const bucket = slash === -1 ? rest : rest.slice(0, slash);
  let prefix = slash === -1 ? '' : rest.slice(slash + 1);

  if (bucket === '') return fail('the bucket name is missing');
  const badBucket = bucketProblem(bucket);
  if (badBucket !== undefined) return fail(`bad bucket name '${bucket}': ${badBucket}`);

  if (CONTROL.test(prefix)) return fail('the prefix contains a control character');
  if (prefix.startsWith('/')) return fail('the prefix starts with "/" (write s3://bucket/prefix/)');
  if (prefix.includes('?') || prefix.includes('#')) {
    return fail('the prefix contains "?" or "#" (query strings and fragments are not part of an S3 location)');
  }
  if (prefix.split('/').some((segment) => segment === '.' || segment === '..')) {
    return fail('the prefix contains a "." or ".." segment');
  }
  if (prefix !== '' && !prefix.endsWith('/')) prefix = `${prefix}/`;
  if (prefix.includes('//')) return fail('the prefix contains an empty path segment');
  if (Buffer.byteLength(prefix, 'utf8') > MAX_PREFIX_BYTES) {
    return fail(`the prefix is longer than ${MAX_PREFIX_BYTES} bytes`);
  }
  return { bucket, prefix, uri: `s3://${bucket}/${prefix}` };
}

/** `s3://bucket/key`, for messages and logs. */
export function s3ObjectUri(bucket: string, key: string): string {
  return `s3://${bucket}/${key}`;
}

function bucketProblem(bucket: string): string | undefined {
  if (bucket.length < 3 || bucket.length > 63) return 'it must be 3 to 63 characters long';
  if (/[A-Z]/.test(bucket)) return 'it must be lowercase';
  if (!BUCKET_NAME.test(bucket)) {
    return 'only lowercase letters, digits, "." and "-" are allowed, starting and ending with a letter or digit';
  }
  if (bucket.includes('..')) return 'it must not contain two adjacent dots';
  if (bucket.includes('.-') || bucket.includes('-.')) return 'a dot must not be next to a hyphen';
  if (IP_ADDRESS.test(bucket)) return 'it must not look like an IP address';
  return undefined;
}
