/**
 * @module config/ort-telemetry
 * onnxruntime's own telemetry, off unless the operator asks for it. On Linux,
 * onnxruntime-node 1.30 records events (session creation, model load,
 * execution providers, CPU and OS, run counts and durations) in
 * `$HOME/.cache/Microsoft/DeveloperTools/.onnxruntime/onnxruntime.db`, keeps a
 * device id beside it and schedules their upload to Microsoft. It reads
 * `ORT_DISABLE_TELEMETRY` from the process environment (C getenv) when it
 * creates its environment; `1` turns all of it off (no store is created).
 *
 * `MME_ORT_TELEMETRY` is the one switch: `true` leaves onnxruntime's default
 * (telemetry on, ORT_DISABLE_TELEMETRY removed); anything else, unset
 * included, sets ORT_DISABLE_TELEMETRY=1. A value that is not a boolean keeps
 * telemetry off here and then fails startup in loadServerConfig, which parses
 * the same variable with the same words.
 */

import { parseBooleanSetting } from './boolean-setting.js';

export const ORT_TELEMETRY_ENV = 'MME_ORT_TELEMETRY';
export const ORT_DISABLE_ENV = 'ORT_DISABLE_TELEMETRY';

/** MME_ORT_TELEMETRY's value: true only when the operator asked for telemetry. Throws on a value that is not a boolean. */
export function parseOrtTelemetry(raw: string | undefined): boolean {
  return raw === undefined ? false : parseBooleanSetting(ORT_TELEMETRY_ENV, raw);
}

/**
 * Sets or clears ORT_DISABLE_TELEMETRY in `env` from MME_ORT_TELEMETRY; returns
 * whether telemetry stays on. On the main thread `process.env` writes reach
 * the C environment that onnxruntime reads, so this must run there, before the
 * first session is created; worker threads inherit it.
 */
export function applyOrtTelemetrySetting(env: NodeJS.ProcessEnv): boolean {
  let on: boolean;
  try {
    on = parseOrtTelemetry(env[ORT_TELEMETRY_ENV]);
  } catch {
    on = false;
  }
  if (on) delete env[ORT_DISABLE_ENV];
  else env[ORT_DISABLE_ENV] = '1';
  return on;
}
