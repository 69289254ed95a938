import assert from 'node:assert/strict';
import { it } from 'node:test';
import { TransferProgress } from '../../../src/store/transfer-progress.js';

it('reports bytes, fraction, average rate and time left at that rate', () => {
  let now = 1000;
  const p = new TransferProgress(1000, () => now);
  assert.deepEqual(p.snapshot(), { bytes: 0, totalBytes: 1000, fraction: 0, bytesPerSecond: 0, etaSeconds: undefined, elapsedMs: 0 });
  now = 3000;
  p.add(250);
  assert.deepEqual(p.snapshot(), { bytes: 250, totalBytes: 1000, fraction: 0.25, bytesPerSecond: 125, etaSeconds: 6, elapsedMs: 2000 });
});

it('without a total: no fraction and no ETA', () => {
  let now = 0;
  const p = new TransferProgress(undefined, () => now);
  now = 1000;
  p.add(10);
  const s = p.snapshot();
  assert.equal(s.fraction, undefined);
  assert.equal(s.etaSeconds, undefined);
  assert.equal(s.bytesPerSecond, 10);
});
