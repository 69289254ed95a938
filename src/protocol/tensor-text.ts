/**
 * @module protocol/tensor-text
 * Each element of a tensor as text, for the text formats (CSV, nested JSON):
 * numbers in JavaScript's shortest round-trip form, int64 with exact digits,
 * FP16 widened, BOOL as true/false. How NaN and infinities are spelled
 * depends on the format, so the caller chooses.
 */
import { fromBFloat16Bits, fromFloat16Bits } from './float16.js';
import type { Tensor } from './tensor.js';

export interface NonFiniteSpelling {
  readonly nan: string;
  readonly inf: string;
  readonly negInf: string;
}

/** JSON has no NaN/Infinity: the strings "NaN", "Infinity", "-Infinity" (as the v2 codec writes them). */
export const JSON_NON_FINITE: NonFiniteSpelling = { nan: '"NaN"', inf: '"Infinity"', negInf: '"-Infinity"' };
/** CSV readers (pandas, numpy) read these unquoted. */
export const CSV_NON_FINITE: NonFiniteSpelling = { nan: 'NaN', inf: 'Infinity', negInf: '-Infinity' };

function numberText(v: number, spell: NonFiniteSpelling): string {
  if (Number.isFinite(v)) return String(v);
  if (Number.isNaN(v)) return spell.nan;
  return v > 0 ? spell.inf : spell.negInf;
}

/** Element texts of a numeric or BOOL tensor (not BYTES), row-major. */
export function numericElementTexts(tensor: Tensor, spell: NonFiniteSpelling): string[] {
  const { datatype, data } = tensor;
  if (Array.isArray(data)) throw new TypeError('numericElementTexts: BYTES tensor');
  const n = data.length;
  const out = new Array<string>(n);
  switch (datatype) {
    case 'BOOL':
      for (let i = 0; i < n; i++) out[i] = data[i] ? 'true' : 'false';
      return out;
    case 'FP16':
    case 'BF16': {
      const widen = datatype === 'FP16' ? fromFloat16Bits : fromBFloat16Bits;
      for (let i = 0; i < n; i++) out[i] = numberText(widen((data as Uint16Array)[i]!), spell);
      return out;
    }
    case 'INT64':
    case 'UINT64':
      for (let i = 0; i < n; i++) out[i] = String((data as BigInt64Array | BigUint64Array)[i]!);
      return out;
    default:
      for (let i = 0; i < n; i++) out[i] = numberText((data as Float64Array)[i]!, spell);
      return out;
  }
}
