/**
 * @module test/support/metric-value
 * One series of a metric from a server's /metrics text, by the labels given
 * (others, such as `target`, may be present): `metricValue` fetches the
 * text, `sample` reads text already fetched; undefined when the series is absent.
 */
import { request } from './test-server.js';

export async function metricValue(baseUrl: string, name: string, labels: Record<string, string>): Promise<number | undefined> {
  return sample((await request(`${baseUrl}/metrics`)).text, name, labels);
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
