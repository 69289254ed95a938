/**
 * @module scheduler/schedule-options
 * The request parameters that steer scheduling, as Triton's HTTP frontend
 * reads them from a KServe v2 request's `parameters`: `priority` (1 = highest;
 * 0 = the model's default level) and `timeout` (queue timeout in
 * microseconds, honoured where the model's queue policy sets
 * allow_timeout_override), and the sequence parameters `sequence_id` (a
 * non-negative integer or a string; 0 and "" mean none), `sequence_start`
 * and `sequence_end` (booleans) that a stateful model's sequence batcher
 * reads. An ensemble passes them all on to its steps.
 */
import { ServingError } from '../errors.js';
import type { Parameters } from '../protocol/infer-types.js';
import type { ScheduleOptions } from './model-scheduler.js';
import type { SequenceId, SequenceRequest } from './sequence-tensors.js';

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

function flag(parameters: Parameters, key: string, model: string): boolean {
  const v = parameters[key];
  if (v === undefined) return false;
  if (typeof v !== 'boolean') {
    throw new ServingError('INVALID_REQUEST', `model '${model}': request parameter '${key}' must be true or false, got ${JSON.stringify(v)}`, { model });
  }
  return v;
}

function sequenceId(parameters: Parameters, model: string): SequenceId {
  const v = parameters['sequence_id'];
  if (v === undefined || typeof v === 'string') return v ?? 0;
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return v;
  const hint = typeof v === 'number' && Number.isInteger(v) && v > 0 ? ' (ids above 2^53 - 1 lose precision in JSON numbers; send a string id)' : '';
  throw new ServingError(
    'INVALID_REQUEST',
    `model '${model}': request parameter 'sequence_id' must be a non-negative integer or a string, got ${JSON.stringify(v)}${hint}`,
    {
      model,
    },
  );
}

function sequenceOf(parameters: Parameters, model: string): SequenceRequest | undefined {
  if (parameters['sequence_id'] === undefined && parameters['sequence_start'] === undefined && parameters['sequence_end'] === undefined) return undefined;
  return { id: sequenceId(parameters, model), start: flag(parameters, 'sequence_start', model), end: flag(parameters, 'sequence_end', model) };
}

/** What a request without scheduling parameters gets (most do): one shared object, none built per request. */
const NO_OPTIONS: ScheduleOptions = Object.freeze({});

export function scheduleOptionsFrom(parameters: Parameters, model: string): ScheduleOptions {
  const priority = nonNegativeInteger(parameters, 'priority', model);
  const timeoutUs = nonNegativeInteger(parameters, 'timeout', model);
  const sequence = sequenceOf(parameters, model);
  if (priority === undefined && timeoutUs === undefined && sequence === undefined) return NO_OPTIONS;
  return {
    ...(priority === undefined ? {} : { priority }),
    ...(timeoutUs === undefined ? {} : { timeoutUs }),
    ...(sequence === undefined ? {} : { sequence }),
  };
}
