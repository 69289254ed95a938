/**
 * @module test/support/metric-value
 * One series of a metric from a server's /metrics text, by exact label set;
 * undefined when the series is absent.
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
