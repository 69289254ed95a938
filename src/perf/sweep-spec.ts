/**
 * @module perf/sweep-spec
 * The `start:end:step` ranges of `--concurrency` and `--rate`, as
 * perf_analyzer writes them (`1:8:1` adds the step), plus a geometric form
 * (`1:64:x2` multiplies), which is how these curves are usually swept: equal
 * spacing on the log scale the charts use. A single number is one step.
 */

/** Most steps one range may produce: a typo such as `1:100000:1` must not become a day-long run. */
export const MAX_STEPS = 64;

/** The values of `spec`; throws Error with a message naming the flag on anything malformed. */
export function parseSweep(spec: string, flag: string, options: { integer: boolean }): number[] {
  const parts = spec.trim().split(':');
  const number = (raw: string, what: string): number => {
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n) || n <= 0 || (options.integer && !Number.isInteger(n))) {
      throw new Error(`${flag}: ${what} must be a positive ${options.integer ? 'integer' : 'number'}, got '${raw}' (in '${spec}')`);
    }
    return n;
  };
  if (parts.length === 1) return [number(parts[0]!, 'the value')];
  if (parts.length > 3) throw new Error(`${flag}: expected start:end[:step] or start:end:xFACTOR, got '${spec}'`);
  const start = number(parts[0]!, 'start');
  const end = number(parts[1]!, 'end');
  if (end < start) throw new Error(`${flag}: end ${end} is below start ${start} (in '${spec}')`);
  const stepRaw = parts[2] ?? '1';
  const geometric = /^x/i.test(stepRaw.trim());
  const step = geometric ? Number(stepRaw.trim().slice(1)) : number(stepRaw, 'the step');
  if (geometric && (!Number.isFinite(step) || step <= 1)) throw new Error(`${flag}: a factor must be a number above 1, got '${stepRaw}' (in '${spec}')`);
  const values: number[] = [];
  for (let v = start; v <= end * (1 + 1e-9); v = geometric ? v * step : v + step) {
    values.push(options.integer ? Math.round(v) : Number(v.toPrecision(12)));
    if (values.length > MAX_STEPS) throw new Error(`${flag}: '${spec}' gives more than ${MAX_STEPS} steps`);
  }
  // A geometric range ends on `end` even when the factor overshoots it (1:48:x2 → 1 2 4 8 16 32 48), as people expect of "up to".
  if (values[values.length - 1] !== end) values.push(end);
  return [...new Set(values)];
}
