/**
 * @module protocol/exact-json
 * JSON text → values, like JSON.parse, except that an integer literal beyond
 * ±(2^53 − 1) (no fraction, no exponent) becomes a BigInt holding its exact
 * digits. JSON.parse turns 9007199254740997 into the double
 * 9007199254740996 before any codec sees it, so INT64/UINT64 tensors sent as
 * JSON numbers (as Python's `json` and most clients write integers) would
 * silently change value.
 *
 * This reader is about 3× slower than JSON.parse, so bodies are read with
 * JSON.parse first and again with this only when a decoder meets a 64-bit
 * integer JSON.parse may have rounded (v2-json-codec's decodeJsonBody): float
 * bodies never pay for it. It agrees with JSON.parse on every valid text
 * (strings are unescaped by JSON.parse itself); on an invalid one the error
 * is JSON.parse's.
 */

const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?(?:[eE][+-]?\d+)?/y;

/** Deeper than any request needs (Triton allows 100 levels of tensor data); the reader is recursive. */
export const MAX_EXACT_JSON_DEPTH = 512;

class JsonTextError extends Error {}

class Reader {
  private i = 0;

  constructor(private readonly text: string) {}

  document(): unknown {
    const v = this.value(0);
    this.space();
    if (this.i !== this.text.length) this.fail('unexpected text after the JSON value');
    return v;
  }

  private fail(message: string): never {
    throw new JsonTextError(`${message} at position ${this.i}`);
  }

  private space(): void {
    const t = this.text;
    for (;;) {
      const c = t.charCodeAt(this.i);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) this.i++;
      else return;
    }
  }

  private value(depth: number): unknown {
    if (depth > MAX_EXACT_JSON_DEPTH) this.fail(`JSON nested deeper than ${MAX_EXACT_JSON_DEPTH} levels`);
    this.space();
    const t = this.text;
    const c = t.charCodeAt(this.i);
    if (c === 0x5b /* [ */) return this.array(depth);
    if (c === 0x7b /* { */) return this.object(depth);
    if (c === 0x22 /* " */) return this.string();
    if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) return this.number();
    for (const [word, v] of WORDS) {
      if (t.startsWith(word, this.i)) {
        this.i += word.length;
        return v;
      }
    }
    return this.fail('unexpected character');
  }

  private array(depth: number): unknown[] {
    this.i++;
    const out: unknown[] = [];
    this.space();
    if (this.text.charCodeAt(this.i) === 0x5d /* ] */) {
      this.i++;
      return out;
    }
    for (;;) {
      out.push(this.value(depth + 1));
      this.space();
      const c = this.text.charCodeAt(this.i++);
      if (c === 0x5d) return out;
      if (c !== 0x2c /* , */) this.fail("expected ',' or ']'");
    }
  }

  private object(depth: number): Record<string, unknown> {
    this.i++;
    const out: Record<string, unknown> = {};
    this.space();
    if (this.text.charCodeAt(this.i) === 0x7d /* } */) {
      this.i++;
      return out;
    }
    for (;;) {
      this.space();
      if (this.text.charCodeAt(this.i) !== 0x22) this.fail('expected a property name');
      const key = this.string();
      this.space();
      if (this.text.charCodeAt(this.i++) !== 0x3a /* : */) this.fail("expected ':'");
      const v = this.value(depth + 1);
      // JSON.parse makes "__proto__" an own property; plain assignment would set the prototype.
      if (key === '__proto__') Object.defineProperty(out, key, { value: v, writable: true, enumerable: true, configurable: true });
      else out[key] = v;
      this.space();
      const c = this.text.charCodeAt(this.i++);
      if (c === 0x7d) return out;
      if (c !== 0x2c) this.fail("expected ',' or '}'");
    }
  }

  private string(): string {
    const t = this.text;
    const start = this.i;
    let j = start + 1;
    let plain = true;
    for (;;) {
      const c = t.charCodeAt(j);
      if (Number.isNaN(c)) this.fail('unterminated string');
      if (c === 0x22) break;
      if (c === 0x5c /* \ */) {
        plain = false;
        j += 2;
        continue;
      }
      if (c < 0x20) plain = false;
      j++;
    }
    this.i = j + 1;
    // JSON.parse unescapes (and refuses control characters) exactly as it would in the whole text.
    return plain ? t.slice(start + 1, j) : (JSON.parse(t.slice(start, j + 1)) as string);
  }

  private number(): number | bigint {
    NUMBER.lastIndex = this.i;
    const m = NUMBER.exec(this.text);
    if (m === null) return this.fail('invalid number');
    const literal = m[0];
    this.i += literal.length;
    const n = Number(literal);
    if (Number.isSafeInteger(n) || literal.length < 16 || !/^-?\d+$/.test(literal)) return n;
    return BigInt(literal);
  }
}

const WORDS: readonly (readonly [string, unknown])[] = [
  ['true', true],
  ['false', false],
  ['null', null],
];

/**
 * JSON.parse(text), with integer literals beyond ±(2^53 − 1) read as exact
 * BigInts. Throws JSON.parse's SyntaxError on invalid text.
 */
export function parseJsonExact(text: string): unknown {
  try {
    return new Reader(text).document();
  } catch (err) {
    if (!(err instanceof JsonTextError)) throw err;
    JSON.parse(text); // the standard message for text that is not JSON
    throw err; // valid for JSON.parse but not here: only nesting beyond MAX_EXACT_JSON_DEPTH
  }
}

/** A parsed JSON value for a message: BigInts (which JSON.stringify refuses) as their digits. */
export function jsonValueText(v: unknown): string {
  return typeof v === 'bigint' ? String(v) : (JSON.stringify(v) ?? String(v));
}
