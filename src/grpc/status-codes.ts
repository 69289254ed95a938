/**
 * @module grpc/status-codes
 * The only place that knows how an error code becomes a gRPC status (the
 * gRPC twin of http/error-response.ts). Triton's choices where it has one:
 * a full queue or an expired queue timeout is UNAVAILABLE (clients retry
 * it), an unsupported feature UNIMPLEMENTED, a message over the limit
 * RESOURCE_EXHAUSTED (what gRPC itself answers for one). The code travels
 * too, in the trailing metadata `onnx-mme-error-code`, for machines, and
 * when to retry in `grpc-retry-pushback-ms` (gRFC A6).
 */
import { Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { assertNever, NO_REDACTION, retryAfterSecondsOf, toServingError, type ErrorCode, type HostRedactor, type ServingError } from '../errors.js';

export function grpcStatusOf(code: ErrorCode): status {
  switch (code) {
    case 'INVALID_REQUEST':
    case 'INVALID_INPUT':
    case 'INVALID_TARGET':
    case 'TARGET_MISMATCH':
    case 'INVALID_MODEL':
    case 'ARCHIVE_REJECTED':
    case 'UNSUPPORTED_MEDIA_TYPE':
    case 'NOT_ACCEPTABLE':
      return status.INVALID_ARGUMENT;
    case 'MODEL_NOT_FOUND':
    case 'ROUTE_NOT_FOUND':
      return status.NOT_FOUND;
    case 'MODEL_ALREADY_LOADED':
      return status.ALREADY_EXISTS;
    case 'ACCESS_DENIED':
    // Triton answers a restricted protocol UNAVAILABLE, which clients retry; a missing key is not fixed by retrying.
    case 'API_RESTRICTED':
    case 'MODEL_CONTROL_DISABLED':
      return status.PERMISSION_DENIED;
    case 'PAYLOAD_TOO_LARGE':
    case 'RESPONSE_TOO_LARGE':
    case 'INSUFFICIENT_MEMORY':
    case 'INSUFFICIENT_STORAGE':
      return status.RESOURCE_EXHAUSTED;
    case 'OVERLOADED':
    case 'TIMEOUT':
    case 'UPSTREAM_UNAVAILABLE':
    case 'SHUTTING_DOWN':
    case 'RUNTIME_UNAVAILABLE':
      return status.UNAVAILABLE;
    case 'CANCELLED':
      return status.CANCELLED;
    case 'METHOD_NOT_ALLOWED':
    case 'UNSUPPORTED':
      return status.UNIMPLEMENTED;
    case 'INTERNAL':
      return status.INTERNAL;
    default:
      return assertNever(code);
  }
}

/** The name of a status, e.g. `NOT_FOUND` (metric label values). */
export function statusName(code: status): string {
  return status[code] ?? String(code);
}

/** Same cap as the HTTP error body: SageMaker-style consumers and log lines stay bounded. */
const MAX_MESSAGE = 2048;
export const ERROR_CODE_METADATA = 'onnx-mme-error-code';
/**
 * gRFC A6's server pushback: how long a client's retry policy should wait before its next attempt, in ms, sent with
 * every error whose details say when to retry (the HTTP Retry-After of the same error).
 */
export const RETRY_PUSHBACK_METADATA = 'grpc-retry-pushback-ms';

export interface GrpcErrorReply {
  readonly grpcError: Partial<ServiceError>;
  readonly error: ServingError;
}

/** As errorReply in http/error-response.ts: `details` redacted for the client, `error` whole for the log. */
export function grpcErrorReply(err: unknown, redactor: HostRedactor = NO_REDACTION): GrpcErrorReply {
  const e = toServingError(err);
  const text = redactor.redact(e.message);
  const message = text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE - 3)}...` : text;
  const metadata = new Metadata();
  metadata.set(ERROR_CODE_METADATA, e.code);
  const retryAfter = retryAfterSecondsOf(e);
  if (retryAfter !== undefined) metadata.set(RETRY_PUSHBACK_METADATA, String(retryAfter * 1000));
  return { grpcError: { code: grpcStatusOf(e.code), details: message, metadata }, error: e };
}
