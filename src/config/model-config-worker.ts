/**
 * @module config/model-config-worker
 * The config parser thread (config/model-config-parse.ts): parses and checks
 * config.pbtxt text into a draft, so a large config costs the main thread
 * only the structured clone of the result.
 */
import { parentPort } from 'node:worker_threads';
import { ServingError } from '../errors.js';
import { readModelConfigDraft } from './model-config-draft.js';
import type { ParseAnswer, ParseRequest } from './model-config-parse.js';

const port = parentPort;
if (!port) throw new Error('config/model-config-worker runs as a worker thread');

port.on('message', ({ id, text, options }: ParseRequest) => {
  let answer: ParseAnswer;
  try {
    answer = { id, draft: readModelConfigDraft(text, options) };
  } catch (err) {
    answer =
      err instanceof ServingError
        ? {
            id,
            error: {
              code: err.code,
              message: err.message,
              ...(err.model === undefined ? {} : { model: err.model }),
              ...(err.details === undefined ? {} : { details: { ...err.details } }),
            },
          }
        : { id, error: { message: err instanceof Error ? err.message : String(err) } };
  }
  port.postMessage(answer);
});
