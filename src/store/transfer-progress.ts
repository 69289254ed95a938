/**
 * @module store/transfer-progress
 * How far a transfer has come: bytes so far, the total where the source said
 * it (S3's Content-Length), the average rate, and the time left at that rate.
 * A measurement only, kept per transfer by the source that runs it and read
 * by whoever reports on it (registry/load-progress.ts logs it at a steady
 * interval with the model and the request, and shows it in the repository
 * index). A module of its own so that any remote fetch can use it.
 */

export interface TransferSnapshot {
  readonly bytes: number;
  /** Undefined when the source did not say. */
  readonly totalBytes: number | undefined;
  /** bytes / totalBytes in [0, 1]; undefined without a total. */
  readonly fraction: number | undefined;
  /** Average since the transfer began. */
  readonly bytesPerSecond: number;
  /** At the average rate; undefined without a total or before any byte came. */
  readonly etaSeconds: number | undefined;
  readonly elapsedMs: number;
}

export class TransferProgress {
  private received = 0;
  private readonly startedAt: number;

  constructor(
    private readonly totalBytes: number | undefined,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.startedAt = now();
  }

  add(bytes: number): void {
    this.received += bytes;
  }

  snapshot(): TransferSnapshot {
    const elapsedMs = Math.max(0, this.now() - this.startedAt);
    const bytesPerSecond = elapsedMs > 0 ? Math.round((this.received * 1000) / elapsedMs) : 0;
    const total = this.totalBytes !== undefined && this.totalBytes > 0 ? this.totalBytes : undefined;
    const fraction = total === undefined ? undefined : Math.min(1, this.received / total);
    const etaSeconds =
      total === undefined || bytesPerSecond <= 0 ? undefined : Math.max(0, Math.round(((total - Math.min(total, this.received)) / bytesPerSecond) * 10) / 10);
    return { bytes: this.received, totalBytes: total, fraction, bytesPerSecond, etaSeconds, elapsedMs: Math.round(elapsedMs) };
  }
}

/** The transfer running per key (a source's target), for `transferProgress(target)`. */
export class ActiveTransfers {
  private readonly running = new Map<string, TransferProgress>();

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** A transfer of `totalBytes` (when known) begins for `key`; it replaces any earlier one's report. */
  start(key: string, totalBytes: number | undefined): TransferProgress {
    const progress = new TransferProgress(totalBytes, this.now);
    this.running.set(key, progress);
    return progress;
  }

  /** `progress` ended: no longer reported (unless a later transfer has replaced it already). */
  end(key: string, progress: TransferProgress): void {
    if (this.running.get(key) === progress) this.running.delete(key);
  }

  snapshot(key: string): TransferSnapshot | undefined {
    return this.running.get(key)?.snapshot();
  }
}
