/**
 * @module protocol/float16
 * IEEE 754 half-precision conversion. FP16 tensors travel as raw 16-bit
 * patterns (Uint16Array); JSON carries numbers, so the codec converts here.
 */

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** Round half to even; `q` is exact because it comes from power-of-two scaling. */
function roundHalfEven(q: number): number {
  const f = Math.floor(q);
  const d = q - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/**
 * Round a JS number once, directly to a small binary float (no detour through
 * float32, which would round twice). Returns the bit pattern.
 */
function toSmallFloatBits(value: number, expBits: number, mantBits: number): number {
  const bias = (1 << (expBits - 1)) - 1;
  const expMax = (1 << expBits) - 1;
  const sign = value < 0 || Object.is(value, -0) ? 1 << (expBits + mantBits) : 0;
  if (Number.isNaN(value)) return (expMax << mantBits) | (1 << (mantBits - 1));
  const a = Math.abs(value);
  const inf = sign | (expMax << mantBits);
  if (a === Infinity) return inf;
  const minNormal = 2 ** (1 - bias);
  if (a < minNormal) {
    // Subnormal (or zero): units of the smallest subnormal; may round up into the first normal.
    return sign | roundHalfEven(a / 2 ** (1 - bias - mantBits));
  }
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  else if (2 ** (e + 1) <= a) e++;
  let m = roundHalfEven((a / 2 ** e - 1) * 2 ** mantBits);
  if (m === 2 ** mantBits) {
    m = 0;
    e++;
  }
  if (e + bias >= expMax) return inf;
  return sign | ((e + bias) << mantBits) | m;
}

/** Round-to-nearest-even conversion of a JS number to half-precision bits. */
export function toFloat16Bits(value: number): number {
  return toSmallFloatBits(value, 5, 10);
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
  return toSmallFloatBits(value, 8, 7);
}
