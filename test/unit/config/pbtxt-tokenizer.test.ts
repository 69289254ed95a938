/**
 * @module test/unit/config/pbtxt-tokenizer
 * The text-format lexer: every token kind, every number and string spelling
 * the protobuf spec allows, exact line/column positions, and each lexical
 * error with the position it is reported at.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ServingError } from '../../../src/errors.js';
import { tokenize, Tokenizer, type NumberToken, type Token } from '../../../src/config/pbtxt/tokenizer.js';

const SOURCE = 'config.pbtxt';

function kinds(text: string): [string, string][] {
  return tokenize(text, SOURCE).map((t) => [t.kind, t.text]);
}

function only(text: string): Token {
  const tokens = tokenize(text, SOURCE);
  assert.equal(tokens.length, 2, `expected one token in ${JSON.stringify(text)}, got ${tokens.length - 1}`);
  return tokens[0] as Token;
}

function num(text: string): NumberToken {
  const token = only(text);
  assert.equal(token.kind, 'number');
  return token as NumberToken;
}

function str(text: string): string {
  const token = only(text);
  assert.equal(token.kind, 'string');
  return (token as { value: string }).value;
}

/** Asserts the exact error message (which starts with source:line:column). */
function lexError(text: string, message: string): void {
  assert.throws(
    () => tokenize(text, SOURCE),
    (err: unknown) => {
      assert.ok(err instanceof ServingError, `expected a ServingError, got ${String(err)}`);
      assert.equal(err.code, 'INVALID_MODEL');
      assert.equal(err.message, message);
      return true;
    },
  );
}

describe('pbtxt tokenizer: structure', () => {
  test('identifiers, punctuation and eof, in order', () => {
    assert.deepEqual(kinds('name { } < > [ ] : , ; _x9'), [
      ['identifier', 'name'],
      ['punct', '{'],
      ['punct', '}'],
      ['punct', '<'],
      ['punct', '>'],
      ['punct', '['],
      ['punct', ']'],
      ['punct', ':'],
      ['punct', ','],
      ['punct', ';'],
      ['identifier', '_x9'],
      ['eof', ''],
    ]);
  });

  test('punctuation needs no surrounding blanks', () => {
    assert.deepEqual(kinds('dims:[1,2];x{}'), [
      ['identifier', 'dims'],
      ['punct', ':'],
      ['punct', '['],
      ['number', '1'],
      ['punct', ','],
      ['number', '2'],
      ['punct', ']'],
      ['punct', ';'],
      ['identifier', 'x'],
      ['punct', '{'],
      ['punct', '}'],
      ['eof', ''],
    ]);
  });

  test('# comments run to the end of the line; # inside a string is text', () => {
    assert.deepEqual(kinds('# Copyright header\nname: "a#b" # trailing\n#last'), [
      ['identifier', 'name'],
      ['punct', ':'],
      ['string', '"a#b"'],
      ['eof', ''],
    ]);
  });

  test('all spec whitespace separates tokens: space, \\n, \\t, \\v, \\f, \\r', () => {
    assert.deepEqual(kinds('a\tb\vc\fd\r\ne f'), [
      ['identifier', 'a'],
      ['identifier', 'b'],
      ['identifier', 'c'],
      ['identifier', 'd'],
      ['identifier', 'e'],
      ['identifier', 'f'],
      ['eof', ''],
    ]);
  });

  test('every token has a 1-based line and column', () => {
    const tokens = tokenize('# header\nname: "x"\n  dims: [ -1,\n 3 ]\n', SOURCE);
    assert.deepEqual(
      tokens.map((t) => [t.text, t.line, t.column]),
      [
        ['name', 2, 1],
        [':', 2, 5],
        ['"x"', 2, 7],
        ['dims', 3, 3],
        [':', 3, 7],
        ['[', 3, 9],
        ['-1', 3, 11],
        [',', 3, 13],
        ['3', 4, 2],
        [']', 4, 4],
        ['', 5, 1],
      ],
    );
  });

  test('empty input is just eof at 1:1, and eof repeats', () => {
    const t = new Tokenizer('', SOURCE);
    assert.deepEqual(t.next(), { kind: 'eof', line: 1, column: 1, text: '' });
    assert.equal(t.next().kind, 'eof');
    assert.equal(t.peek().kind, 'eof');
  });

  test('peek does not consume', () => {
    const t = new Tokenizer('a b', SOURCE);
    assert.equal(t.peek().text, 'a');
    assert.equal(t.peek().text, 'a');
    assert.equal(t.next().text, 'a');
    assert.equal(t.next().text, 'b');
  });

  test('an unexpected character is an error at its position', () => {
    lexError('name: 1\n  $', 'config.pbtxt:2:3: unexpected character "$"');
    lexError('a // b', 'config.pbtxt:1:3: unexpected character "/"');
  });
});

