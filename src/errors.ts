/**
 * @module errors
 * The one error vocabulary of onnx-mme. Every layer below the transport throws
 * `ServingError` with a stable `code`; only `http/error-response.ts` knows how a
 * code becomes an HTTP status. Codes never change once shipped: clients and
 * dashboards match on them.
 */

export const ERROR_CODES = [
  'INVALID_REQUEST', // malformed body, header or query
  'INVALID_INPUT', // a tensor that does not match the model (name, dtype, shape)
  'INVALID_TARGET', // a target-model path that is absolute, escapes, or is unusable
  'TARGET_MISMATCH', // X-Amzn-SageMaker-Target-Model contradicts the loaded model
  'INVALID_MODEL', // the model package is wrong: config.pbtxt, layout, ONNX graph
  'ARCHIVE_REJECTED', // a hostile or corrupt model archive
  'MODEL_NOT_FOUND', // unknown model name or target
  'MODEL_ALREADY_LOADED', // SageMaker load of a name that is already loaded
  'PAYLOAD_TOO_LARGE', // body over the configured limit
  'RESPONSE_TOO_LARGE', // an answer whose encoding could exceed MME_MAX_RESPONSE_BYTES
  'UNSUPPORTED_MEDIA_TYPE',
  'NOT_ACCEPTABLE',
  'INSUFFICIENT_MEMORY', // the memory budget cannot hold the model, or an allocation failed
  'INSUFFICIENT_STORAGE', // the disk (cache) cannot hold the model
  'OVERLOADED', // a bounded queue is full
  'TIMEOUT', // a deadline passed before the work was done
  'CANCELLED', // the client went away
  'ACCESS_DENIED', // the model store refused us
  'API_RESTRICTED', // a restricted API group without its header (MME_HTTP_RESTRICTED_API, MME_GRPC_RESTRICTED_PROTOCOL)
  'MODEL_CONTROL_DISABLED', // a load or unload while MME_MODEL_CONTROL is none
  'UPSTREAM_UNAVAILABLE', // the model store failed or could not be reached
  'RUNTIME_UNAVAILABLE', // the runtime worker holding the model died (replaced; retry)
  'SHUTTING_DOWN', // the server is draining after SIGTERM
  'ROUTE_NOT_FOUND',
  'METHOD_NOT_ALLOWED',
  'UNSUPPORTED', // a valid request for something this server does not do
  'INTERNAL',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export interface ServingErrorOptions {
  /** The model (name or target) the error is about, for logs and metric labels. */
  readonly model?: string;
  readonly cause?: unknown;
  /** Extra facts a client may act on (e.g. the memory budget), serialised with the error. */
  readonly details?: Readonly<Record<string, unknown>>;
}

export class ServingError extends Error {
  readonly code: ErrorCode;
  readonly model: string | undefined;
  readonly details: Readonly<Record<string, unknown>> | undefined;

  constructor(code: ErrorCode, message: string, options: ServingErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ServingError';
    this.code = code;
    this.model = options.model;
    this.details = options.details;
  }

  /** True when the caller, not the server, is at fault (4xx class). */
  get isClientFault(): boolean {
    return CLIENT_FAULTS.has(this.code);
  }
}

/**
 * The one list of failures that are the caller's or the model package's (4xx):
 * a bad request, a bad or hostile package, an unknown model, a client that left.
 * Everything else is the server's or its environment's (5xx): memory, disk,
 * the model store, a dead runtime worker, queues, deadlines, bugs.
 */
const CLIENT_FAULTS: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'INVALID_REQUEST',
  'INVALID_INPUT',
  'INVALID_TARGET',
  'TARGET_MISMATCH',
  'INVALID_MODEL',
  'ARCHIVE_REJECTED',
  'MODEL_NOT_FOUND',
  'MODEL_ALREADY_LOADED',
  'PAYLOAD_TOO_LARGE',
  'RESPONSE_TOO_LARGE',
  'UNSUPPORTED_MEDIA_TYPE',
  'NOT_ACCEPTABLE',
  'CANCELLED',
  'ROUTE_NOT_FOUND',
  'METHOD_NOT_ALLOWED',
  'API_RESTRICTED',
  'MODEL_CONTROL_DISABLED',
]);

