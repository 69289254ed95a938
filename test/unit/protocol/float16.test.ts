/**
 * @module test/unit/protocol/float16
 * IEEE 754 half precision and bfloat16 conversions used by the JSON codec.
 * Expected bit patterns are written literally (worked out by hand from the
 * formats), so the tests do not trust the code under test for their answers.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fromBFloat16Bits, fromFloat16Bits, toBFloat16Bits, toFloat16Bits } from '../../../src/protocol/float16.js';
import { seededRandom } from '../../../examples/models/zoo.js';

const hex = (n: number): string => `0x${n.toString(16).padStart(4, '0')}`;

describe('toFloat16Bits', () => {
  test('exact values map to their half-precision bit patterns', () => {
    const cases: Array<[number, number]> = [
      [0, 0x0000],
      [1, 0x3c00],
      [-1, 0xbc00],
      [2, 0x4000],
      [-2, 0xc000],
      [0.5, 0x3800],
      [1.5, 0x3e00],
      [0.25, 0x3400],
      [1024, 0x6400],
      [65504, 0x7bff], // largest finite half
      [2 ** -14, 0x0400], // smallest normal
      [-(2 ** -14), 0x8400],
    ];
    for (const [value, bits] of cases) assert.equal(hex(toFloat16Bits(value)), hex(bits), `value ${value}`);
  });

  test('negative zero keeps its sign bit', () => {
    assert.equal(hex(toFloat16Bits(-0)), '0x8000');
  });

  test('inexact values round to nearest: 0.1 → 0x2e66, 1/3 → 0x3555, 3.14159 → 0x4248', () => {
    assert.equal(hex(toFloat16Bits(0.1)), '0x2e66');
    assert.equal(hex(toFloat16Bits(1 / 3)), '0x3555');
    assert.equal(hex(toFloat16Bits(3.14159)), '0x4248');
    assert.equal(hex(toFloat16Bits(-0.1)), '0xae66');
  });

  test('ties round to even in the normal range', () => {
    // 1 + 2^-11 lies halfway between 1 (0x3c00, even) and 1 + 2^-10 (0x3c01, odd).
    assert.equal(hex(toFloat16Bits(1 + 2 ** -11)), '0x3c00');
    // 1 + 3·2^-11 lies halfway between 0x3c01 (odd) and 0x3c02 (even).
    assert.equal(hex(toFloat16Bits(1 + 3 * 2 ** -11)), '0x3c02');
    // Just above the midpoint rounds up; just below rounds down.
    assert.equal(hex(toFloat16Bits(1 + 2 ** -11 + 2 ** -20)), '0x3c01');
    assert.equal(hex(toFloat16Bits(1 + 2 ** -11 - 2 ** -20)), '0x3c00');
  });

  test('rounding up can carry into the exponent', () => {
    // 2 - 2^-11 is halfway between 0x3bff (1.9990234375, odd) and 0x4000 (2, even).
    assert.equal(hex(toFloat16Bits(2 - 2 ** -11)), '0x4000');
  });

  test('overflow: 65519 stays finite, 65520 (tie with odd 0x7bff) and larger become infinity', () => {
    assert.equal(hex(toFloat16Bits(65519)), '0x7bff');
    assert.equal(hex(toFloat16Bits(65520)), '0x7c00');
    assert.equal(hex(toFloat16Bits(1e6)), '0x7c00');
    assert.equal(hex(toFloat16Bits(-1e6)), '0xfc00');
    assert.equal(hex(toFloat16Bits(1e300)), '0x7c00'); // beyond float32 range too
  });

  test('infinities and NaN', () => {
    assert.equal(hex(toFloat16Bits(Infinity)), '0x7c00');
    assert.equal(hex(toFloat16Bits(-Infinity)), '0xfc00');
    assert.equal(hex(toFloat16Bits(Number.NaN)), '0x7e00');
  });

  test('subnormals: exact multiples of 2^-24', () => {
    assert.equal(hex(toFloat16Bits(2 ** -24)), '0x0001'); // smallest subnormal
    assert.equal(hex(toFloat16Bits(3 * 2 ** -24)), '0x0003');
    assert.equal(hex(toFloat16Bits(1023 * 2 ** -24)), '0x03ff'); // largest subnormal
    assert.equal(hex(toFloat16Bits(-(2 ** -24))), '0x8001');
  });

  test('subnormal rounding: ties to even, underflow to signed zero', () => {
    assert.equal(hex(toFloat16Bits(2 ** -25)), '0x0000'); // tie between 0 (even) and 1
    assert.equal(hex(toFloat16Bits(3 * 2 ** -25)), '0x0002'); // 1.5 ulps: tie between 1 and 2 (even)
    assert.equal(hex(toFloat16Bits(1.5 * 2 ** -25)), '0x0001'); // 0.75 ulp rounds up
    assert.equal(hex(toFloat16Bits(2 ** -26)), '0x0000'); // 0.25 ulp
    assert.equal(hex(toFloat16Bits(-(2 ** -26))), '0x8000');
    assert.equal(hex(toFloat16Bits(1e-10)), '0x0000');
    // 1023.5 ulps: tie between 0x03ff (odd) and 0x0400 (even, the smallest normal).
    assert.equal(hex(toFloat16Bits(1023.5 * 2 ** -24)), '0x0400');
  });

  test('rounds the JS number once (no double rounding through float32)', () => {
    // The exact value is above the midpoint between 0x3c00 and 0x3c01, so RNE gives 0x3c01;
    // rounding to float32 first would drop the 2^-30 and the tie would then round down to even.
    assert.equal(hex(toFloat16Bits(1 + 2 ** -11 + 2 ** -30)), '0x3c01');
    assert.equal(hex(toFloat16Bits(2 ** -25 + 2 ** -60)), '0x0001'); // just above half the smallest subnormal
  });
});

/**
 * Checks that `bits` is the round-to-nearest-even encoding of `x`: no neighbouring
 * magnitude is closer, and on a tie the mantissa is even.
 */
