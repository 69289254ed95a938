/**
 * @module test/unit/config/pbtxt-parser
 * Text format → JSON form against a schema: every syntax form the protobuf
 * text-format spec allows (and Triton configs use), the exact JSON form
 * produced (defaults printed, enums as names, maps as objects), every error
 * with its line and column, the JSON-form decoder and the printer.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ServingError } from '../../../src/errors.js';
import { parseTextFormat, printTextFormat } from '../../../src/config/pbtxt/parser.js';
import {
  decodeJsonForm,
  defineEnum,
  defineMessage,
  enumOf,
  field,
  mapOf,
  messageOf,
  repeated,
  scalar,
  withDefaults,
} from '../../../src/config/pbtxt/schema.js';
import { ModelConfigDescriptor } from '../../../src/config/model-config-schema.js';

const Color = defineEnum('Color', { RED: 0, GREEN: 1, BLUE: 2, DARK: -1 });

const Inner = defineMessage('Inner', [field('a', 1, scalar('int32')), repeated('r', 2, scalar('string'))]);

const Root = defineMessage('Root', [
  field('s', 1, scalar('string')),
  field('b', 2, scalar('bool')),
  field('i32', 3, scalar('int32')),
  field('i64', 4, scalar('int64')),
  field('u32', 5, scalar('uint32')),
  field('u64', 6, scalar('uint64')),
  field('f', 7, scalar('float')),
  field('d', 8, scalar('double')),
  field('e', 9, enumOf(Color)),
  repeated('ri', 10, scalar('int64')),
  repeated('rs', 11, scalar('string')),
  repeated('re', 12, enumOf(Color)),
  repeated('rb', 13, scalar('bool')),
  field('m', 14, messageOf(Inner)),
  repeated('rm', 15, messageOf(Inner)),
  field('ms', 16, mapOf('string', scalar('string'))),
  field('mm', 17, mapOf('uint64', messageOf(Inner))),
  field('mi', 18, mapOf('int32', scalar('int32'))),
  field('me', 19, mapOf('string', enumOf(Color))),
  field('o1', 20, scalar('string'), { oneof: 'choice' }),
  field('o2', 21, messageOf(Inner), { oneof: 'choice' }),
  field('o3', 22, scalar('bool'), { oneof: 'choice' }),
]);

/** What an empty Root parses to: every field without presence at its default. */
const EMPTY = {
  s: '',
  b: false,
  i32: 0,
  i64: 0,
  u32: 0,
  u64: 0,
  f: 0,
  d: 0,
  e: 'RED',
  ri: [],
  rs: [],
  re: [],
  rb: [],
  rm: [],
  ms: {},
  mm: {},
  mi: {},
  me: {},
} as const;

const parse = (text: string): Record<string, unknown> => parseTextFormat(text, Root, 'config.pbtxt');
const with_ = (fields: Record<string, unknown>): Record<string, unknown> => ({ ...EMPTY, ...fields });
const inner = (fields: Record<string, unknown>): Record<string, unknown> => ({ a: 0, r: [], ...fields });

function parseError(text: string, message: string): void {
  assert.throws(
    () => parse(text),
    (err: unknown) => {
      assert.ok(err instanceof ServingError, `expected a ServingError, got ${String(err)}`);
      assert.equal(err.code, 'INVALID_MODEL');
      assert.equal(err.message, message);
      return true;
    },
  );
}

describe('pbtxt parser: JSON form', () => {
  test('an empty text gives every field without presence at its default', () => {
    assert.deepEqual(parse(''), EMPTY);
    assert.deepEqual(parse('  # only a comment\n'), EMPTY);
  });

  test('scalars of every type', () => {
    const json = parse(`
      s: "hello"
      b: true
      i32: -2147483648
      i64: -9007199254740991
      u32: 4294967295
      u64: 0x1F
      f: 0.5
      d: 1e-3
      e: BLUE
    `);
    assert.deepEqual(json, with_({ s: 'hello', b: true, i32: -2147483648, i64: -9007199254740991, u32: 4294967295, u64: 31, f: 0.5, d: 0.001, e: 'BLUE' }));
  });

  test('a field at its default is still printed the same', () => {
    assert.deepEqual(parse('s: "" i32: 0 e: RED'), EMPTY);
  });
});

