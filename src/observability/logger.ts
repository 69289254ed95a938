/**
 * @module observability/logger
 * The root pino logger. Requests get `log.child({ reqId })`, models
 * `log.child({ model })`; bindings carry names chosen by the server, never raw
 * user input as keys.
 */
import { pino, type Logger, type DestinationStream } from 'pino';
import type { LogLevel } from '../config/server-config.js';

export type { Logger };

/**
 * Lines are gathered into writes of at least this many bytes (about 25 access
 * lines): one write(2) per line cost the main thread more than formatting the
 * line did (docs/metrics-and-logs.md, "What is logged per request").
 */
export const LOG_BUFFER_BYTES = 8 * 1024;
/** A line waits at most this long for the buffer to fill (a quiet server's lines still come out promptly). */
export const LOG_FLUSH_INTERVAL_MS = 500;

/**
 * Where the server's lines go: `dest` is a file descriptor (1, stdout, by
 * default) or a file path. Asynchronous and buffered (LOG_BUFFER_BYTES,
 * flushed every LOG_FLUSH_INTERVAL_MS); nothing is lost at exit: main.ts
 * flushes before process.exit, and pino flushes what is left synchronously on
 * the process's `exit` event.
 */
export function logDestination(dest: number | string = 1): DestinationStream {
  return pino.destination({ dest, sync: false, minLength: LOG_BUFFER_BYTES, periodicFlush: LOG_FLUSH_INTERVAL_MS });
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
