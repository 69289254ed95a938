/**
 * @module test/support/test-server
 * Starts the real server (the same startServer main.ts uses) on a free
 * loopback port with its own temp cache, a fresh metrics registry and a
 * logger that records JSON lines, so tests can assert on logs too.
 */
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { loadServerConfig } from '../../src/config/server-config.js';
import { createLogger } from '../../src/observability/logger.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { writeRepository, type ModelDirContents } from '../../examples/models/zoo.js';
import { tempDir, type Cleanups } from './temp-dir.js';

export interface TestServer {
  readonly url: string;
  readonly running: RunningServer;
  /** Parsed pino lines written so far. */
  readonly logs: Record<string, unknown>[];
  close(): Promise<void>;
}

export interface TestServerOptions {
  readonly modelSource: string;
  readonly cacheDir: string;
  readonly env?: Readonly<Record<string, string>>;
}

/**
 * What a test needs to drive the load and unload APIs: explicit model control
 * with the temp directory (where every test builds its model directories) as
 * the only url root. The shipped default is `none`; tests of that default
 * pass `MME_MODEL_CONTROL: 'none'` (or unset these) in `env`.
 */
export function explicitControl(root: string = os.tmpdir()): Record<string, string> {
  return { MME_MODEL_CONTROL: 'explicit', MME_MODEL_URL_ROOTS: root };
}

export async function startTestServer(options: TestServerOptions): Promise<TestServer> {
  const config = loadServerConfig({
    MME_HOST: '127.0.0.1',
    SAGEMAKER_BIND_TO_PORT: '0',
    MME_MODEL_SOURCE: options.modelSource,
    MME_CACHE_DIR: options.cacheDir,
    MME_LOG_LEVEL: 'debug',
    // No balancer in front: close() skips the drain period unless a test asks for one.
    MME_DRAIN_SECONDS: '0',
    ...explicitControl(),
    ...options.env,
  });
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) logs.push(JSON.parse(line) as Record<string, unknown>);
      cb();
    },
  });
  const logger = createLogger(config.logLevel, sink);
  const running = await startServer(config, logger, createMetrics({ maxTargets: config.metricsMaxTargets }));
  const url = `http://127.0.0.1:${running.port}`;
  return { url, running, logs, close: () => running.shutdown('test finished') };
}

export interface JsonReply {
  readonly status: number;
  readonly headers: Headers;
  readonly body: any; // test convenience
  readonly text: string;
}

/** fetch + JSON parse (when the body is JSON). */
export async function request(url: string, init: RequestInit & { json?: unknown } = {}): Promise<JsonReply> {
  const { json, ...rest } = init;
  const res = await fetch(url, {
    ...rest,
    ...(json === undefined ? {} : { body: JSON.stringify(json), headers: { 'content-type': 'application/json', ...(rest.headers as Record<string, string>) } }),
  });
  const text = await res.text();
  let body: unknown = undefined;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, body, text };
}

// The request bodies live beside the server for the tests that import both from here.
export { addSubBody, input } from './v2-json.js';

/**
 * A server over `models` (name → model), written as model directories into a
 * fresh temp directory with the server's cache beside them; `ctx` stops the
 * server, then removes the directory.
 */
export async function serveModelDirs(
  ctx: Cleanups,
  models: Readonly<Record<string, ModelDirContents>>,
  env?: Readonly<Record<string, string>>,
): Promise<TestServer> {
  const root = await tempDir(ctx);
  await writeRepository(path.join(root, 'models'), models);
  const server = await startTestServer({ modelSource: path.join(root, 'models'), cacheDir: path.join(root, 'cache'), ...(env ? { env } : {}) });
  ctx.after(() => server.close());
  return server;
}
