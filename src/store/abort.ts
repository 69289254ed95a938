/**
 * @module store/abort
 * Cancellation for model-source work that many callers share: a caller whose
 * signal fires stops waiting, while the shared download or extraction goes on
 * for the others.
 */
import { ServingError } from '../errors.js';

/** The error for an aborted signal: its own ServingError reason, TIMEOUT for AbortSignal.timeout, else CANCELLED. */
export function cancelled(target: string | undefined, signal: AbortSignal | undefined): ServingError {
  const reason: unknown = signal?.reason;
  if (reason instanceof ServingError) return reason;
  const about = target === undefined ? 'S3 request' : `model '${target}': localizing`;
  const options = { cause: reason, ...(target === undefined ? {} : { model: target }) };
  if (reason instanceof Error && reason.name === 'TimeoutError') {
    return new ServingError('TIMEOUT', `${about} timed out`, options);
  }
  return new ServingError('CANCELLED', `${about} was cancelled`, options);
}

/** Wait for `work` unless `signal` fires first; `work` itself is not stopped. */
export function abortable<T>(work: Promise<T>, signal: AbortSignal | undefined, target: string): Promise<T> {
  if (!signal) return work;
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(cancelled(target, signal));
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}