/**
 * When a refused client may try again, for a refusal whose maker knows no better date: HTTP's smallest Retry-After
 * (whole seconds). Where the server knows more (a failed load's back-off, a token bucket, the source's retry back-off),
 * the error carries that instead. Read by every transport through retryAfterSecondsOf.
 */
export const RETRY_AFTER_SECONDS = 1;

/**
 * The seconds a client should wait before retrying `err` (HTTP Retry-After, gRPC grpc-retry-pushback-ms): the
 * error's own details.retryAfterSeconds, rounded up to whole seconds, at least 1; undefined when the error does not
 * say (a client fault, or a failure a retry will not fix). The one decision is made where the error is made.
 */
export function retryAfterSecondsOf(err: ServingError): number | undefined {
  const given = err.details?.['retryAfterSeconds'];
  return typeof given === 'number' && Number.isFinite(given) && given > 0 ? Math.max(1, Math.ceil(given)) : undefined;
}

/** The details of a refusal a client may retry after `seconds` (rounded up, at least 1). */
export function retryAfter(seconds: number = RETRY_AFTER_SECONDS): { readonly retryAfterSeconds: number } {
  return { retryAfterSeconds: Math.max(1, Math.ceil(seconds)) };
}

/**
 * New work refused while the server drains after SIGTERM. A balancer already sends new connections elsewhere, so
 * the retry may come at once: the smallest Retry-After. Not the time left in the shutdown: this instance will not
 * serve again, waiting for it helps no one.
 */
export function shuttingDown(): ServingError {
  return new ServingError('SHUTTING_DOWN', 'the server is shutting down; retry on another instance', { details: retryAfter() });
}

/**
 * An error's message without the host paths Node's filesystem errors carry
 * (`ENOENT: no such file or directory, open '/var/cache/x/1/model.onnx'`):
 * each absolute `path`/`dest` of the error is cut to its last segment
 * (`open 'model.onnx'`). Messages reach clients; host paths must not.
 */
export function pathFreeMessage(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  let message = err.message;
  for (const key of ['path', 'dest'] as const) {
    const p = (err as { path?: unknown; dest?: unknown })[key];
    if (typeof p !== 'string' || !p.startsWith('/') || p.length < 2 || !message.includes(p)) continue;
    const trimmed = p.replace(/\/+$/, '');
    message = message.split(p).join(trimmed.slice(trimmed.lastIndexOf('/') + 1) || '/');
  }
  return message;
}

/** Anything thrown becomes a ServingError; unknown errors are INTERNAL with the original as cause. */
export function toServingError(err: unknown, model?: string): ServingError {
  if (err instanceof ServingError) return err;
  const message = pathFreeMessage(err);
  return new ServingError('INTERNAL', model ? `model '${model}': ${message}` : message, {
    cause: err,
    ...(model === undefined ? {} : { model }),
  });
}

/**
 * The error as a client sees it for `model`: errors below the layer that
 * knows which model the work is for (a config, a package's layout, a step's
 * input) are thrown without a model; that layer (the registry's package load,
 * a step's load and run, the CLI's validate) names it here, once. A
 * ServingError that already names a model (a step model inside an ensemble, a
 * sub-model of a package) is returned as it is; any other error gets `model`
 * set and its message prefixed `model '<model>': ` (anything not a
 * ServingError becomes INTERNAL, as toServingError does).
 */
