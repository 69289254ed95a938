/**
 * @module test/unit/grpc/infer-codec
 * ModelInferRequest decoding edge cases, with messages shaped as
 * proto-loader delivers them: parameters of every oneof member, raw and
 * typed inputs never mixed, 64-bit values exact, and each refusal naming
 * the model and the tensor.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ServingError } from '../../../src/errors.js';
import { decodeModelInferRequest, encodeModelInferResponse } from '../../../src/grpc/infer-codec.js';

const refused = (fn: () => unknown, code: string, message: RegExp) =>
  assert.throws(fn, (e: unknown) => e instanceof ServingError && e.code === code && message.test(e.message) && e.message.includes("model 'm'"));

describe('grpc/infer-codec', () => {
  test('parameters: every InferParameter member becomes the JSON form value', () => {
    const r = decodeModelInferRequest(
      {
        inputs: [{ name: 'x', datatype: 'INT64', shape: ['2'], contents: { int64_contents: ['-9223372036854775808', '9223372036854775807'] } }],
        parameters: {
          a: { parameter_choice: 'bool_param', bool_param: true },
          b: { parameter_choice: 'int64_param', int64_param: '42' },
          c: { parameter_choice: 'string_param', string_param: 's' },
          d: { parameter_choice: 'double_param', double_param: 0.5 },
          e: { parameter_choice: 'uint64_param', uint64_param: '7' },
        },
      },
      'm',
    );
    assert.deepEqual(r.parameters, { a: true, b: 42, c: 's', d: 0.5, e: 7 });
    assert.deepEqual([...(r.inputs.get('x')!.data as BigInt64Array)], [-(2n ** 63n), 2n ** 63n - 1n]);
    assert.equal(r.id, undefined);
  });

  test('an int64 parameter beyond 2^53 is refused rather than rounded', () => {
    refused(
      () =>
        decodeModelInferRequest(
          {
            inputs: [{ name: 'x', datatype: 'FP32', shape: ['1'], contents: { fp32_contents: [1] } }],
            parameters: { timeout: { parameter_choice: 'int64_param', int64_param: '9007199254740993' } },
          },
          'm',
        ),
      'INVALID_REQUEST',
      /timeout/,
    );
  });

  test("raw and typed inputs are not mixed; typed elements must be in the datatype's field and match the shape", () => {
    refused(
      () =>
        decodeModelInferRequest(
          { inputs: [{ name: 'x', datatype: 'FP32', shape: ['1'], contents: { fp32_contents: [1] } }], raw_input_contents: [Buffer.alloc(4)] },
          'm',
        ),
      'INVALID_REQUEST',
      /input 'x' has contents/,
    );
    refused(
      () => decodeModelInferRequest({ inputs: [{ name: 'x', datatype: 'FP32', shape: ['2'], contents: { int_contents: [1, 2] } }] }, 'm'),
      'INVALID_INPUT',
      /contents\.fp32_contents/,
    );
    refused(
      () => decodeModelInferRequest({ inputs: [{ name: 'x', datatype: 'INT8', shape: ['3'], contents: { int_contents: [1, 2] } }] }, 'm'),
      'INVALID_INPUT',
      /needs 3 elements/,
    );
    refused(
      () => decodeModelInferRequest({ inputs: [{ name: 'x', datatype: 'INT8', shape: ['1'], contents: { int_contents: [300] } }] }, 'm'),
      'INVALID_INPUT',
      /x/,
    );
    refused(() => decodeModelInferRequest({ inputs: [{ name: 'x', datatype: 'FP32', shape: ['1'] }] }, 'm'), 'INVALID_INPUT', /has no data/);
    refused(
      () => decodeModelInferRequest({ inputs: [{ name: 'x', datatype: 'FLOAT', shape: ['1'], contents: {} }] }, 'm'),
      'INVALID_INPUT',
      /unknown datatype/,
    );
    assert.equal(decodeModelInferRequest({ inputs: [] }, 'm').inputs.size, 0, 'no inputs: for a model that declares none');
    refused(
      () => decodeModelInferRequest({ inputs: [{ name: 'x', datatype: 'BYTES', shape: ['1'], contents: { bytes_contents: [Buffer.from([0xff])] } }] }, 'm'),
      'INVALID_INPUT',
      /UTF-8/,
    );
  });

  test('classification must be a positive integer', () => {
    const input = { name: 'x', datatype: 'FP32', shape: ['1'], contents: { fp32_contents: [1] } };
    refused(
      () =>
        decodeModelInferRequest(
          { inputs: [input], outputs: [{ name: 'y', parameters: { classification: { parameter_choice: 'int64_param', int64_param: '0' } } }] },
          'm',
        ),
      'INVALID_REQUEST',
      /classification/,
    );
    const ok = decodeModelInferRequest(
      { inputs: [input], outputs: [{ name: 'y', parameters: { classification: { parameter_choice: 'int64_param', int64_param: '2' } } }] },
      'm',
    );
    assert.deepEqual(ok.outputs, [{ name: 'y', parameters: { classification: 2 } }]);
  });

  test('raw inputs are read in place (no copy when aligned); answers are raw, in order, with the id', () => {
    const bytes = Buffer.from(new Float32Array([1, 2, 3, 4]).buffer);
    const r = decodeModelInferRequest({ id: 'r1', inputs: [{ name: 'x', datatype: 'FP32', shape: ['2', '2'] }], raw_input_contents: [bytes] }, 'm');
    const t = r.inputs.get('x')!;
    assert.equal((t.data as Float32Array).buffer, bytes.buffer);
    const answer = encodeModelInferResponse({
      id: 'r1',
      modelName: 'm',
      modelVersion: '1',
      outputs: new Map([
        ['y', t],
        ['s', { datatype: 'BYTES', shape: [2], data: ['ab', ''] }],
      ]),
    });
    assert.equal(answer.id, 'r1');
    assert.deepEqual(
      answer.outputs.map((o) => [o.name, o.datatype, o.shape]),
      [
        ['y', 'FP32', [2, 2]],
        ['s', 'BYTES', [2]],
      ],
    );
    assert.ok(answer.raw_output_contents[0]!.equals(bytes));
    assert.deepEqual([...answer.raw_output_contents[1]!], [2, 0, 0, 0, 0x61, 0x62, 0, 0, 0, 0]);
  });
});
