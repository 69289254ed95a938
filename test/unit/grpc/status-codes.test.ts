/**
 * @module test/unit/grpc/status-codes
 * Every ServingError code maps to its documented gRPC status (written out
 * here on purpose, as for HTTP), the code travels in the trailing metadata,
 * long messages are cut, and anything else is INTERNAL.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { status } from '@grpc/grpc-js';
import { ERROR_CODES, ServingError, shuttingDown, type ErrorCode } from '../../../src/errors.js';
import { ERROR_CODE_METADATA, grpcErrorReply, grpcStatusOf, RETRY_PUSHBACK_METADATA, statusName } from '../../../src/grpc/status-codes.js';

const EXPECTED: Readonly<Record<ErrorCode, status>> = {
  INVALID_REQUEST: status.INVALID_ARGUMENT,
  INVALID_INPUT: status.INVALID_ARGUMENT,
  INVALID_TARGET: status.INVALID_ARGUMENT,
  TARGET_MISMATCH: status.INVALID_ARGUMENT,
  INVALID_MODEL: status.INVALID_ARGUMENT,
  ARCHIVE_REJECTED: status.INVALID_ARGUMENT,
  UNSUPPORTED_MEDIA_TYPE: status.INVALID_ARGUMENT,
  NOT_ACCEPTABLE: status.INVALID_ARGUMENT,
  ACCESS_DENIED: status.PERMISSION_DENIED,
  API_RESTRICTED: status.PERMISSION_DENIED,
  MODEL_CONTROL_DISABLED: status.PERMISSION_DENIED,
  MODEL_NOT_FOUND: status.NOT_FOUND,
  ROUTE_NOT_FOUND: status.NOT_FOUND,
  METHOD_NOT_ALLOWED: status.UNIMPLEMENTED,
  UNSUPPORTED: status.UNIMPLEMENTED,
  MODEL_ALREADY_LOADED: status.ALREADY_EXISTS,
  PAYLOAD_TOO_LARGE: status.RESOURCE_EXHAUSTED,
  RESPONSE_TOO_LARGE: status.RESOURCE_EXHAUSTED,
  INSUFFICIENT_MEMORY: status.RESOURCE_EXHAUSTED,
  INSUFFICIENT_STORAGE: status.RESOURCE_EXHAUSTED,
  OVERLOADED: status.UNAVAILABLE,
  TIMEOUT: status.UNAVAILABLE,
  UPSTREAM_UNAVAILABLE: status.UNAVAILABLE,
  SHUTTING_DOWN: status.UNAVAILABLE,
  RUNTIME_UNAVAILABLE: status.UNAVAILABLE,
  CANCELLED: status.CANCELLED,
  INTERNAL: status.INTERNAL,
};

describe('grpc/status-codes', () => {
  test('every error code has its gRPC status', () => {
    for (const code of ERROR_CODES) assert.equal(grpcStatusOf(code), EXPECTED[code], code);
  });

  test('the reply carries the message, the status and the code in metadata', () => {
    const { grpcError, error } = grpcErrorReply(new ServingError('MODEL_NOT_FOUND', "model 'x' not found", { model: 'x' }));
    assert.equal(grpcError.code, status.NOT_FOUND);
    assert.equal(grpcError.details, "model 'x' not found");
    assert.deepEqual(grpcError.metadata!.get(ERROR_CODE_METADATA), ['MODEL_NOT_FOUND']);
    assert.equal(error.model, 'x');
    assert.equal(statusName(status.NOT_FOUND), 'NOT_FOUND');
  });

  test('an error that says when to retry says it as grpc-retry-pushback-ms (gRFC A6), in whole seconds; others do not', () => {
    const pushback = (err: ServingError) => grpcErrorReply(err).grpcError.metadata!.get(RETRY_PUSHBACK_METADATA);
    assert.deepEqual(pushback(new ServingError('UPSTREAM_UNAVAILABLE', 'x', { details: { retryAfterSeconds: 1.2 } })), ['2000']);
    assert.deepEqual(pushback(shuttingDown()), ['1000']);
    assert.deepEqual(pushback(new ServingError('OVERLOADED', 'x')), [], 'only what the error says: no table decides a second time');
    assert.deepEqual(pushback(new ServingError('INVALID_INPUT', 'x')), []);
    assert.deepEqual(pushback(new ServingError('INTERNAL', 'x', { details: { retryAfterSeconds: 'soon' } })), []);
  });

  test('long messages are cut to 2048 characters; unknown errors are INTERNAL', () => {
    assert.equal(grpcErrorReply(new ServingError('INVALID_INPUT', 'x'.repeat(5000))).grpcError.details!.length, 2048);
    const r = grpcErrorReply(new Error('boom'));
    assert.equal(r.grpcError.code, status.INTERNAL);
    assert.equal(r.error.code, 'INTERNAL');
  });
});

describe('docs/grpc.md', () => {
  test("its status table is the code's: every error code once, under the status it maps to", async () => {
    // dist/test/unit/grpc → the repository root.
    const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
    const text = await readFile(path.join(root, 'docs', 'grpc.md'), 'utf8');
    const table = text.slice(text.indexOf('| gRPC status | Error codes |'));
    const documented = new Map<string, string>();
    for (const line of table.split('\n').slice(2)) {
      if (!line.startsWith('|')) break;
      const [statusCell, codesCell] = line
        .split('|')
        .slice(1, 3)
        .map((c) => c.trim());
      for (const code of codesCell!.match(/[A-Z_]+/g) ?? []) {
        assert.ok(!documented.has(code), `${code} listed twice`);
        documented.set(code, statusCell!.replace(/`/g, ''));
      }
    }
    for (const code of ERROR_CODES) assert.equal(documented.get(code), statusName(grpcStatusOf(code)), `docs/grpc.md: ${code}`);
    assert.equal(documented.size, ERROR_CODES.length);
  });
});