describe('pbtxt parser: syntax', () => {
  test('separators ; and , are optional after any field', () => {
    const expected = with_({ s: 'x', b: true, i32: 3, m: inner({ a: 1 }) });
    assert.deepEqual(parse('s: "x"; b: true, i32: 3 m { a: 1; },'), expected);
    assert.deepEqual(parse('s: "x" b: true i32: 3 m { a: 1 }'), expected);
    assert.deepEqual(parse('s:"x";b:true;i32:3;m{a:1}'), expected);
  });

  test('space before the colon is fine', () => {
    assert.equal(parse('i32 : 7')['i32'], 7);
  });

  test('message values: name { }, name: { }, name < >, name: < >', () => {
    const expected = with_({ m: inner({ a: 5 }) });
    assert.deepEqual(parse('m { a: 5 }'), expected);
    assert.deepEqual(parse('m: { a: 5 }'), expected);
    assert.deepEqual(parse('m < a: 5 >'), expected);
    assert.deepEqual(parse('m: < a: 5 >'), expected);
    assert.deepEqual(parse('m {}'), with_({ m: inner({}) }));
  });

  test('repeated scalars: repeated, as a list, mixed, single value', () => {
    assert.deepEqual(parse('ri: 1 ri: [2, 3] ri: 4')['ri'], [1, 2, 3, 4]);
    assert.deepEqual(parse('ri: 16')['ri'], [16]);
    assert.deepEqual(parse('ri: [ -1 ]')['ri'], [-1]);
    assert.deepEqual(parse('rs: ["a", \'b\'] rs: "c"')['rs'], ['a', 'b', 'c']);
    assert.deepEqual(parse('re: [RED, 2, DARK]')['re'], ['RED', 'BLUE', 'DARK']);
    assert.deepEqual(parse('rb: [true, f, 1]')['rb'], [true, false, true]);
  });

  test('the empty list [ ] gives an empty array, and adds nothing to earlier values', () => {
    assert.deepEqual(parse('ri: [ ]')['ri'], []);
    assert.deepEqual(parse('ri: []')['ri'], []);
    assert.deepEqual(parse('ri: 1 ri: []')['ri'], [1]);
    assert.deepEqual(parse('m { r: [ ] }')['m'], inner({}));
  });

  test('repeated messages: repeated blocks, lists (colon optional), mixed', () => {
    const json = parse(`
      rm { a: 1 }
      rm [ { a: 2 }, < a: 3 > ]
      rm: [ { a: 4 r: "x" } ]
      rm: []
      rm: { a: 5 }
    `);
    assert.deepEqual(json['rm'], [inner({ a: 1 }), inner({ a: 2 }), inner({ a: 3 }), inner({ a: 4, r: ['x'] }), inner({ a: 5 })]);
  });

  test('maps: block entries, list entries, commas inside entries', () => {
    const json = parse(`
      ms { key: "A" value: "B" }
      ms [ { key: "C", value: "D" }, { key: 'E'; value: 'F' } ]
      ms: { key: "G" value: "H" }
    `);
    assert.deepEqual(json['ms'], { A: 'B', C: 'D', E: 'F', G: 'H' });
  });

  test('maps: the last duplicate key wins', () => {
    assert.deepEqual(parse('ms { key: "k" value: "1" } ms { key: "k" value: "2" }')['ms'], { k: '2' });
  });

  test('maps: message values get their defaults; integer keys become decimal strings', () => {
    const json = parse(`
      mm { key: 0x10 value { a: 1 } }
      mm { key: 18446744073709551615 value: < r: "z" > }
      mm { key: 3 value: {} }
    `);
    assert.deepEqual(json['mm'], {
      '16': inner({ a: 1 }),
      '18446744073709551615': inner({ r: ['z'] }),
      '3': inner({}),
    });
    assert.deepEqual(parse('mi { key: -5 value: 7 }')['mi'], { '-5': 7 });
    assert.deepEqual(parse('me { key: "x" value: GREEN }')['me'], { x: 'GREEN' });
  });

  test('maps: a missing key or value is the default', () => {
    assert.deepEqual(parse('ms { value: "v" } ms { key: "k" }')['ms'], { '': 'v', k: '' });
    assert.deepEqual(parse('mm { value { a: 2 } } mm { key: 9 }')['mm'], { '0': inner({ a: 2 }), '9': inner({}) });
    assert.deepEqual(parse('me { key: "x" }')['me'], { x: 'RED' });
  });

  test('enums by name or by integer (negative included)', () => {
    assert.equal(parse('e: GREEN')['e'], 'GREEN');
    assert.equal(parse('e: 2')['e'], 'BLUE');
    assert.equal(parse('e: -1')['e'], 'DARK');
    assert.equal(parse('e: 0x1')['e'], 'GREEN');
  });

  test('booleans: true/false/True/False/t/f/1/0', () => {
    const cases: [string, boolean][] = [
      ['true', true],
      ['True', true],
      ['t', true],
      ['1', true],
      ['false', false],
      ['False', false],
      ['f', false],
      ['0', false],
    ];
    for (const [text, value] of cases) assert.equal(parse(`b: ${text}`)['b'], value, text);
  });

  test('integers: decimal, hex, octal, negative', () => {
    assert.equal(parse('i32: 0x7fffffff')['i32'], 2147483647);
    assert.equal(parse('i32: 010')['i32'], 8);
    assert.equal(parse('i32: - 12')['i32'], -12);
    assert.equal(parse('i64: 9007199254740991')['i64'], 9007199254740991);
  });

  test('64-bit extremes become the nearest number, as in Triton JSON', () => {
    assert.equal(parse('u64: 18446744073709551615')['u64'], 18446744073709551615);
    assert.equal(parse('i64: -9223372036854775808')['i64'], -9223372036854775808);
  });

  test('floats: integers, exponents, f suffix, inf and nan (JSON spellings)', () => {
    assert.equal(parse('f: 1')['f'], 1);
    assert.equal(parse('f: 1.5f')['f'], 1.5);
    assert.equal(parse('d: -2.5e-3')['d'], -0.0025);
    assert.equal(parse('f: .25')['f'], 0.25);
    assert.equal(parse('f: inf')['f'], 'Infinity');
    assert.equal(parse('f: Infinity')['f'], 'Infinity');
    assert.equal(parse('d: -inf')['d'], '-Infinity');
    assert.equal(parse('d: nan')['d'], 'NaN');
    assert.equal(parse('d: NaN')['d'], 'NaN');
  });

  test('strings: escapes and adjacent literals', () => {
    assert.equal(parse(String.raw`s: "a\tb" 'c\x41' "\u00e9"`)['s'], 'a\tbcAé');
  });

  test('oneof: one member is kept; the others stay absent', () => {
    assert.deepEqual(parse('o1: "x"'), with_({ o1: 'x' }));
    assert.deepEqual(parse('o2 { a: 1 }'), with_({ o2: inner({ a: 1 }) }));
    // A member set to its default is still set: presence is what a oneof records.
    assert.deepEqual(parse('o3: false'), with_({ o3: false }));
  });
});

