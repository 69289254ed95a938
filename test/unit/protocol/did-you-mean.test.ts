/**
 * The one "did you mean" (protocol/did-you-mean.ts), as every message about
 * an unknown name uses it: settings, config.pbtxt fields and enum values,
 * datatypes, log levels.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { didYouMean, nearestName } from '../../../src/protocol/did-you-mean.js';
import { DATA_TYPES, unknownDataTypeMessage } from '../../../src/protocol/tensor.js';

describe('did you mean', () => {
  test('the nearest name: one edit, a prefix, or only the case apart; nothing when nothing is close', () => {
    assert.equal(nearestName('max_batch_sise', ['name', 'max_batch_size', 'input']), 'max_batch_size');
    assert.equal(nearestName('fp32', DATA_TYPES), 'FP32');
    assert.equal(nearestName('Int64', DATA_TYPES), 'INT64');
    assert.equal(nearestName('warning', ['trace', 'debug', 'info', 'warn', 'error']), 'warn');
    assert.equal(nearestName('verbose', ['trace', 'debug', 'info', 'warn', 'error']), undefined);
    assert.equal(nearestName('float', DATA_TYPES), undefined, 'a short name tolerates few edits');
    assert.equal(nearestName('x', ['xy', 'xz']), undefined, 'a one-letter name is nobody’s prefix');
  });

  test('the message tail: the suggestion, then every valid name where asked', () => {
    assert.equal(didYouMean('max_batch_sise', ['max_batch_size']), "; did you mean 'max_batch_size'?");
    assert.equal(didYouMean('zzz', ['max_batch_size']), '');
    assert.equal(didYouMean('verbose', ['info', 'debug'], { list: true }), ' (expected one of info, debug)');
    assert.equal(didYouMean('Debug', ['info', 'debug'], { list: true }), "; did you mean 'debug'? (expected one of info, debug)");
  });

  test('an unknown datatype: the suggestion (case) and the list of datatypes', () => {
    assert.equal(
      unknownDataTypeMessage('fp32'),
      'unknown datatype "fp32"; did you mean "FP32"? (expected one of BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, FP32, FP64, BYTES, BF16)',
    );
    assert.match(unknownDataTypeMessage(7), /^unknown datatype 7 \(expected one of BOOL, .*BF16\)$/);
  });
});
