/**
 * @module test/unit/protocol/v2-json-codec
 * KServe v2 JSON decoding (every datatype, every error, exact messages and
 * codes) and response encoding (exact JSON text: NaN/Infinity as strings,
 * int64 digits, BOOL, FP16/BF16 as numbers, BYTES as strings, optional id).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ServingError, type ErrorCode } from '../../../src/errors.js';
import type { InferResponse } from '../../../src/protocol/infer-types.js';
import type { DataType, Tensor, TensorData } from '../../../src/protocol/tensor.js';
import { decodeInferRequest, decodeTensorData, encodeInferResponse, parseJsonBody, tensorDataToJson } from '../../../src/protocol/v2-json-codec.js';

const MODEL = 'm';

/** Decode a request holding the one input `x` and return its tensor. */
function decodeX(datatype: string, shape: unknown, data: unknown): Tensor {
  const request = decodeInferRequest({ inputs: [{ name: 'x', datatype, shape, data }] }, MODEL);
  const t = request.inputs.get('x');
  assert.ok(t, 'input x decoded');
  return t;
}

function expectError(fn: () => unknown, code: ErrorCode, message: string): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ServingError, `expected ServingError, got ${String(err)}`);
    assert.equal(err.code, code);
    assert.equal(err.message, message);
    assert.equal(err.model, MODEL);
    return true;
  });
}

/** The error decoding one input `x` gives. */
function expectInputError(datatype: string, shape: unknown, data: unknown, code: ErrorCode, message: string): void {
  expectError(() => decodeX(datatype, shape, data), code, `model '${MODEL}': ${message}`);
}

function plain(data: TensorData): unknown[] {
  return Array.from(data as ArrayLike<unknown>);
}

// ------------------------------------------------------------------ decoding

