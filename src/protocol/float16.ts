/**
 * @module protocol/float16
 * IEEE 754 half-precision conversion. FP16 tensors travel as raw 16-bit
 * patterns (Uint16Array); JSON carries numbers, so the codec converts here.
 */

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** Round-to-nearest-even conversion of a JS number to half-precision bits. */
export function toFloat16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0); // Inf / NaN
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00; // overflow → Inf
  if (e <= 0) {
    if (e < -10) return sign; // underflow → ±0
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && (half & 1))) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1))) half++;
  return sign | half;
}

export function fromFloat16Bits(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >>> 10) & 0x1f;
  const mant = bits & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? Number.NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** bfloat16 is the top half of a float32. */
export function fromBFloat16Bits(bits: number): number {
  u32[0] = bits << 16;
  return f32[0]!;
}

export function toBFloat16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0]!;
  if (Number.isNaN(value)) return 0x7fc0;
  // round to nearest even on the dropped 16 bits
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}
