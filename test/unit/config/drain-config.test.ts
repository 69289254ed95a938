/**
 * MME_DRAIN_SECONDS and MME_SHUTDOWN_TIMEOUT_SECONDS: the drain is part of the
 * shutdown deadline. Default 5 s, at most half the deadline; an explicit drain
 * not shorter than the deadline is refused naming both.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { loadServerConfig } from '../../../src/config/server-config.js';

const base = { MME_MODEL_SOURCE: '/tmp' };

it('defaults to 5 s inside the 25 s deadline, and to half of a short deadline', () => {
  assert.equal(loadServerConfig(base).drainMs, 5000);
  assert.equal(loadServerConfig({ ...base, MME_SHUTDOWN_TIMEOUT_SECONDS: '6' }).drainMs, 3000);
  assert.equal(loadServerConfig({ ...base, MME_SHUTDOWN_TIMEOUT_SECONDS: '0' }).drainMs, 0);
});

it('takes seconds with up to 3 decimals, 0 for none', () => {
  assert.equal(loadServerConfig({ ...base, MME_DRAIN_SECONDS: '1.5' }).drainMs, 1500);
  assert.equal(loadServerConfig({ ...base, MME_DRAIN_SECONDS: '0' }).drainMs, 0);
  assert.equal(loadServerConfig({ ...base, MME_DRAIN_SECONDS: '20', MME_SHUTDOWN_TIMEOUT_SECONDS: '30' }).drainMs, 20_000);
});

it('refuses a drain that leaves in-flight requests no time, or is not a number', () => {
  assert.throws(() => loadServerConfig({ ...base, MME_DRAIN_SECONDS: '25' }), /MME_DRAIN_SECONDS \(25\) must be less than MME_SHUTDOWN_TIMEOUT_SECONDS \(25\)/);
  assert.throws(() => loadServerConfig({ ...base, MME_DRAIN_SECONDS: '10', MME_SHUTDOWN_TIMEOUT_SECONDS: '5' }), /MME_DRAIN_SECONDS/);
  assert.throws(() => loadServerConfig({ ...base, MME_DRAIN_SECONDS: 'five' }), /MME_DRAIN_SECONDS must be a number of seconds/);
  assert.throws(() => loadServerConfig({ ...base, MME_DRAIN_SECONDS: '-1' }), /MME_DRAIN_SECONDS/);
});