describe('decodeInferRequest: datatypes', () => {
  test('BOOL: true/false (and 1/0) become 0/1 bytes in a Uint8Array', () => {
    const t = decodeX('BOOL', [5], [true, false, 1, 0, true]);
    assert.equal(t.datatype, 'BOOL');
    assert.ok(t.data instanceof Uint8Array);
    assert.deepEqual(plain(t.data), [1, 0, 1, 0, 1]);
  });

  test('BOOL rejects strings and other numbers', () => {
    expectInputError('BOOL', [1], ['true'], 'INVALID_INPUT', `input 'x': element 0 is "true", expected true or false for datatype BOOL`);
    expectInputError('BOOL', [2], [true, 2], 'INVALID_INPUT', `input 'x': element 1 is 2, expected true or false for datatype BOOL`);
    expectInputError('BOOL', [1], [null], 'INVALID_INPUT', `input 'x': element 0 is null, expected true or false for datatype BOOL`);
  });

  const intCases: Array<{ dt: DataType; ctor: Function; lo: number; hi: number }> = [
    { dt: 'INT8', ctor: Int8Array, lo: -128, hi: 127 },
    { dt: 'INT16', ctor: Int16Array, lo: -32768, hi: 32767 },
    { dt: 'INT32', ctor: Int32Array, lo: -2147483648, hi: 2147483647 },
    { dt: 'UINT8', ctor: Uint8Array, lo: 0, hi: 255 },
    { dt: 'UINT16', ctor: Uint16Array, lo: 0, hi: 65535 },
    { dt: 'UINT32', ctor: Uint32Array, lo: 0, hi: 4294967295 },
  ];
  for (const { dt, ctor, lo, hi } of intCases) {
    test(`${dt}: accepts the full range [${lo}, ${hi}] into a ${ctor.name}`, () => {
      const t = decodeX(dt, [3], [lo, 0, hi]);
      assert.equal(t.datatype, dt);
      assert.equal(t.data.constructor, ctor);
      assert.deepEqual(plain(t.data), [lo, 0, hi]);
    });

    test(`${dt}: rejects ${lo - 1} and ${hi + 1} as out of range`, () => {
      expectInputError(dt, [2], [0, lo - 1], 'INVALID_INPUT', `input 'x': element 1 (${lo - 1}) is out of range for ${dt}`);
      expectInputError(dt, [1], [hi + 1], 'INVALID_INPUT', `input 'x': element 0 (${hi + 1}) is out of range for ${dt}`);
    });

    test(`${dt}: rejects non-integers (1.5, "3", true, null)`, () => {
      expectInputError(dt, [1], [1.5], 'INVALID_INPUT', `input 'x': element 0 is 1.5, expected an integer for datatype ${dt}`);
      expectInputError(dt, [1], ['3'], 'INVALID_INPUT', `input 'x': element 0 is "3", expected an integer for datatype ${dt}`);
      expectInputError(dt, [1], [true], 'INVALID_INPUT', `input 'x': element 0 is true, expected an integer for datatype ${dt}`);
      expectInputError(dt, [1], [null], 'INVALID_INPUT', `input 'x': element 0 is null, expected an integer for datatype ${dt}`);
    });
  }

  test('INT64: numbers and decimal strings, exact beyond 2^53, into a BigInt64Array', () => {
    const t = decodeX('INT64', [6], [1, -1, 9007199254740991, '9007199254740993', '9223372036854775807', '-9223372036854775808']);
    assert.ok(t.data instanceof BigInt64Array);
    assert.deepEqual(plain(t.data), [1n, -1n, 9007199254740991n, 9007199254740993n, 9223372036854775807n, -9223372036854775808n]);
  });

  test('INT64: out of range and non-integer values', () => {
    expectInputError('INT64', [1], ['9223372036854775808'], 'INVALID_INPUT', `input 'x': element 0 (9223372036854775808) is out of range for INT64`);
    expectInputError('INT64', [1], ['-9223372036854775809'], 'INVALID_INPUT', `input 'x': element 0 (-9223372036854775809) is out of range for INT64`);
    expectInputError('INT64', [1], [1e20], 'INVALID_INPUT', `input 'x': element 0 (100000000000000000000) is out of range for INT64`);
    expectInputError('INT64', [1], [1.5], 'INVALID_INPUT', `input 'x': element 0 is 1.5, expected an integer for datatype INT64`);
    expectInputError('INT64', [1], ['1.0'], 'INVALID_INPUT', `input 'x': element 0 is "1.0", expected an integer for datatype INT64`);
    expectInputError('INT64', [1], ['12a'], 'INVALID_INPUT', `input 'x': element 0 is "12a", expected an integer for datatype INT64`);
    expectInputError('INT64', [1], [''], 'INVALID_INPUT', `input 'x': element 0 is "", expected an integer for datatype INT64`);
    expectInputError('INT64', [1], [true], 'INVALID_INPUT', `input 'x': element 0 is true, expected an integer for datatype INT64`);
  });

  test('UINT64: up to 2^64-1 given as a string, into a BigUint64Array', () => {
    const t = decodeX('UINT64', [4], [0, 42, '9007199254740993', '18446744073709551615']);
    assert.ok(t.data instanceof BigUint64Array);
    assert.deepEqual(plain(t.data), [0n, 42n, 9007199254740993n, 18446744073709551615n]);
  });

  test('UINT64: negative and 2^64 are out of range', () => {
    expectInputError('UINT64', [1], [-1], 'INVALID_INPUT', `input 'x': element 0 (-1) is out of range for UINT64`);
    expectInputError('UINT64', [1], ['-1'], 'INVALID_INPUT', `input 'x': element 0 (-1) is out of range for UINT64`);
    expectInputError('UINT64', [1], ['18446744073709551616'], 'INVALID_INPUT', `input 'x': element 0 (18446744073709551616) is out of range for UINT64`);
    expectInputError('UINT64', [1], [0.5], 'INVALID_INPUT', `input 'x': element 0 is 0.5, expected an integer for datatype UINT64`);
  });

  test('FP32: numbers rounded to float32, NaN/Infinity/inf strings accepted', () => {
    const t = decodeX('FP32', [8], [1.5, -2, 0.1, 'NaN', 'Infinity', '-Infinity', 'inf', '-inf']);
    assert.ok(t.data instanceof Float32Array);
    const v = plain(t.data) as number[];
    assert.deepEqual(v.slice(0, 3), [1.5, -2, Math.fround(0.1)]);
    assert.ok(Number.isNaN(v[3]));
    assert.deepEqual(v.slice(4), [Infinity, -Infinity, Infinity, -Infinity]);
  });

  test('FP64: numbers kept exactly, NaN/Infinity strings accepted', () => {
    const t = decodeX('FP64', [5], [0.1, 1e308, -5e-324, 'NaN', '-Infinity']);
    assert.ok(t.data instanceof Float64Array);
    const v = plain(t.data) as number[];
    assert.deepEqual(v.slice(0, 3), [0.1, 1e308, -5e-324]);
    assert.ok(Number.isNaN(v[3]));
    assert.equal(v[4], -Infinity);
  });

  for (const dt of ['FP16', 'BF16', 'FP32', 'FP64'] as const) {
    test(`${dt}: other strings, booleans and null are rejected`, () => {
      expectInputError(dt, [1], ['1.5'], 'INVALID_INPUT', `input 'x': element 0 is "1.5", expected a number for datatype ${dt}`);
      expectInputError(dt, [1], ['nan'], 'INVALID_INPUT', `input 'x': element 0 is "nan", expected a number for datatype ${dt}`);
      expectInputError(dt, [2], [1, true], 'INVALID_INPUT', `input 'x': element 1 is true, expected a number for datatype ${dt}`);
      expectInputError(dt, [1], [null], 'INVALID_INPUT', `input 'x': element 0 is null, expected a number for datatype ${dt}`);
    });
  }

  test('FP16: numbers become half-precision bit patterns (rounded, overflow to inf, subnormals)', () => {
    const t = decodeX('FP16', [9], [1, -2, 0.1, 65504, 65520, 2 ** -24, 'NaN', 'Infinity', '-inf']);
    assert.ok(t.data instanceof Uint16Array);
    assert.deepEqual(plain(t.data), [0x3c00, 0xc000, 0x2e66, 0x7bff, 0x7c00, 0x0001, 0x7e00, 0x7c00, 0xfc00]);
  });

  test('BF16: numbers become bfloat16 bit patterns', () => {
    const t = decodeX('BF16', [5], [1, -1, 3.14159, 'NaN', '-Infinity']);
    assert.ok(t.data instanceof Uint16Array);
    assert.deepEqual(plain(t.data), [0x3f80, 0xbf80, 0x4049, 0x7fc0, 0xff80]);
  });

  test('BYTES: one string per element, kept as JS strings', () => {
    const t = decodeX('BYTES', [3], ['hello', '', 'ünï "q"']);
    assert.ok(Array.isArray(t.data));
    assert.deepEqual(t.data, ['hello', '', 'ünï "q"']);
  });

  test('BYTES: non-strings are rejected', () => {
    expectInputError('BYTES', [2], ['a', 1], 'INVALID_INPUT', `input 'x': element 1 is 1, expected a string for datatype BYTES`);
    expectInputError('BYTES', [1], [null], 'INVALID_INPUT', `input 'x': element 0 is null, expected a string for datatype BYTES`);
  });
});