describe('pbtxt tokenizer: numbers', () => {
  test('decimal integers are exact', () => {
    const t = num('42');
    assert.equal(t.isFloat, false);
    assert.equal(t.integer, 42n);
    assert.equal(t.value, 42);
    assert.equal(num('0').integer, 0n);
    assert.equal(num('18446744073709551615').integer, 18446744073709551615n);
  });

  test('hex (0x / 0X) and leading-zero octal', () => {
    assert.equal(num('0x1F').integer, 31n);
    assert.equal(num('0Xff').integer, 255n);
    assert.equal(num('017').integer, 15n);
    assert.equal(num('00').integer, 0n);
    assert.equal(num('-0x10').integer, -16n);
    assert.equal(num('-010').integer, -8n);
  });

  test('negative numbers, with or without blanks after the minus', () => {
    assert.equal(num('-1').integer, -1n);
    const spaced = num('-  7');
    assert.equal(spaced.integer, -7n);
    assert.equal(spaced.column, 1);
    assert.equal(num('- # comment\n 5').integer, -5n);
  });

  test('floats: fraction, exponent, leading dot, trailing dot, f suffix', () => {
    const cases: [string, number][] = [
      ['1.5', 1.5],
      ['.5', 0.5],
      ['1.', 1],
      ['1e3', 1000],
      ['1E-2', 0.01],
      ['2.5e+3', 2500],
      ['1.5f', 1.5],
      ['1F', 1],
      ['0f', 0],
      ['-0.25', -0.25],
      ['0.5', 0.5],
    ];
    for (const [text, value] of cases) {
      const t = num(text);
      assert.equal(t.isFloat, true, text);
      assert.equal(t.integer, undefined, text);
      assert.equal(t.value, value, text);
      assert.equal(t.text, text);
    }
  });

  test('-inf, -infinity and -nan are numbers; bare inf/nan are identifiers', () => {
    assert.equal(num('-inf').value, -Infinity);
    assert.equal(num('-Infinity').value, -Infinity);
    assert.ok(Number.isNaN(num('-nan').value));
    assert.equal(num('-inf').isFloat, true);
    assert.deepEqual(kinds('inf nan'), [
      ['identifier', 'inf'],
      ['identifier', 'nan'],
      ['eof', ''],
    ]);
  });

  test('a number directly followed by an identifier character is an error', () => {
    lexError('foo: 10bar', 'config.pbtxt:1:8: unexpected "b" right after a number; a number must be followed by a separator');
    lexError('x: 0x1G', 'config.pbtxt:1:7: unexpected "G" right after a number; a number must be followed by a separator');
    lexError('x: 1.5fx', 'config.pbtxt:1:8: unexpected "x" right after a number; a number must be followed by a separator');
    lexError('x: 1.2.3', 'config.pbtxt:1:7: unexpected "." right after a number; a number must be followed by a separator');
    lexError('x: 12_', 'config.pbtxt:1:6: unexpected "_" right after a number; a number must be followed by a separator');
  });

  test('malformed numbers', () => {
    lexError('x: 0x', 'config.pbtxt:1:6: "0x" must be followed by hex digits');
    lexError('x: 08', 'config.pbtxt:1:4: numbers starting with a leading zero must be in octal, found 08');
    lexError('x: 09.5', 'config.pbtxt:1:4: numbers starting with a leading zero must be in octal, found 09');
    lexError('x: 01.5', 'config.pbtxt:1:6: a float must not start with a leading zero (01.…)');
    lexError('x: 1e', 'config.pbtxt:1:6: "e" must be followed by exponent digits');
    lexError('x: 1e+', 'config.pbtxt:1:7: "e" must be followed by exponent digits');
    lexError('x: -foo', "config.pbtxt:1:5: expected a number after '-', found identifier 'foo'");
    lexError('x: - ]', "config.pbtxt:1:6: expected a number after '-'");
    lexError('x: -', "config.pbtxt:1:5: expected a number after '-'");
  });
});