export function inModel(err: unknown, model: string): ServingError {
  if (!(err instanceof ServingError)) return toServingError(err, model);
  if (err.model !== undefined) return err;
  const named = err.message.startsWith(`model '${model}'`) ? err.message : `model '${model}': ${err.message}`;
  const out = new ServingError(err.code, named, {
    model,
    ...(err.cause === undefined ? {} : { cause: err.cause }),
    ...(err.details === undefined ? {} : { details: err.details }),
  });
  // Where it was thrown, not where it was named.
  const frames = err.stack?.indexOf('\n') ?? -1;
  if (frames >= 0) out.stack = `ServingError: ${named}${err.stack!.slice(frames)}`;
  return out;
}

/** `fn`'s result, or its error named for `model` (inModel). */
export async function withModel<T>(model: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw inModel(err, model);
  }
}

/** withModel for synchronous work. */
export function withModelSync<T>(model: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw inModel(err, model);
  }
}

/**
 * A start-up failure the operator fixes by changing one setting (a port in
 * use, a cache directory that cannot be written, a model source that does not
 * exist): main.ts logs it as one line naming `setting`, without a stack, and
 * exits 2. Never reaches a client (the server is not serving yet).
 */
export class StartupError extends Error {
  /** The environment variable to change, e.g. `SAGEMAKER_BIND_TO_PORT`. */
  readonly setting: string;