describe('decodeInferRequest: data layout', () => {
  test('nested data is flattened row-major', () => {
    const t = decodeX(
      'INT32',
      [2, 3],
      [
        [1, 2, 3],
        [4, 5, 6],
      ],
    );
    assert.deepEqual(t.shape, [2, 3]);
    assert.deepEqual(plain(t.data), [1, 2, 3, 4, 5, 6]);
  });

  test('deeply nested 3-D data is flattened row-major', () => {
    const t = decodeX(
      'FP32',
      [2, 2, 2],
      [
        [
          [1, 2],
          [3, 4],
        ],
        [
          [5, 6],
          [7, 8],
        ],
      ],
    );
    assert.deepEqual(plain(t.data), [1, 2, 3, 4, 5, 6, 7, 8]);
  });

  test('flat data for a multi-dimensional shape is accepted', () => {
    const t = decodeX('INT32', [2, 3], [1, 2, 3, 4, 5, 6]);
    assert.deepEqual(t.shape, [2, 3]);
    assert.deepEqual(plain(t.data), [1, 2, 3, 4, 5, 6]);
  });

  test('only the total element count is checked, not the nesting structure', () => {
    const t = decodeX(
      'INT32',
      [2, 3],
      [
        [1, 2],
        [3, 4, 5, 6],
      ],
    );
    assert.deepEqual(plain(t.data), [1, 2, 3, 4, 5, 6]);
  });

  test('a bare scalar as data counts as one element', () => {
    assert.deepEqual(plain(decodeX('INT32', [1], 7).data), [7]);
    const scalar = decodeX('FP32', [], [2.5]);
    assert.deepEqual(scalar.shape, []);
    assert.deepEqual(plain(scalar.data), [2.5]);
  });

  test('zero-element tensors are allowed', () => {
    const t = decodeX('FP32', [0, 3], []);
    assert.deepEqual(t.shape, [0, 3]);
    assert.ok(t.data instanceof Float32Array);
    assert.equal(t.data.length, 0);
  });

  function nested(levels: number, value: unknown): unknown {
    let v = value;
    for (let i = 0; i < levels; i++) v = [v];
    return v;
  }

  test('data nested 101 array levels (100 below the outer array) is accepted', () => {
    const t = decodeX('INT32', new Array<number>(101).fill(1), nested(101, 9));
    assert.deepEqual(plain(t.data), [9]);
  });

  test('data nested 102 array levels is rejected (more than 100 nested levels)', () => {
    expectInputError('INT32', new Array<number>(102).fill(1), nested(102, 9), 'INVALID_INPUT', `input 'x': 'data' is nested deeper than 100 levels`);
  });

  test('very deep nesting is rejected without a stack overflow', () => {
    expectInputError('INT32', [1], nested(100_000, 1), 'INVALID_INPUT', `input 'x': 'data' is nested deeper than 100 levels`);
  });
});

