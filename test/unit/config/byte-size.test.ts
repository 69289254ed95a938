/**
 * Byte settings accept Kubernetes-style quantities (config/byte-size.ts,
 * docs/configuration.md#byte-sizes): every byte setting of the server goes
 * through the one parser, and an ambiguous unit is refused with the forms
 * it could have meant.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BYTE_SIZE_FORMS, parseByteSize } from '../../../src/config/byte-size.js';
import { loadServerConfig, SETTINGS } from '../../../src/config/server-config.js';

const GI = 1024 ** 3;
const parse = (raw: string, min = 1): number => parseByteSize('MME_MEMORY_BUDGET_BYTES', raw, min);

describe('byte sizes', () => {
  test('plain bytes, binary suffixes (with or without B), decimal suffixes, exact fractions', () => {
    assert.equal(parse('2147483648'), 2 * GI);
    assert.equal(parse(' 2Gi '), 2 * GI);
    assert.equal(parse('2GiB'), 2 * GI);
    assert.equal(parse('512Mi'), 512 * 1024 ** 2);
    assert.equal(parse('512MiB'), 512 * 1024 ** 2);
    assert.equal(parse('64Ki'), 64 * 1024);
    assert.equal(parse('1Ti'), 1024 ** 4);
    assert.equal(parse('2G'), 2e9);
    assert.equal(parse('512M'), 512e6);
    assert.equal(parse('16k'), 16_000);
    assert.equal(parse('1.5Gi'), 1.5 * GI);
    assert.equal(parse('1.1G'), 1_100_000_000, 'exact, not 1100000000.0000002');
  });

  test('ambiguous units are refused with the two forms they could mean and the accepted ones', () => {
    assert.throws(
      () => parse('2GB'),
      (err: Error) =>
        err.message.startsWith("MME_MEMORY_BUDGET_BYTES: '2GB' is ambiguous (GB is a power of 1000 to some and of 1024 to others): write 2Gi") &&
        err.message.includes(' or 2G for ') &&
        err.message.endsWith(`accepted: ${BYTE_SIZE_FORMS}`),
    );
    for (const raw of ['512MB', '1kb', '4KB', '2TB', '2g', '512m', '2K']) {
      assert.throws(() => parse(raw), /is ambiguous .*accepted: a whole number of bytes/, raw);
    }
  });

  test('anything else is refused naming the setting and the accepted forms; fractions of a byte are not rounded', () => {
    for (const raw of ['', 'lots', '-1', '2 Gi', '1e9', '2Gib', '2Xi']) {
      assert.throws(
        () => parse(raw),
        (err: Error) => err.message.startsWith('MME_MEMORY_BUDGET_BYTES') && err.message.includes(BYTE_SIZE_FORMS),
        raw,
      );
    }
    assert.throws(() => parse('0.1Ki'), /'0\.1Ki' is not a whole number of bytes/);
    assert.throws(() => parse('1.5'), /'1\.5' is not a whole number of bytes/);
    assert.throws(() => parse('0'), /^Error: MME_MEMORY_BUDGET_BYTES must be at least 1 byte, got '0'$/);
    assert.throws(() => parse('9Pi'), /must be at most 9007199254740991 bytes, got '9Pi' \(10133099161583616 bytes\)/);
  });

  test('every byte setting of the server takes the forms', () => {
    const byteSettings = SETTINGS.flatMap((s) => s.env.filter((name) => /_BYTES(_PER_SECOND)?$/.test(name)));
    assert.deepEqual(byteSettings.sort(), [
      'MME_ARCHIVE_MAX_BYTES',
      'MME_CACHE_MAX_BYTES',
      'MME_CONFIG_MAX_BYTES',
      'MME_MAX_INFLIGHT_BYTES',
      'MME_MAX_RESPONSE_BYTES',
      'MME_MEMORY_BUDGET_BYTES',
      'MME_RESPONSE_CACHE_BYTES',
      'MME_S3_MIN_BYTES_PER_SECOND',
    ]);
    const config = loadServerConfig(Object.fromEntries(byteSettings.map((name) => [name, '3Mi'])));
    for (const key of [
      'archiveMaxBytes',
      'cacheMaxBytes',
      'configMaxBytes',
      'maxInflightBytes',
      'maxResponseBytes',
      'memoryBudgetBytes',
      'responseCacheBytes',
      's3MinBytesPerSecond',
    ] as const) {
      assert.equal(config[key], 3 * 1024 * 1024, key);
    }
    assert.throws(() => loadServerConfig({ MME_CACHE_MAX_BYTES: '10GB' }), /MME_CACHE_MAX_BYTES: '10GB' is ambiguous/);
  });
});
