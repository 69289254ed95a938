/**
 * @module observability/logger
 * The root pino logger. Requests get `log.child({ reqId })`, models
 * `log.child({ model })`; bindings carry names chosen by the server, never raw
 * user input as keys.
 */
import { pino, type Logger, type DestinationStream } from 'pino';
import type { LogLevel } from '../config/server-config.js';

export type { Logger };

/** Where the server's lines go: `dest` is a file descriptor (1, stdout, by default) or a file path. */
export function logDestination(dest: number | string = 1): DestinationStream {
  return pino.destination({ dest, sync: false });
}

export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'onnx-mme' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination ?? logDestination(1),
  );
}

/** A logger that drops everything (tests, tools). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
