/**
 * Main-thread sessions run through onnxruntime-node's binding
 * (runtime/ort-native.ts): the same metadata and the same answers as the
 * public API, for every element type the server serves; the run finishes in
 * the turn it was asked in; and the binding still has the shape this module
 * expects (after an onnxruntime-node upgrade this test says so, rather than
 * main-thread sessions quietly taking the slower public path).
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, test } from 'node:test';
import * as ort from 'onnxruntime-node';
import { identity, IDENTITY_TYPES, mlp, tiny } from '../../../examples/models/zoo.js';
import { createMainThreadSession } from '../../../src/runtime/main-thread-session.js';
import { loadNativeSession, nativeRunAvailable } from '../../../src/runtime/ort-native.js';
import { ortSessionOptions } from '../../../src/runtime/provider-options.js';
import type { CreateSessionOptions } from '../../../src/runtime/worker-protocol.js';
import { tempDir } from '../../support/temp-dir.js';

const CREATE: CreateSessionOptions = { providers: ['cpu'], deviceId: 0, graphOptimizationLevel: 'all', intraOpThreads: 1, interOpThreads: undefined };
const OPTIONS = ortSessionOptions(CREATE);

/** Two rows of values of `type` for a [2, 4] input. */
function twoRows(type: ort.Tensor.Type): ort.Tensor {
  const n = 8;
  const seq = Array.from({ length: n }, (_, i) => i);
  switch (type) {
    case 'string':
      return new ort.Tensor(
        'string',
        seq.map((i) => `v${i}`),
        [2, 4],
      );
    case 'bool':
      return new ort.Tensor(
        'bool',
        Uint8Array.from(seq, (i) => i % 2),
        [2, 4],
      );
    case 'int64':
      return new ort.Tensor(
        'int64',
        BigInt64Array.from(seq, (i) => BigInt(i - 3)),
        [2, 4],
      );
    case 'uint64':
      return new ort.Tensor(
        'uint64',
        BigUint64Array.from(seq, (i) => BigInt(i)),
        [2, 4],
      );
    case 'float16':
      return new ort.Tensor(
        'float16',
        Uint16Array.from(seq, (i) => 0x3c00 + i),
        [2, 4],
      );
    default: {
      const arrays: Record<string, new (xs: number[]) => ArrayLike<number>> = {
        float32: Float32Array as never,
        float64: Float64Array as never,
        int8: Int8Array as never,
        int16: Int16Array as never,
        int32: Int32Array as never,
        uint8: Uint8Array as never,
        uint16: Uint16Array as never,
        uint32: Uint32Array as never,
      };
      return new ort.Tensor(type as 'float32', new arrays[type]!(seq.map((i) => i + 1)) as Float32Array, [2, 4]);
    }
  }
}

async function modelFile(dir: string, name: string, onnx: Uint8Array): Promise<string> {
  const file = path.join(dir, `${name}.onnx`);
  await writeFile(file, onnx);
  return file;
}

describe('main-thread sessions through the binding', () => {
  test('the pinned onnxruntime-node has the binding this module uses', () => {
    assert.equal(nativeRunAvailable(), true, 'onnxruntime-node/dist/binding.js changed shape: see runtime/ort-native.ts');
  });

  test('metadata and answers equal the public API, for every element type served', async (t) => {
    const dir = await tempDir(t);
    for (const dt of IDENTITY_TYPES) {
      const file = await modelFile(dir, `identity-${dt}`, identity(dt).onnx);
      const pub = await ort.InferenceSession.create(file, OPTIONS);
      const native = loadNativeSession(file, OPTIONS)!;
      try {
        assert.deepEqual(native.inputMetadata, pub.inputMetadata, dt);
        assert.deepEqual(native.outputMetadata, pub.outputMetadata, dt);
        const type = (pub.inputMetadata[0] as { type: ort.Tensor.Type }).type;
        const feeds = { INPUT0: twoRows(type) };
        const expected = (await pub.run(feeds, ['OUTPUT0']))['OUTPUT0']!;
        const got = native.runSync(feeds, ['OUTPUT0'])['OUTPUT0']!;
        assert.equal(got.type, expected.type, dt);
        assert.deepEqual(got.dims, expected.dims, dt);
        assert.deepEqual(got.data, expected.data, dt);
      } finally {
        native.release();
        await pub.release();
      }
    }
  });

  test('a dense model answers bit for bit as the public API does, batch of 3', async (t) => {
    const dir = await tempDir(t);
    for (const [name, model, features] of [
      ['tiny', tiny(), 16],
      ['mlp', mlp({ in: 32, hidden: [64], out: 8 }), 32],
    ] as const) {
      const file = await modelFile(dir, name, model.onnx);
      const pub = await ort.InferenceSession.create(file, OPTIONS);
      const native = loadNativeSession(file, OPTIONS)!;
      try {
        const x = new ort.Tensor(
          'float32',
          Float32Array.from({ length: 3 * features }, (_, i) => Math.sin(i)),
          [3, features],
        );
        const expected = (await pub.run({ INPUT0: x }, ['OUTPUT0']))['OUTPUT0']!;
        const got = native.runSync({ INPUT0: x }, ['OUTPUT0'])['OUTPUT0']!;
        assert.deepEqual(got.dims, expected.dims, name);
        assert.deepEqual(got.data, expected.data, name);
      } finally {
        native.release();
        await pub.release();
      }
    }
  });

  test('a file that is not a model is refused with onnxruntime message, every time', async (t) => {
    const dir = await tempDir(t);
    const file = path.join(dir, 'broken.onnx');
    await writeFile(file, Buffer.from('not a model'));
    for (let i = 0; i < 3; i++) assert.throws(() => loadNativeSession(file, OPTIONS), /protobuf|parsing|Load model/i);
  });

  test('a model with a type onnxruntime-node cannot hold (bfloat16) is refused naming the value, as the public API refuses it', async (t) => {
    const dir = await tempDir(t);
    const file = await modelFile(dir, 'identity-bf16', identity('BF16').onnx);
    await assert.rejects(ort.InferenceSession.create(file, OPTIONS), /Unsupported data type: 16/);
    for (let i = 0; i < 3; i++) assert.throws(() => loadNativeSession(file, OPTIONS), /'INPUT0': onnxruntime-node has no tensor type for ONNX data type 16/);
  });

  test('a run finishes in the turn it is asked in, and a bad input rejects with onnxruntime message', async (t) => {
    const dir = await tempDir(t);
    const file = await modelFile(dir, 'tiny', tiny().onnx);
    const session = await createMainThreadSession(file, CREATE);
    try {
      let nextTurn = false;
      setImmediate(() => (nextTurn = true));
      const out = await session.run(new Map([['INPUT0', { datatype: 'FP32', shape: [1, 16], data: new Float32Array(16) }]]), ['OUTPUT0']);
      assert.equal(nextTurn, false, 'the answer came before the next turn of the event loop');
      assert.deepEqual(out.get('OUTPUT0')!.shape, [1, 4]);
      await assert.rejects(
        session.run(new Map([['INPUT0', { datatype: 'FP32', shape: [1, 15], data: new Float32Array(15) }]]), ['OUTPUT0']),
        /dimension|shape|Got invalid dimensions/i,
      );
    } finally {
      await session.release();
    }
  });
});
