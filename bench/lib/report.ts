/**
 * @module bench/lib/report
 * What a `*.bench.ts` module's `run()` returns, and table formatting for the
 * terminal (aligned text) and for latest.md (markdown).
 */

export interface BenchReport {
  /** Short id, e.g. `invocations`. */
  readonly name: string;
  readonly title: string;
  /** Settings the numbers depend on (durations, concurrency, server settings). */
  readonly settings: Readonly<Record<string, unknown>>;
  /** Tables as aligned text, for the terminal. */
  readonly text: string;
  /** The same tables as markdown, for latest.md. */
  readonly markdown: string;
  /** Every measurement, for latest.json. */
  readonly data: unknown;
}

/** A bench module as run-all loads it. */
export interface BenchModule {
  run(): Promise<BenchReport>;
}

export type Align = 'l' | 'r';

export interface Table {
  readonly headers: readonly string[];
  readonly rows: readonly (readonly string[])[];
  /** Per column; default: first column left, the rest right. */
  readonly align?: readonly Align[];
}

function alignOf(table: Table, i: number): Align {
  return table.align?.[i] ?? (i === 0 ? 'l' : 'r');
}

export function textTable(table: Table): string {
  const widths = table.headers.map((h, i) => Math.max(h.length, ...table.rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (alignOf(table, i) === 'l' ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(table.headers), widths.map((w) => '-'.repeat(w)).join('  '), ...table.rows.map(line)].join('\n');
}

export function markdownTable(table: Table): string {
  const row = (cells: readonly string[]): string => `| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`;
  const rule = `|${table.headers.map((_, i) => (alignOf(table, i) === 'l' ? ' :--- ' : ' ---: ')).join('|')}|`;
  return [row(table.headers), rule, ...table.rows.map(row)].join('\n');
}

/** A number for a table: 3 significant digits below 100, whole numbers above. */
export function num(n: number): string {
  if (!Number.isFinite(n)) return 'n/a';
  if (Math.abs(n) >= 100) return Math.round(n).toLocaleString('en-US');
  return n.toPrecision(3);
}

/** A ratio as `0.85x`. */
export function ratio(a: number, b: number): string {
  const r = a / b;
  return Number.isFinite(r) ? `${r.toFixed(2)}x` : 'n/a';
}
