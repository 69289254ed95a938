/**
 * @module registry/load-history
 * What the repository index says about a model that is not in memory: the
 * last error its load ended with (Triton's index gives a failed model's load
 * error as its `reason`), or that it was loaded once and has since been
 * unloaded. Kept per target, bounded (oldest forgotten first) whatever clients
 * name, and never decides anything: FailedLoads (registry/failed-loads.ts)
 * owns the back-off.
 */
import { ServingError, type ErrorCode } from '../errors.js';

export interface LoadError {
  readonly code: ErrorCode;
  readonly message: string;
  /** Wall-clock epoch ms of the failure. */
  readonly atMs: number;
}

export interface LoadRecord {
  /** The last load's error; undefined once a load succeeds. */
  readonly lastError: LoadError | undefined;
  /** Whether a load of it has succeeded since the server started. */
  readonly loadedOnce: boolean;
}

/**
 * Failures that say nothing about a model of the source: the request went away, the server is stopping, or the
 * name is not one of its models (those are never listed, and a client naming many must not push the real ones out).
 */
const NOT_THE_MODEL: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['CANCELLED', 'SHUTTING_DOWN', 'MODEL_NOT_FOUND', 'INVALID_TARGET']);

/** Targets remembered at most: a map lookup each, bounded whatever clients name. */
export const LOAD_HISTORY_MAX = 4096;

export class LoadHistory {
  private readonly records = new Map<string, LoadRecord>();

  constructor(private readonly now: () => number = Date.now) {}

  failed(target: string, err: unknown): void {
    const code: ErrorCode = err instanceof ServingError ? err.code : 'INTERNAL';
    if (NOT_THE_MODEL.has(code)) return;
    const message = err instanceof ServingError ? err.message : `model '${target}': the load failed`;
    this.put(target, { lastError: { code, message, atMs: this.now() }, loadedOnce: this.records.get(target)?.loadedOnce ?? false });
  }

  loaded(target: string): void {
    this.put(target, { lastError: undefined, loadedOnce: true });
  }

  get(target: string): LoadRecord | undefined {
    return this.records.get(target);
  }

  private put(target: string, record: LoadRecord): void {
    this.records.delete(target);
    if (this.records.size >= LOAD_HISTORY_MAX) this.records.delete(this.records.keys().next().value!);
    this.records.set(target, record);
  }
}
