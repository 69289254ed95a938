/**
 * @module cli/models
 * `onnx-mme models [--url <server>]`: every model a running server knows (the
 * models of its source, SageMaker-loaded ones) as a table: state, memory
 * booked against the budget, last use, and why one is not loaded (its load's
 * error when it failed). It reads the server's repository index (POST
 * /v2/repository/index), the one view of every model, so it needs no other
 * route and shows what tritonclient would.
 */
import {
  EXIT_FAILED,
  EXIT_OK,
  formatBytes,
  noAnswerReason,
  numberOption,
  parseCommandLine,
  serverUrl,
  write,
  type CliCommand,
  type CliIo,
} from './cli-support.js';

/** One row of the index as the server sends it (Triton's fields, then ours). */
export interface IndexRow {
  readonly name: string;
  readonly version?: string;
  readonly state: string;
  readonly reason: string;
  readonly reserved_bytes?: number;
  readonly last_used?: string;
  readonly last_error?: { readonly code: string; readonly message: string; readonly at: string };
}

function ago(iso: string | undefined, nowMs: number): string {
  if (iso === undefined) return '-';
  const s = Math.max(0, Math.round((nowMs - Date.parse(iso)) / 1000));
  if (s < 120) return `${s} s ago`;
  if (s < 7200) return `${Math.round(s / 60)} min ago`;
  if (s < 172_800) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86_400)} d ago`;
}

/** The rows as an aligned table; the reason column last, since a load error can be long. */
export function formatModelTable(rows: readonly IndexRow[], nowMs: number): string {
  const header = ['MODEL', 'VERSION', 'STATE', 'MEMORY', 'LAST USED', 'REASON'];
  const cells = rows.map((r) => [
    r.name,
    r.version ?? '-',
    r.state,
    r.reserved_bytes === undefined ? '-' : formatBytes(r.reserved_bytes),
    ago(r.last_used, nowMs),
    r.reason === '' ? (r.last_error === undefined ? '' : `last load failed: ${r.last_error.message}`) : r.reason,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: readonly string[]): string =>
    c
      .map((v, i) => (i === c.length - 1 ? v : v.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  const count = (state: string): number => rows.filter((r) => r.state === state).length;
  const summary = `${rows.length} model${rows.length === 1 ? '' : 's'}: ${count('READY')} ready, ${count('LOADING')} loading, ${rows.filter((r) => r.last_error !== undefined && r.state === 'UNAVAILABLE').length} failed to load`;
  return [line(header), ...cells.map(line), summary].join('\n');
}

export const modelsCommand: CliCommand = {
  name: 'models',
  help: `Usage: onnx-mme models [--url <server>] [--ready] [--json]

Lists every model a running server knows: the models of its source (for a
local directory every model directory and archive in it; for S3 the objects
under the prefix) and the ones loaded through SageMaker's POST /models, with
state (READY, LOADING, UNLOADING, UNAVAILABLE), memory booked against the
budget, last use, and the reason one is not loaded (its load's error when it
failed, "unloaded" after an eviction or unload, else "not loaded"). It reads
POST <url>/v2/repository/index, Triton's repository index.

Options:
  --url <url>      server address (default http://127.0.0.1:$SAGEMAKER_BIND_TO_PORT, i.e. :8080)
  --ready          only the models that are READY
  --json           print the index as the server answered it (JSON)
  --timeout <s>    give up after this many seconds (default 30)
  -h, --help       this help

Exit status: 0 listed, 1 the server could not be reached or refused, 2 bad command line.`,
  async run(argv: readonly string[], io: CliIo): Promise<number> {
    const parsed = parseCommandLine(
      argv,
      { url: { type: 'string' }, ready: { type: 'boolean' }, json: { type: 'boolean' }, timeout: { type: 'string' } },
      { min: 0, max: 0, names: '' },
    );
    if (parsed.help) {
      write(io.stdout, this.help);
      return EXIT_OK;
    }
    const timeoutMs = numberOption(parsed, 'timeout', 30, 0.001) * 1000;
    const base = serverUrl(parsed, io.env);
    const url = `${base}/v2/repository/index`;
    let res: Response;
    try {
      res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(parsed.values['ready'] === true ? { ready: true } : {}),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      write(io.stderr, `models: ${url}: ${noAnswerReason(err, timeoutMs)}`);
      return EXIT_FAILED;
    }
    const text = await res.text();
    if (!res.ok) {
      write(io.stderr, `models: HTTP ${res.status} from ${url}\n${text}`);
      return EXIT_FAILED;
    }
    if (parsed.values['json'] === true) {
      write(io.stdout, text);
      return EXIT_OK;
    }
    write(io.stdout, formatModelTable(JSON.parse(text) as IndexRow[], Date.now()));
    return EXIT_OK;
  },
};