describe('pbtxt parser: errors with line and column', () => {
  test('unknown field', () => {
    parseError('s: "x"\nfoo: 1', "config.pbtxt:2:1: unknown field 'foo' in message Root");
    parseError('m {\n  a: 1\n  zz: 2\n}', "config.pbtxt:3:3: unknown field 'zz' in message Inner");
  });

  test("a misspelt field or enum value: did you mean (Triton's own ModelConfig)", () => {
    assert.throws(
      () => parseTextFormat('name: "m"\nmax_batch_sise: 8', ModelConfigDescriptor, 'config.pbtxt'),
      (err: Error) => err.message === "config.pbtxt:2:1: unknown field 'max_batch_sise' in message ModelConfig; did you mean 'max_batch_size'?",
    );
    assert.throws(
      () => parseTextFormat('input { name: "x" data_type: TYPE_fp32 dims: 1 }', ModelConfigDescriptor, 'config.pbtxt'),
      /unknown value 'TYPE_fp32' for enum DataType of field 'data_type'; did you mean 'TYPE_FP32'\? \(expected one of TYPE_INVALID, .*TYPE_BF16\)/,
    );
  });

  test('colon required before scalar values', () => {
    parseError('s "x"', "config.pbtxt:1:3: expected ':' after field 's', found string \"x\"");
    parseError('i32 5', "config.pbtxt:1:5: expected ':' after field 'i32', found number 5");
    parseError('ri [1]', "config.pbtxt:1:4: expected ':' after field 'ri', found '['");
  });

  test('a scalar field given a message, and a message field given a scalar', () => {
    parseError('s { }', "config.pbtxt:1:3: field 's' is of type string, not a message");
    parseError('m: 5', "config.pbtxt:1:4: expected '{' or '<' to start the value of field 'm' (message Inner), found number 5");
    parseError('ms: "x"', "config.pbtxt:1:5: expected '{' or '<' to start the value of field 'ms' (map<string, string>), found string \"x\"");
  });

  test('non-repeated field set twice', () => {
    parseError('s: "a"\ns: "b"', "config.pbtxt:2:1: non-repeated field 's' is specified more than once (first at 1:1)");
    parseError('m { a: 1 } m { a: 2 }', "config.pbtxt:1:12: non-repeated field 'm' is specified more than once (first at 1:1)");
    parseError('m { a: 1 a: 2 }', "config.pbtxt:1:10: non-repeated field 'a' is specified more than once (first at 1:5)");
    parseError('ms { key: "a" key: "b" }', "config.pbtxt:1:15: non-repeated field 'key' is specified more than once (first at 1:6)");
  });

  test('two members of one oneof', () => {
    parseError('o1: "x"\no2 { }', "config.pbtxt:2:1: field 'o2' is specified along with field 'o1', another member of oneof 'choice'");
    parseError('o1: "x" o1: "y"', "config.pbtxt:1:9: non-repeated field 'o1' is specified more than once (first at 1:1)");
  });

  test('lists: not for non-repeated fields, no trailing comma, commas required', () => {
    parseError('s: ["a"]', "config.pbtxt:1:4: field 's' is not repeated; a list is not allowed");
    parseError('m [ { } ]', "config.pbtxt:1:3: field 'm' is not repeated; a list is not allowed");
    parseError('ri: [1, 2,]', "config.pbtxt:1:11: field 'ri' expects an integer, found ']'");
    parseError('ri: [1 2]', "config.pbtxt:1:8: expected ',' or ']' in list, found number 2");
    parseError('ri: [1, 2', "config.pbtxt:1:10: expected ',' or ']' in list, found end of input");
    parseError('rm [ { a: 1 } { a: 2 } ]', "config.pbtxt:1:15: expected ',' or ']' in list, found '{'");
  });

  test('wrong value types', () => {
    parseError('s: 5', "config.pbtxt:1:4: field 's' expects a string, found number 5");
    parseError('s: abc', "config.pbtxt:1:4: field 's' expects a string, found identifier 'abc'");
    parseError('b: 2', "config.pbtxt:1:4: field 'b' expects a boolean (true, false, True, False, t, f, 1 or 0), found number 2");
    parseError('b: yes', "config.pbtxt:1:4: field 'b' expects a boolean (true, false, True, False, t, f, 1 or 0), found identifier 'yes'");
    parseError('b: "true"', 'config.pbtxt:1:4: field \'b\' expects a boolean (true, false, True, False, t, f, 1 or 0), found string "true"');
    parseError('i32: 1.5', "config.pbtxt:1:6: field 'i32' expects an integer, found number 1.5");
    parseError('i32: "1"', 'config.pbtxt:1:6: field \'i32\' expects an integer, found string "1"');
    parseError('i64: inf', "config.pbtxt:1:6: field 'i64' expects an integer, found identifier 'inf'");
    parseError('f: "1"', 'config.pbtxt:1:4: field \'f\' expects a number, found string "1"');
    parseError('f: infinite', "config.pbtxt:1:4: field 'f' expects a number, found identifier 'infinite'");
  });

  test('integer ranges', () => {
    parseError('i32: 2147483648', "config.pbtxt:1:6: value 2147483648 is out of range [-2147483648, 2147483647] for int32 field 'i32'");
    parseError('u32: -1', "config.pbtxt:1:6: value -1 is out of range [0, 4294967295] for uint32 field 'u32'");
    parseError('u64: 18446744073709551616', "config.pbtxt:1:6: value 18446744073709551616 is out of range [0, 18446744073709551615] for uint64 field 'u64'");
    parseError(
      'ri: [1, 9223372036854775808]',
      "config.pbtxt:1:9: value 9223372036854775808 is out of range [-9223372036854775808, 9223372036854775807] for int64 field 'ri'",
    );
  });

  test('enums: unknown names and numbers', () => {
    parseError('e: PURPLE', "config.pbtxt:1:4: unknown value 'PURPLE' for enum Color of field 'e' (expected one of RED, GREEN, BLUE, DARK)");
    parseError('e: red', "config.pbtxt:1:4: unknown value 'red' for enum Color of field 'e'; did you mean 'RED'? (expected one of RED, GREEN, BLUE, DARK)");
    parseError('e: 7', "config.pbtxt:1:4: unknown number 7 for enum Color of field 'e' (expected one of RED, GREEN, BLUE, DARK)");
    parseError('e: "RED"', 'config.pbtxt:1:4: field \'e\' expects an enum Color value, found string "RED"');
  });

  test('structure errors', () => {
    parseError('}', "config.pbtxt:1:1: expected a field name of message Root, found '}'");
    parseError('5: 1', 'config.pbtxt:1:1: expected a field name of message Root, found number 5');
    parseError('[ext.field]: 1', "config.pbtxt:1:1: extension and Any fields ('[…]') are not supported; expected a field name of message Root");
    parseError('m {\n  a: 1\n', "config.pbtxt:3:1: unexpected end of input: expected '}' to close message Inner opened at 1:3");
    parseError('m < a: 1 }', "config.pbtxt:1:10: expected a field name of message Inner, found '}'");
    parseError('m { a: 1 >', "config.pbtxt:1:10: expected a field name of message Inner, found '>'");
    parseError('s:', "config.pbtxt:1:3: field 's' expects a string, found end of input");
    parseError('s: "x";;', "config.pbtxt:1:8: expected a field name of message Root, found ';'");
  });

  test('lexical errors surface with their position', () => {
    parseError('i32: 10bar', 'config.pbtxt:1:8: unexpected "b" right after a number; a number must be followed by a separator');
  });

  test('the source name is the one given', () => {
    assert.throws(() => parseTextFormat('foo: 1', Root, 'models/x/config.pbtxt'), {
      message: "models/x/config.pbtxt:1:1: unknown field 'foo' in message Root",
    });
  });
});

