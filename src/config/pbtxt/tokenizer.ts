/**
 * @module config/pbtxt/tokenizer
 * Lexer for the protobuf text format (the syntax of Triton's `config.pbtxt`),
 * following the text-format spec and the quirks of the C++ `io::Tokenizer`
 * that Triton itself parses with. Every token carries its 1-based line and
 * column so parse errors can point at the exact spot in the file.
 *
 * Lazy on purpose: the parser pulls tokens one by one, so the first error in
 * reading order is the one reported, whether it is lexical or grammatical.
 */
import { ServingError } from '../../errors.js';

export type Punctuation = '{' | '}' | '<' | '>' | '[' | ']' | ':' | ',' | ';';

interface TokenBase {
  /** 1-based. */
  readonly line: number;
  /** 1-based, counted in UTF-16 code units. */
  readonly column: number;
  /** The source text of the token (for strings: all concatenated literals with quotes). */
  readonly text: string;
}

export interface IdentifierToken extends TokenBase {
  readonly kind: 'identifier';
}

export interface NumberToken extends TokenBase {
  readonly kind: 'number';
  /** Written with a decimal point, an exponent, an `f` suffix, or as ±inf/nan. */
  readonly isFloat: boolean;
  /** Exact value of an integer literal (sign applied); undefined for floats. */
  readonly integer: bigint | undefined;
  /** Numeric value (lossy above 2^53 for integers; ±Infinity and NaN for floats). */
  readonly value: number;
}

export interface StringToken extends TokenBase {
  readonly kind: 'string';
  /** Decoded value: escapes resolved, adjacent literals joined, UTF-8 decoded. */
  readonly value: string;
}

export interface PunctuationToken extends TokenBase {
  readonly kind: 'punct';
  readonly text: Punctuation;
}

export interface EndToken extends TokenBase {
  readonly kind: 'eof';
}

export type Token = IdentifierToken | NumberToken | StringToken | PunctuationToken | EndToken;

const PUNCTUATION = new Set<string>(['{', '}', '<', '>', '[', ']', ':', ',', ';']);
/** The spec's whitespace: space, \n, \t, \v, \f, \r. */
const WHITESPACE = new Set<string>([' ', '\n', '\t', '\v', '\f', '\r']);
const SIMPLE_ESCAPES: Readonly<Record<string, number>> = {
  n: 0x0a,
  t: 0x09,
  r: 0x0d,
  a: 0x07,
  b: 0x08,
  f: 0x0c,
  v: 0x0b,
  '\\': 0x5c,
  "'": 0x27,
  '"': 0x22,
  '?': 0x3f,
};
/** Float spellings the spec accepts as identifiers (case-insensitive). */
const FLOAT_WORDS: Readonly<Record<string, number>> = { inf: Infinity, infinity: Infinity, nan: NaN };

const isDigit = (c: string | undefined): boolean => c !== undefined && c >= '0' && c <= '9';
const isOctal = (c: string | undefined): boolean => c !== undefined && c >= '0' && c <= '7';
const isHex = (c: string | undefined): boolean => c !== undefined && /^[0-9a-fA-F]$/.test(c);
const isIdentStart = (c: string | undefined): boolean => c !== undefined && /^[A-Za-z_]$/.test(c);
const isIdentChar = (c: string | undefined): boolean => c !== undefined && /^[A-Za-z0-9_]$/.test(c);

/** Float value of a float-word identifier (`inf`, `Infinity`, `nan`, …), or undefined. */
export function floatWordValue(word: string): number | undefined {
  return FLOAT_WORDS[word.toLowerCase()];
}

/** Describes a token for error messages: `'{'`, `identifier 'foo'`, `end of input`. */
export function describeToken(token: Token): string {
  switch (token.kind) {
    case 'eof':
      return 'end of input';
    case 'identifier':
      return `identifier '${token.text}'`;
    case 'number':
      return `number ${token.text}`;
    case 'string':
      return `string ${token.text.length > 40 ? `${token.text.slice(0, 37)}...` : token.text}`;
    case 'punct':
      return `'${token.text}'`;
  }
}

