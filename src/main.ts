/**
 * @module main
 * Entry point: the only place that reads the environment (through
 * loadServerConfig; config/ort-env, imported first, only turns onnxruntime's
 * telemetry off before onnxruntime loads) and installs signal handlers. SageMaker runs `serve`,
 * which execs this file; Node is PID 1 there, so SIGTERM is ours to handle:
 * turn not ready while still serving (the drain), stop accepting, finish
 * in-flight requests, release sessions, exit well within SageMaker's 30 s.
 *
 * A start-up failure the operator can fix (a bad setting or argument, a port
 * in use, a missing model source, an unwritable cache) is one log line naming
 * the setting to change, and exit code 2; anything else is a bug: exit 1 with
 * its stack.
 */
// First: onnxruntime's telemetry is decided before onnxruntime-node loads (config/ort-env.ts).
import './config/ort-env.js';
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { logFormatOf, loadServerConfig, type ServerConfig } from './config/server-config.js';
import { parseServeArgs, SERVE_HELP } from './config/serve-args.js';
import { ServingError, StartupError } from './errors.js';
import { createLogger, serverDestination, type Logger } from './observability/logger.js';
import type { RunningServer } from './server.js';

/** The backstop fires this long after the shutdown deadline, which shutdown itself keeps. */
const SHUTDOWN_BACKSTOP_MARGIN_MS = 500;

/** Exit code of a start-up failure the operator fixes with a setting (docs/operations.md). */
const EXIT_SETTING = 2;

/** Run as `./serve` (this file is the entry script), not imported by `onnx-mme serve`, which parsed its own arguments. */
function isEntryScript(): boolean {
  const entry = process.argv[1];
  if (entry === undefined) return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

/** The one line of a failed start; exits once it is written (the promise never settles: callers return it). */
function failStart(logger: Logger, setting: string | undefined, message: string, fields: Record<string, unknown> = {}): Promise<never> {
  logger.fatal({ ...(setting === undefined ? {} : { setting }), exitCode: EXIT_SETTING, ...fields }, `onnx-mme cannot start: ${message}`);
  return new Promise<never>(() => logger.flush(() => process.exit(EXIT_SETTING)));
}

async function main(): Promise<void> {
  const color = process.stdout.isTTY === true;
  // Before the settings load, failures are written in MME_LOG_FORMAT when that is valid itself.
  const early = (): Logger => createLogger('info', serverDestination(logFormatOf(process.env), color));
  if (isEntryScript()) {
    const args = parseServeArgs(process.argv.slice(2));
    if (args.kind === 'help') {
      process.stdout.write(`${SERVE_HELP}\n`);
      return;
    }
    if (args.kind === 'refused') return failStart(early(), args.setting, args.message, { args: args.args });
  }
  let config: ServerConfig;
  try {
    config = loadServerConfig(process.env);
  } catch (err) {
    const settings = err instanceof ServingError ? (err.details?.['settings'] as string[] | undefined) : undefined;
    return failStart(early(), settings?.join(', '), (err as Error).message);
  }
  const logger = createLogger(config.logLevel, serverDestination(config.logFormat, color));
  // Handlers go in before startup: a SIGTERM that arrives while models or the
  // socket are still being set up must still end in an orderly exit.
  let running: RunningServer | undefined;
  let signalled: NodeJS.Signals | undefined;
  const stop = (server: RunningServer, signal: NodeJS.Signals, drain: boolean): void => {
    server.shutdown(signal, drain).then(
      // The destination is asynchronous: exit only once the last lines are written.
      () => logger.flush(() => process.exit(0)),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        logger.flush(() => process.exit(1));
      },
    );
  };
  // A second signal during the start comes from an operator who will not wait for it: exit, whatever that interrupts.
  const exitNow = (signal: NodeJS.Signals): void => {
    logger.warn({ reason: signal }, 'second signal before startup finished: exiting now');
    logger.flush(() => process.exit(0));
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    if (signalled !== undefined) {
      // A second signal (Ctrl-C twice) skips what is left of the drain period; the deadline stays.
      if (running) running.endDrain();
      else exitNow(signal);
      return;
    }
    signalled = signal;
    // The backstop: whatever shutdown waits for, the process is gone by the deadline (SageMaker's SIGKILL comes later).
    setTimeout(() => {
      logger.error({ timeoutMs: config.shutdownTimeoutMs }, 'shutdown did not finish by MME_SHUTDOWN_TIMEOUT_SECONDS: exiting');
      logger.flush(() => process.exit(1));
    }, config.shutdownTimeoutMs + SHUTDOWN_BACKSTOP_MARGIN_MS).unref();
    if (running) {
      stop(running, signal, true);
      return;
    }
    // Exiting here could stop a runtime worker while node registers onnxruntime's addon, which aborts the
    // process (SIGABRT; runtime/runtime-pool.ts, STOP_WAITS_FOR_START_MS): the start finishes, then the
    // shutdown stops everything in order.
    logger.info({ reason: signal, hint: 'a second signal exits now' }, 'signal before startup finished: stopping once the start is through');
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    // Loaded once the command line and the settings are known good: --help and a refusal answer without loading onnxruntime.
    const { startServer } = await import('./server.js');
    running = await startServer(config, logger);
  } catch (err) {
    if (err instanceof StartupError) return failStart(logger, err.setting, err.message);
    logger.fatal({ err }, 'onnx-mme failed to start (an unexpected failure: the stack says where)');
    return new Promise<never>(() => logger.flush(() => process.exit(1)));
  }
  // No balancer has seen this server ready: there is nothing to drain for.
  if (signalled !== undefined) stop(running, signalled, false);
}

main().catch((err: unknown) => {
  process.stderr.write(`onnx-mme failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
