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

/** Exactly these own keys (a lifted tensor, a batch, a message): anything more goes the nested way, which keeps it. */
function hasKeys(o: object, count: number): boolean {
  let n = 0;
  for (const k in o) if (!Object.hasOwn(o, k) || ++n > count) return false;
  return n === count;
}

function isDim(d: unknown): d is number {
  return Number.isSafeInteger(d) && (d as number) >= 0 && !Object.is(d, -0);
}

/** A tensor whose data was lifted: `{ datatype, shape, data: null }` with a string datatype and a shape of dims. */
function flatTensor(key: string, t: unknown, into: (string | number)[]): boolean {
  if (key === '__proto__' || t === null || typeof t !== 'object' || Object.getPrototypeOf(t) !== Object.prototype || !hasKeys(t, 3)) return false;
  const { datatype, shape, data } = t as { datatype?: unknown; shape?: unknown; data?: unknown };
  if (data !== null || typeof datatype !== 'string' || !Array.isArray(shape) || !shape.every(isDim)) return false;
  into.push(key, datatype, shape.length, ...(shape as number[]));
  return true;
}

function flatTensors(tensors: unknown, into: (string | number)[]): boolean {
  if (tensors === null || typeof tensors !== 'object' || Object.getPrototypeOf(tensors) !== Object.prototype) return false;
  const keys = Object.keys(tensors);
  into.push(keys.length);
  return keys.every((k) => flatTensor(k, (tensors as Record<string, unknown>)[k], into));
}

/**
 * The two messages of every call, flat (js-step-frames.ts sends them as one
 * JSON array): an execute `['x', id, rows, outputs, …names, tensors, …]`
 * and a successful result `['r', id, tensors, …]`, a tensor being `key,
 * datatype, rank, …dims`. Anything else (a Map of outputs, a tensor with
 * more keys, a shape JSON would not carry exactly) has no flat form.
 */
export function flatten(msg: Record<string, unknown>): (string | number)[] | undefined {
  if (!Number.isSafeInteger(msg['id'])) return undefined;
  if (msg['op'] === 'execute' && hasKeys(msg, 3)) {
    const batch = msg['batch'] as { inputs?: unknown; outputs?: unknown; rows?: unknown } | null;
    if (batch === null || typeof batch !== 'object' || !hasKeys(batch, 3) || !Number.isSafeInteger(batch.rows)) return undefined;
    const { outputs } = batch;
    if (!Array.isArray(outputs) || !outputs.every((o) => typeof o === 'string')) return undefined;
    const flat: (string | number)[] = ['x', msg['id'] as number, batch.rows as number, outputs.length, ...(outputs as string[])];
    return flatTensors(batch.inputs, flat) ? flat : undefined;
  }
  if (msg['op'] === 'result' && msg['ok'] === true && hasKeys(msg, 4)) {
    const flat: (string | number)[] = ['r', msg['id'] as number];
    return flatTensors(msg['value'], flat) ? flat : undefined;
  }
  return undefined;
}

/** Reads a flat message; throws on anything flatten cannot have written (a broken or hostile peer). */
class FlatReader {
  constructor(
    private readonly flat: readonly unknown[],
    private at: number,
  ) {}

  string(): string {
    const v = this.flat[this.at++];
    if (typeof v !== 'string') throw new Error('a malformed flat message');
    return v;
  }

  count(): number {
    const v = this.flat[this.at++];
    if (!isDim(v)) throw new Error('a malformed flat message');
    return v;
  }

  integer(): number {
    const v = this.flat[this.at++];
    if (!Number.isSafeInteger(v)) throw new Error('a malformed flat message');
    return v as number;
  }

  tensors(): Record<string, unknown> {
    const tensors: Record<string, unknown> = {};
    for (let n = this.count(); n > 0; n--) {
      const key = this.string();
      if (key === '__proto__' || Object.hasOwn(tensors, key)) throw new Error('a malformed flat message');
      const datatype = this.string();
      const shape: number[] = [];
      for (let rank = this.count(); rank > 0; rank--) shape.push(this.count());
      tensors[key] = { datatype, shape, data: null };
    }
    return tensors;
  }

  end(): void {
    if (this.at !== this.flat.length) throw new Error('a malformed flat message');
  }
}

export function unflatten(flat: readonly unknown[], at: number): Record<string, unknown> {
  const r = new FlatReader(flat, at);
  const kind = r.string();
  const id = r.integer();
  let msg: Record<string, unknown>;
  if (kind === 'x') {
    const rows = r.integer();
    const outputs: string[] = [];
    for (let n = r.count(); n > 0; n--) outputs.push(r.string());
    msg = { op: 'execute', id, batch: { inputs: r.tensors(), outputs, rows } };
  } else if (kind === 'r') {
    msg = { op: 'result', id, ok: true, value: r.tensors() };
  } else {
    throw new Error('a malformed flat message');
  }
  r.end();
  return msg;
}

/** The frame codec's view of this protocol. */
export const JS_STEP_TENSORS = { tensorsOf, withTensors, flatten, unflatten };

/** Marks an unhandled rejection rethrown by the host, so it can say which it was. */
export const UNHANDLED_REJECTION = 'UnhandledRejection';

export function describeError(err: unknown): JsStepError {
  const code = (err as { code?: unknown } | null)?.code;
  return { message: err instanceof Error ? err.message : String(err), code: typeof code === 'string' ? code : undefined };
}