export class Tokenizer {
  private pos = 0;
  private line = 1;
  private column = 1;
  private lookahead: Token | undefined;

  constructor(
    private readonly source: string,
    readonly sourceName: string,
  ) {}

  /** The next token without consuming it. */
  peek(): Token {
    this.lookahead ??= this.read();
    return this.lookahead;
  }

  /** Consumes and returns the next token; at the end, returns the eof token again and again. */
  next(): Token {
    const token = this.peek();
    if (token.kind !== 'eof') this.lookahead = undefined;
    return token;
  }

  /** A ServingError('INVALID_MODEL') located at `line:column` of this source. */
  error(line: number, column: number, message: string): ServingError {
    return new ServingError('INVALID_MODEL', `${this.sourceName}:${line}:${column}: ${message}`);
  }

  private read(): Token {
    this.skipBlank();
    const line = this.line;
    const column = this.column;
    const c = this.source[this.pos];
    if (c === undefined) return { kind: 'eof', line, column, text: '' };
    if (PUNCTUATION.has(c)) {
      this.advance(1);
      return { kind: 'punct', line, column, text: c as Punctuation };
    }
    if (c === '"' || c === "'") return this.readStrings(line, column);
    if (isIdentStart(c)) {
      const text = this.readWhile(isIdentChar);
      return { kind: 'identifier', line, column, text };
    }
    if (isDigit(c) || (c === '.' && isDigit(this.source[this.pos + 1]))) return this.readNumber(line, column, false, this.pos);
    if (c === '-') return this.readNegative(line, column);
    throw this.error(line, column, `unexpected character ${JSON.stringify(c)}`);
  }

  /** Skips whitespace and `#` comments (the only comment syntax of the text format). */
  private skipBlank(): void {
    for (;;) {
      const c = this.source[this.pos];
      if (c === undefined) return;
      if (WHITESPACE.has(c)) {
        this.advance(1);
      } else if (c === '#') {
        while (this.pos < this.source.length && this.source[this.pos] !== '\n') this.advance(1);
      } else {
        return;
      }
    }
  }

  /** Moves over `count` characters, keeping line and column right. */
  private advance(count: number): void {
    for (let i = 0; i < count; i++) {
      if (this.source[this.pos] === '\n') {
        this.line++;
        this.column = 1;
      } else {
        this.column++;
      }
      this.pos++;
    }
  }

  private readWhile(accept: (c: string | undefined) => boolean): string {
    const start = this.pos;
    while (accept(this.source[this.pos])) this.advance(1);
    return this.source.slice(start, this.pos);
  }

  /**
   * `-` is its own token in the spec, so blanks and comments may sit between it
   * and the number; we fold it into the number token, located at the `-`.
   */
  private readNegative(line: number, column: number): NumberToken {
    const start = this.pos;
    this.advance(1);
    this.skipBlank();
    const c = this.source[this.pos];
    if (isDigit(c) || (c === '.' && isDigit(this.source[this.pos + 1]))) return this.readNumber(line, column, true, start);
    if (isIdentStart(c)) {
      const wordLine = this.line;
      const wordColumn = this.column;
      const word = this.readWhile(isIdentChar);
      const value = floatWordValue(word);
      if (value === undefined) throw this.error(wordLine, wordColumn, `expected a number after '-', found identifier '${word}'`);
      return { kind: 'number', line, column, text: this.source.slice(start, this.pos), isFloat: true, integer: undefined, value: -value };
    }
    throw this.error(this.line, this.column, `expected a number after '-'`);
  }

