/**
 * @module http/error-response
 * The only place that knows how an error code becomes an HTTP status. The body
 * is `{"error": message, "code": CODE, "message": message}`: Triton/KServe
 * clients (tritonclient's _raise_if_error) read `error`; the AWS SDKs' REST
 * JSON deserializers take the error name from `code` and the text from
 * `message` (without it they report "UnknownError"); machines match `code`.
 * Messages are capped at 2048 characters because SageMaker forwards them to
 * clients as ModelError.OriginalMessage.
 */
import { assertNever, NO_REDACTION, toServingError, type ErrorCode, type HostRedactor, type ServingError } from '../errors.js';

export function httpStatusOf(code: ErrorCode): number {
  switch (code) {
    case 'INVALID_REQUEST':
    case 'INVALID_INPUT':
    case 'INVALID_TARGET':
    case 'TARGET_MISMATCH':
    case 'INVALID_MODEL':
    case 'ARCHIVE_REJECTED':
    case 'RESPONSE_TOO_LARGE':
      return 400;
    case 'ACCESS_DENIED':
    case 'API_RESTRICTED':
    case 'MODEL_CONTROL_DISABLED':
      return 403;
    case 'MODEL_NOT_FOUND':
    case 'ROUTE_NOT_FOUND':
      return 404;
    case 'METHOD_NOT_ALLOWED':
      return 405;
    case 'NOT_ACCEPTABLE':
      return 406;
    case 'MODEL_ALREADY_LOADED':
      return 409;
    case 'PAYLOAD_TOO_LARGE':
      return 413;
    case 'UNSUPPORTED_MEDIA_TYPE':
      return 415;
    case 'OVERLOADED':
      return 429;
    case 'CANCELLED':
      return 499;
    case 'INTERNAL':
      return 500;
    case 'UNSUPPORTED':
      return 501;
    case 'UPSTREAM_UNAVAILABLE':
    case 'RUNTIME_UNAVAILABLE':
    case 'SHUTTING_DOWN':
      return 503;
    case 'TIMEOUT':
      return 504;
    case 'INSUFFICIENT_MEMORY':
    case 'INSUFFICIENT_STORAGE':
      return 507;
    default:
      return assertNever(code);
  }
}

const MAX_MESSAGE = 2048;

export interface ErrorReply {
  readonly status: number;
  readonly body: string;
  readonly error: ServingError;
}

/**
 * On the KServe v2 routes, Triton's clients expect its statuses where they
 * differ from ours: a full queue and an expired queue timeout are
 * UNAVAILABLE there (503), not 429 and 504.
 */
export function kserveStatusOf(code: ErrorCode): number {
  return code === 'OVERLOADED' || code === 'TIMEOUT' ? 503 : httpStatusOf(code);
}

/**
 * The answer to an error. `redactor` cuts the server's own directories,
 * bucket and prefix out of what the client reads (errors.ts HostRedactor);
 * `error` keeps the full text for the request's log line.
 */
export function errorReply(err: unknown, flavor: 'sagemaker' | 'kserve' = 'sagemaker', redactor: HostRedactor = NO_REDACTION): ErrorReply {
  const e = toServingError(err);
  const text = redactor.redact(e.message);
  const message = text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE - 3)}...` : text;
  const body: Record<string, unknown> = { error: message, code: e.code, message };
  if (e.details) body['details'] = redactor.redactDetails(e.details);
  return { status: flavor === 'kserve' ? kserveStatusOf(e.code) : httpStatusOf(e.code), body: `${JSON.stringify(body)}\n`, error: e };
}
