/**
 * @module store/s3-errors
 * What an S3 failure means for a model source: which SDK and network errors
 * are a missing object (MODEL_NOT_FOUND), a denial (ACCESS_DENIED), or an
 * outage worth another attempt (UPSTREAM_UNAVAILABLE, marked retryable for
 * store/remote-fetch.ts's retry loop), and how each reads in a message.
 * S3's own vocabulary; the retry and transfer code around it is
 * transport-neutral.
 */
import { ServingError } from '../errors.js';
import { targetNotFound } from './model-source.js';
import { errorCode, messageOf } from './node-error.js';
import { markRetryable } from './remote-fetch.js';

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

export interface FailureContext {
  readonly target?: string;
  /** e.g. `downloading 'team/a.tar.gz'` */
  readonly action: string;
  /** The object's name relative to the prefix. */
  readonly name?: string;
  readonly bucket: string;
}

/** Maps an SDK or network error to a ServingError; transient ones are marked retryable. */
export function s3Failure(err: unknown, context: FailureContext): ServingError {
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
export function notFound(target: string, tried: readonly string[]): ServingError {
  return targetNotFound(target, 'S3 prefix', { tried, details: { uris: tried } });
}