  private readNumber(line: number, column: number, negative: boolean, start: number): NumberToken {
    const c0 = this.source[this.pos];
    const c1 = this.source[this.pos + 1];
    let integer: bigint | undefined;
    let float: number | undefined;
    if (c0 === '0' && (c1 === 'x' || c1 === 'X')) {
      this.advance(2);
      const hex = this.readWhile(isHex);
      if (hex === '') throw this.error(this.line, this.column, `"0x" must be followed by hex digits`);
      integer = BigInt(`0x${hex}`);
    } else if (c0 === '0' && isDigit(c1)) {
      this.advance(1);
      const digits = this.readWhile(isDigit);
      if (![...digits].every(isOctal)) {
        throw this.error(line, column, `numbers starting with a leading zero must be in octal, found ${this.source.slice(start, this.pos)}`);
      }
      const next = this.source[this.pos];
      if (next === '.' || next === 'e' || next === 'E') {
        throw this.error(this.line, this.column, `a float must not start with a leading zero (${this.source.slice(start, this.pos + 1)}…)`);
      }
      integer = BigInt(`0o${digits}`);
    } else {
      [integer, float] = this.readDecimal();
    }
    this.checkNumberEnd();
    const text = this.source.slice(start, this.pos);
    if (integer === undefined) {
      const value = float ?? NaN;
      return { kind: 'number', line, column, text, isFloat: true, integer: undefined, value: negative ? -value : value };
    }
    const signed = negative ? -integer : integer;
    return { kind: 'number', line, column, text, isFloat: false, integer: signed, value: Number(signed) };
  }

  /** Digits, optional fraction and exponent, optional `f` suffix: an exact integer, or a float when any of the last three is there. */
  private readDecimal(): [bigint, undefined] | [undefined, number] {
    const start = this.pos;
    this.readWhile(isDigit);
    let isFloat = false;
    if (this.source[this.pos] === '.') {
      isFloat = true;
      this.advance(1);
      this.readWhile(isDigit);
    }
    const e = this.source[this.pos];
    if (e === 'e' || e === 'E') {
      isFloat = true;
      this.advance(1);
      const sign = this.source[this.pos];
      if (sign === '+' || sign === '-') this.advance(1);
      if (this.readWhile(isDigit) === '') throw this.error(this.line, this.column, `"e" must be followed by exponent digits`);
    }
    const literal = this.source.slice(start, this.pos);
    const f = this.source[this.pos];
    if (f === 'f' || f === 'F') {
      isFloat = true;
      this.advance(1);
    }
    return isFloat ? [undefined, Number(literal)] : [BigInt(literal), undefined];
  }

  /** `foo: 10bar` and `1.2.3` are invalid: a number must end at a separator. */
  private checkNumberEnd(): void {
    const c = this.source[this.pos];
    if (isIdentChar(c) || c === '.') {
      throw this.error(this.line, this.column, `unexpected ${JSON.stringify(c)} right after a number; a number must be followed by a separator`);
    }
  }

