/**
 * ResponseCache: keys that separate everything the answer depends on (the
 * loaded package, version, input names, datatypes, shapes, bytes, string
 * elements, requested outputs and their order) and nothing it does not
 * (input order); byte accounting with LRU eviction; answers bigger than the
 * budget are not kept; a hit hands out a fresh map.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Tensor } from '../../../src/protocol/tensor.js';
import { ResponseCache } from '../../../src/service/response-cache.js';

const f32 = (shape: number[], values: number[]): Tensor => ({ datatype: 'FP32', shape, data: Float32Array.from(values) });
const inputs = (...entries: [string, Tensor][]) => new Map(entries);

describe('ResponseCache keys', () => {
  const cache = new ResponseCache(1 << 20);
  const pkg = {};
  const base = inputs(['A', f32([1, 2], [1, 2])], ['B', f32([1, 2], [3, 4])]);
  const key = (p: object, version: string, ins: Map<string, Tensor>, wanted = ['OUT']) => cache.keyOf(p, 'm', version, ins, wanted);

  test('the same request gives the same key; input order does not matter', () => {
    assert.equal(key(pkg, '1', base), key(pkg, '1', inputs(['B', f32([1, 2], [3, 4])], ['A', f32([1, 2], [1, 2])])));
  });

  test('every fact the answer depends on changes the key', () => {
    const k = key(pkg, '1', base);
    const variants = [
      key({}, '1', base), // another load of the model
      key(pkg, '2', base),
      cache.keyOf(pkg, 'other', '1', base, ['OUT']),
      key(pkg, '1', inputs(['A', f32([1, 2], [1, 2])], ['B', f32([1, 2], [3, 5])])),
      key(pkg, '1', inputs(['A', f32([2, 1], [1, 2])], ['B', f32([1, 2], [3, 4])])),
      key(pkg, '1', inputs(['A', { datatype: 'INT32', shape: [1, 2], data: Int32Array.from([1, 2]) }], ['B', f32([1, 2], [3, 4])])),
      key(pkg, '1', inputs(['A2', f32([1, 2], [1, 2])], ['B', f32([1, 2], [3, 4])])),
      key(pkg, '1', base, ['OUT', 'OUT2']),
      key(pkg, '1', base, []),
    ];
    for (const v of variants) assert.notEqual(v, k);
    assert.equal(new Set(variants).size, variants.length);
    assert.notEqual(key(pkg, '1', base, ['X', 'Y']), key(pkg, '1', base, ['Y', 'X']));
  });

  test('string tensors: element boundaries count, and a view hashes only its own bytes', () => {
    const s = (data: string[]) => inputs(['T', { datatype: 'BYTES', shape: [data.length], data }]);
    assert.notEqual(key(pkg, '1', s(['ab', 'c'])), key(pkg, '1', s(['a', 'bc'])));
    assert.equal(key(pkg, '1', s(['ab', 'c'])), key(pkg, '1', s(['ab', 'c'])));
    assert.notEqual(key(pkg, '1', s(['\ud800'])), key(pkg, '1', s(['\udc00'])), 'two different lone surrogates');
    const big = Float32Array.from([9, 1, 2, 9]);
    const view = inputs(['A', { datatype: 'FP32', shape: [1, 2], data: big.subarray(1, 3) }], ['B', f32([1, 2], [3, 4])]);
    assert.equal(key(pkg, '1', view), key(pkg, '1', base));
  });
});

describe('ResponseCache storage', () => {
  const out = (n: number) =>
    new Map<string, Tensor>([
      [
        'OUT',
        f32(
          [1, n],
          Array.from({ length: n }, (_, i) => i),
        ),
      ],
    ]);

  test('a hit returns the stored tensors in a fresh map', () => {
    const cache = new ResponseCache(1 << 20);
    const stored = out(4);
    cache.set('k', stored);
    stored.set('LATER', f32([1], [0])); // post-processing may change the caller's map after the insert
    const a = cache.get('k')!;
    assert.deepEqual([...a.keys()], ['OUT']);
    a.delete('OUT');
    assert.equal(cache.get('k')!.get('OUT')!.data, stored.get('OUT')!.data);
    assert.equal(cache.get('missing'), undefined);
  });

  test('bytes are counted; the least recently used answer leaves first; an answer bigger than the budget is not kept', () => {
    const cache = new ResponseCache(2000);
    for (let i = 0; i < 3; i++) cache.set(`k${i}`, out(64)); // 256 data bytes + overheads each
    assert.equal(cache.stats().entries, 3);
    cache.get('k0'); // now k1 is the oldest
    cache.set('k3', out(64));
    const { bytes, entries, evictions } = cache.stats();
    assert.ok(bytes <= 2000, `${bytes} bytes`);
    assert.equal(evictions, 1);
    assert.equal(entries, 3);
    assert.equal(cache.get('k1'), undefined);
    assert.notEqual(cache.get('k0'), undefined);
    cache.set('huge', out(1000));
    assert.equal(cache.get('huge'), undefined);
  });
});
