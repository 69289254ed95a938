/**
 * @module cli/progress
 * A progress bar on stderr. On a terminal it redraws one line (at most every
 * 100 ms); otherwise (CI logs, pipes) it prints a line per reported step, so
 * logs stay readable and bounded.
 */
import { formatBytes } from './cli-support.js';

const WIDTH = 30;
const REDRAW_MS = 100;

export class ProgressBar {
  private lastDraw = 0;
  private readonly started = performance.now();
  private drawn = false;

  constructor(
    private readonly stream: NodeJS.WritableStream & { isTTY?: boolean },
    private readonly total: number,
    private readonly label: string,
  ) {}

  private line(done: number): string {
    const fraction = this.total > 0 ? Math.min(1, done / this.total) : 1;
    const filled = Math.round(fraction * WIDTH);
    const seconds = (performance.now() - this.started) / 1000;
    const rate = seconds > 0 ? `${formatBytes(done / seconds)}/s` : '';
    return `${this.label} [${'#'.repeat(filled)}${'.'.repeat(WIDTH - filled)}] ${(fraction * 100).toFixed(0).padStart(3)}% ${formatBytes(done)}/${formatBytes(this.total)} ${rate}`;
  }

  /** `done` bytes so far; `step` names what just finished (non-terminal output prints one line per step). */
  update(done: number, step?: string): void {
    if (this.stream.isTTY) {
      const now = performance.now();
      if (now - this.lastDraw < REDRAW_MS && done < this.total) return;
      this.lastDraw = now;
      this.stream.write(`\r${this.line(done)}`);
      this.drawn = true;
    } else {
      this.stream.write(`${this.line(done)}${step ? ` (${step})` : ''}\n`);
      this.drawn = true;
    }
  }

  finish(done: number): void {
    if (this.stream.isTTY) {
      this.stream.write(`\r${this.line(done)}\n`);
    } else if (!this.drawn) {
      this.stream.write(`${this.line(done)}\n`);
    }
  }
}
