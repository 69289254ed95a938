/**
 * @module test/support/metric-value
 * One series of a metric from a server's /metrics text: `metricValue` by
 * exact label set (fetching the text), `sample` by the labels given (others
 * may be present) in text already read; undefined when the series is absent.
 */
import { request } from './test-server.js';

export async function metricValue(baseUrl: string, name: string, labels: Record<string, string>): Promise<number | undefined> {
  const text = (await request(`${baseUrl}/metrics`)).text;
  const want = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .sort()
    .join(',');
  for (const line of text.split('\n')) {
    const m = /^([a-z_:]+)\{([^}]*)\} (\S+)$/.exec(line);
    if (m && m[1] === name && m[2]!.split(',').sort().join(',') === want) return Number(m[3]);
  }
  return undefined;
}

/** The value of the first sample line `name{labels} value` whose labels include `labels` (in any order). */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = new Map([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1]!, x[2]!]));
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) return Number(m[3]);
  }
  return undefined;
}
