/**
 * @module test/unit/store/target-path
 * Which client-supplied targets are accepted, their canonical form, and that
 * every refusal is INVALID_TARGET naming the target and the reason.
 */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ServingError } from '../../../src/errors.js';
import { normalizeTarget } from '../../../src/store/target-path.js';

describe('normalizeTarget', () => {
  const accepted: ReadonlyArray<[string, string]> = [
    ['model_a.tar.gz', 'model_a.tar.gz'],
    ['team/b.tar.gz', 'team/b.tar.gz'],
    ['a-b_c.v2.tgz', 'a-b_c.v2.tgz'],
    ['my model.tar.gz', 'my model.tar.gz'],
    ['./model_a.tar.gz', 'model_a.tar.gz'],
    ['././team/b.tgz', 'team/b.tgz'],
    ['résumé/模型.tar.gz', 'résumé/模型.tar.gz'],
    ['..hidden-but-legal.tar.gz', '..hidden-but-legal.tar.gz'],
    ['a'.repeat(200) + '/' + 'b'.repeat(200), 'a'.repeat(200) + '/' + 'b'.repeat(200)],
  ];
  for (const [raw, expected] of accepted) {
    it(`accepts ${JSON.stringify(raw.slice(0, 40))}`, () => {
      assert.equal(normalizeTarget(raw), expected);
    });
  }

  const rejected: ReadonlyArray<[string, RegExp]> = [
    ['', /empty/],
    ['x'.repeat(1025), /1025 characters.*1024/],
    ['/etc/passwd', /absolute/],
    ['C:\\models\\a.tar.gz', /backslash/],
    ['C:/models/a.tar.gz', /drive letter/],
    ['c:a.tar.gz', /drive letter/],
    ['\\\\server\\share\\a.tar.gz', /backslash/],
    ['team\\b.tar.gz', /backslash/],
    ['../a.tar.gz', /"\.\." segment/],
    ['team/../../a.tar.gz', /"\.\." segment/],
    ['team/..', /"\.\." segment/],
    ['..', /"\.\." segment/],
    ['team//b.tar.gz', /empty path segment/],
    ['team/', /empty path segment/],
    ['team/./b.tar.gz', /"\." segment/],
    ['./', /root itself/],
    ['.', /"\." segment/],
    ['a\0b.tar.gz', /NUL/],
    ['a\nb.tar.gz', /non-printable/],
    ['a\u001b[31mb.tar.gz', /non-printable/],
    ['a\u007fb.tar.gz', /non-printable/],
    ['a\u202eb.tar.gz', /non-printable/], // right-to-left override
    ['a\u200bb.tar.gz', /non-printable/], // zero-width space
    ['x'.repeat(256) + '.tgz', /longer than 255 bytes/],
  ];
  for (const [raw, reason] of rejected) {
    it(`rejects ${JSON.stringify(raw.slice(0, 40))}`, () => {
      assert.throws(
        () => normalizeTarget(raw),
        (err: unknown) => {
          assert.ok(err instanceof ServingError);
          assert.equal(err.code, 'INVALID_TARGET');
          assert.match(err.message, /^invalid target ".*": /s);
          assert.match(err.message, reason);
          assert.equal(err.isClientFault, true);
          return true;
        },
      );
    });
  }

  it('escapes control characters in the message', () => {
    assert.throws(() => normalizeTarget('evil\n.tar.gz'), /invalid target "evil\\n\.tar\.gz"/);
  });
});