describe('pbtxt JSON-form decoder', () => {
  const decode = (json: unknown): Record<string, unknown> => decodeJsonForm(json, Root, 'override');

  test('canonicalises: camelCase names, int strings, enum numbers and case, null as absent', () => {
    assert.deepEqual(
      decode({ i64: '12', u64: 3, e: 'green', re: [2, 'blue'], rm: [{ a: '4' }], ms: { k: 'v' }, mm: { '7': {} }, o2: null, m: null }),
      with_({ i64: 12, u64: 3, e: 'GREEN', re: ['BLUE', 'BLUE'], rm: [inner({ a: 4 })], ms: { k: 'v' }, mm: { '7': inner({}) } }),
    );
    const camel = defineMessage('Camel', [field('max_batch_size', 1, scalar('int32'))]);
    assert.deepEqual(decodeJsonForm({ maxBatchSize: 4 }, camel, 'x'), { max_batch_size: 4 });
  });

  test('accepts its own output unchanged', () => {
    const json = parse('s: "x" ri: [1, -1] m { a: 2 } mm { key: 5 value {} } o1: "y" f: nan');
    assert.deepEqual(decode(json), json);
  });

  test('collects every problem, with paths', () => {
    assert.throws(() => decode({ s: 1, zz: true, ri: [1, 'x'], rm: [{ a: 1.5 }], e: 'PURPLE', mi: { x: 1 }, o1: 'a', o3: true, u32: -1 }), {
      message:
        'override: s: expected a string, found number 1; ' +
        "zz: unknown field 'zz' in message Root; " +
        'ri[1]: expected an integer (int64), found string "x"; ' +
        'rm[0].a: expected an integer (int32), found number 1.5; ' +
        'e: string "PURPLE" is not a value of enum Color (expected one of RED, GREEN, BLUE, DARK); ' +
        'mi["x"]: map key "x" is not a valid int32; ' +
        "o3: field 'o3' is specified along with field 'o1', another member of oneof 'choice'; " +
        'u32: value -1 is out of range for uint32',
    });
  });

  test('rejects non-objects and wrong containers', () => {
    assert.throws(() => decode([]), { message: 'override: expected an object (message Root), found an array' });
    assert.throws(() => decode({ ri: 5, m: [], ms: [] }), {
      message:
        'override: ri: expected an array (repeated int64), found number 5; ' +
        'm: expected an object (message Inner), found an array; ' +
        'ms: expected an object (map<string, string>), found an array',
    });
  });

  test('withDefaults leaves present values alone and fills the rest', () => {
    assert.deepEqual(withDefaults({ s: 'x', m: { a: 1 } }, Root), with_({ s: 'x', m: inner({ a: 1 }) }));
  });
});

