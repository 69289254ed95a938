/**
 * @module observability/logger
 * The root pino logger. Requests get `log.child({ reqId })`, models
 * `log.child({ model })`; bindings carry names chosen by the server, never raw
 * user input as keys.
 */
import { pino, type Logger, type DestinationStream } from 'pino';
import type { LogLevel } from '../config/server-config.js';

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

export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'onnx-mme' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }), log: roundDurations },
    },
    destination ?? pino.destination({ fd: 1, sync: false }),
  );
}

/** A logger that drops everything (tests, tools). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
