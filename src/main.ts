/**
 * @module main
 * Entry point: the only place that reads the environment (through
 * loadServerConfig; config/ort-env, imported first, only turns onnxruntime's
 * telemetry off before onnxruntime loads) and installs signal handlers. SageMaker runs `serve`,
 * which execs this file; Node is PID 1 there, so SIGTERM is ours to handle:
 * turn not ready while still serving (the drain), stop accepting, finish
 * in-flight requests, release sessions, exit well within SageMaker's 30 s.
 */
// First: onnxruntime's telemetry is decided before onnxruntime-node loads (config/ort-env.ts).
import './config/ort-env.js';
import { loadServerConfig, type ServerConfig } from './config/server-config.js';
import { createLogger } from './observability/logger.js';
import { startServer, type RunningServer } from './server.js';

/** The backstop fires this long after the shutdown deadline, which shutdown itself keeps. */
const SHUTDOWN_BACKSTOP_MARGIN_MS = 500;

async function main(): Promise<void> {
  let config: ServerConfig;
  try {
    config = loadServerConfig(process.env);
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(2);
  }
  const logger = createLogger(config.logLevel);
  // Handlers go in before startup: a SIGTERM that arrives while models or the
  // socket are still being set up must still end in an orderly exit.
  let running: RunningServer | undefined;
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    // A second signal (Ctrl-C twice) skips what is left of the drain period; the deadline stays.
    if (stopping) {
      running?.endDrain();
      return;
    }
    stopping = true;
    if (!running) {
      logger.info({ reason: signal }, 'signal before startup finished: exiting');
      logger.flush(() => process.exit(0));
      return;
    }
    // The backstop: whatever shutdown waits for, the process is gone by the deadline (SageMaker's SIGKILL comes later).
    setTimeout(() => {
      logger.error({ timeoutMs: config.shutdownTimeoutMs }, 'shutdown did not finish by MME_SHUTDOWN_TIMEOUT_SECONDS: exiting');
      logger.flush(() => process.exit(1));
    }, config.shutdownTimeoutMs + SHUTDOWN_BACKSTOP_MARGIN_MS).unref();
    running.shutdown(signal).then(
      // The destination is asynchronous: exit only once the last lines are written.
      () => logger.flush(() => process.exit(0)),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        logger.flush(() => process.exit(1));
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  running = await startServer(config, logger);
}

main().catch((err: unknown) => {
  process.stderr.write(`onnx-mme failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