describe('decodeInferRequest: request structure', () => {
  test('a full request: id, inputs in order, requested outputs and parameters, all frozen', () => {
    const request = decodeInferRequest(
      {
        id: 'req-7',
        parameters: { priority: 1, flag: true, tag: 'x' },
        inputs: [
          { name: 'b', datatype: 'FP32', shape: [1, 2], data: [1, 2] },
          { name: 'a', datatype: 'INT32', shape: [1], data: [3] },
        ],
        outputs: [{ name: 'y', parameters: { binary_data: false, classification: 2 } }, { name: 'z' }],
      },
      MODEL,
    );
    assert.equal(request.id, 'req-7');
    assert.deepEqual([...request.inputs.keys()], ['b', 'a']);
    assert.deepEqual(request.parameters, { priority: 1, flag: true, tag: 'x' });
    assert.deepEqual(request.outputs, [
      { name: 'y', parameters: { binary_data: false, classification: 2 } },
      { name: 'z', parameters: {} },
    ]);
    assert.ok(Object.isFrozen(request));
    assert.ok(Object.isFrozen(request.outputs));
    assert.ok(Object.isFrozen(request.outputs![0]));
    assert.ok(Object.isFrozen(request.parameters));
    const b = request.inputs.get('b')!;
    assert.ok(Object.isFrozen(b));
    assert.ok(Object.isFrozen(b.shape));
    assert.deepEqual(b.shape, [1, 2]);
  });

  test('id and outputs are undefined when absent; outputs: null counts as absent', () => {
    const r = decodeInferRequest({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1], data: [1] }], outputs: null }, MODEL);
    assert.equal(r.id, undefined);
    assert.equal(r.outputs, undefined);
    assert.deepEqual(r.parameters, {});
  });

  test('the decoded shape is a copy of the request array', () => {
    const shape = [2];
    const r = decodeInferRequest({ inputs: [{ name: 'x', datatype: 'FP32', shape, data: [1, 2] }] }, MODEL);
    shape[0] = 5;
    assert.deepEqual(r.inputs.get('x')!.shape, [2]);
  });
});