describe('pbtxt tokenizer: strings', () => {
  test('double and single quotes', () => {
    assert.equal(str('"input:0"'), 'input:0');
    assert.equal(str("'InceptionV3/Predictions/Softmax:0'"), 'InceptionV3/Predictions/Softmax:0');
    assert.equal(str(`"it's"`), "it's");
    assert.equal(str(`'say "hi"'`), 'say "hi"');
    assert.equal(str('""'), '');
  });

  test('simple escapes: \\n \\t \\r \\a \\b \\f \\v \\\\ \\\' \\" \\?', () => {
    assert.equal(str(String.raw`"\n\t\r\a\b\f\v\\\'\"\?"`), '\n\t\r\x07\b\f\v\\\'"?');
  });

  test('octal escapes take one to three digits, one byte each', () => {
    assert.equal(str(String.raw`"\101\0\12x"`), 'A\0\nx');
    assert.equal(str(String.raw`"\1011"`), 'A1');
    // Bytes, not code points: \303\251 is the UTF-8 encoding of é.
    assert.equal(str(String.raw`"\303\251"`), 'é');
  });

  test('hex escapes take one or two digits', () => {
    assert.equal(str(String.raw`"\x41\x4g"`), 'A\x04g');
    assert.equal(str(String.raw`"\X41"`), 'A');
    assert.equal(str(String.raw`"\xc3\xa9"`), 'é');
  });

  test('\\u and \\U escapes, surrogate pairs joined', () => {
    assert.equal(str(String.raw`"\u00e9"`), 'é');
    assert.equal(str(String.raw`"\U0001F600"`), '😀');
    assert.equal(str(String.raw`"\ud83d\ude00"`), '😀');
  });

  test('raw UTF-8 text passes through', () => {
    assert.equal(str('"naïve 😀 模型"'), 'naïve 😀 模型');
  });

  test('adjacent literals are concatenated, across blanks, lines and comments', () => {
    const t = only(`"abc" 'def' # comment\n  "g"`);
    assert.equal(t.kind, 'string');
    assert.equal((t as { value: string }).value, 'abcdefg');
    assert.equal(t.text, `"abc" 'def' # comment\n  "g"`);
    // Split UTF-8 sequences survive concatenation because it is done on bytes.
    assert.equal(str(String.raw`"\303" "\251"`), 'é');
  });

  test('string errors are reported where the literal or escape starts', () => {
    lexError('name: "abc', 'config.pbtxt:1:7: unterminated string (string literals cannot span lines)');
    lexError('name: "ab\nc"', 'config.pbtxt:1:7: unterminated string (string literals cannot span lines)');
    lexError('name: \'ab"', 'config.pbtxt:1:7: unterminated string (string literals cannot span lines)');
    lexError('name: "a\\q"', 'config.pbtxt:1:9: invalid escape sequence \\q in string');
    lexError('name: "a\\x"', 'config.pbtxt:1:9: \\x must be followed by hex digits');
    lexError('name: "\\u12"', 'config.pbtxt:1:8: \\u must be followed by exactly 4 hex digits');
    lexError('name: "\\U00110000"', 'config.pbtxt:1:8: \\U00110000 is beyond the last Unicode code point U+10FFFF');
    lexError('name: "\\udc00"', 'config.pbtxt:1:8: unpaired surrogate \\udc00 in string');
    lexError('name: "\\ud83dx"', 'config.pbtxt:1:8: unpaired surrogate \\ud83d in string');
    lexError('name: "\\400"', 'config.pbtxt:1:8: octal escape \\400 is larger than one byte');
    lexError('name: "\\377"', 'config.pbtxt:1:7: string is not valid UTF-8 (check its octal/hex escapes)');
    lexError('name: "a\\', 'config.pbtxt:1:9: unterminated string (backslash at end of line)');
  });
});
