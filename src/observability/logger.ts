/**
 * @module observability/logger
 * The root pino logger. Requests get `log.child({ reqId })`, models
 * `log.child({ model })`; bindings carry names chosen by the server, never raw
 * user input as keys.
 */
import { pino, type Logger, type DestinationStream } from 'pino';
import type { LogFormat, LogLevel } from '../config/server-config.js';
import { prettyDestination } from './pretty-log.js';

export type { Logger };

const DURATION_KEY = /Ms$/;

/**
 * Durations (`durationMs`, `delayMs`, any number field named `…Ms`) to the
 * microsecond, in one place for every line: timers give fractions like
 * 12.345678901, noise in a log and in anything that parses it.
 */
export function roundDurations(fields: Record<string, unknown>): Record<string, unknown> {
  let out: Record<string, unknown> | undefined;
  for (const key in fields) {
    const v = fields[key];
    if (typeof v !== 'number' || !DURATION_KEY.test(key) || Number.isInteger(v)) continue;
    out ??= { ...fields };
    out[key] = Math.round(v * 1000) / 1000;
  }
  return out ?? fields;
}

/**
 * Where the server's lines go: `dest` is a file descriptor (1, stdout, by
 * default) or a file path. Asynchronous: a line goes to a write at once when
 * none is in flight, and lines that come while one is (a busy server) go out
 * together in the next, so lines are never held back and a flood of them
 * costs fewer writes than lines. A fixed buffer (sonic-boom's minLength, 8
 * KiB) measured no better within the noise of the shared bench box (149
 * against 158 µs a request with a line for every request) and held a quiet
 * server's lines back until a timer. Nothing is lost at exit: main.ts
 * flushes before process.exit, and pino writes what is left synchronously
 * on the process's `exit` event.
 */
export function logDestination(dest: number | string = 1): DestinationStream {
  return pino.destination({ dest, sync: false });
}

/** The server's stdout in MME_LOG_FORMAT's form; `color`: level names coloured (stdout is a terminal). */
export function serverDestination(format: LogFormat, color = false): DestinationStream {
  return format === 'pretty' ? prettyDestination(logDestination(1), color) : logDestination(1);
}

export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'onnx-mme' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (level) => ({ level }), log: roundDurations },
    },
    destination ?? logDestination(1),
  );
}

/** A logger that drops everything (tests, tools). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