describe('decodeInferRequest: errors', () => {
  const ok = { name: 'x', datatype: 'FP32', shape: [1], data: [1] };

  test('body that is not an object', () => {
    for (const body of [null, [], 'text', 5]) {
      expectError(() => decodeInferRequest(body, MODEL), 'INVALID_REQUEST', `model 'm': request body must be a JSON object with an "inputs" array`);
    }
  });

  test('inputs missing or not an array', () => {
    for (const body of [{}, { inputs: {} }, { inputs: 'x' }]) {
      expectError(() => decodeInferRequest(body, MODEL), 'INVALID_REQUEST', `model 'm': request must have an 'inputs' array`);
    }
  });

  test('an empty inputs list decodes (a model that declares no inputs takes it)', () => {
    assert.equal(decodeInferRequest({ inputs: [] }, MODEL).inputs.size, 0);
  });

  test('an input that is not an object', () => {
    expectError(() => decodeInferRequest({ inputs: [ok, 5] }, MODEL), 'INVALID_REQUEST', `model 'm': inputs[1] must be an object`);
    expectError(() => decodeInferRequest({ inputs: [[ok]] }, MODEL), 'INVALID_REQUEST', `model 'm': inputs[0] must be an object`);
  });

  test('missing, empty or non-string name', () => {
    const { name: _name, ...noName } = ok;
    for (const input of [noName, { ...ok, name: '' }, { ...ok, name: 5 }]) {
      expectError(() => decodeInferRequest({ inputs: [ok, input] }, MODEL), 'INVALID_REQUEST', `model 'm': inputs[1]: 'name' must be a non-empty string`);
    }
  });

  test('unknown, lowercase or missing datatype', () => {
    expectInputError(
      'FLOAT32',
      [1],
      [1],
      'INVALID_INPUT',
      `input 'x': unknown datatype "FLOAT32" (expected one of BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, FP32, FP64, BYTES, BF16)`,
    );
    expectInputError(
      'fp32',
      [1],
      [1],
      'INVALID_INPUT',
      `input 'x': unknown datatype "fp32"; did you mean "FP32"? (expected one of BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, FP32, FP64, BYTES, BF16)`,
    );
    expectError(
      () => decodeInferRequest({ inputs: [{ name: 'x', shape: [1], data: [1] }] }, MODEL),
      'INVALID_INPUT',
      `model 'm': input 'x': unknown datatype undefined (expected one of BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, FP32, FP64, BYTES, BF16)`,
    );
  });

  test('shape that is not an array', () => {
    expectInputError('FP32', 3, [1, 2, 3], 'INVALID_INPUT', `input 'x': 'shape' must be an array of non-negative integers`);
    expectInputError('FP32', undefined, [1], 'INVALID_INPUT', `input 'x': 'shape' must be an array of non-negative integers`);
  });

  test('negative, fractional, non-numeric and unsafe dims', () => {
    expectInputError('FP32', [-1, 2], [1, 2], 'INVALID_INPUT', `input 'x': 'shape' must be an array of non-negative integers, got [-1,2]`);
    expectInputError('FP32', [1.5], [1], 'INVALID_INPUT', `input 'x': 'shape' must be an array of non-negative integers, got [1.5]`);
    expectInputError('FP32', ['2'], [1, 2], 'INVALID_INPUT', `input 'x': 'shape' must be an array of non-negative integers, got ["2"]`);
    expectInputError('FP32', [2 ** 53], [1], 'INVALID_INPUT', `input 'x': 'shape' must be an array of non-negative integers, got [9007199254740992]`);
  });

  test('a shape whose element count overflows', () => {
    expectInputError('FP32', [2 ** 40, 2 ** 40], [1], 'INVALID_INPUT', `input 'x': shape [1099511627776,1099511627776] has too many elements`);
  });

  test('data missing', () => {
    expectError(
      () => decodeInferRequest({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1] }] }, MODEL),
      'INVALID_INPUT',
      `model 'm': input 'x': 'data' is missing (binary tensor data needs the binary protocol)`,
    );
  });

  test('element count does not match the shape', () => {
    expectInputError('FP32', [2, 2], [1, 2, 3], 'INVALID_INPUT', `input 'x': shape [2,2] needs 4 elements but 'data' has 3`);
    expectInputError('FP32', [2, 2], [[1, 2], [3, 4], [5]], 'INVALID_INPUT', `input 'x': shape [2,2] needs 4 elements but 'data' has 5`);
    expectInputError('FP32', [0], [1], 'INVALID_INPUT', `input 'x': shape [0] needs 0 elements but 'data' has 1`);
  });

  test('duplicate input name', () => {
    expectError(() => decodeInferRequest({ inputs: [ok, { ...ok }] }, MODEL), 'INVALID_INPUT', `model 'm': input 'x' appears more than once`);
  });

  test("'outputs' that is not an array", () => {
    for (const outputs of [{}, 'y', 5]) {
      expectError(() => decodeInferRequest({ inputs: [ok], outputs }, MODEL), 'INVALID_REQUEST', `model 'm': 'outputs' must be an array`);
    }
  });

  test('a requested output without a name', () => {
    for (const output of [{}, { name: '' }, 'y', null]) {
      expectError(
        () => decodeInferRequest({ inputs: [ok], outputs: [{ name: 'a' }, output] }, MODEL),
        'INVALID_REQUEST',
        `model 'm': outputs[1] must be an object with a non-empty 'name'`,
      );
    }
  });

  test('bad parameters on a requested output and on the request', () => {
    expectError(
      () => decodeInferRequest({ inputs: [ok], outputs: [{ name: 'y', parameters: [] }] }, MODEL),
      'INVALID_REQUEST',
      `model 'm': output 'y': 'parameters' must be an object`,
    );
    expectError(
      () => decodeInferRequest({ inputs: [ok], outputs: [{ name: 'y', parameters: { p: { nested: 1 } } }] }, MODEL),
      'INVALID_REQUEST',
      `model 'm': output 'y': parameter 'p' must be a string, number or boolean`,
    );
    expectError(() => decodeInferRequest({ inputs: [ok], parameters: 'x' }, MODEL), 'INVALID_REQUEST', `model 'm': request: 'parameters' must be an object`);
    expectError(
      () => decodeInferRequest({ inputs: [ok], parameters: { q: null } }, MODEL),
      'INVALID_REQUEST',
      `model 'm': request: parameter 'q' must be a string, number or boolean`,
    );
  });

  test("'id' that is not a string", () => {
    for (const id of [5, null, true, {}]) {
      expectError(() => decodeInferRequest({ inputs: [ok], id }, MODEL), 'INVALID_REQUEST', `model 'm': 'id' must be a string`);
    }
  });
});

