/**
 * @module config/boolean-setting
 * The words a boolean setting accepts, in one place: the server's env schema
 * (server-config.ts) and the telemetry switch that runs before it
 * (ort-telemetry.ts) read them alike.
 */

/** `raw` as a boolean (true/1/yes/on, false/0/no/off or empty); throws naming `name` on any other value. */
export function parseBooleanSetting(name: string, raw: string): boolean {
  const v = raw.trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(v)) return true;
  if (['false', '0', 'no', 'off', ''].includes(v)) return false;
  throw new Error(`${name} must be true or false, got '${raw}'`);
}
