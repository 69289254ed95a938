/**
 * @module scheduler/schedule-options
 * The request parameters that steer scheduling, as Triton's HTTP frontend
 * reads them from a KServe v2 request's `parameters`: `priority` (1 = highest;
 * 0 = the model's default level) and `timeout` (queue timeout in
 * microseconds, honoured where the model's queue policy sets
 * allow_timeout_override). An ensemble passes both on to its steps.
 */
import { ServingError } from '../errors.js';
import type { Parameters } from '../protocol/infer-types.js';
import type { ScheduleOptions } from './model-scheduler.js';

function nonNegativeInteger(parameters: Parameters, key: string, model: string): number | undefined {
  const v = parameters[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    throw new ServingError('INVALID_REQUEST', `model '${model}': request parameter '${key}' must be a non-negative integer, got ${JSON.stringify(v)}`, {
      model,
    });
  }
  return v;
}

/** What a request without scheduling parameters gets (most do): one shared object, none built per request. */
const NO_OPTIONS: ScheduleOptions = Object.freeze({});

export function scheduleOptionsFrom(parameters: Parameters, model: string): ScheduleOptions {
  const priority = nonNegativeInteger(parameters, 'priority', model);
  const timeoutUs = nonNegativeInteger(parameters, 'timeout', model);
  if (priority === undefined && timeoutUs === undefined) return NO_OPTIONS;
  return { ...(priority === undefined ? {} : { priority }), ...(timeoutUs === undefined ? {} : { timeoutUs }) };
}
