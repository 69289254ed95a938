/**
 * @module observability/refusal-summary
 * Overload refusals are logged as one warn line when they start (the first
 * refusal after a quiet window, at once) and then one per window (default
 * 10 s) with their counts by reason and the most refused models, not one
 * line per refusal: under a retry storm refusals come by the ten thousand a
 * second, and a line each would cost more than the refusal itself and bury
 * every other line. Each refusal's own `request rejected` line is at debug.
 */
import type { Logger } from './logger.js';

/** The part of a Clock (src/clock.ts) the summary needs: one timer per window. */
export interface SummaryTimer {
  setTimer(delayUs: number, fn: () => void): () => void;
}

export const DEFAULT_SUMMARY_WINDOW_MS = 10_000;
/** Models named in one line, the most refused first. */
const TOP_MODELS = 10;

export class RefusalSummary {
  private byReason = new Map<string, number>();
  private byModel = new Map<string, number>();
  private open = false;

  constructor(
    private readonly logger: Logger,
    private readonly timer: SummaryTimer,
    private readonly windowMs = DEFAULT_SUMMARY_WINDOW_MS,
  ) {}

  note(reason: string, model: string): void {
    if (!this.open) {
      this.open = true;
      this.timer.setTimer(this.windowMs * 1000, this.flush);
      this.logger.warn(
        { code: 'OVERLOADED', reason, ...(model === '' ? {} : { model }) },
        `refusing inference requests for overload (${reason}); counts follow every ${this.windowMs / 1000} s while it lasts`,
      );
      return;
    }
    this.byReason.set(reason, (this.byReason.get(reason) ?? 0) + 1);
    if (model !== '') this.byModel.set(model, (this.byModel.get(model) ?? 0) + 1);
  }

  /** Writes the window's line and opens the next window; a window without refusals closes quietly. */
  readonly flush = (): void => {
    if (this.byReason.size === 0) {
      this.open = false;
      return;
    }
    this.timer.setTimer(this.windowMs * 1000, this.flush);
    let total = 0;
    for (const n of this.byReason.values()) total += n;
    const models = [...this.byModel].sort((a, b) => b[1] - a[1]).slice(0, TOP_MODELS);
    this.logger.warn(
      {
        code: 'OVERLOADED',
        refused: total,
        reasons: Object.fromEntries(this.byReason),
        models: Object.fromEntries(models),
        windowMs: this.windowMs,
      },
      `refused ${total} inference requests for overload in the last ${this.windowMs / 1000} s (429 with Retry-After; 503 on the KServe routes)`,
    );
    this.byReason = new Map();
    this.byModel = new Map();
  };
}
