/**
 * @module test/support/serving-error
 * An `assert.rejects` validator for ServingError: the code and a message pattern.
 */
import assert from 'node:assert/strict';
import { ServingError, type ErrorCode } from '../../src/errors.js';

export function isServingError(code: ErrorCode, pattern: RegExp): (err: unknown) => boolean {
  return (err: unknown): boolean => {
    assert.ok(err instanceof ServingError, `expected a ServingError, got ${String(err)}`);
    assert.equal(err.code, code, err.message);
    assert.match(err.message, pattern);
    return true;
  };
}
