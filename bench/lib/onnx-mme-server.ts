/**
 * @module bench/lib/onnx-mme-server
 * Child-process entry: the real onnx-mme server (startServer, as main.ts
 * uses it) on 127.0.0.1, port 0; silent, or with BENCH_LOG_FILE logging at
 * the configured level (MME_LOG_LEVEL, default info) into that file through
 * the server's own destination (observability/logger.ts). MME_MODEL_SOURCE and
 * MME_CACHE_DIR come from the environment the parent sets; other MME_*
 * settings pass through, so `MME_RUNTIME_WORKERS=1 npm run bench` works.
 * Prints `{"port": n, ...}` when listening; answers `{"stats": true}` with
 * rows and executions per model (for the average batch size); drains and
 * exits when stdin ends.
 */
import { loadServerConfig } from '../../src/config/server-config.js';
import { createLogger, logDestination, silentLogger } from '../../src/observability/logger.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { startServer } from '../../src/server.js';
import { announce, serveCommands } from './child.js';

const logFile = process.env['BENCH_LOG_FILE'];
const config = loadServerConfig({
  ...process.env,
  BENCH_LOG_FILE: undefined,
  MME_HOST: '127.0.0.1',
  SAGEMAKER_BIND_TO_PORT: '0',
  ...(logFile === undefined ? { MME_LOG_LEVEL: 'silent' } : {}),
  // No balancer in front: stopping skips the drain period (it changes nothing measured).
  MME_DRAIN_SECONDS: '0',
});
const logger = logFile === undefined ? silentLogger() : createLogger(config.logLevel, logDestination(logFile));
const running = await startServer(config, logger, createMetrics({ collectProcessMetrics: true }));
announce({
  port: running.port,
  // MME_GRPC_PORT=0 in the parent's env: the gRPC listener's port (grpc.bench).
  ...(running.grpcPort === undefined ? {} : { grpcPort: running.grpcPort }),
  runtimeWorkers: config.runtimeWorkers,
  intraOpThreads: config.intraOpThreads ?? 'onnxruntime default',
  maxInflightRequests: config.maxInflightRequests,
  dynamicBatching: config.dynamicBatching,
});

/** `{"stats": true}` → rows and executions per model so far (average batch = rows / executions). */
async function stats(): Promise<Record<string, { rows: number; executions: number }>> {
  const out: Record<string, { rows: number; executions: number }> = {};
  const read = async (metric: typeof running.metrics.inferenceCount, key: 'rows' | 'executions'): Promise<void> => {
    for (const v of (await metric.get()).values) {
      const model = String(v.labels['model'] ?? '');
      (out[model] ??= { rows: 0, executions: 0 })[key] += v.value;
    }
  };
  await read(running.metrics.inferenceCount, 'rows');
  await read(running.metrics.execCount, 'executions');
  return out;
}

serveCommands(
  async (command) => ((command as { stats?: boolean }).stats === true ? stats() : {}),
  async () => {
    await running.shutdown('bench finished');
    await new Promise<void>((resolve) => logger.flush(() => resolve()));
  },
);
