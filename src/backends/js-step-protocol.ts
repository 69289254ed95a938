/**
 * @module backends/js-step-protocol
 * Messages between a js step's worker thread (js-step-host.ts) and the main
 * thread (js-step-worker.ts). Tensors cross as structured clones: typed arrays
 * (BigInt64Array included), string arrays and Maps survive it. Inputs are
 * copied into the worker (a request's tensors may be read again after a
 * batch, see runtime-pool.ts); what execute() returns is handed over, its
 * typed arrays' buffers transferred rather than copied.
 */

/** What a worker starts with: the module to import and initialize()'s argument. */
export interface JsHostData {
  /** file: URL of model.mjs. */
  readonly url: string;
  /** As messages name it (model.mjs or default_model_filename). */
  readonly fileName: string;
  readonly initArgs: {
    readonly config: unknown;
    readonly parameters: Readonly<Record<string, string>>;
    readonly modelDir: string;
    readonly versionDir: string;
    readonly version: number;
  };
}

/** An error thrown by the step: its message and its `code` when it has a string one ('INVALID_INPUT' → 400). */
export interface JsStepError {
  readonly message: string;
  readonly code: string | undefined;
}

export interface JsBatch {
  readonly inputs: Readonly<Record<string, { readonly datatype: string; readonly shape: readonly number[]; readonly data: unknown }>>;
  readonly outputs: readonly string[];
  readonly rows: number;
}

export type HostRequest = { readonly op: 'execute'; readonly id: number; readonly batch: JsBatch } | { readonly op: 'finalize'; readonly id: number };

export type HostReply =
  /** import + checks + initialize() done. */
  | { readonly op: 'ready' }
  /** The module could not be loaded: `what` says which part ("model.mjs cannot be imported", "initialize() failed", …). */
  | { readonly op: 'load-failed'; readonly what: string; readonly error: JsStepError | undefined }
  | { readonly op: 'result'; readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly op: 'result'; readonly id: number; readonly ok: false; readonly what: string; readonly error: JsStepError }
  | { readonly op: 'finalized'; readonly id: number; readonly error: JsStepError | undefined };

/** Marks an unhandled rejection rethrown by the host, so the main thread can say which it was. */
export const UNHANDLED_REJECTION = 'UnhandledRejection';

export function describeError(err: unknown): JsStepError {
  const code = (err as { code?: unknown } | null)?.code;
  return { message: err instanceof Error ? err.message : String(err), code: typeof code === 'string' ? code : undefined };
}
