/**
 * @module observability/logger
 * The root pino logger. Requests get `log.child({ reqId })`, models
 * `log.child({ model })`; bindings carry names chosen by the server, never raw
 * user input as keys.
 */
import { pino, type Logger, type DestinationStream } from 'pino';
import type { LogLevel } from '../config/server-config.js';

export type { Logger };

export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'onnx-mme' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination ?? pino.destination({ fd: 1, sync: false }),
  );
}

/** A logger that drops everything (tests, tools). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
