/**
 * @module observability/pretty-log
 * MME_LOG_FORMAT=pretty: pino's JSON lines turned into one readable line each
 * (`12:00:01.234 INFO  onnx-mme listening  port=8080 source=file:///models …`)
 * for an operator at a terminal. A small formatter on the main thread rather
 * than pino's pretty transport: a transport runs in a worker thread of its
 * own, and the process's thread count is a documented promise
 * (docs/memory-and-caching.md); a terminal's log rate makes the parse per
 * line nothing. JSON stays the default: collectors parse it.
 */
import type { DestinationStream } from 'pino';

/** Fields every line has, shown in the line's head instead. */
const HEAD_FIELDS = new Set(['time', 'level', 'msg', 'service']);

const LEVEL_COLORS: Readonly<Record<string, string>> = { trace: '90', debug: '36', info: '32', warn: '33', error: '31', fatal: '35' };

/** A field's value as `key=value` shows it: plain words bare, anything with spaces or quotes quoted, objects as JSON. */
function valueText(value: unknown): string {
  if (typeof value === 'string') return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  if (value !== null && typeof value === 'object' && 'message' in value && typeof (value as { message: unknown }).message === 'string') {
    // A serialised error: its message is what a reader needs on this line.
    return JSON.stringify((value as { message: string }).message);
  }
  return JSON.stringify(value) ?? String(value);
}

/** `HH:MM:SS.mmm` of an ISO time (the server logs UTC ISO times). */
function clock(time: unknown): string {
  return typeof time === 'string' && time.length >= 23 ? time.slice(11, 23) : '';
}

/** One JSON log line as one readable line (with its newline); a line that is not JSON passes through unchanged. */
export function prettyLine(json: string, color = false): string {
  let rec: Record<string, unknown>;
  try {
    rec = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const level = String(rec['level'] ?? '');
  const label = level.toUpperCase().padEnd(5);
  const code = LEVEL_COLORS[level];
  const head = `${clock(rec['time'])} ${color && code ? `\u001b[${code}m${label}\u001b[39m` : label} ${String(rec['msg'] ?? '')}`;
  const fields: string[] = [];
  for (const [k, v] of Object.entries(rec)) if (!HEAD_FIELDS.has(k) && v !== undefined) fields.push(`${k}=${valueText(v)}`);
  return fields.length === 0 ? `${head}\n` : `${head}  ${fields.join(' ')}\n`;
}

/** A pino destination that writes each line to `out` in the pretty form; flushes pass through. */
export function prettyDestination(out: DestinationStream & { flush?: (cb: (err?: Error) => void) => void }, color = false): DestinationStream {
  return {
    write(line: string): void {
      out.write(prettyLine(line.endsWith('\n') ? line.slice(0, -1) : line, color));
    },
    flush(cb: (err?: Error) => void): void {
      if (typeof out.flush === 'function') out.flush(cb);
      else cb();
    },
  } as DestinationStream;
}
