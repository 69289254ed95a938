/**
 * @module config/byte-size
 * The one parser for byte settings (`MME_MEMORY_BUDGET_BYTES=2Gi`). It
 * follows Kubernetes resource quantities, which operators of this server
 * already write in their pod specs: a whole number of bytes, or a number
 * with a binary suffix (Ki, Mi, Gi, Ti, Pi: powers of 1024) or a decimal one
 * (k, M, G, T, P: powers of 1000). The IEC spellings with a B (KiB, MiB, GiB,
 * TiB, PiB) mean the same as the binary suffixes. `KB`, `MB`, `GB`, `TB` are
 * refused: half the world reads them as powers of 1024, the other half as
 * powers of 1000, and a budget must not depend on which half wrote it.
 */

const BINARY: Readonly<Record<string, number>> = { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4, Pi: 1024 ** 5 };
const DECIMAL: Readonly<Record<string, number>> = { k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15 };

/** The accepted forms, for messages and docs/configuration.md. */
export const BYTE_SIZE_FORMS =
  'a whole number of bytes, or a number with a suffix: Ki, Mi, Gi, Ti, Pi (powers of 1024; KiB, MiB, GiB, TiB, PiB alike) or k, M, G, T, P (powers of 1000), e.g. 2Gi, 512Mi, 1.5G';

/** The multiplier of a suffix, or undefined for one that is not accepted. */
function multiplier(suffix: string): number | undefined {
  if (suffix === '') return 1;
  const binary = /^([KMGTP]i)B?$/.exec(suffix);
  if (binary) return BINARY[binary[1]!];
  return DECIMAL[suffix];
}

/** Why a suffix is refused, with the two forms it could have meant. */
function refusal(name: string, raw: string, number: string, suffix: string): string {
  const letter = suffix[0]!.toUpperCase();
  const ambiguous = /^[KMGTP]B$/i.test(suffix);
  if (ambiguous || /^[KMGTPkmgtp]$/.test(suffix)) {
    const decimal = letter === 'K' ? 'k' : letter;
    const why = ambiguous ? `${suffix} is a power of 1000 to some and of 1024 to others` : `'${suffix}' is not a suffix here`;
    return `${name}: '${raw.trim()}' is ambiguous (${why}): write ${number}${letter}i for ${number} × 1024^${exponent(letter)} bytes or ${number}${decimal} for ${number} × 1000^${exponent(letter)}; accepted: ${BYTE_SIZE_FORMS}`;
  }
  return `${name} must be a byte size, got '${raw}'; accepted: ${BYTE_SIZE_FORMS}`;
}

function exponent(letter: string): number {
  return 'KMGTP'.indexOf(letter) + 1;
}

/**
 * `raw` as a whole number of bytes in [min, max]; throws a message naming the
 * setting and showing the accepted forms otherwise (a fraction of a byte too:
 * `0.1Ki` is refused, not rounded).
 */
export function parseByteSize(name: string, raw: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const m = /^\s*(\d+(?:\.\d+)?)([A-Za-z]*)\s*$/.exec(raw);
  if (!m) throw new Error(`${name} must be a byte size, got '${raw}'; accepted: ${BYTE_SIZE_FORMS}`);
  const [, number, suffix] = m as unknown as [string, string, string];
  const factor = multiplier(suffix);
  if (factor === undefined) throw new Error(refusal(name, raw, number, suffix));
  // Exact arithmetic: 1.1G is 1100000000 bytes, not 1100000000.0000002.
  const [whole, fraction = ''] = number.split('.') as [string, string?];
  const scaled = BigInt(whole + fraction) * BigInt(factor);
  const scale = 10n ** BigInt(fraction.length);
  if (scaled % scale !== 0n) throw new Error(`${name}: '${raw.trim()}' is not a whole number of bytes; accepted: ${BYTE_SIZE_FORMS}`);
  const exact = scaled / scale;
  const bound = exact < BigInt(min) ? `at least ${min} byte${min === 1 ? '' : 's'}` : exact > BigInt(max) ? `at most ${max} bytes` : undefined;
  if (bound !== undefined) throw new Error(`${name} must be ${bound}, got '${raw.trim()}'${suffix === '' ? '' : ` (${exact} bytes)`}`);
  return Number(exact);
}
