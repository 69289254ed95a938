/**
 * @module backends/js-step-protocol
 * Messages between a js step's process (js-step-host.ts) and the server
 * (js-step-worker.ts), framed by js-step-frames.ts: typed arrays (BigInt64Array
 * included) travel as raw bytes, the rest (shapes, string arrays, Maps, …)
 * as JSON where JSON carries it exactly, else as V8's structured
 * serialization writes it. The request's own tensors are
 * written as they are (never changed, a failed batch may re-run them);
 * what arrives on either side is a fresh copy.
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
    /** The one directory the step may write (its cwd). */
    readonly scratchDir: string;
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

export type HostRequest =
  /** The first message: what to import and initialize() with. */
  | { readonly op: 'init'; readonly data: JsHostData }
  | { readonly op: 'execute'; readonly id: number; readonly batch: JsBatch }
  | { readonly op: 'finalize'; readonly id: number };

export type HostReply =
  /** The process runs (its own start-up done; the step's load deadline counts from here). */
  | { readonly op: 'online' }
  /** import + checks + initialize() done. */
  | { readonly op: 'ready' }
  /** The module could not be loaded: `what` says which part ("model.mjs cannot be imported", "initialize() failed", …). */
  | { readonly op: 'load-failed'; readonly what: string; readonly error: JsStepError | undefined }
  | { readonly op: 'result'; readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly op: 'result'; readonly id: number; readonly ok: false; readonly what: string; readonly error: JsStepError }
  | { readonly op: 'finalized'; readonly id: number; readonly error: JsStepError | undefined }
  /** The process is ending on the step's fault: `cause` says which ("an uncaught exception: …"). */
  | { readonly op: 'crash'; readonly cause: string };

/** Where each message keeps its tensors (js-step-frames.ts lifts their typed arrays into sections). */
export function tensorsOf(msg: Record<string, unknown>): Map<unknown, unknown> | Record<string, unknown> | undefined {
  if (msg['op'] === 'execute') return (msg['batch'] as { inputs: Record<string, unknown> }).inputs;
  if (msg['op'] === 'result' && msg['ok'] === true) {
    const v = msg['value'];
    if (v instanceof Map) return v;
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  }
  return undefined;
}

/** `msg` with other tensors where tensorsOf found its own (a shallow copy: `msg` is not changed). */
export function withTensors(msg: Record<string, unknown>, tensors: Map<unknown, unknown> | Record<string, unknown>): Record<string, unknown> {
  if (msg['op'] === 'execute') return { ...msg, batch: { ...(msg['batch'] as object), inputs: tensors } };
  if (msg['op'] === 'result') return { ...msg, value: tensors };
  return msg;
}

/** The frame codec's view of this protocol. */
export const JS_STEP_TENSORS = { tensorsOf, withTensors };

/** Marks an unhandled rejection rethrown by the host, so it can say which it was. */
export const UNHANDLED_REJECTION = 'UnhandledRejection';

export function describeError(err: unknown): JsStepError {
  const code = (err as { code?: unknown } | null)?.code;
  return { message: err instanceof Error ? err.message : String(err), code: typeof code === 'string' ? code : undefined };
}