  /** One or more adjacent string literals, joined at the byte level (so split UTF-8 sequences survive). */
  private readStrings(line: number, column: number): StringToken {
    const start = this.pos;
    const bytes: number[] = [];
    let end = this.pos;
    for (;;) {
      this.readStringLiteral(bytes);
      end = this.pos;
      this.skipBlank();
      const c = this.source[this.pos];
      if (c !== '"' && c !== "'") break;
    }
    let value: string;
    try {
      value = new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(bytes));
    } catch {
      throw this.error(line, column, 'string is not valid UTF-8 (check its octal/hex escapes)');
    }
    return { kind: 'string', line, column, text: this.source.slice(start, end), value };
  }

  private readStringLiteral(bytes: number[]): void {
    const quote = this.source[this.pos];
    const openLine = this.line;
    const openColumn = this.column;
    this.advance(1);
    const encoder = new TextEncoder();
    for (;;) {
      const c = this.source[this.pos];
      if (c === undefined || c === '\n') {
        throw this.error(openLine, openColumn, `unterminated string (string literals cannot span lines)`);
      }
      if (c === quote) {
        this.advance(1);
        return;
      }
      if (c === '\\') {
        this.readEscape(bytes);
        continue;
      }
      // A whole code point, so astral characters are encoded as one UTF-8 sequence.
      const cp = this.source.codePointAt(this.pos) as number;
      if (cp < 0x80) {
        // ASCII is its own UTF-8 byte: no encoder call per character (a long string literal cost seconds).
        bytes.push(cp);
        this.advance(1);
        continue;
      }
      const ch = String.fromCodePoint(cp);
      for (const b of encoder.encode(ch)) bytes.push(b);
      this.advance(ch.length);
    }
  }

  private readEscape(bytes: number[]): void {
    const line = this.line;
    const column = this.column;
    this.advance(1);
    const c = this.source[this.pos];
    if (c === undefined || c === '\n') throw this.error(line, column, 'unterminated string (backslash at end of line)');
    const simple = SIMPLE_ESCAPES[c];
    if (simple !== undefined) {
      bytes.push(simple);
      this.advance(1);
      return;
    }
    if (isOctal(c)) {
      // \NNN: one to three octal digits, one byte.
      let digits = '';
      while (digits.length < 3 && isOctal(this.source[this.pos])) {
        digits += this.source[this.pos];
        this.advance(1);
      }
      const value = parseInt(digits, 8);
      if (value > 0xff) throw this.error(line, column, `octal escape \\${digits} is larger than one byte`);
      bytes.push(value);
      return;
    }
    if (c === 'x' || c === 'X') {
      // \xHH: one or two hex digits, one byte.
      this.advance(1);
      let digits = '';
      while (digits.length < 2 && isHex(this.source[this.pos])) {
        digits += this.source[this.pos];
        this.advance(1);
      }
      if (digits === '') throw this.error(line, column, `\\x must be followed by hex digits`);
      bytes.push(parseInt(digits, 16));
      return;
    }
    if (c === 'u' || c === 'U') {
      let cp = this.readUnicodeEscape(c === 'u' ? 4 : 8, line, column);
      if (cp >= 0xd800 && cp <= 0xdbff) {
        // A high surrogate must be followed by a \u low surrogate; together they are one code point.
        const lowLine = this.line;
        const lowColumn = this.column;
        if (this.source[this.pos] !== '\\' || this.source[this.pos + 1] !== 'u') {
          throw this.error(line, column, `unpaired surrogate \\u${cp.toString(16)} in string`);
        }
        this.advance(1);
        const low = this.readUnicodeEscape(4, lowLine, lowColumn);
        if (low < 0xdc00 || low > 0xdfff) throw this.error(line, column, `unpaired surrogate \\u${cp.toString(16)} in string`);
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
      } else if (cp >= 0xdc00 && cp <= 0xdfff) {
        throw this.error(line, column, `unpaired surrogate \\u${cp.toString(16)} in string`);
      }
      for (const b of new TextEncoder().encode(String.fromCodePoint(cp))) bytes.push(b);
      return;
    }
    throw this.error(line, column, `invalid escape sequence \\${c} in string`);
  }

  /** Reads `u`/`U` and exactly `count` hex digits; returns the code point. */
  private readUnicodeEscape(count: number, line: number, column: number): number {
    const letter = this.source[this.pos];
    this.advance(1);
    const digits = this.source.slice(this.pos, this.pos + count);
    if (digits.length !== count || ![...digits].every(isHex)) {
      throw this.error(line, column, `\\${letter} must be followed by exactly ${count} hex digits`);
    }
    this.advance(count);
    const cp = parseInt(digits, 16);
    if (cp > 0x10ffff) throw this.error(line, column, `\\${letter}${digits} is beyond the last Unicode code point U+10FFFF`);
    return cp;
  }
}

/** All tokens of `source`, ending with the eof token (for tests and tools). */
export function tokenize(source: string, sourceName: string): Token[] {
  const tokenizer = new Tokenizer(source, sourceName);
  const tokens: Token[] = [];
  for (;;) {
    const token = tokenizer.next();
    tokens.push(token);
    if (token.kind === 'eof') return tokens;
  }
}
