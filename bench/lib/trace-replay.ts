/**
 * @module bench/lib/trace-replay
 * Replays a fixed request trace against a loopback server with `concurrency`
 * workers pulling the next position from the trace, timing each request on
 * its own (autocannon repeats one request; a trace needs a different target
 * per request and the per-position latency). node:http with a keep-alive
 * agent rather than fetch: on a 2-core box the load generator's CPU is taken
 * from the server, and node:http costs less per request.
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';

export interface ReplayRequest {
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

export interface ReplayOptions {
  readonly port: number;
  readonly length: number;
  readonly concurrency: number;
  /** The request at trace position i. */
  request(i: number): ReplayRequest;
  /** undefined when the answer at position i is right, else why it is wrong. */
  check(i: number, status: number, body: string): string | undefined;
  /** A request not answered within this is destroyed and counted as an error. */
  readonly timeoutMs: number;
  /** Called every `progressEvery` completed requests (progress on stderr). */
  readonly onProgress?: (done: number) => void;
  readonly progressEvery?: number;
}

export interface ReplayResult {
  /** Latency of each position, ms (send → whole body received). */
  readonly latencyMs: Float64Array;
  /** HTTP status per position; 0 = no answer (socket error or timeout). */
  readonly status: Uint16Array;
  /** Positions whose answer failed the check (or got none). */
  readonly failed: Uint8Array;
  readonly errors: number;
  /** Error kind (status + reason) → count and first message seen. */
  readonly errorKinds: Readonly<Record<string, { count: number; first: string }>>;
  readonly seconds: number;
}

function post(agent: http.Agent, port: number, r: ReplayRequest, timeoutMs: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: r.path,
        agent,
        headers: { 'content-type': 'application/json', 'content-length': String(r.body.length), ...r.headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(r.body);
  });
}

/** `HTTP 507 INSUFFICIENT_MEMORY` (the server's stable error code when the body has one), `HTTP 200 wrong answer`. */
function errorKind(status: number, body: string): string {
  if (status === 200) return 'HTTP 200 wrong answer';
  const code = /"code"\s*:\s*"([A-Z_]+)"/.exec(body)?.[1];
  return code === undefined ? `HTTP ${status}` : `HTTP ${status} ${code}`;
}

export async function replayTrace(options: ReplayOptions): Promise<ReplayResult> {
  const { port, length, concurrency, timeoutMs } = options;
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const latencyMs = new Float64Array(length);
  const status = new Uint16Array(length);
  const failed = new Uint8Array(length);
  const errorKinds: Record<string, { count: number; first: string }> = {};
  let errors = 0;
  let next = 0;
  let done = 0;
  const every = options.progressEvery ?? 0;
  const fail = (i: number, kind: string, message: string): void => {
    failed[i] = 1;
    errors++;
    const k = (errorKinds[kind] ??= { count: 0, first: message.slice(0, 500) });
    k.count++;
  };
  const worker = async (): Promise<void> => {
    for (let i = next++; i < length; i = next++) {
      const request = options.request(i);
      const t0 = performance.now();
      try {
        const answer = await post(agent, port, request, timeoutMs);
        latencyMs[i] = performance.now() - t0;
        status[i] = answer.status;
        const problem = options.check(i, answer.status, answer.body);
        if (problem !== undefined) fail(i, errorKind(answer.status, answer.body), problem);
      } catch (err) {
        latencyMs[i] = performance.now() - t0;
        const message = err instanceof Error ? err.message : String(err);
        fail(i, `no answer: ${message.startsWith('no answer within') ? 'timeout' : message}`, message);
      }
      done++;
      if (every > 0 && done % every === 0) options.onProgress?.(done);
    }
  };
  const started = performance.now();
  try {
    await Promise.all(Array.from({ length: Math.max(1, concurrency) }, worker));
  } finally {
    agent.destroy();
  }
  return { latencyMs, status, failed, errors, errorKinds, seconds: (performance.now() - started) / 1000 };
}