describe('pbtxt printer', () => {
  test('prints in declaration order, leaving defaults out', () => {
    const json = parse(
      'ri: [1, -2] s: "a\\"b\\n" m { a: 3 } e: BLUE rm { a: 1 } rm { } ms { key: "k" value: "v" } mm { key: 2 value { a: 1 } } o3: false f: -inf',
    );
    assert.equal(
      printTextFormat(json, Root),
      [
        's: "a\\"b\\n"',
        'f: -inf',
        'e: BLUE',
        'ri: [ 1, -2 ]',
        'm {',
        '  a: 3',
        '}',
        'rm [',
        '  {',
        '    a: 1',
        '  },',
        '  { }',
        ']',
        'ms { key: "k" value: "v" }',
        'mm {',
        '  key: 2',
        '  value {',
        '    a: 1',
        '  }',
        '}',
        'o3: false',
        '',
      ].join('\n'),
    );
  });

  test('an all-default message prints as nothing', () => {
    assert.equal(printTextFormat(parse(''), Root), '');
  });

  test('round trip: parse(print(x)) equals x', () => {
    const texts = [
      String.raw`s: "tab\t nl\n quote\" bs\\ bell\a del\177 é 😀" b: true i32: -5 i64: -9223372036854775808 u64: 18446744073709551615`,
      'f: nan d: 1e-300 e: DARK re: [GREEN, RED] rb: [false, true] ri: []',
      'm { } rm [ { r: ["x", ""] }, { a: -1 } ] mm { key: 18446744073709551615 value { } } mi { key: -3 value: 0 } o2 { }',
      'me { key: "" value: RED } ms { key: "a b" value: "" } d: 0.1 f: 3.4028234663852886e+38',
    ];
    for (const text of texts) {
      const json = parse(text);
      assert.deepEqual(parse(printTextFormat(json, Root)), json, text);
    }
  });

  test('round trip of the whole ModelConfig schema with every message present', () => {
    const text = `
      name: "all" platform: "p" backend: "b" runtime: "r"
      version_policy { specific { versions: [1, 3] } }
      max_batch_size: 4
      input { name: "i" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [3, -1, 2] reshape { shape: [6, -1] } is_shape_tensor: true allow_ragged_batch: true optional: true is_non_linear_format_io: true }
      output { name: "o" data_type: TYPE_STRING dims: 1 reshape { } label_filename: "l.txt" is_shape_tensor: true is_non_linear_format_io: true }
      batch_input { kind: BATCH_ITEM_SHAPE target_name: "t" data_type: TYPE_INT32 source_input: "i" }
      batch_output { target_name: "o" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "i" }
      optimization {
        graph { level: -1 } priority: PRIORITY_MAX
        cuda { graphs: true busy_wait_events: true output_copy_stream: true
          graph_spec { batch_size: 2 input { key: "i" value { dim: [3, 4] } } graph_lower_bound { batch_size: 1 input { key: "i" value { dim: 1 } } } } }
        execution_accelerators { gpu_execution_accelerator { name: "tensorrt" parameters { key: "precision_mode" value: "FP16" } } cpu_execution_accelerator { name: "openvino" } }
        input_pinned_memory { enable: false } output_pinned_memory { enable: true } gather_kernel_buffer_threshold: 5 eager_batching: true
      }
      sequence_batching {
        oldest { max_candidate_sequences: 4 preferred_batch_size: [2] max_queue_delay_microseconds: 100 preserve_ordering: true }
        max_sequence_idle_microseconds: 5
        control_input { name: "START" control { kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1] fp32_false_true: [0, 1.5] bool_false_true: [false, true] data_type: TYPE_INT32 } }
        state { input_name: "a" output_name: "b" data_type: TYPE_FP32 dims: [-1] initial_state { data_type: TYPE_FP32 dims: [1] zero_data: true name: "z" } use_same_buffer_for_input_output: true use_growable_memory: true }
        iterative_sequence: true
      }
      instance_group { name: "g" kind: KIND_GPU count: 2 rate_limiter { resources { name: "R" global: True count: 2 } priority: 2 } gpus: [0, 1] secondary_devices { kind: KIND_NVDLA device_id: 3 } profile: ["0"] passive: true host_policy: "h" }
      default_model_filename: "m.onnx"
      cc_model_filenames { key: "7.5" value: "a.plan" }
      metric_tags { key: "team" value: "x" }
      parameters { key: "k" value { string_value: "v" } }
      model_warmup { name: "w" batch_size: 2 inputs { key: "i" value { data_type: TYPE_FP32 dims: 3 input_data_file: "f.bin" } } count: 3 }
      model_operations { op_library_filename: "libop.so" }
      model_transaction_policy { decoupled: true }
      model_repository_agents { agents { name: "checksum" parameters { key: "MD5:1/model.onnx" value: "abc" } } }
      response_cache { enable: true }
      model_metrics { metric_control { metric_identifier { family: "nv_inference" } histogram_options { buckets: [0.5, 1, 10] } } }
    `;
    const json = parseTextFormat(text, ModelConfigDescriptor, 'config.pbtxt');
    assert.deepEqual(parseTextFormat(printTextFormat(json, ModelConfigDescriptor), ModelConfigDescriptor, 'again'), json);
    assert.deepEqual(json['version_policy'], { specific: { versions: [1, 3] } });
    assert.deepEqual((json['model_metrics'] as { metric_control: unknown[] }).metric_control, [
      { metric_identifier: { family: 'nv_inference' }, histogram_options: { buckets: [0.5, 1, 10] } },
    ]);
  });
});
