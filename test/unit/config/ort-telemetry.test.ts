/**
 * MME_ORT_TELEMETRY is the one switch for onnxruntime's telemetry: anything
 * but a true word leaves ORT_DISABLE_TELEMETRY=1 (what onnxruntime reads),
 * true removes it, a value that is not a boolean keeps telemetry off and is
 * refused by the config (startup fails naming it). The process-level promise
 * (no store under HOME) is test/integration/telemetry.test.ts.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { applyOrtTelemetrySetting, parseOrtTelemetry } from '../../../src/config/ort-telemetry.js';
import { loadServerConfig } from '../../../src/config/server-config.js';

it('telemetry stays off unless MME_ORT_TELEMETRY is a true word', () => {
  for (const raw of [undefined, '', 'false', '0', 'no', 'off', 'maybe']) {
    const env: NodeJS.ProcessEnv = raw === undefined ? {} : { MME_ORT_TELEMETRY: raw };
    assert.equal(applyOrtTelemetrySetting(env), false, String(raw));
    assert.equal(env['ORT_DISABLE_TELEMETRY'], '1', String(raw));
  }
  // An operator's ORT_DISABLE_TELEMETRY=0 does not turn it on: only MME_ORT_TELEMETRY does.
  const env: NodeJS.ProcessEnv = { ORT_DISABLE_TELEMETRY: '0' };
  applyOrtTelemetrySetting(env);
  assert.equal(env['ORT_DISABLE_TELEMETRY'], '1');
});

it('MME_ORT_TELEMETRY=true removes ORT_DISABLE_TELEMETRY (the images set it) so onnxruntime keeps its default', () => {
  for (const raw of ['true', 'TRUE', '1', 'yes', 'on']) {
    const env: NodeJS.ProcessEnv = { MME_ORT_TELEMETRY: raw, ORT_DISABLE_TELEMETRY: '1' };
    assert.equal(applyOrtTelemetrySetting(env), true, raw);
    assert.equal('ORT_DISABLE_TELEMETRY' in env, false, raw);
  }
});

it('the config parses the same words and refuses others, naming the variable', () => {
  assert.equal(parseOrtTelemetry(undefined), false);
  assert.equal(parseOrtTelemetry('true'), true);
  assert.throws(() => parseOrtTelemetry('maybe'), /MME_ORT_TELEMETRY must be true or false, got 'maybe'/);
  assert.equal(loadServerConfig({}).ortTelemetry, false);
  assert.equal(loadServerConfig({ MME_ORT_TELEMETRY: 'true' }).ortTelemetry, true);
  assert.throws(() => loadServerConfig({ MME_ORT_TELEMETRY: 'sometimes' }), /MME_ORT_TELEMETRY must be true or false/);
});
