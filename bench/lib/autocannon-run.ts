/**
 * @module bench/lib/autocannon-run
 * One load test with autocannon, run programmatically against a loopback URL:
 * an optional warm-up run (discarded), then the measured run.
 *
 * Throughput is completed 2xx responses / seconds actually run (the mean
 * rate). Latencies come from autocannon's per-response hrtime timing, kept as
 * raw samples: autocannon's own histogram records whole milliseconds, too
 * coarse for sub-millisecond loopback requests.
 */
import autocannon from 'autocannon';
import { statSync } from 'node:fs';
import { processCpuUs } from './proc-cpu.js';
import { latencySummary, SampleBuffer, type RunSample } from './stats.js';

export interface LoadOptions {
  readonly url: string;
  /** POST body (JSON text). */
  readonly body: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly connections: number;
  readonly durationS: number;
  /** Warm-up run before the measured one, discarded; 0 = none. */
  readonly warmupS?: number;
  /** The server's process id: its CPU time over the measured run is reported (Linux /proc). */
  readonly pid?: number;
  /** The server's log file: the bytes it grew by over the measured run are reported. */
  readonly logFile?: string;
}

export interface LoadResult {
  /** Mean rate of 2xx responses over the measured run. */
  readonly requestsPerSec: number;
  /** Latency percentiles of 2xx responses, ms. */
  readonly p50: number;
  readonly p99: number;
  /** Socket errors, timeouts included. */
  readonly errors: number;
  readonly non2xx: number;
  /** 2xx responses counted. */
  readonly ok: number;
  readonly durationS: number;
  /** The server process's CPU time (user + system, all threads) over the measured run, µs; NaN without a pid. */
  readonly serverCpuUs: number;
  /** Bytes the server's log file grew by over the measured run; NaN without a log file. */
  readonly logBytes: number;
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);

function assertLoopback(url: string): void {
  const host = new URL(url).hostname;
  if (!LOOPBACK.has(host)) throw new Error(`bench load generator only targets loopback, got '${host}'`);
}

async function once(options: LoadOptions, durationS: number): Promise<LoadResult> {
  const logSize = (): number => (options.logFile === undefined ? Number.NaN : (statSync(options.logFile, { throwIfNoEntry: false })?.size ?? 0));
  const logBefore = logSize();
  const cpuBefore = options.pid === undefined ? Number.NaN : processCpuUs(options.pid);
  const latencies = new SampleBuffer();
  const instance = autocannon({
    url: options.url,
    method: 'POST',
    headers: { 'content-type': 'application/json', ...options.headers },
    body: options.body,
    connections: options.connections,
    duration: durationS,
    timeout: 30,
  });
  instance.on('response', (_client: unknown, statusCode: number, _bytes: number, responseTimeMs: number) => {
    if (statusCode >= 200 && statusCode < 300) latencies.push(responseTimeMs);
  });
  const result = await instance;
  const serverCpuUs = options.pid === undefined ? Number.NaN : processCpuUs(options.pid) - cpuBefore;
  const logBytes = logSize() - logBefore;
  const { p50, p99 } = latencySummary(latencies.values());
  const seconds = result.duration > 0 ? result.duration : durationS;
  return {
    requestsPerSec: result['2xx'] / seconds,
    p50,
    p99,
    errors: result.errors, // timeouts are counted here too
    non2xx: result.non2xx,
    ok: result['2xx'],
    durationS: seconds,
    serverCpuUs,
    logBytes,
  };
}

export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  assertLoopback(options.url);
  if (options.warmupS !== undefined && options.warmupS > 0) await once(options, options.warmupS);
  return once(options, options.durationS);
}

/**
 * One autocannon run with any body (a Buffer too) and exactly the headers
 * given, no warm-up: 2xx per second and their latency percentiles, for the
 * benches that compare body formats (binary.bench.ts, grpc.bench.ts).
 */
export async function loadSample(
  url: string,
  headers: Record<string, string>,
  body: string | Buffer,
  connections: number,
  durationS: number,
): Promise<RunSample> {
  assertLoopback(url);
  const latencies = new SampleBuffer();
  const instance = autocannon({ url, method: 'POST', headers, body, connections, duration: durationS, timeout: 60 });
  instance.on('response', (_c: unknown, status: number, _bytes: number, ms: number) => {
    if (status >= 200 && status < 300) latencies.push(ms);
  });
  const result = await instance;
  const { p50, p99 } = latencySummary(latencies.values());
  const seconds = result.duration > 0 ? result.duration : durationS;
  return { perSec: result['2xx'] / seconds, p50, p99, errors: result.errors, non2xx: result.non2xx };
}