function assertNearestEven(x: number, bits: number, decode: (b: number) => number, signBit: number, maxFinite: number, what: string): void {
  const sign = bits & signBit;
  const mag = bits & (signBit - 1);
  assert.equal(sign !== 0, x < 0, `${what}(${x}) sign`);
  const d = Math.abs(x - decode(bits));
  for (const n of [mag - 1, mag + 1]) {
    if (n < 0 || n > maxFinite) continue;
    const dn = Math.abs(x - decode(sign | n));
    if (dn < d) assert.fail(`${what}(${x}) = ${hex(bits)} but ${hex(sign | n)} is closer`);
    if (dn === d && (mag & 1) === 1) assert.fail(`${what}(${x}) = ${hex(bits)} is odd on a tie with ${hex(sign | n)}`);
  }
}

describe('round-to-nearest-even property on random doubles', () => {
  test('toFloat16Bits over the whole finite range, subnormals included', () => {
    const rand = seededRandom(16);
    for (let i = 0; i < 50_000; i++) {
      // Log-uniform magnitudes from 2^-26 to 2^15.99, random sign.
      const x = (rand() < 0.5 ? -1 : 1) * 2 ** (rand() * 41.99 - 26);
      assertNearestEven(x, toFloat16Bits(x), fromFloat16Bits, 0x8000, 0x7bff, 'toFloat16Bits');
    }
  });

  test('toBFloat16Bits over normal magnitudes', () => {
    const rand = seededRandom(7);
    for (let i = 0; i < 50_000; i++) {
      const x = (rand() < 0.5 ? -1 : 1) * 2 ** (rand() * 200 - 100);
      assertNearestEven(x, toBFloat16Bits(x), fromBFloat16Bits, 0x8000, 0x7f7f, 'toBFloat16Bits');
    }
  });
});

describe('fromFloat16Bits', () => {
  test('decodes normal, subnormal, zero, infinity and NaN patterns', () => {
    assert.equal(fromFloat16Bits(0x3c00), 1);
    assert.equal(fromFloat16Bits(0xc000), -2);
    assert.equal(fromFloat16Bits(0x3555), 0.333251953125);
    assert.equal(fromFloat16Bits(0x2e66), 0.0999755859375);
    assert.equal(fromFloat16Bits(0x7bff), 65504);
    assert.equal(fromFloat16Bits(0x0400), 2 ** -14);
    assert.equal(fromFloat16Bits(0x0001), 2 ** -24);
    assert.equal(fromFloat16Bits(0x03ff), 1023 * 2 ** -24);
    assert.equal(fromFloat16Bits(0x8001), -(2 ** -24));
    assert.ok(Object.is(fromFloat16Bits(0x0000), 0));
    assert.ok(Object.is(fromFloat16Bits(0x8000), -0));
    assert.equal(fromFloat16Bits(0x7c00), Infinity);
    assert.equal(fromFloat16Bits(0xfc00), -Infinity);
    assert.ok(Number.isNaN(fromFloat16Bits(0x7e00)));
    assert.ok(Number.isNaN(fromFloat16Bits(0x7c01)));
    assert.ok(Number.isNaN(fromFloat16Bits(0xffff)));
  });

  test('every one of the 65536 patterns round-trips through toFloat16Bits (NaNs stay NaN)', () => {
    let nan = 0;
    for (let bits = 0; bits <= 0xffff; bits++) {
      const value = fromFloat16Bits(bits);
      if (Number.isNaN(value)) {
        nan++;
        assert.ok(Number.isNaN(fromFloat16Bits(toFloat16Bits(value))), hex(bits));
        continue;
      }
      const back = toFloat16Bits(value);
      if (back !== bits) assert.fail(`${hex(bits)} → ${value} → ${hex(back)}`);
    }
    assert.equal(nan, 2 * 1023); // exponent 0x1f with a non-zero mantissa, both signs
  });
});

