/**
 * @module test/unit/http/request-id
 * The request ids the server makes when the client sent none: UUID v4 text,
 * unique, and stable once handed out (they are sliced from a shared buffer).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { newRequestId } from '../../../src/http/request-id.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('request ids', () => {
  test('are RFC 4122 version 4 UUIDs, all different, across many refills of the entropy pool', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 1000; i++) {
      const id = newRequestId();
      assert.match(id, UUID_V4);
      seen.add(id);
    }
    assert.equal(seen.size, 1000);
  });

  test('each id is its own string: a later id does not change an earlier one', () => {
    const a = newRequestId();
    const copy = `${a}`;
    newRequestId();
    assert.equal(a, copy);
  });

  test('every hex digit shows up: the digits come from the random bytes, not a fixed table slice', () => {
    const digits = new Set<string>();
    for (let i = 0; i < 200; i++) for (const c of newRequestId().replaceAll('-', '')) digits.add(c);
    assert.equal(digits.size, 16);
  });
});
