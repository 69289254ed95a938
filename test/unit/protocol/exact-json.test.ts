import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_EXACT_JSON_DEPTH, parseJsonExact } from '../../../src/protocol/exact-json.js';

describe('parseJsonExact', () => {
  it('reads integer literals beyond ±(2^53 − 1) as exact BigInts, everything else as JSON.parse does', () => {
    const text =
      '{"a":[9007199254740993,-9223372036854775808,18446744073709551615,9007199254740991,1.5,0.8444218515250481,1e400,-0,"x\\"y\\u0041",true,false,null,{}],"b":{"c":[]}}';
    const v = parseJsonExact(text) as { a: unknown[] };
    assert.deepEqual(v.a.slice(0, 3), [9007199254740993n, -9223372036854775808n, 18446744073709551615n]);
    const plain = JSON.parse(text) as { a: unknown[] };
    assert.deepEqual(v.a.slice(3), plain.a.slice(3));
    assert.ok(Object.is(v.a[7], -0));
    assert.deepEqual((v as unknown as { b: unknown }).b, { c: [] });
  });

  it('a long literal with a fraction or exponent stays a number (its digits are not an integer)', () => {
    assert.deepEqual(
      parseJsonExact('[9007199254740993.0, 9.007199254740993e15, 12345678901234567e2]'),
      JSON.parse('[9007199254740993.0, 9.007199254740993e15, 12345678901234567e2]'),
    );
  });

  it('agrees with JSON.parse on generated documents', () => {
    let seed = 7;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const gen = (depth: number): unknown => {
      const r = rand();
      if (depth > 4 || r < 0.3) return [rand() * 1e6, Math.floor(rand() * 1e15), 'sé\n"q"', true, null][Math.floor(rand() * 5)];
      if (r < 0.65) return Array.from({ length: Math.floor(rand() * 5) }, () => gen(depth + 1));
      return Object.fromEntries(Array.from({ length: Math.floor(rand() * 5) }, (_, i) => [`k${i}\t`, gen(depth + 1)]));
    };
    for (let i = 0; i < 200; i++) {
      const text = JSON.stringify(gen(0), null, i % 2 === 0 ? 2 : undefined);
      assert.deepEqual(parseJsonExact(text), JSON.parse(text), text);
    }
  });

  it('"__proto__" is an own property, as JSON.parse makes it', () => {
    const v = parseJsonExact('{"__proto__":{"polluted":1},"n":12345678901234567890}') as Record<string, unknown>;
    assert.equal(Object.getPrototypeOf(v), Object.prototype);
    assert.deepEqual(Object.keys(v), ['__proto__', 'n']);
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
  });

  it("invalid text throws JSON.parse's SyntaxError", () => {
    for (const bad of ['[12345678901234567', '{"a":1,}', '[1,]', '"\u0001"', '', 'tru', '[1] x', '{"a" 1}']) {
      assert.throws(() => parseJsonExact(bad), SyntaxError, bad);
    }
  });

  it(`nesting beyond ${MAX_EXACT_JSON_DEPTH} levels is refused by name, not by a stack overflow`, () => {
    const deep = `${'['.repeat(MAX_EXACT_JSON_DEPTH + 5)}1${']'.repeat(MAX_EXACT_JSON_DEPTH + 5)}`;
    assert.throws(() => parseJsonExact(deep), /nested deeper than 512 levels/);
  });
});
