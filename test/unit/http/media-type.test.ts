/**
 * @module test/unit/http/media-type
 * Content-Type parsing (parameters, quoting, case) and Accept negotiation
 * (q weights, specificity, aliases, the server's order breaking ties), plus
 * the answer-type choice the inference routes make from them (406 when
 * nothing fits).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ServingError } from '../../../src/errors.js';
import { responseTypeFor } from '../../../src/http/infer-exchange.js';
import { negotiate, parseAccept, parseMediaType } from '../../../src/http/media-type.js';

describe('parseMediaType', () => {
  test('type, lower-cased; parameters with case-insensitive names and quoted values', () => {
    const m = parseMediaType('Application/VND.SageMaker-Triton.Binary+JSON; JSON-Header-Size=123');
    assert.equal(m?.type, 'application/vnd.sagemaker-triton.binary+json');
    assert.equal(m?.params.get('json-header-size'), '123');
    assert.equal(parseMediaType('text/csv; charset="utf-8"')?.params.get('charset'), 'utf-8');
    assert.equal(parseMediaType('application/json;')?.type, 'application/json');
  });

  test('malformed values are undefined', () => {
    for (const bad of ['json', '/json', 'application/', 'a b/c', 'text/csv; =x', 'text/csv; novalue']) assert.equal(parseMediaType(bad), undefined, bad);
  });
});

describe('parseAccept and negotiate', () => {
  test('q weights; malformed entries ignored', () => {
    assert.deepEqual(parseAccept('text/csv;q=0.5, application/json, ???, */*;q=0.1'), [
      { type: 'text/csv', q: 0.5 },
      { type: 'application/json', q: 1 },
      { type: '*/*', q: 0.1 },
    ]);
  });

  const offers = ['application/json', 'text/csv', 'application/x-npy'];

  test('missing or */* → the first offer; exact beats wildcard; q decides', () => {
    assert.equal(negotiate(undefined, offers), 'application/json');
    assert.equal(negotiate('*/*', offers), 'application/json');
    assert.equal(negotiate('text/csv', offers), 'text/csv');
    assert.equal(negotiate('text/*', offers), 'text/csv');
    assert.equal(negotiate('application/json;q=0.4, text/csv;q=0.9', offers), 'text/csv');
    assert.equal(negotiate('*/*;q=0.8, application/x-npy', offers), 'application/x-npy');
    assert.equal(negotiate('application/json;q=0, */*', offers), 'text/csv', 'q=0 refuses json even though */* allows it');
  });

  test('nothing acceptable → undefined; aliases map to offers', () => {
    assert.equal(negotiate('image/png', offers), undefined);
    assert.equal(negotiate('application/octet-stream', offers, { 'application/octet-stream': 'application/json' }), 'application/json');
  });
});

describe('responseTypeFor', () => {
  test('the configured default when Accept is absent; aliases of the JSON answer', () => {
    assert.equal(responseTypeFor(undefined, 'text/csv'), 'text/csv');
    assert.equal(responseTypeFor('*/*', 'application/x-npy'), 'application/x-npy');
    assert.equal(responseTypeFor('application/vnd.sagemaker-triton.binary+json', 'application/json'), 'application/json');
    assert.equal(responseTypeFor('application/octet-stream', 'text/csv'), 'application/json');
  });

  test('an impossible Accept is NOT_ACCEPTABLE naming what is available (the route names the model)', () => {
    assert.throws(
      () => responseTypeFor('image/png, text/html', 'application/json'),
      (err: unknown) => {
        assert.ok(err instanceof ServingError);
        assert.equal(err.code, 'NOT_ACCEPTABLE');
        assert.match(
          err.message,
          /^cannot answer in any type of Accept 'image\/png, text\/html'; available: application\/json, text\/csv, application\/x-npy$/,
        );
        return true;
      },
    );
  });
});

describe('remembered parses (the per-request Content-Type and Accept work)', () => {
  test('the same string gives the same answer, frozen; more distinct strings than the table holds still parse right', () => {
    const a = parseMediaType('application/vnd.sagemaker-triton.binary+json;json-header-size=42');
    assert.ok(a && Object.isFrozen(a));
    assert.equal(parseMediaType('application/vnd.sagemaker-triton.binary+json;json-header-size=42'), a);
    assert.equal(parseMediaType('not a type'), undefined);
    assert.equal(parseMediaType('not a type'), undefined);
    for (let i = 0; i < 600; i++) {
      const m = parseMediaType(`application/x-${i}; n=${i}`);
      assert.equal(m?.type, `application/x-${i}`);
      assert.equal(m?.params.get('n'), String(i));
    }
  });

  test('responseTypeFor answers a repeated Accept the same way, per default type', () => {
    for (let round = 0; round < 2; round++) {
      assert.equal(responseTypeFor('text/csv;q=0.5, application/x-npy', 'application/json'), 'application/x-npy');
      assert.equal(responseTypeFor('*/*', 'text/csv'), 'text/csv');
      assert.equal(responseTypeFor('*/*', 'application/json'), 'application/json');
      assert.throws(
        () => responseTypeFor('image/png', 'application/json'),
        (err: unknown) => err instanceof ServingError && err.code === 'NOT_ACCEPTABLE',
      );
    }
  });
});
