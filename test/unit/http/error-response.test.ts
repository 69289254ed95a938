/**
 * @module test/unit/http/error-response
 * Every ServingError code maps to its documented HTTP status (the table is
 * written out here on purpose), bodies are `{"error", "code"[, "details"]}`,
 * long messages are cut to 2048 characters, and anything else is INTERNAL/500.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ERROR_CODES, ServingError, type ErrorCode } from '../../../src/errors.js';
import { errorReply, httpStatusOf } from '../../../src/http/error-response.js';

const EXPECTED_STATUS: Readonly<Record<ErrorCode, number>> = {
  INVALID_REQUEST: 400,
  INVALID_INPUT: 400,
  INVALID_TARGET: 400,
  TARGET_MISMATCH: 400,
  INVALID_MODEL: 400,
  ARCHIVE_REJECTED: 400,
  ACCESS_DENIED: 403,
  API_RESTRICTED: 403,
  MODEL_CONTROL_DISABLED: 403,
  MODEL_NOT_FOUND: 404,
  ROUTE_NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  NOT_ACCEPTABLE: 406,
  MODEL_ALREADY_LOADED: 409,
  PAYLOAD_TOO_LARGE: 413,
  RESPONSE_TOO_LARGE: 400,
  UNSUPPORTED_MEDIA_TYPE: 415,
  OVERLOADED: 429,
  CANCELLED: 499,
  INTERNAL: 500,
  UNSUPPORTED: 501,
  UPSTREAM_UNAVAILABLE: 503,
  RUNTIME_UNAVAILABLE: 503,
  SHUTTING_DOWN: 503,
  TIMEOUT: 504,
  INSUFFICIENT_MEMORY: 507,
  INSUFFICIENT_STORAGE: 507,
};

function body(text: string): Record<string, unknown> {
  return JSON.parse(text) as Record<string, unknown>;
}

describe('httpStatusOf', () => {
  test('the expected table covers exactly ERROR_CODES', () => {
    assert.deepEqual(Object.keys(EXPECTED_STATUS).sort(), [...ERROR_CODES].sort());
    assert.equal(ERROR_CODES.length, 27);
  });

  for (const code of ERROR_CODES) {
    test(`${code} → ${EXPECTED_STATUS[code]}`, () => {
      assert.equal(httpStatusOf(code), EXPECTED_STATUS[code]);
    });
  }

  test('an unknown code throws (exhaustiveness guard)', () => {
    assert.throws(() => httpStatusOf('NOPE' as ErrorCode), { message: 'unexpected value: NOPE' });
  });
});

describe('errorReply', () => {
  for (const code of ERROR_CODES) {
    test(`ServingError ${code}: status, body {error, code, message}, same error object`, () => {
      const err = new ServingError(code, `something about ${code}`);
      const reply = errorReply(err);
      assert.equal(reply.status, EXPECTED_STATUS[code]);
      // A newline ends it, as every JSON answer: curl's output does not run into the prompt.
      assert.equal(reply.body, `${JSON.stringify({ error: `something about ${code}`, code, message: `something about ${code}` })}\n`);
      assert.equal(reply.error, err);
    });
  }

  test('details are serialised with the error', () => {
    const reply = errorReply(new ServingError('INSUFFICIENT_MEMORY', 'no room', { details: { budgetBytes: 1024, model: 'm' } }));
    assert.equal(reply.status, 507);
    assert.deepEqual(body(reply.body), { error: 'no room', code: 'INSUFFICIENT_MEMORY', message: 'no room', details: { budgetBytes: 1024, model: 'm' } });
  });

  test('no details key when the error has none', () => {
    assert.equal('details' in body(errorReply(new ServingError('TIMEOUT', 't')).body), false);
  });

  test('messages of exactly 2048 characters are kept whole', () => {
    const message = 'x'.repeat(2048);
    assert.equal(body(errorReply(new ServingError('INVALID_INPUT', message)).body)['error'], message);
  });

  test('messages over 2048 characters are cut to 2048, ending in "..."', () => {
    for (const length of [2049, 5000, 100_000]) {
      const message = 'abcdefghij'.repeat(Math.ceil(length / 10)).slice(0, length);
      const reply = errorReply(new ServingError('INVALID_INPUT', message));
      const error = body(reply.body)['error'] as string;
      assert.equal(error.length, 2048, `length ${length}`);
      assert.equal(error, `${message.slice(0, 2045)}...`);
      // The ServingError itself keeps the full message for logs.
      assert.equal(reply.error.message, message);
    }
  });

  test('an unknown Error becomes INTERNAL/500 with its message and the original as cause', () => {
    const original = new TypeError('cannot read properties of undefined');
    const reply = errorReply(original);
    assert.equal(reply.status, 500);
    assert.deepEqual(body(reply.body), { error: 'cannot read properties of undefined', code: 'INTERNAL', message: 'cannot read properties of undefined' });
    assert.ok(reply.error instanceof ServingError);
    assert.equal(reply.error.code, 'INTERNAL');
    assert.equal(reply.error.cause, original);
  });

  test('non-Error values thrown become INTERNAL/500 with their string form', () => {
    for (const [value, message] of [
      ['plain string', 'plain string'],
      [42, '42'],
      [undefined, 'undefined'],
      [null, 'null'],
    ] as const) {
      const reply = errorReply(value);
      assert.equal(reply.status, 500);
      assert.deepEqual(body(reply.body), { error: message, code: 'INTERNAL', message });
    }
  });

  test('messages with quotes, newlines and unicode stay valid JSON', () => {
    const message = 'bad "input"\n\tüñ\u0000';
    assert.equal(body(errorReply(new ServingError('INVALID_INPUT', message)).body)['error'], message);
  });
});
