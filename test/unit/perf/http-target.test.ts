/**
 * perf/http-target.ts: a send resolves with a status key and never rejects,
 * even when node refuses the request before opening a socket (the open-loop
 * runner fires sends and forgets them, so a rejection would end the run).
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { createHttpTarget } from '../../../src/perf/http-target.js';

it('a target-model header node cannot send resolves as ERR_INVALID_CHAR, with the reason kept for the report', async () => {
  // Port 9 is never reached: node throws while building the request.
  const target = createHttpTarget({ baseUrl: 'http://127.0.0.1:9', model: 'unused', targetModel: 'модель.tar.gz' });
  try {
    const prepared = target.prepare({ kind: 'v2', body: Buffer.from('{"inputs":[]}') });
    assert.equal(await target.send(prepared, 1000), 'ERR_INVALID_CHAR');
    assert.match(target.errorSamples.get('ERR_INVALID_CHAR') ?? '', /Invalid character in header content \["X-Amzn-SageMaker-Target-Model"\]/);
  } finally {
    target.close();
  }
});
