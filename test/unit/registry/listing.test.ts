/**
 * GET /models in O(page) (issue 28 item 5): a paginated walk's work per page
 * does not grow with the number of models, counted, not timed (the records
 * each page touches, registry/sorted-names.ts), and pages stay exact while
 * models come and go between them.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ManagedRecords, type ManagedRecord } from '../../../src/registry/managed-records.js';
import { SortedNames } from '../../../src/registry/sorted-names.js';

function record(modelName: string): ManagedRecord {
  return {
    modelName,
    url: `/opt/ml/models/${modelName}`,
    dir: `/opt/ml/models/${modelName}`,
    targetHeader: undefined,
    label: modelName,
    loadedAt: new Date(0),
    entryModel: modelName,
    versions: [1],
  };
}

/** A shuffled insertion order: the index, not the order of arrival, sorts them. */
function names(count: number): string[] {
  const out = Array.from({ length: count }, (_, i) => `model-${String(i).padStart(5, '0')}`);
  for (let i = out.length - 1; i > 0; i--) {
    const j = (i * 7919) % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

function walk(records: ManagedRecords, limit: number): { seen: string[]; visits: number[] } {
  const seen: string[] = [];
  const visits: number[] = [];
  let after: string | undefined;
  for (;;) {
    const page = records.page(after, limit);
    seen.push(...page.records.map((r) => r.modelName));
    visits.push(page.visited);
    if (!page.more) return { seen, visits };
    after = page.records[page.records.length - 1]!.modelName;
  }
}

describe('GET /models costs the page', () => {
  test('a walk over 2,000 models does at most 5x the work of a walk over 500; no page touches more than its size plus a binary search', () => {
    const work = new Map<number, number>();
    for (const count of [500, 2000]) {
      const records = new ManagedRecords();
      for (const n of names(count)) records.add(record(n));
      const { seen, visits } = walk(records, 100);
      assert.deepEqual(seen, [...seen].sort(), 'by name');
      assert.equal(new Set(seen).size, count, 'every model once');
      const bound = 100 + Math.ceil(Math.log2(count + 1));
      for (const v of visits) assert.ok(v <= bound, `a page of 100 of ${count} touched ${v} records (bound ${bound})`);
      work.set(
        count,
        visits.reduce((a, b) => a + b, 0),
      );
    }
    const ratio = work.get(2000)! / work.get(500)!;
    assert.ok(ratio <= 5, `a walk of 2,000 did ${ratio.toFixed(2)}x the work of 500 (${work.get(2000)} vs ${work.get(500)} records touched)`);
  });

  test('pages stay exact while names are added and removed between them', () => {
    const index = new SortedNames();
    const initial = names(300);
    for (const n of initial) index.add(n);
    const removed = new Set<string>();
    const seen: string[] = [];
    let after: string | undefined;
    let round = 0;
    for (;;) {
      const page = index.page(after, 7);
      seen.push(...page.names);
      if (!page.more) break;
      after = page.names[page.names.length - 1]!;
      // Between pages: one name goes (anywhere), one new name comes (anywhere).
      const gone = initial[(round * 37) % initial.length]!;
      index.delete(gone);
      removed.add(gone);
      index.add(`model-${String(round).padStart(5, '0')}x`);
      round++;
    }
    assert.equal(new Set(seen).size, seen.length, 'no name twice');
    assert.deepEqual(seen, [...seen].sort(), 'in order');
    for (const n of initial) if (!removed.has(n)) assert.ok(seen.includes(n), `${n}, present all along, was listed`);
    assert.equal(index.has(initial[1]!), !removed.has(initial[1]!));
  });
});
