/**
 * The bounded set of main-thread copies: a place goes to the models that run
 * most often, so a working set wider than the copies does not make and drop a
 * copy per request.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AGE_RUNS_PER_COPY, MainThreadCopies, type CopyHolder } from '../../../src/runtime/main-thread-copies.js';

class Holder implements CopyHolder {
  dropped = 0;
  constructor(readonly name: string) {}
  dropCopy(): void {
    this.dropped++;
  }
}

function runs(copies: MainThreadCopies, holder: Holder, n: number): void {
  for (let i = 0; i < n; i++) copies.ran(holder);
}

describe('MainThreadCopies', () => {
  test('free places go to any model; a full set admits only a model that ran more often than the least used holder', () => {
    const copies = new MainThreadCopies(2);
    const [a, b, c] = [new Holder('a'), new Holder('b'), new Holder('c')];
    runs(copies, a, 5);
    runs(copies, b, 2);
    assert.equal(copies.admit(a), true);
    assert.equal(copies.admit(b), true);
    runs(copies, c, 2);
    assert.equal(copies.wouldAdmit(c), false, 'as often as b is not enough');
    assert.equal(copies.admit(c), false);
    assert.equal(b.dropped, 0);
    copies.ran(c);
    assert.equal(copies.admit(c), true);
    assert.equal(b.dropped, 1, 'b, the least used holder, dropped its copy');
    assert.equal(a.dropped, 0);
    assert.equal(copies.size, 2);
    assert.equal(copies.admit(c), true, 'a holder is admitted again without another drop');
    assert.equal(b.dropped + a.dropped, 1);
  });

  test('of holders that ran equally often, the least recently run gives up its place', () => {
    const copies = new MainThreadCopies(2);
    const [a, b, c] = [new Holder('a'), new Holder('b'), new Holder('c')];
    for (const h of [a, b]) {
      runs(copies, h, 3);
      copies.admit(h);
    }
    copies.ran(a);
    copies.ran(b); // both 4 runs, b the more recent
    runs(copies, c, 5);
    assert.equal(copies.admit(c), true);
    assert.deepEqual([a.dropped, b.dropped], [1, 0]);
  });

  test('a Zipf-like stream over many more models than copies: the hot models keep their copies, few drops', () => {
    const copies = new MainThreadCopies(4);
    const held = new Set<Holder>();
    const holders = Array.from({ length: 200 }, (_, i) => {
      const h = new Holder(`m${i}`);
      h.dropCopy = () => void (h.dropped++, held.delete(h));
      return h;
    });
    // Deterministic stream: model k is requested about 1 / (k + 1) as often as model 0, shuffled.
    const stream: number[] = [];
    for (let k = 0; k < holders.length; k++) for (let r = 0; r < Math.ceil(400 / (k + 1)); r++) stream.push(k);
    let seed = 7;
    for (let i = stream.length - 1; i > 0; i--) {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      const j = seed % (i + 1);
      [stream[i], stream[j]] = [stream[j]!, stream[i]!];
    }
    let onCopy = 0;
    for (const k of stream) {
      const h = holders[k]!;
      if (held.has(h)) onCopy++;
      copies.ran(h);
      if (copies.admit(h)) held.add(h);
    }
    const drops = holders.reduce((n, h) => n + h.dropped, 0);
    // Most recently used instead: nearly every run of a model outside the 4 would drop one (about 1,500 here).
    assert.ok(drops < stream.length / 20, `${drops} drops over ${stream.length} runs`);
    const top4 = (400 + 200 + 134 + 100) / stream.length;
    assert.ok(onCopy / stream.length > 0.8 * top4, `${onCopy} of ${stream.length} runs on a copy; the 4 hottest models have ${(top4 * 100).toFixed(0)}%`);
    assert.deepEqual([...held].map((h) => h.name).sort(), ['m0', 'm1', 'm2', 'm3']);
  });

  test('counts are halved every AGE_RUNS_PER_COPY × capacity runs, so a model hot now takes over from one hot before', () => {
    const copies = new MainThreadCopies(1);
    const [old, now] = [new Holder('old'), new Holder('now')];
    runs(copies, old, AGE_RUNS_PER_COPY - 1);
    assert.equal(copies.admit(old), true);
    assert.equal(copies.frequency(old), AGE_RUNS_PER_COPY - 1);
    runs(copies, now, 1); // the period's last run: every count is halved
    assert.equal(copies.frequency(old), (AGE_RUNS_PER_COPY - 1) >>> 1);
    runs(copies, now, AGE_RUNS_PER_COPY); // one more halving
    assert.ok(copies.frequency(now) > copies.frequency(old));
    assert.equal(copies.admit(now), true);
    assert.equal(old.dropped, 1);
  });

  test('capacity 0: copies are off and nothing is counted', () => {
    const copies = new MainThreadCopies(0);
    const a = new Holder('a');
    runs(copies, a, 10);
    assert.equal(copies.frequency(a), 0);
    assert.equal(copies.admit(a), false);
    assert.equal(copies.size, 0);
  });
});
