/**
 * MME_MODEL_CONTROL, MME_MODEL_URL_ROOTS and the restricted-API settings as
 * the environment gives them: the defaults each deployment gets (SageMaker
 * MME, ModelMesh, elsewhere), Triton's value syntax, and every bad value
 * refused naming the setting, never the secret.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadServerConfig } from '../../../src/config/server-config.js';
import { minimalEnv as base, configProblem as problem } from '../../support/config-problem.js';
import { digestOf } from '../../../src/config/restricted-api.js';

describe('model control and url roots', () => {
  test('none by default, with no roots', () => {
    const c = loadServerConfig(base);
    assert.deepEqual(c.modelControl, { mode: 'none', reason: 'the default off SageMaker and ModelMesh' });
    assert.equal(c.modelUrlRoots, undefined);
  });

  test('SageMaker MME: explicit, roots /opt/ml/models unless set', () => {
    const c = loadServerConfig({ ...base, SAGEMAKER_MULTI_MODEL: 'true' });
    assert.equal(c.modelControl.mode, 'explicit');
    assert.match(c.modelControl.reason, /SAGEMAKER_MULTI_MODEL=true/);
    assert.deepEqual(c.modelUrlRoots, ['/opt/ml/models']);
    assert.deepEqual(loadServerConfig({ ...base, SAGEMAKER_MULTI_MODEL: 'true', MME_MODEL_URL_ROOTS: '/srv/a, /srv/b' }).modelUrlRoots, ['/srv/a', '/srv/b']);
    // The operator's word wins over the platform's default.
    assert.equal(loadServerConfig({ ...base, SAGEMAKER_MULTI_MODEL: 'true', MME_MODEL_CONTROL: 'none' }).modelControl.mode, 'none');
  });

  test('ModelMesh: explicit, and it needs roots', () => {
    assert.match(problem({ MME_GRPC_PORT: '8001', MME_MODEL_MESH: 'true' }), /needs MME_MODEL_URL_ROOTS/);
    const c = loadServerConfig({ ...base, MME_GRPC_PORT: '8001', MME_MODEL_MESH: 'true', MME_MODEL_URL_ROOTS: '/models' });
    assert.equal(c.modelControl.mode, 'explicit');
    assert.match(c.modelControl.reason, /MME_MODEL_MESH=true/);
  });

  test('explicit off SageMaker needs roots; bad modes and roots are refused by name', () => {
    assert.match(problem({ MME_MODEL_CONTROL: 'explicit' }), /MME_MODEL_CONTROL=explicit .*needs MME_MODEL_URL_ROOTS/);
    assert.equal(loadServerConfig({ ...base, MME_MODEL_CONTROL: 'EXPLICIT', MME_MODEL_URL_ROOTS: '/srv' }).modelControl.mode, 'explicit');
    assert.match(problem({ MME_MODEL_CONTROL: 'poll' }), /MME_MODEL_CONTROL must be 'none' or 'explicit'/);
    assert.match(problem({ MME_MODEL_CONTROL: 'explicit', MME_MODEL_URL_ROOTS: 'relative/dir' }), /MME_MODEL_URL_ROOTS: 'relative\/dir' is not an absolute/);
  });
});

describe("restricted APIs: Triton's syntax", () => {
  test('groups, header (lower case), value kept only as its digest', () => {
    const c = loadServerConfig({ ...base, MME_HTTP_RESTRICTED_API: 'model-repository:Admin-Key=s3cr3t;inference, metadata:infer-key=k=1' });
    assert.deepEqual(
      c.httpRestrictedApi.map((r) => [r.groups, r.header, r.valueDigest]),
      [
        [['model-repository'], 'admin-key', digestOf('s3cr3t')],
        [['inference', 'metadata'], 'infer-key', digestOf('k=1')],
      ],
    );
    assert.ok(!JSON.stringify(c).includes('s3cr3t'), 'the value itself is not in the config');
    assert.deepEqual(loadServerConfig(base).httpRestrictedApi, []);
    assert.equal(loadServerConfig({ ...base, MME_GRPC_RESTRICTED_PROTOCOL: 'inference:k=v' }).grpcRestrictedProtocol[0]!.header, 'k');
  });

  test('refused: unknown groups (named), a group twice, no header or value, metrics on gRPC; the value is never in the message', () => {
    assert.match(problem({ MME_HTTP_RESTRICTED_API: 'model-repo,infer:k=SECRET' }), /unknown API groups 'model-repo', 'infer'/);
    assert.match(problem({ MME_HTTP_RESTRICTED_API: 'inference:a=SECRET;inference:b=SECRET' }), /'inference' is named twice/);
    assert.match(problem({ MME_HTTP_RESTRICTED_API: 'inference' }), /not '<API>\[,<API>\.\.\.\]:<header>=<value>'/);
    assert.match(problem({ MME_HTTP_RESTRICTED_API: 'inference:k=' }), /the value of header 'k' is empty/);
    assert.match(problem({ MME_HTTP_RESTRICTED_API: 'inference:bad header=SECRET' }), /is not a header name/);
    assert.match(problem({ MME_GRPC_RESTRICTED_PROTOCOL: 'metrics:k=SECRET' }), /MME_GRPC_RESTRICTED_PROTOCOL: unknown API group 'metrics'/);
    assert.equal(loadServerConfig({ ...base, MME_HTTP_RESTRICTED_API: 'metrics:k=v' }).httpRestrictedApi[0]!.groups[0], 'metrics');
    for (const env of [{ MME_HTTP_RESTRICTED_API: 'model-repo:k=SECRET' }, { MME_HTTP_RESTRICTED_API: 'inference:a=SECRET;inference:b=SECRET' }])
      assert.ok(!problem(env).includes('SECRET'));
  });
});
