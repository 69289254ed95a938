/**
 * @module test/unit/config/protocol-settings
 * The settings added for protocols and metrics: MME_METRICS_PORT (unset,
 * 0 = any free port, a port), refused outside SAGEMAKER_SAFE_PORT_RANGE or
 * on the main port; the range's own syntax; and
 * SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadServerConfig } from '../../../src/config/server-config.js';
import { ServingError } from '../../../src/errors.js';

function configError(env: Record<string, string>): string {
  try {
    loadServerConfig(env);
  } catch (err) {
    assert.ok(err instanceof ServingError);
    assert.equal(err.code, 'INVALID_REQUEST');
    return err.message;
  }
  assert.fail('expected a configuration error');
}

describe('MME_METRICS_PORT and SAGEMAKER_SAFE_PORT_RANGE', () => {
  test('unset: no separate listener; a port or 0 otherwise', () => {
    assert.equal(loadServerConfig({}).metricsPort, undefined);
    assert.equal(loadServerConfig({ MME_METRICS_PORT: '' }).metricsPort, undefined);
    assert.equal(loadServerConfig({ MME_METRICS_PORT: '9100' }).metricsPort, 9100);
    assert.equal(loadServerConfig({ MME_METRICS_PORT: '0' }).metricsPort, 0);
  });

  test('inside the safe range is fine; outside it stops startup', () => {
    const ok = loadServerConfig({ SAGEMAKER_SAFE_PORT_RANGE: '23000-23999', MME_METRICS_PORT: '23010' });
    assert.deepEqual(ok.safePortRange, { min: 23000, max: 23999 });
    assert.equal(ok.metricsPort, 23010);
    assert.match(
      configError({ SAGEMAKER_SAFE_PORT_RANGE: '23000-23999', MME_METRICS_PORT: '9100' }),
      /MME_METRICS_PORT 9100 is outside SAGEMAKER_SAFE_PORT_RANGE 23000-23999/,
    );
    assert.match(configError({ SAGEMAKER_SAFE_PORT_RANGE: '23000-23999', MME_METRICS_PORT: '0' }), /MME_METRICS_PORT 0 is outside/);
  });

  test('the main port is refused; bad numbers and bad ranges are reported', () => {
    assert.match(configError({ MME_METRICS_PORT: '8080' }), /MME_METRICS_PORT 8080 is the main port/);
    assert.match(configError({ SAGEMAKER_BIND_TO_PORT: '9000', MME_METRICS_PORT: '9000' }), /is the main port/);
    assert.match(configError({ MME_METRICS_PORT: 'abc' }), /MME_METRICS_PORT must be an integer in \[0, 65535\], got 'abc'/);
    assert.match(configError({ MME_METRICS_PORT: '70000' }), /MME_METRICS_PORT must be an integer/);
    for (const bad of ['23999-23000', '23000', '0-10', 'a-b', '23000-99999']) {
      assert.match(configError({ SAGEMAKER_SAFE_PORT_RANGE: bad }), /SAGEMAKER_SAFE_PORT_RANGE must be an inclusive port range 'MIN-MAX'/, bad);
    }
  });
});

describe('SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT', () => {
  test('application/json by default; text/csv and application/x-npy accepted; anything else refused', () => {
    assert.equal(loadServerConfig({}).defaultAccept, 'application/json');
    assert.equal(loadServerConfig({ SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT: 'Text/CSV' }).defaultAccept, 'text/csv');
    assert.equal(loadServerConfig({ SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT: 'application/x-npy' }).defaultAccept, 'application/x-npy');
    assert.match(
      configError({ SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT: 'image/png' }),
      /SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT must be one of application\/json, text\/csv, application\/x-npy, got 'image\/png'$/,
    );
    assert.match(configError({ SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT: 'application/npy' }), /got 'application\/npy'; did you mean 'application\/x-npy'\?$/);
  });
});
