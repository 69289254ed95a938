/**
 * The access policy's decisions: a restricted group needs its header with
 * the right value (any other value, another group's key, or none is refused
 * with API_RESTRICTED naming the header, never the value), an unrestricted
 * group and `open` pass, and model control refuses loads and unloads in
 * `none` after the key is checked (Triton's order).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseRestrictions, TRITON_API_GROUPS } from '../../../src/config/restricted-api.js';
import { AccessPolicy } from '../../../src/service/access-policy.js';
import type { ServingError } from '../../../src/errors.js';

const restrictions = parseRestrictions('MME_HTTP_RESTRICTED_API', 'model-repository:admin-key=A;inference:infer-key=I', [...TRITON_API_GROUPS]);
const headers =
  (h: Record<string, string>) =>
  (name: string): string | undefined =>
    h[name];

function policy(mode: 'none' | 'explicit', aliases?: (h: string) => readonly string[]): AccessPolicy {
  return new AccessPolicy({ modelControl: { mode, reason: 'test' }, restrictions, setting: 'MME_HTTP_RESTRICTED_API', ...(aliases ? { aliases } : {}) });
}

describe('AccessPolicy', () => {
  test('a restricted group: only its own header with its own value passes', () => {
    const p = policy('explicit');
    for (const h of <Record<string, string>[]>[
      {},
      { 'admin-key': 'a' },
      { 'admin-key': 'A ' },
      { 'admin-key': 'I' },
      { 'infer-key': 'A' },
      { 'admin-key': '' },
    ]) {
      const refused = p.refusal({ group: 'model-repository' }, headers(h)) as ServingError;
      assert.equal(refused?.code, 'API_RESTRICTED', JSON.stringify(h));
      assert.equal(refused.message, "This API is restricted, expecting header 'admin-key' (MME_HTTP_RESTRICTED_API guards the 'model-repository' group)");
    }
    assert.equal(p.refusal({ group: 'model-repository' }, headers({ 'admin-key': 'A' })), undefined);
    assert.equal(p.refusal({ group: 'inference' }, headers({ 'infer-key': 'I' })), undefined);
  });

  test('unrestricted groups and open targets pass without headers', () => {
    const p = policy('explicit');
    assert.equal(p.refusal({ group: 'metadata' }, headers({})), undefined);
    assert.equal(p.refusal({ group: 'open' }, headers({})), undefined);
    assert.deepEqual([...p.restrictedGroups].sort(), ['inference', 'model-repository']);
    // What the HTTP guard skips without reading a header: only targets nothing restricts.
    assert.deepEqual(
      [{ group: 'metadata' }, { group: 'open' }, { group: 'inference' }, { group: 'metadata', controls: true }].map((t) => p.restricts(t as never)),
      [false, false, true, false],
    );
    assert.equal(policy('none').restricts({ group: 'metadata', controls: true }), true);
  });

  test('model control none refuses loads and unloads, after the key', () => {
    const p = policy('none');
    assert.equal(p.refusal({ group: 'model-repository', controls: true }, headers({}))?.code, 'API_RESTRICTED');
    const refused = p.refusal({ group: 'model-repository', controls: true }, headers({ 'admin-key': 'A' }));
    assert.equal(refused?.code, 'MODEL_CONTROL_DISABLED');
    assert.match(refused!.message, /MME_MODEL_CONTROL is 'none' \(test\)/);
    assert.equal(p.refusal({ group: 'model-repository' }, headers({ 'admin-key': 'A' })), undefined, 'listing is not a load');
    assert.equal(policy('explicit').refusal({ group: 'model-repository', controls: true }, headers({ 'admin-key': 'A' })), undefined);
  });

  test('aliases: the key under another name (gRPC: triton-grpc-protocol-<key>) counts, a wrong one beside it does not spoil it', () => {
    const p = policy('explicit', (h) => [`triton-grpc-protocol-${h}`]);
    assert.equal(p.refusal({ group: 'inference' }, headers({ 'triton-grpc-protocol-infer-key': 'I' })), undefined);
    assert.equal(p.refusal({ group: 'inference' }, headers({ 'infer-key': 'x', 'triton-grpc-protocol-infer-key': 'I' })), undefined);
    assert.equal(p.refusal({ group: 'inference' }, headers({ 'triton-grpc-protocol-infer-key': 'x' }))?.code, 'API_RESTRICTED');
  });
});
