/**
 * @module registry/load-progress
 * Where a load stands while it runs: its phase (downloading, waiting for a
 * slot or memory, creating sessions, warming up, measuring), the download's
 * bytes, total, rate and time left (store/transfer-progress.ts), and how long
 * it has run. The repository index shows it beside the LOADING state, and a
 * load that lasts past one interval logs a `model load in progress` line at
 * every interval (model, request id, phase, bytes, percent, rate, ETA), so a
 * multi-GB model is not minutes of silence.
 */
import type { Logger } from '../observability/logger.js';
import type { TransferSnapshot } from '../store/transfer-progress.js';

/** MME_PROGRESS_LOG_SECONDS's default. */
export const DEFAULT_PROGRESS_INTERVAL_MS = 5_000;

export const LOAD_PHASES = [
  'preparing files',
  'downloading',
  'waiting for a load slot',
  'waiting for memory',
  'creating sessions',
  'warming up',
  'measuring',
] as const;
export type LoadPhase = (typeof LOAD_PHASES)[number];

/** What the repository index shows of a load in progress. */
export interface LoadProgressView {
  readonly phase: LoadPhase;
  /** Of the phase, where known (the download's bytes over its Content-Length). */
  readonly fraction: number | undefined;
  readonly bytes: number | undefined;
  readonly totalBytes: number | undefined;
  readonly bytesPerSecond: number | undefined;
  readonly etaSeconds: number | undefined;
  readonly elapsedMs: number;
}

export interface LoadProgressOptions {
  readonly label: string;
  /** The request that started the load, when one did. */
  readonly requestId: string | undefined;
  readonly logger: Logger;
  /** Between progress lines (the first after one interval); 0 = no lines. */
  readonly intervalMs: number;
  /** The download of this load, while it runs. */
  readonly transfer: () => TransferSnapshot | undefined;
  /** The first phase: `downloading` from a remote source, `preparing files` (extraction, checks) from a local one. */
  readonly firstPhase: LoadPhase;
  readonly now?: () => number;
}

export class LoadProgress {
  private phase: LoadPhase;
  private readonly startedAt: number;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: LoadProgressOptions) {
    this.now = options.now ?? (() => performance.now());
    this.startedAt = this.now();
    this.phase = options.firstPhase;
  }

  /** Starts the progress lines. */
  start(): this {
    if (this.options.intervalMs > 0) {
      this.timer = setInterval(() => this.log(), this.options.intervalMs);
      this.timer.unref();
    }
    return this;
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  setPhase(phase: LoadPhase): void {
    this.phase = phase;
  }

  view(): LoadProgressView {
    const transfer = this.phase === 'downloading' ? this.options.transfer() : undefined;
    return {
      phase: this.phase,
      fraction: transfer?.fraction,
      bytes: transfer?.bytes,
      totalBytes: transfer?.totalBytes,
      bytesPerSecond: transfer?.bytesPerSecond,
      etaSeconds: transfer?.etaSeconds,
      elapsedMs: Math.round(this.now() - this.startedAt),
    };
  }

  private log(): void {
    const v = this.view();
    const { label, requestId, logger } = this.options;
    logger.info(
      {
        model: label,
        ...(requestId === undefined ? {} : { reqId: requestId }),
        phase: v.phase,
        elapsedMs: v.elapsedMs,
        ...(v.bytes === undefined ? {} : { bytes: v.bytes }),
        ...(v.totalBytes === undefined ? {} : { totalBytes: v.totalBytes }),
        ...(v.fraction === undefined ? {} : { percent: Math.floor(v.fraction * 100) }),
        ...(v.bytesPerSecond === undefined ? {} : { bytesPerSecond: v.bytesPerSecond }),
        ...(v.etaSeconds === undefined ? {} : { etaSeconds: v.etaSeconds }),
      },
      'model load in progress',
    );
  }
}

/** The loads of one provenance in progress, by key: each runs with its progress lines, and the index reads their views. */
export class LoadProgressBoard {
  private readonly loads = new Map<string, LoadProgress>();

  constructor(private readonly defaults: { readonly logger: Logger; readonly intervalMs: number }) {}

  /** Runs `load` with a LoadProgress that logs until it settles; `view(key)` shows it meanwhile. */
  async run<T>(
    key: string,
    options: Pick<LoadProgressOptions, 'label' | 'requestId' | 'firstPhase'> & { readonly transfer?: LoadProgressOptions['transfer'] },
    load: (progress: LoadProgress) => Promise<T>,
  ): Promise<T> {
    const progress = new LoadProgress({ ...this.defaults, transfer: () => undefined, ...options }).start();
    this.loads.set(key, progress);
    try {
      return await load(progress);
    } finally {
      progress.stop();
      if (this.loads.get(key) === progress) this.loads.delete(key);
    }
  }

  view(key: string): LoadProgressView | undefined {
    return this.loads.get(key)?.view();
  }
}
