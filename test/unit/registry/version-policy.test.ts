/**
 * @module test/unit/registry/version-policy
 * selectVersions: Triton's latest / all / specific policies (default latest 1)
 * and their errors.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { modelConfigFromJson } from '../../../src/config/model-config.js';
import { ServingError } from '../../../src/errors.js';
import { modelConfigDraftFromJson } from '../../../src/config/model-config-draft.js';
import { selectVersions } from '../../../src/registry/version-policy.js';

/** A version_policy as written in config.pbtxt (JSON form), read as the loader reads it. */
function policy(raw: unknown) {
  const json = raw === undefined || raw === null ? {} : { version_policy: raw as Record<string, unknown> };
  return modelConfigDraftFromJson(json, { sourceName: 'm/config.pbtxt', directoryName: 'm' }).versionPolicy;
}

function throwsInvalidModel(fn: () => unknown, message: string): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ServingError);
    assert.equal(err.code, 'INVALID_MODEL');
    assert.equal(err.message, message);
    assert.equal(err.model, undefined);
    return true;
  });
}

const NONE_AVAILABLE = 'at least one version must be available under the version policy; add a numeric version directory such as 1/model.onnx';

describe('selectVersions: latest', () => {
  test('no policy (undefined, null) means latest 1: the highest version', () => {
    assert.deepEqual(selectVersions([1, 2, 10], policy(undefined)), [10]);
    assert.deepEqual(selectVersions([1, 2, 10], policy(null)), [10]);
    assert.deepEqual(selectVersions([3], policy(undefined)), [3]);
  });

  test('latest n gives the n highest versions, ascending; input order does not matter', () => {
    assert.deepEqual(selectVersions([3, 1, 10, 2], policy({ latest: { num_versions: 2 } })), [3, 10]);
    assert.deepEqual(selectVersions([1, 2, 3], policy({ latest: { num_versions: 3 } })), [1, 2, 3]);
  });

  test('latest n larger than what exists gives every version', () => {
    assert.deepEqual(selectVersions([5, 2], policy({ latest: { num_versions: 9 } })), [2, 5]);
  });

  test('latest with num_versions 0 or missing behaves as 1', () => {
    assert.deepEqual(selectVersions([1, 2], policy({ latest: { num_versions: 0 } })), [2]);
    assert.deepEqual(selectVersions([1, 2], policy({ latest: {} })), [2]);
  });

  test('the input array is not modified', () => {
    const available = [3, 1, 2];
    selectVersions(available, policy({ latest: { num_versions: 2 } }));
    assert.deepEqual(available, [3, 1, 2]);
  });

  test('latest with no versions is INVALID_MODEL', () => {
    throwsInvalidModel(() => selectVersions([], policy(undefined)), NONE_AVAILABLE);
    throwsInvalidModel(() => selectVersions([], policy({ latest: { num_versions: 2 } })), NONE_AVAILABLE);
  });
});

describe('selectVersions: all', () => {
  test('all gives every version, ascending', () => {
    assert.deepEqual(selectVersions([10, 1, 2], policy({ all: {} })), [1, 2, 10]);
  });

  test('an explicit empty version_policy {} selects every version', () => {
    const config = modelConfigFromJson(
      {
        name: 'm',
        platform: 'onnxruntime_onnx',
        version_policy: {},
        input: [{ name: 'x', data_type: 'TYPE_FP32', dims: [1] }],
        output: [{ name: 'y', data_type: 'TYPE_FP32', dims: [1] }],
      },
      { sourceName: 'm/config.pbtxt', directoryName: 'm' },
    );
    assert.deepEqual(config.versionPolicy, { kind: 'all' });
    assert.deepEqual(selectVersions([1, 2, 3], config.versionPolicy), [1, 2, 3]);
  });

  test('all with no versions is INVALID_MODEL', () => {
    throwsInvalidModel(() => selectVersions([], policy({ all: {} })), NONE_AVAILABLE);
  });
});

describe('selectVersions: specific', () => {
  test('specific gives exactly the listed versions, ascending', () => {
    assert.deepEqual(selectVersions([1, 2, 3, 4], policy({ specific: { versions: [3, 1] } })), [1, 3]);
    assert.deepEqual(selectVersions([1, 2], policy({ specific: { versions: [2] } })), [2]);
  });

  test('a listed version the package lacks is INVALID_MODEL naming it and what exists', () => {
    throwsInvalidModel(
      () => selectVersions([1, 2, 3], policy({ specific: { versions: [4, 1, 7] } })),
      'version_policy asks for version(s) 4, 7 but the package has 1, 2, 3',
    );
    throwsInvalidModel(() => selectVersions([], policy({ specific: { versions: [1] } })), 'version_policy asks for version(s) 1 but the package has none');
  });

  test('an empty or missing list selects nothing: INVALID_MODEL', () => {
    throwsInvalidModel(() => selectVersions([1, 2], policy({ specific: { versions: [] } })), NONE_AVAILABLE);
    throwsInvalidModel(() => selectVersions([1, 2], policy({ specific: {} })), NONE_AVAILABLE);
  });
});

describe('selectVersions with a normalised config', () => {
  test("modelConfigFromJson's default version_policy selects the latest version", () => {
    const config = modelConfigFromJson(
      {
        name: 'm',
        platform: 'onnxruntime_onnx',
        max_batch_size: 0,
        input: [{ name: 'x', data_type: 'TYPE_FP32', dims: [1] }],
        output: [{ name: 'y', data_type: 'TYPE_FP32', dims: [1] }],
      },
      { sourceName: 'm/config.pbtxt', directoryName: 'm' },
    );
    assert.deepEqual(selectVersions([1, 4, 2], config.versionPolicy), [4]);
  });

  test('a parsed specific policy selects the listed versions', () => {
    const config = modelConfigFromJson(
      {
        name: 'm',
        platform: 'onnxruntime_onnx',
        version_policy: { specific: { versions: [1, 2] } },
        input: [{ name: 'x', data_type: 'TYPE_FP32', dims: [1] }],
        output: [{ name: 'y', data_type: 'TYPE_FP32', dims: [1] }],
      },
      { sourceName: 'm/config.pbtxt', directoryName: 'm' },
    );
    assert.deepEqual(selectVersions([1, 2, 3], config.versionPolicy), [1, 2]);
  });
});
