/**
 * @module config/model-config-parse
 * config.pbtxt read where it cannot stall the server. The text-format parser
 * and the schema check cost about a millisecond per KiB of config on a small
 * machine (a 52 MB config held the main thread, and /ping, for 4 s), so:
 * - a config is refused before it is read when it is over MME_CONFIG_MAX_BYTES
 *   (`checkConfigSize`, from a stat: the limit holds whatever the file holds);
 * - a config of more than INLINE_PARSE_CHARS is parsed in a worker thread, one
 *   for the process, started on first use and idle (unref'd) between parses;
 *   smaller ones (every real Triton config: a few KiB) are parsed inline, where
 *   they cost less than a worker round trip.
 * The draft comes back by structured clone and is frozen again here; what the
 * main thread still does with it (the final config) is proportional to the
 * number of fields, not the text's size.
 */
import { Worker } from 'node:worker_threads';
import { ServingError, type ErrorCode } from '../errors.js';
import { adoptModelConfigDraft, readModelConfigDraft, type ModelConfigDraft } from './model-config-draft.js';
import type { ModelConfigOptions } from './model-config.js';

/** MME_CONFIG_MAX_BYTES's default: Triton configs are a few KiB; the largest real ensembles tens of KiB. */
export const DEFAULT_CONFIG_MAX_BYTES = 1024 * 1024;
/** Parsed on the calling thread up to this many characters (a few milliseconds at most). */
export const INLINE_PARSE_CHARS = 8 * 1024;
/** A parse in the worker is given this long (a config at the limit takes about a second on a loaded 2-core machine). */
const PARSE_DEADLINE_MS = 60_000;

/** The request and answer messages between this module and config/model-config-worker.ts. */
export interface ParseRequest {
  readonly id: number;
  readonly text: string;
  readonly options: ModelConfigOptions;
}
export type ParseAnswer =
  | { readonly id: number; readonly draft: ModelConfigDraft }
  | {
      readonly id: number;
      readonly error: { readonly code?: ErrorCode; readonly message: string; readonly model?: string; readonly details?: Record<string, unknown> };
    };

/**
 * Refuses a config.pbtxt of `bytes` bytes over `maxBytes` with INVALID_MODEL
 * naming the file and the limit (called with the file's stat size, before
 * reading it).
 */
export function checkConfigSize(bytes: number, maxBytes: number, sourceName: string): void {
  if (bytes <= maxBytes) return;
  throw new ServingError(
    'INVALID_MODEL',
    `${sourceName} is ${bytes} bytes, over the limit of ${maxBytes} bytes for a model configuration (MME_CONFIG_MAX_BYTES); Triton configs are a few KiB`,
    { details: { configBytes: bytes, limitBytes: maxBytes } },
  );
}

/** readModelConfigDraft, off the main thread for a large config (see the module comment). */
export async function parseModelConfigDraft(text: string | undefined, options: ModelConfigOptions): Promise<ModelConfigDraft> {
  if (text === undefined || text.length <= INLINE_PARSE_CHARS) return readModelConfigDraft(text, options);
  return (parser ??= new ConfigParser()).parse(text, options);
}

let parser: ConfigParser | undefined;

interface Pending {
  readonly sourceName: string;
  readonly resolve: (draft: ModelConfigDraft) => void;
  readonly reject: (err: unknown) => void;
  readonly timer: NodeJS.Timeout;
}

class ConfigParser {
  private worker: Worker | undefined;
  private nextId = 0;
  private readonly pending = new Map<number, Pending>();

  parse(text: string, options: ModelConfigOptions): Promise<ModelConfigDraft> {
    const worker = this.start();
    const id = ++this.nextId;
    return new Promise<ModelConfigDraft>((resolve, reject) => {
      const timer = setTimeout(() => {
        // Unreachable under the size limit unless the machine is starved; the worker is replaced.
        this.stop(new ServingError('TIMEOUT', `${options.sourceName}: parsing took longer than ${PARSE_DEADLINE_MS / 1000} s`));
      }, PARSE_DEADLINE_MS);
      timer.unref();
      this.pending.set(id, { sourceName: options.sourceName, resolve, reject, timer });
      // Held while a parse is pending (a CLI must not exit under it), unref'd when idle.
      worker.ref();
      worker.postMessage({ id, text, options } satisfies ParseRequest);
    });
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(new URL('./model-config-worker.js', import.meta.url), { name: 'onnx-mme-config-parser' });
    worker.unref();
    worker.on('message', (answer: ParseAnswer) => this.answer(answer));
    worker.on('error', (err: Error) => this.stop(new ServingError('INTERNAL', `the config parser thread failed: ${err.message}`, { cause: err })));
    worker.on('exit', (code) => {
      if (this.worker === worker) this.stop(new ServingError('INTERNAL', `the config parser thread exited with code ${code}`));
    });
    this.worker = worker;
    return worker;
  }

  private answer(answer: ParseAnswer): void {
    const p = this.pending.get(answer.id);
    if (!p) return;
    this.pending.delete(answer.id);
    clearTimeout(p.timer);
    if (this.pending.size === 0) this.worker?.unref();
    if ('draft' in answer) {
      p.resolve(adoptModelConfigDraft(answer.draft));
      return;
    }
    const { code, message, model, details } = answer.error;
    p.reject(
      code === undefined
        ? new Error(message)
        : new ServingError(code, message, { ...(model === undefined ? {} : { model }), ...(details === undefined ? {} : { details }) }),
    );
  }

  /** Fails every pending parse with `err` and drops the worker (the next parse starts a fresh one). */
  private stop(err: ServingError): void {
    const worker = this.worker;
    this.worker = undefined;
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this.pending.clear();
    if (worker) void worker.terminate();
  }
}
