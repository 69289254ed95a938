/**
 * @module cli/progress
 * Progress of long CLI work (an upload, packing a large model, a perf run) on
 * stderr, as npm and cargo show theirs. On a terminal one line is redrawn (at
 * most every 100 ms): a bar, percent, bytes, rate and time left. Elsewhere (CI
 * logs, pipes, `2> file`) a plain line is printed at a steady interval
 * (`intervalMs`, 5 s by default) and once at the end, so a log of a
 * multi-GB upload stays short and still shows it moving.
 */
import { formatBytes } from './cli-support.js';

const WIDTH = 30;
const REDRAW_MS = 100;
/** Plain lines (not a terminal): one per this many ms. */
export const DEFAULT_PROGRESS_INTERVAL_MS = 5000;

export interface ProgressOptions {
  /** Not a terminal: the least time between two lines (the first update and the end always print). */
  readonly intervalMs?: number;
  /** How amounts are shown: bytes (the default), or plain counts with a unit (`requests`, `steps`). */
  readonly unit?: string;
}

function seconds(s: number): string {
  if (!Number.isFinite(s)) return '?';
  if (s < 60) return `${Math.ceil(s)} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

export class ProgressBar {
  private lastDraw = -Infinity;
  private readonly started = performance.now();
  private readonly intervalMs: number;

  constructor(
    private readonly stream: NodeJS.WritableStream & { isTTY?: boolean },
    private readonly total: number,
    /** What is in progress, first on each line (`uploading model.tar.gz`). */
    private readonly title: string,
    private readonly options: ProgressOptions = {},
  ) {
    this.intervalMs = options.intervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS;
  }

  private amount(n: number): string {
    return this.options.unit === undefined ? formatBytes(n) : `${Math.round(n)}`;
  }

  private line(done: number): string {
    const fraction = this.total > 0 ? Math.min(1, done / this.total) : 1;
    const filled = Math.round(fraction * WIDTH);
    const elapsed = (performance.now() - this.started) / 1000;
    const perSecond = elapsed > 0 ? done / elapsed : 0;
    const rate = elapsed > 0 ? ` ${this.options.unit === undefined ? `${formatBytes(perSecond)}/s` : `${perSecond.toFixed(1)} ${this.options.unit}/s`}` : '';
    const eta = fraction > 0 && fraction < 1 && perSecond > 0 ? `, ${seconds((this.total - done) / perSecond)} left` : '';
    return `${this.title} [${'#'.repeat(filled)}${'.'.repeat(WIDTH - filled)}] ${(fraction * 100).toFixed(0).padStart(3)}% ${this.amount(done)}/${this.amount(this.total)}${this.options.unit === undefined ? '' : ` ${this.options.unit}`}${rate}${eta}`;
  }

  /** `done` so far; `step` names what just finished (shown on plain lines). */
  update(done: number, step?: string): void {
    const now = performance.now();
    if (this.stream.isTTY) {
      if (now - this.lastDraw < REDRAW_MS && done < this.total) return;
      this.lastDraw = now;
      this.stream.write(`\r${this.line(done)}`);
    } else {
      if (now - this.lastDraw < this.intervalMs) return;
      this.lastDraw = now;
      this.stream.write(`${this.line(done)}${step ? ` (${step})` : ''}\n`);
    }
  }

  /** The last line: on a terminal the bar is ended with a newline; elsewhere the final state is printed. */
  finish(done: number): void {
    if (this.stream.isTTY) {
      this.stream.write(`\r${this.line(done)}\n`);
    } else {
      this.stream.write(`${this.line(done)}\n`);
    }
  }
}

/**
 * A status line under a log, for work measured in steps rather than bytes
 * (`onnx-mme perf`): on a terminal `status` redraws one line (a bar of the
 * steps done and the latest news) and `log` prints a lasting line above it;
 * elsewhere both print plain lines, as they come.
 */
export class StatusLine {
  private shown = false;

  constructor(private readonly stream: NodeJS.WritableStream & { isTTY?: boolean; columns?: number }) {}

  /** `done` of `total` steps, and what is happening now. */
  status(done: number, total: number, text: string): void {
    if (!this.stream.isTTY) {
      this.stream.write(`${text}\n`);
      return;
    }
    const fraction = total > 0 ? Math.min(1, done / total) : 1;
    const filled = Math.round(fraction * 20);
    const line = `[${'#'.repeat(filled)}${'.'.repeat(20 - filled)}] ${done}/${total} ${text.trim()}`;
    const width = this.stream.columns ?? 120;
    this.stream.write(`\r\u001b[K${line.length > width - 1 ? line.slice(0, width - 1) : line}`);
    this.shown = true;
  }

  /** A line that stays (the status line, if shown, is cleared first and redrawn by the next `status`). */
  log(text: string): void {
    if (this.shown) this.stream.write('\r\u001b[K');
    this.shown = false;
    this.stream.write(`${text}\n`);
  }

  /** Clears the status line (a terminal), so what follows starts on a clean line. */
  end(): void {
    if (this.shown) this.stream.write('\r\u001b[K');
    this.shown = false;
  }
}
