/**
 * inModel / withModel: the one boundary where an error gets the name of the
 * model it is about, exactly once.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { inModel, ServingError, withModel, withModelSync } from '../../src/errors.js';

describe('inModel', () => {
  test('an unnamed ServingError gets the model and the prefix; code, details and cause stay', () => {
    const cause = new Error('root');
    const err = new ServingError('INVALID_MODEL', "parameter x must be 1, got '2'", { cause, details: { limit: 1 } });
    const named = inModel(err, 'team/a.tar.gz');
    assert.equal(named.code, 'INVALID_MODEL');
    assert.equal(named.model, 'team/a.tar.gz');
    assert.equal(named.message, "model 'team/a.tar.gz': parameter x must be 1, got '2'");
    assert.deepEqual(named.details, { limit: 1 });
    assert.equal(named.cause, cause);
    assert.match(named.stack ?? '', /^ServingError: model 'team\/a\.tar\.gz': parameter x/);
  });

  test('named once: a second boundary changes nothing', () => {
    const once = inModel(new ServingError('INVALID_INPUT', "input 'x' is missing"), 'm');
    assert.equal(inModel(once, 'm'), once);
    assert.equal(inModel(once, 'outer').message, "model 'm': input 'x' is missing");
  });

  test('an error that already names its model (a step of an ensemble, a model of a package) keeps it', () => {
    const step = new ServingError('INVALID_INPUT', "model 'pkg/tok': row 1 is too long", { model: 'pkg/tok' });
    assert.equal(inModel(step, 'pkg'), step);
  });

  test('a message that starts with the model but carries no model field gets the field, not a second prefix', () => {
    const named = inModel(new ServingError('INVALID_MODEL', "model 'm' needs more memory"), 'm');
    assert.equal(named.message, "model 'm' needs more memory");
    assert.equal(named.model, 'm');
  });

  test('anything else becomes INTERNAL naming the model, without host paths', () => {
    const fsErr = Object.assign(new Error("ENOENT: no such file or directory, open '/var/cache/x/1/model.onnx'"), { path: '/var/cache/x/1/model.onnx' });
    const named = inModel(fsErr, 'm');
    assert.equal(named.code, 'INTERNAL');
    assert.equal(named.model, 'm');
    assert.equal(named.message, "model 'm': ENOENT: no such file or directory, open 'model.onnx'");
  });
});

describe('withModel', () => {
  test('passes results through and names errors, async and sync', async () => {
    assert.equal(await withModel('m', async () => 7), 7);
    await assert.rejects(
      withModel('m', async () => {
        throw new ServingError('INVALID_MODEL', 'no version to load');
      }),
      (err: unknown) => err instanceof ServingError && err.model === 'm' && err.message === "model 'm': no version to load",
    );
    assert.equal(
      withModelSync('m', () => 3),
      3,
    );
    assert.throws(
      () =>
        withModelSync('m', () => {
          throw new ServingError('INVALID_MODEL', 'bad');
        }),
      (err: unknown) => err instanceof ServingError && err.message === "model 'm': bad",
    );
  });
});
