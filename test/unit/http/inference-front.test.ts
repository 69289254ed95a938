/**
 * @module test/unit/http/inference-front
 * Which requests the front takes: every spelling express would match for an
 * inference route (a trailing slash, other letter case of the fixed
 * segments), with its route label, route family and model reference; a `%`
 * escape that does not decode is the client's error (400); extra or missing
 * segments are left to express (404/405). The V2_PATHS patterns agree for
 * what it takes.
 */
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, test } from 'node:test';
import { matchInferenceRoute } from '../../../src/http/inference-front.js';
import { KNOWN_PATHS as V2_PATHS, ROUTE_LIST } from '../../../src/http/route-table.js';
import type { ModelRef } from '../../../src/service/inference-service.js';
import { isServingError } from '../../support/serving-error.js';

function fakeRequest(headers: Record<string, string> = {}): IncomingMessage {
  return { headers } as unknown as IncomingMessage;
}

/** The front reads only the request: what a v2 name means is the registry's to decide (a 'named' reference). */

function resolve(path: string, headers: Record<string, string> = {}): { route: string; family: string; ref: ModelRef; version: number | undefined } {
  const m = matchInferenceRoute(path);
  assert.ok(m, `${path} is taken by the lean path`);
  return { route: m.spec.path, family: m.family, ...m.resolve(fakeRequest(headers)) };
}

describe('matchInferenceRoute', () => {
  test('/invocations: the target header, or the default model without one', () => {
    assert.deepEqual(resolve('/invocations', { 'x-amzn-sagemaker-target-model': 'team/b.tar.gz' }), {
      route: '/invocations',
      family: 'sagemaker',
      ref: { kind: 'target', target: 'team/b.tar.gz' },
      version: undefined,
    });
    assert.deepEqual(resolve('/invocations').ref, { kind: 'default' });
    assert.deepEqual(resolve('/invocations', { 'x-amzn-sagemaker-target-model': '' }).ref, { kind: 'default' });
  });

  test('/endpoints/{e}/invocations: the same as /invocations, its own route label', () => {
    const r = resolve('/endpoints/my-endpoint/invocations', { 'x-amzn-sagemaker-target-model': 'a.tar.gz' });
    assert.equal(r.route, '/endpoints/:endpoint/invocations');
    assert.deepEqual(r.ref, { kind: 'target', target: 'a.tar.gz' });
  });

  test('/models/{m}/invoke: the SageMaker-managed model, name decoded, target header kept for the mismatch check', () => {
    assert.deepEqual(resolve('/models/m%20one/invoke', { 'x-amzn-sagemaker-target-model': 'x.tar.gz' }), {
      route: '/models/:name/invoke',
      family: 'sagemaker',
      ref: { kind: 'managed', name: 'm one', targetHeader: 'x.tar.gz' },
      version: undefined,
    });
    assert.deepEqual(resolve('/models/m/invoke').ref, { kind: 'managed', name: 'm', targetHeader: undefined });
  });

  test('/v2/models/{m}[/versions/{v}]/infer: KServe family, URL-encoded slashes in the name, the version parsed', () => {
    assert.deepEqual(resolve('/v2/models/team%2Fpipeline.tar.gz/infer'), {
      route: '/v2/models/:model/infer',
      family: 'kserve',
      ref: { kind: 'named', name: 'team/pipeline.tar.gz' },
      version: undefined,
    });
    const v = resolve('/v2/models/add_sub/versions/3/infer');
    assert.equal(v.route, '/v2/models/:model/versions/:version/infer');
    assert.equal(v.version, 3);
  });

  test('a bad version is refused by the route (400 INVALID_REQUEST), as on the express route', () => {
    const m = matchInferenceRoute('/v2/models/add_sub/versions/0/infer');
    assert.ok(m);
    assert.throws(() => m.resolve(fakeRequest()), isServingError('INVALID_REQUEST', /model version must be a positive integer, got '0'/));
    assert.throws(() => matchInferenceRoute('/v2/models/add_sub/versions/x1/infer')!.resolve(fakeRequest()), isServingError('INVALID_REQUEST', /'x1'/));
  });

  test('every spelling express matches is taken, with the canonical route label', () => {
    for (const [path, route] of [
      ['/invocations/', '/invocations'],
      ['/Invocations', '/invocations'],
      ['/endpoints/e/invocations/', '/endpoints/:endpoint/invocations'],
      ['/Models/a/INVOKE', '/models/:name/invoke'],
      ['/v2/models/x/infer/', '/v2/models/:model/infer'],
      ['/V2/Models/x/Infer', '/v2/models/:model/infer'],
      ['/v2/models/x/Versions/2/infer/', '/v2/models/:model/versions/:version/infer'],
    ] as const) {
      assert.equal(resolve(path).route, route, path);
    }
    // The name keeps its letter case: only fixed segments are compared case-insensitively.
    assert.deepEqual(resolve('/V2/MODELS/MyModel/INFER').ref, { kind: 'named', name: 'MyModel' });
  });

  test('a % escape that does not decode is refused (400 INVALID_REQUEST) naming the segment', () => {
    for (const path of ['/models/%E0%A4%A/invoke', '/v2/models/%zz/infer', '/v2/models/x/versions/%zz/infer']) {
      const m = matchInferenceRoute(path);
      assert.ok(m, path);
      assert.throws(() => m.resolve(fakeRequest()), isServingError('INVALID_REQUEST', /not valid percent-encoding/), path);
    }
  });

  test('extra or missing segments are left to express (404 or 405)', () => {
    for (const path of [
      '/invocation',
      '/endpoints//invocations',
      '/models//invoke',
      '/models/a/b/invoke',
      '/v2/models//infer',
      '/v2/models/x/versions//infer',
      '/v2/models/x/version/1/infer',
      '/v2/models/x',
      '/v2/models/x/ready',
      '/ping',
      '/models',
      'invocations',
      '',
    ]) {
      assert.equal(matchInferenceRoute(path), undefined, path);
    }
  });

  test('the routes it labels are exactly the lean routes of the route table', () => {
    const labels = new Set(
      ['/invocations', '/endpoints/e/invocations', '/models/m/invoke', '/v2/models/x/infer', '/v2/models/x/versions/2/infer'].map(
        (p) => matchInferenceRoute(p)!.spec.path,
      ),
    );
    assert.deepEqual(
      [...labels].sort(),
      ROUTE_LIST.filter((r) => r.lean)
        .map((r) => r.path)
        .sort(),
    );
    for (const r of ROUTE_LIST.filter((x) => x.lean)) assert.equal(r.method, 'POST', r.path);
  });

  test('every v2 path it takes is a path express declares (404 versus 405 stays consistent)', () => {
    for (const path of ['/v2/models/x/infer', '/v2/models/x/versions/2/infer']) {
      assert.ok(matchInferenceRoute(path));
      assert.ok(
        V2_PATHS.some((p) => p.test(path)),
        path,
      );
    }
  });
});
