import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { it } from 'node:test';
import { createLogger } from '../../../src/observability/logger.js';

it('every duration field (…Ms) of every line is rounded to the microsecond; other numbers are left alone', async () => {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString('utf8').split('\n')) if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  const logger = createLogger('info', sink);
  logger.info({ model: 'm', durationMs: 12.3456789, delayMs: 250, ratio: 0.123456789, bytes: 7 }, 'extracted model archive');
  logger.child({ reqId: 'r' }).warn({ timeoutMs: 1.0000004 }, 'x');
  await new Promise((r) => setImmediate(r));
  assert.equal(lines[0]!['durationMs'], 12.346);
  assert.equal(lines[0]!['delayMs'], 250);
  assert.equal(lines[0]!['ratio'], 0.123456789);
  assert.equal(lines[1]!['timeoutMs'], 1);
  assert.equal(lines[1]!['reqId'], 'r');
});