describe('parseJsonBody', () => {
  test('parses string and Buffer bodies (UTF-8)', () => {
    assert.deepEqual(parseJsonBody('{"a":[1,2]}', MODEL), { a: [1, 2] });
    assert.deepEqual(parseJsonBody(Buffer.from('{"s":"ü"}', 'utf8'), MODEL), { s: 'ü' });
  });

  test('empty or whitespace-only body is INVALID_REQUEST', () => {
    for (const body of ['', '  \n\t', Buffer.alloc(0)]) {
      expectError(() => parseJsonBody(body, MODEL), 'INVALID_REQUEST', `model 'm': request body is empty; expected a KServe v2 JSON inference request`);
    }
  });

  test('invalid JSON is INVALID_REQUEST with the parser message', () => {
    for (const body of ['{', '{"inputs": [}', 'NaN']) {
      let parserMessage = '';
      try {
        JSON.parse(body);
      } catch (err) {
        parserMessage = (err as Error).message;
      }
      assert.notEqual(parserMessage, '');
      expectError(() => parseJsonBody(body, MODEL), 'INVALID_REQUEST', `model 'm': request body is not valid JSON: ${parserMessage}`);
    }
  });
});

describe('decodeTensorData', () => {
  test('decodes flat values directly and names model and input in errors', () => {
    assert.deepEqual(plain(decodeTensorData(MODEL, 'in', 'INT16', [1, -2])), [1, -2]);
    expectError(() => decodeTensorData(MODEL, 'in', 'UINT8', [300]), 'INVALID_INPUT', `model 'm': input 'in': element 0 (300) is out of range for UINT8`);
  });
});