describe('bfloat16', () => {
  test('toBFloat16Bits: exact values are the top 16 bits of the float32', () => {
    assert.equal(hex(toBFloat16Bits(1)), '0x3f80');
    assert.equal(hex(toBFloat16Bits(-1)), '0xbf80');
    assert.equal(hex(toBFloat16Bits(2)), '0x4000');
    assert.equal(hex(toBFloat16Bits(0.5)), '0x3f00');
    assert.equal(hex(toBFloat16Bits(0)), '0x0000');
    assert.equal(hex(toBFloat16Bits(-0)), '0x8000');
    assert.equal(hex(toBFloat16Bits(3.140625)), '0x4049');
  });

  test('toBFloat16Bits rounds to nearest even on the dropped 16 bits', () => {
    assert.equal(hex(toBFloat16Bits(Math.PI)), '0x4049'); // 0x40490fdb → 0x4049
    assert.equal(hex(toBFloat16Bits(0.1)), '0x3dcd'); // 0x3dcccccd → rounds up
    // 1 + 2^-8 is halfway between 0x3f80 (even) and 0x3f81.
    assert.equal(hex(toBFloat16Bits(1 + 2 ** -8)), '0x3f80');
    // 1 + 3·2^-8 is halfway between 0x3f81 (odd) and 0x3f82 (even).
    assert.equal(hex(toBFloat16Bits(1 + 3 * 2 ** -8)), '0x3f82');
    assert.equal(hex(toBFloat16Bits(1 + 2 ** -8 + 2 ** -16)), '0x3f81');
  });

  test('toBFloat16Bits: infinities, overflow and NaN', () => {
    assert.equal(hex(toBFloat16Bits(Infinity)), '0x7f80');
    assert.equal(hex(toBFloat16Bits(-Infinity)), '0xff80');
    assert.equal(hex(toBFloat16Bits(3.4028234663852886e38)), '0x7f80'); // float32 max rounds up to inf
    assert.equal(hex(toBFloat16Bits(-3.4028234663852886e38)), '0xff80');
    assert.equal(hex(toBFloat16Bits(Number.NaN)), '0x7fc0');
  });

  test('toBFloat16Bits: subnormal float32 inputs keep their top bits', () => {
    // 2^-131 is the float32 subnormal 0x00040000 → bfloat16 0x0004.
    assert.equal(hex(toBFloat16Bits(2 ** -131)), '0x0004');
  });

  test('fromBFloat16Bits decodes exactly', () => {
    assert.equal(fromBFloat16Bits(0x3f80), 1);
    assert.equal(fromBFloat16Bits(0xbf80), -1);
    assert.equal(fromBFloat16Bits(0x4049), 3.140625);
    assert.equal(fromBFloat16Bits(0x7f80), Infinity);
    assert.equal(fromBFloat16Bits(0xff80), -Infinity);
    assert.ok(Number.isNaN(fromBFloat16Bits(0x7fc0)));
    assert.ok(Object.is(fromBFloat16Bits(0x8000), -0));
    assert.equal(fromBFloat16Bits(0x0001), 2 ** -133);
  });

  test('every bfloat16 pattern round-trips (NaNs become the canonical 0x7fc0)', () => {
    for (let bits = 0; bits <= 0xffff; bits++) {
      const value = fromBFloat16Bits(bits);
      const back = toBFloat16Bits(value);
      if (Number.isNaN(value)) {
        if (back !== 0x7fc0) assert.fail(`${hex(bits)} NaN → ${hex(back)}`);
      } else if (back !== bits) {
        assert.fail(`${hex(bits)} → ${value} → ${hex(back)}`);
      }
    }
  });

  test('toBFloat16Bits rounds the JS number once (no double rounding through float32)', () => {
    assert.equal(hex(toBFloat16Bits(1 + 2 ** -8 + 2 ** -30)), '0x3f81');
  });
});
