/**
 * @module bench/lib/baselines
 * Parent-side launchers for everything the bench measures, each in its own
 * child process (compiled entries next to this module in dist/bench/lib):
 *
 * - onnx-mme: the real server (onnx-mme-server.js).
 * - express: the hand-written express + onnxruntime server (express-server.js).
 * - bare-http: node:http that parses the JSON and answers a fixed body, the
 *   HTTP limit (bare-http-server.js).
 * - raw-ort: session.run back to back in one process, the onnxruntime
 *   limit (raw-ort-loop.js).
 */
import { launcherEnv } from '../../test/support/launcher.js';
import { childPort, spawnChild, type BenchChild } from './child.js';

export interface HttpTarget {
  readonly name: string;
  /** Full URL to POST to. */
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  /** What the child reported at start (settings worth recording). */
  readonly info: Readonly<Record<string, unknown>>;
  /** The server's process id (its CPU time per request, bench/lib/proc-cpu.ts). */
  readonly pid: number | undefined;
  stop(): Promise<void>;
}

function httpTarget(name: string, child: BenchChild, path: string, headers: Record<string, string> = {}): HttpTarget {
  return {
    name,
    pid: child.pid,
    url: `http://127.0.0.1:${childPort(child)}${path}`,
    headers,
    info: child.hello,
    stop: () => child.stop(),
  };
}

/** Rows and model executions per model since the server started (average batch = rows / executions). */
export type BatchStats = Readonly<Record<string, { readonly rows: number; readonly executions: number }>>;

export interface OnnxMmeProcess {
  readonly port: number;
  readonly pid: number | undefined;
  /** Where its log lines go (BENCH_LOG_FILE), when it logs. */
  readonly logFile: string | undefined;
  readonly info: Readonly<Record<string, unknown>>;
  target(model: string): HttpTarget;
  stats(): Promise<BatchStats>;
  stop(): Promise<void>;
}

/**
 * The onnx-mme server as one process, serving `modelSource` (a directory of
 * targets). `env` adds server settings on top of the bench's environment,
 * e.g. `{ MME_DYNAMIC_BATCHING: 'false' }`. With `logFile`, the server logs
 * as it ships (MME_LOG_LEVEL's default, the server's own destination) into
 * that file, as a container's log driver would take its stdout; without, it
 * is silent.
 */
export async function startOnnxMme(
  modelSource: string,
  cacheDir: string,
  env: Readonly<Record<string, string>> = {},
  name = 'onnx-mme',
  logFile?: string,
): Promise<OnnxMmeProcess> {
  // The settings the launcher (./serve) gives the server process; `env` wins.
  const child = await spawnChild(name, new URL('./onnx-mme-server.js', import.meta.url), [], {
    ...launcherEnv(process.env['NODE_OPTIONS']),
    ...env,
    MME_MODEL_SOURCE: modelSource,
    MME_CACHE_DIR: cacheDir,
    ...(logFile === undefined ? {} : { BENCH_LOG_FILE: logFile }),
  });
  const { port: _port, ...info } = child.hello;
  return {
    port: childPort(child),
    pid: child.pid,
    logFile,
    info,
    target: (model) => httpTarget(name, child, '/invocations', { 'X-Amzn-SageMaker-Target-Model': model }),
    stats: () => child.request<BatchStats>({ stats: true }),
    stop: () => child.stop(),
  };
}

/** The hand-written express + onnxruntime baseline for one model file. */
export async function startExpressBaseline(modelFile: string): Promise<HttpTarget> {
  return httpTarget('express', await spawnChild('express', new URL('./express-server.js', import.meta.url), [modelFile]), '/invocations');
}

/** The bare node:http server: JSON.parse and a fixed answer. */
export async function startBareHttp(): Promise<HttpTarget> {
  return httpTarget('bare-http', await spawnChild('bare-http', new URL('./bare-http-server.js', import.meta.url)), '/invocations');
}

export interface RawOrtResult {
  readonly runsPerSec: number;
  readonly p50: number;
  readonly p99: number;
  readonly runs: number;
}

export interface RawOrtLoop {
  measure(options: { concurrency: number; durationS: number; warmupS?: number }): Promise<RawOrtResult>;
  stop(): Promise<void>;
}

/** session.run back to back on one session of `modelFile`, batch 1 × `features`. */
export async function startRawOrtLoop(modelFile: string, features: number): Promise<RawOrtLoop> {
  const child = await spawnChild('raw-ort', new URL('./raw-ort-loop.js', import.meta.url), [modelFile, String(features)]);
  return {
    measure: (options) => child.request<RawOrtResult>(options),
    stop: () => child.stop(),
  };
}