  constructor(setting: string, message: string, options: { readonly cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'StartupError';
    this.setting = setting;
  }
}

/** Exhaustiveness guard for switches over closed unions. */
export function assertNever(value: never): never {
  throw new Error(`unexpected value: ${String(value)}`);
}

/** What the server knows of its own host and store, never to be shown to a client (a ServerConfig's paths and S3 location). */
export interface HostSecrets {
  /** Absolute directories whose contents a client may know by their relative names: the model source root, SageMaker url roots. */
  readonly paths: readonly string[];
  /** The cache directory: its entry names are internal (`<cache>/<entry>/model/a/1/model.onnx` reads `a/1/model.onnx`). */
  readonly cacheDir?: string | undefined;
  /** The model source's S3 bucket and prefix (`prefix/`, may be empty), when it is in S3. */
  readonly bucket?: string | undefined;
  readonly prefix?: string | undefined;
  /** AWS_ENDPOINT_URL_S3: an internal host (MinIO, a VPC endpoint) whose name and port are nobody's business. */
  readonly endpoint?: string | undefined;
}

/**
 * Node's network errors end with the peer (`connect ECONNREFUSED 10.0.3.7:9000`,
 * `getaddrinfo ENOTFOUND minio.internal`): the kind of failure is kept, the
 * address (a resolved IP the configuration never names) is not.
 */
const NETWORK_PEER = /\b((?:connect|getaddrinfo|read|write) E[A-Z_]+) [^\s'"`,;()[\]{}]+/g;

/** Rules that cut the S3 endpoint's URL, `host:port` and host out of a message. */
function endpointRules(endpoint: string): { pattern: RegExp; replace: () => string }[] {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return [];
  }
  const forms = [endpoint.replace(/\/+$/, ''), url.origin, url.host, url.hostname].filter((f) => f !== '');
  return [...new Set(forms)].map((f) => ({ pattern: new RegExp(`${escapeRegExp(f)}(?![\\w.-])`, 'g'), replace: () => 'the S3 endpoint' }));
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * The last line of defence at the answer boundary (http/error-response.ts,
 * grpc/status-codes.ts): a message that still names one of the server's own
 * directories or its bucket and prefix has them cut out before a client sees
 * it. `/srv/models/a/1/model.onnx` under the source root becomes
 * `a/1/model.onnx`; a path under the cache directory (whose entry names are
 * internal) becomes its last segment; `s3://bucket/prefix/a.tar.gz` becomes
 * `a.tar.gz`; the S3 endpoint and the address of a network error are cut
 * too. Messages are meant to be made right where they are created;
 * this catches what a library (onnxruntime, Node, the AWS SDK) wrote into
 * them. The unredacted text stays in the log line of the request.
 */
export class HostRedactor {
  private readonly rules: readonly { readonly pattern: RegExp; readonly replace: (match: string, rest: string) => string }[];

  constructor(secrets: HostSecrets) {
    const rules: { pattern: RegExp; replace: (match: string, rest: string) => string }[] = [{ pattern: NETWORK_PEER, replace: (_m, kind) => kind }];
    if (secrets.endpoint !== undefined && secrets.endpoint !== '') rules.push(...endpointRules(secrets.endpoint));
    // The rest of a path up to a delimiter; a root followed by anything else (`/srv/models-old`) is another directory.
    const tail = String.raw`((?:/[^\s'"\`,;:()\[\]{}]*)?)(?![^\s'"\`,;:()\[\]{}])`;
    const { bucket, prefix } = secrets;
    if (bucket !== undefined && bucket !== '') {
      const b = escapeRegExp(bucket);
      const p = escapeRegExp(prefix ?? '');
      // `s3://bucket/prefix/team/a.tar.gz` → `team/a.tar.gz`; the bare bucket → "the model source".
      rules.push({ pattern: new RegExp(String.raw`s3://${b}/${p}([^\s'"\`,;()\[\]{}]*)`, 'g'), replace: (_m, rest) => rest || 'the model source' });
      rules.push({ pattern: new RegExp(String.raw`s3://${b}\b/?`, 'g'), replace: () => 'the model source' });
      // The bucket's name where a message quotes it or calls it a bucket (a bare word like `models` is left alone).
      rules.push({ pattern: new RegExp(String.raw`(?<=['"\`]|[Bb]ucket[ :=]+)${b}(?![\w.-])`, 'g'), replace: () => '<bucket>' });
      const bare = (prefix ?? '').replace(/^\/+|\/+$/g, '');
      // `prefix/team/a.tar.gz` (a key the SDK or a message wrote out) → `team/a.tar.gz`.
      // Only where a key starts: `team/v1/x` keeps its `v1/` under a prefix `v1/`.
      if (bare !== '') rules.push({ pattern: new RegExp(String.raw`(?<![\w./-])${escapeRegExp(bare)}/`, 'g'), replace: () => '' });
    }
    // Longest first: a cache directory inside the source root is cut as the cache, not the source.
    const roots = [...secrets.paths.map((p) => ({ p, cache: false })), ...(secrets.cacheDir === undefined ? [] : [{ p: secrets.cacheDir, cache: true }])]
      .map(({ p, cache }) => ({ root: p.replace(/\/+$/, ''), cache }))
      .filter(({ root }) => root.startsWith('/'))
      .sort((a, b) => b.root.length - a.root.length);
    for (const { root, cache } of roots) {
      rules.push({
        pattern: new RegExp(`${escapeRegExp(root)}${tail}`, 'g'),
        replace: (_m, rest) => {
          const segments = rest.split('/').filter((s) => s !== '');
          if (segments.length === 0) return '<server directory>';
          if (!cache) return segments.join('/');
          return segments[1] === 'model' && segments.length > 2 ? segments.slice(2).join('/') : segments[segments.length - 1]!;
        },
      });
    }
    this.rules = rules;
  }

  /** Every string in a details object redacted (details travel with the answer too). */
  redactDetails(details: Readonly<Record<string, unknown>>): Record<string, unknown> {
    const walk = (v: unknown): unknown =>
      typeof v === 'string'
        ? this.redact(v)
        : Array.isArray(v)
          ? v.map(walk)
          : typeof v === 'object' && v !== null
            ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]))
            : v;
    return walk(details) as Record<string, unknown>;
  }

  /** The message without the server's own paths, bucket and prefix. */
  redact(message: string): string {
    let out = message;
    for (const rule of this.rules) out = out.replace(rule.pattern, (m: string, rest: string | undefined) => rule.replace(m, rest ?? ''));
    return out;
  }
}

/** A redactor that changes nothing (a server with no configured paths, unit tests). */
export const NO_REDACTION: HostRedactor = new HostRedactor({ paths: [] });