// ------------------------------------------------------------------ encoding

function response(outputs: Array<[string, Tensor]>, id?: string): InferResponse {
  return { id, modelName: 'm', modelVersion: '3', outputs: new Map(outputs) };
}

describe('encodeInferResponse', () => {
  test('exact text with id, model name and version (a string), shape and flat data', () => {
    const text = encodeInferResponse(response([['y', { datatype: 'FP32', shape: [2, 2], data: new Float32Array([1.5, -2, 0, 4]) }]], 'req-7'));
    assert.equal(text, '{"id":"req-7","model_name":"m","model_version":"3","outputs":[{"name":"y","datatype":"FP32","shape":[2,2],"data":[1.5,-2,0,4]}]}');
    assert.deepEqual(JSON.parse(text), {
      id: 'req-7',
      model_name: 'm',
      model_version: '3',
      outputs: [{ name: 'y', datatype: 'FP32', shape: [2, 2], data: [1.5, -2, 0, 4] }],
    });
  });

  test('id is absent when the response has none', () => {
    const text = encodeInferResponse(response([['y', { datatype: 'INT32', shape: [1], data: new Int32Array([7]) }]]));
    assert.equal(text, '{"model_name":"m","model_version":"3","outputs":[{"name":"y","datatype":"INT32","shape":[1],"data":[7]}]}');
    assert.equal('id' in JSON.parse(text), false);
  });

  test('an empty id is omitted, as Triton does', () => {
    const text = encodeInferResponse(response([['y', { datatype: 'INT32', shape: [1], data: new Int32Array([7]) }]], ''));
    assert.equal(text, '{"model_name":"m","model_version":"3","outputs":[{"name":"y","datatype":"INT32","shape":[1],"data":[7]}]}');
  });

  test('outputs keep their order; names and ids are JSON-escaped', () => {
    const text = encodeInferResponse(
      response(
        [
          ['z"q', { datatype: 'INT8', shape: [2], data: new Int8Array([-128, 127]) }],
          ['a', { datatype: 'UINT16', shape: [1], data: new Uint16Array([65535]) }],
        ],
        'i"d\n',
      ),
    );
    const parsed = JSON.parse(text) as { id: string; outputs: Array<{ name: string; data: unknown[] }> };
    assert.equal(parsed.id, 'i"d\n');
    assert.deepEqual(
      parsed.outputs.map((o) => [o.name, o.data]),
      [
        ['z"q', [-128, 127]],
        ['a', [65535]],
      ],
    );
  });

  test('NaN and ±Infinity become the strings "NaN", "Infinity", "-Infinity"', () => {
    const text = encodeInferResponse(response([['y', { datatype: 'FP64', shape: [5], data: new Float64Array([NaN, Infinity, -Infinity, 1.5, -0.25]) }]]));
    assert.ok(text.includes('"data":["NaN","Infinity","-Infinity",1.5,-0.25]'), text);
    assert.deepEqual((JSON.parse(text) as { outputs: Array<{ data: unknown[] }> }).outputs[0]!.data, ['NaN', 'Infinity', '-Infinity', 1.5, -0.25]);
  });

  test('FP32 values are written as the exact float32 value', () => {
    const text = encodeInferResponse(response([['y', { datatype: 'FP32', shape: [2], data: new Float32Array([0.1, NaN]) }]]));
    assert.ok(text.includes('"data":[0.10000000149011612,"NaN"]'), text);
  });

  test('INT64 and UINT64 are written with exact digits beyond 2^53', () => {
    const text = encodeInferResponse(
      response([
        ['i', { datatype: 'INT64', shape: [3], data: new BigInt64Array([-9223372036854775808n, 9007199254740993n, 0n]) }],
        ['u', { datatype: 'UINT64', shape: [1], data: new BigUint64Array([18446744073709551615n]) }],
      ]),
    );
    assert.ok(text.includes('"datatype":"INT64","shape":[3],"data":[-9223372036854775808,9007199254740993,0]'), text);
    assert.ok(text.includes('"datatype":"UINT64","shape":[1],"data":[18446744073709551615]'), text);
    assert.doesNotThrow(() => JSON.parse(text));
  });

  test('BOOL is written as true/false (any non-zero byte is true)', () => {
    const text = encodeInferResponse(response([['b', { datatype: 'BOOL', shape: [4], data: new Uint8Array([1, 0, 2, 0]) }]]));
    assert.ok(text.includes('"data":[true,false,true,false]'), text);
  });

  test('FP16 and BF16 bit patterns are decoded to numbers (NaN/inf as strings)', () => {
    const text = encodeInferResponse(
      response([
        ['h', { datatype: 'FP16', shape: [5], data: new Uint16Array([0x3c00, 0x3555, 0x0001, 0x7e00, 0xfc00]) }],
        ['b', { datatype: 'BF16', shape: [3], data: new Uint16Array([0x3f80, 0x4049, 0x7f80]) }],
      ]),
    );
    const parsed = JSON.parse(text) as { outputs: Array<{ datatype: string; data: unknown[] }> };
    assert.deepEqual(parsed.outputs[0], { name: 'h', datatype: 'FP16', shape: [5], data: [1, 0.333251953125, 2 ** -24, 'NaN', '-Infinity'] });
    assert.deepEqual(parsed.outputs[1], { name: 'b', datatype: 'BF16', shape: [3], data: [1, 3.140625, 'Infinity'] });
  });

  test('BYTES are written as JSON strings', () => {
    const text = encodeInferResponse(response([['s', { datatype: 'BYTES', shape: [3], data: ['a', 'ü "q"', ''] }]]));
    assert.ok(text.includes('"data":["a","ü \\"q\\"",""]'), text);
    assert.deepEqual((JSON.parse(text) as { outputs: Array<{ data: unknown[] }> }).outputs[0]!.data, ['a', 'ü "q"', '']);
  });

  test('scalar and empty tensors', () => {
    const text = encodeInferResponse(
      response([
        ['s', { datatype: 'FP32', shape: [], data: new Float32Array([2]) }],
        ['e', { datatype: 'INT32', shape: [0, 3], data: new Int32Array(0) }],
      ]),
    );
    assert.ok(text.includes('{"name":"s","datatype":"FP32","shape":[],"data":[2]}'), text);
    assert.ok(text.includes('{"name":"e","datatype":"INT32","shape":[0,3],"data":[]}'), text);
  });

  test('no outputs gives an empty outputs array', () => {
    assert.equal(encodeInferResponse(response([])), '{"model_name":"m","model_version":"3","outputs":[]}');
  });

  test('decode → encode keeps int64 values exact', () => {
    const request = decodeInferRequest(
      { inputs: [{ name: 'x', datatype: 'INT64', shape: [2], data: ['-9223372036854775807', '1234567890123456789'] }] },
      MODEL,
    );
    const text = encodeInferResponse(response([['x', request.inputs.get('x')!]]));
    assert.ok(text.includes('"data":[-9223372036854775807,1234567890123456789]'), text);
  });
});

describe('tensorDataToJson', () => {
  test('every numeric array type', () => {
    const cases: Array<[Tensor, string]> = [
      [{ datatype: 'UINT8', shape: [2], data: new Uint8Array([0, 255]) }, '[0,255]'],
      [{ datatype: 'INT16', shape: [2], data: new Int16Array([-32768, 32767]) }, '[-32768,32767]'],
      [{ datatype: 'UINT32', shape: [1], data: new Uint32Array([4294967295]) }, '[4294967295]'],
      [{ datatype: 'INT32', shape: [1], data: new Int32Array([-2147483648]) }, '[-2147483648]'],
      [{ datatype: 'FP64', shape: [2], data: new Float64Array([1e21, 1e-7]) }, '[1e+21,1e-7]'],
      [{ datatype: 'BOOL', shape: [0], data: new Uint8Array(0) }, '[]'],
    ];
    for (const [tensor, json] of cases) assert.equal(tensorDataToJson(tensor), json, tensor.datatype);
  });
});
