/**
 * @module bench/lib/prom-text
 * Reads the server's GET /metrics (Prometheus text format 0.0.4) into
 * samples, so a bench can compare what the server counted with what it
 * measured from outside. Only what prom-client writes is handled: one sample
 * per line, `name{label="value",...} number`, `#` lines skipped.
 */

export interface PromSample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

function unescapeLabel(v: string): string {
  return v.replace(/\\(["\\n])/g, (_, c: string) => (c === 'n' ? '\n' : c));
}

function parseValue(raw: string): number {
  if (raw === '+Inf') return Number.POSITIVE_INFINITY;
  if (raw === '-Inf') return Number.NEGATIVE_INFINITY;
  return Number(raw);
}

export function parsePrometheusText(text: string): PromSample[] {
  const out: PromSample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = LINE.exec(line);
    if (!m) throw new Error(`unreadable metrics line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL)) labels[l[1]!] = unescapeLabel(l[2]!);
    out.push({ name: m[1]!, labels, value: parseValue(m[3]!) });
  }
  return out;
}

/** Sum of the samples named `name` whose labels include `match` (0 when none). */
export function promSum(samples: readonly PromSample[], name: string, match: Readonly<Record<string, string>> = {}): number {
  let sum = 0;
  for (const s of samples) {
    if (s.name !== name) continue;
    if (Object.entries(match).every(([k, v]) => s.labels[k] === v)) sum += s.value;
  }
  return sum;
}

/** GET http://127.0.0.1:port/metrics, parsed. */
export async function scrapeMetrics(port: number): Promise<PromSample[]> {
  const response = await fetch(`http://127.0.0.1:${port}/metrics`);
  const text = await response.text();
  if (response.status !== 200) throw new Error(`GET /metrics: HTTP ${response.status}: ${text.slice(0, 200)}`);
  return parsePrometheusText(text);
}
