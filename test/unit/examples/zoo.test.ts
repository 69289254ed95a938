/**
 * @module test/unit/examples/zoo
 * Every zoo model must load in a real onnxruntime-node session and compute
 * what its generator promises; the repository writers and the tarball packer
 * must produce the Triton layout. Other tests build on these models, so a
 * wrong fixture would otherwise show up as a confusing server failure.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import ort from 'onnxruntime-node';
import * as tar from 'tar';
import { buildDemoRepository } from '../../../examples/demo/build-demo-repository.js';
import {
  attr,
  buildModel,
  float16BitsToNumber,
  float32ToFloat16Bits,
  node,
  onnxElementType,
  tensor,
  valueInfo,
  type ElementType,
  type TensorValues,
} from '../../../examples/models/onnx-builder.js';
import {
  ADD_SUB_TYPES,
  addSub,
  denseForward,
  ensembleRepository,
  IDENTITY_TYPES,
  identity,
  mlp,
  packTarGz,
  scale,
  SIZED_MODEL_OFFSET,
  sizedModel,
  tiny,
  writeEnsembleRepository,
  writeModelDir,
  writeRepository,
} from '../../../examples/models/zoo.js';
import { DATATYPE_TO_ORT } from '../../../src/runtime/onnx-io.js';

type OrtType = ort.Tensor.Type;

/** The server's own mapping, so the zoo is checked against what the runtime will send. */
const ORT_TYPE = DATATYPE_TO_ORT as Readonly<Record<Exclude<ElementType, 'BF16'>, OrtType>>;

async function session(bytes: Uint8Array): Promise<ort.InferenceSession> {
  return ort.InferenceSession.create(bytes);
}

/** A JS typed array (or string[]) of `values` in the form onnxruntime-node wants for `type`. */
function ortData(type: Exclude<ElementType, 'BF16'>, values: readonly number[]): ort.Tensor['data'] {
  switch (type) {
    case 'BOOL':
      return Uint8Array.from(values, (v) => (v !== 0 ? 1 : 0));
    case 'UINT8':
      return Uint8Array.from(values);
    case 'UINT16':
      return Uint16Array.from(values);
    case 'UINT32':
      return Uint32Array.from(values);
    case 'UINT64':
      return BigUint64Array.from(values, (v) => BigInt(v));
    case 'INT8':
      return Int8Array.from(values);
    case 'INT16':
      return Int16Array.from(values);
    case 'INT32':
      return Int32Array.from(values);
    case 'INT64':
      return BigInt64Array.from(values, (v) => BigInt(v));
    case 'FP16':
      return Uint16Array.from(values, float32ToFloat16Bits);
    case 'FP32':
      return Float32Array.from(values);
    case 'FP64':
      return Float64Array.from(values);
    case 'BYTES':
      return values.map((v) => `s${v}`);
  }
}

/** Tensor data back as plain numbers (FP16 bits decoded, booleans as 0/1). */
function numbers(t: ort.Tensor): number[] {
  if (t.type === 'float16' && t.data instanceof Uint16Array) return Array.from(t.data, float16BitsToNumber);
  return Array.from(t.data as ArrayLike<number | bigint | boolean>, Number);
}

function output(result: ort.InferenceSession.OnnxValueMapType, name: string): ort.Tensor {
  const t = result[name];
  assert.ok(t !== undefined, `missing output ${name}`);
  return t;
}

function floats(n: number, f: (i: number) => number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => f(i));
}

function assertClose(actual: ArrayLike<number>, expected: ArrayLike<number>, tolerance: number): void {
  assert.equal(actual.length, expected.length);
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i] ?? NaN;
    const e = expected[i] ?? NaN;
    assert.ok(Math.abs(a - e) <= tolerance * Math.max(1, Math.abs(e)), `index ${i}: ${a} vs ${e}`);
  }
}

describe('onnx-builder', () => {
  test('maps KServe names to ONNX element types', () => {
    assert.equal(onnxElementType('FP32'), 1);
    assert.equal(onnxElementType('INT64'), 7);
    assert.equal(onnxElementType('BYTES'), 8);
    assert.equal(onnxElementType('FP16'), 10);
    assert.equal(onnxElementType('BF16'), 16);
  });

  test('float16 conversion round-trips representable values and rounds to nearest even', () => {
    for (const v of [0, 1, -2.5, 65504, 2 ** -14, 2 ** -24, 0.333251953125]) {
      assert.equal(float16BitsToNumber(float32ToFloat16Bits(v)), v);
    }
    assert.equal(float32ToFloat16Bits(1 + 2 ** -11), 0x3c00); // tie → even
    assert.equal(float32ToFloat16Bits(1 + 3 * 2 ** -11), 0x3c02); // tie → even (up)
    assert.equal(float32ToFloat16Bits(1e6), 0x7c00);
    assert.ok(Number.isNaN(float16BitsToNumber(float32ToFloat16Bits(NaN))));
  });

  test('tensor() rejects a value count that does not match the shape', () => {
    assert.throws(() => tensor('t', 'FP32', [2, 2], [1, 2, 3]), RangeError);
  });

  // Constant initializers as graph outputs check rawData (little-endian) and
  // stringData encodings for every type, as ORT reads them.
  for (const type of IDENTITY_TYPES) {
    test(`initializer of ${type} reads back in onnxruntime`, async () => {
      const t = type as Exclude<ElementType, 'BF16'>;
      const values = [0, 1, 2, 3, 4, 5];
      const literal: TensorValues =
        t === 'BYTES'
          ? values.map((v) => `s${v}`)
          : t === 'BOOL'
            ? values.map((v) => v % 2 === 1)
            : t === 'UINT64' || t === 'INT64'
              ? values.map((v) => (t === 'INT64' ? BigInt(v) - 3n : BigInt(v) << 40n))
              : t === 'INT8' || t === 'INT16' || t === 'INT32'
                ? values.map((v) => v * 3 - 7)
                : t === 'FP16' || t === 'FP32' || t === 'FP64'
                  ? values.map((v) => v * 1.5 - 2)
                  : values.map((v) => v * 3);
      const bytes = buildModel({
        inputs: [],
        outputs: [valueInfo('OUTPUT0', t, [2, 3])],
        nodes: [node('Identity', ['C'], ['OUTPUT0'])],
        initializers: [tensor('C', t, [2, 3], literal)],
      });
      const s = await session(bytes);
      const out = output(await s.run({}), 'OUTPUT0');
      assert.deepEqual(out.dims, [2, 3]);
      if (t === 'BYTES') assert.deepEqual(out.data, literal);
      else assert.deepEqual(numbers(out), Array.from(literal as ArrayLike<unknown>, Number));
    });
  }

  test('typed-array initializers and every attribute kind', async () => {
    const bytes = buildModel({
      inputs: [valueInfo('X', 'FP32', ['batch', 2])],
      outputs: [
        valueInfo('T', 'INT64', [2]),
        valueInfo('F', 'FP32', [2]),
        valueInfo('I', 'INT64', [3]),
        valueInfo('S', 'BYTES', []),
        valueInfo('Y', 'FP32', ['batch', 2]),
      ],
      nodes: [
        node('Constant', [], ['T'], { attributes: { value: attr.tensor(tensor('t', 'INT64', [2], new BigInt64Array([-1n, 2n ** 40n]))) } }),
        node('Constant', [], ['F'], { attributes: { value_floats: attr.floats([0.5, -1]) } }),
        node('Constant', [], ['I'], { attributes: { value_ints: attr.ints([1, 2, 3]) } }),
        node('Constant', [], ['S'], { attributes: { value_string: attr.string('hi') } }),
        node('Gemm', ['X', 'W', 'B'], ['Y'], { attributes: { alpha: attr.float(2), transB: attr.int(1) } }),
      ],
      initializers: [tensor('W', 'FP32', [2, 2], new Float32Array([1, 2, 3, 4])), tensor('B', 'FP32', [2], [10, 20])],
    });
    const s = await session(bytes);
    const r = await s.run({ X: new ort.Tensor('float32', new Float32Array([1, 1]), [1, 2]) });
    assert.deepEqual(output(r, 'T').data, new BigInt64Array([-1n, 2n ** 40n]));
    assert.deepEqual(Array.from(output(r, 'F').data as Float32Array), [0.5, -1]);
    assert.deepEqual(output(r, 'I').data, new BigInt64Array([1n, 2n, 3n]));
    assert.deepEqual(output(r, 'S').data, ['hi']);
    // Y = 2 * X · Wᵀ + B = 2 * [1+2, 3+4] + [10, 20]
    assert.deepEqual(Array.from(output(r, 'Y').data as Float32Array), [16, 34]);
  });
});

describe('zoo models', () => {
  test('addSub(FP32) computes exact sums and differences; config matches', async () => {
    const model = addSub();
    const s = await session(model.onnx);
    assert.deepEqual(s.inputNames, ['INPUT0', 'INPUT1']);
    assert.deepEqual(s.outputNames, ['OUTPUT0', 'OUTPUT1']);
    const batch = 3;
    const a = floats(batch * 16, (i) => i * 0.25);
    const b = floats(batch * 16, (i) => 100 - i);
    const r = await s.run({ INPUT0: new ort.Tensor('float32', a, [batch, 16]), INPUT1: new ort.Tensor('float32', b, [batch, 16]) });
    assert.deepEqual(output(r, 'OUTPUT0').dims, [batch, 16]);
    assert.deepEqual(
      Array.from(output(r, 'OUTPUT0').data as Float32Array),
      Array.from(a, (v, i) => v + (b[i] ?? 0)),
    );
    assert.deepEqual(
      Array.from(output(r, 'OUTPUT1').data as Float32Array),
      Array.from(a, (v, i) => v - (b[i] ?? 0)),
    );
    const config = model.config ?? '';
    assert.match(config, /platform: "onnxruntime_onnx"/);
    assert.match(config, /max_batch_size: 8/);
    assert.match(config, /\{ name: "INPUT0" data_type: TYPE_FP32 dims: \[ 16 \] \}/);
    assert.match(config, /\{ name: "OUTPUT1" data_type: TYPE_FP32 dims: \[ 16 \] \}/);
    assert.doesNotMatch(config, /^name:/m);
  });

  for (const type of ADD_SUB_TYPES) {
    test(`addSub(${type}) runs`, async () => {
      const t = type;
      const dims = 4;
      const a = [20, 21, 30, 59, 40, 41, 42, 43];
      const b = [0, 1, 19, 2, 3, 4, 5, 6];
      const s = await session(addSub(t, dims).onnx);
      const r = await s.run({
        INPUT0: new ort.Tensor(ORT_TYPE[t], ortData(t, a), [2, dims]),
        INPUT1: new ort.Tensor(ORT_TYPE[t], ortData(t, b), [2, dims]),
      });
      assert.equal(output(r, 'OUTPUT0').type, ORT_TYPE[t]);
      assert.deepEqual(
        numbers(output(r, 'OUTPUT0')),
        a.map((v, i) => v + (b[i] ?? 0)),
      );
      assert.deepEqual(
        numbers(output(r, 'OUTPUT1')),
        a.map((v, i) => v - (b[i] ?? 0)),
      );
    });
  }

  for (const type of IDENTITY_TYPES) {
    test(`identity(${type}) round-trips`, async () => {
      const t = type as Exclude<ElementType, 'BF16'>;
      const model = identity(t, [2, 3]);
      const s = await session(model.onnx);
      const values = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
      const input = new ort.Tensor(ORT_TYPE[t], ortData(t, values), [2, 2, 3]);
      const out = output(await s.run({ INPUT0: input }), 'OUTPUT0');
      assert.equal(out.type, ORT_TYPE[t]);
      assert.deepEqual(out.dims, [2, 2, 3]);
      assert.deepEqual(out.data, input.data);
      assert.match(model.config ?? '', new RegExp(`data_type: TYPE_${t === 'BYTES' ? 'STRING' : t} dims: \\[ 2, 3 \\]`));
    });
  }

  test('BF16 models cannot be loaded by onnxruntime-node 1.30 (update IDENTITY_TYPES if this starts to pass)', async () => {
    await assert.rejects(session(identity('BF16').onnx), /Unsupported data type/);
  });

  test('mlp is deterministic, seed-sensitive and matches the reference maths', async () => {
    const first = mlp({ seed: 3 });
    const second = mlp({ seed: 3 });
    assert.deepEqual(first.onnx, second.onnx);
    assert.notDeepEqual(mlp({ seed: 4 }).onnx, first.onnx);
    assert.deepEqual(
      first.layers.map((l) => [l.inFeatures, l.outFeatures, l.relu]),
      [
        [256, 1024, true],
        [1024, 1024, true],
        [1024, 16, false],
      ],
    );
    const s = await session(first.onnx);
    const batch = 2;
    const x = floats(batch * 256, (i) => Math.sin(i));
    const y = output(await s.run({ INPUT0: new ort.Tensor('float32', x, [batch, 256]) }), 'OUTPUT0');
    assert.deepEqual(y.dims, [batch, 16]);
    assertClose(y.data as Float32Array, denseForward(first.layers, x, batch), 1e-4);
    assert.match(first.config ?? '', /dims: \[ 256 \][\s\S]*dims: \[ 16 \]/);
  });

  test('tiny is one linear layer', async () => {
    const model = tiny({ in: 16, out: 4 });
    const s = await session(model.onnx);
    const x = floats(3 * 16, (i) => i / 10);
    const y = output(await s.run({ INPUT0: new ort.Tensor('float32', x, [3, 16]) }), 'OUTPUT0');
    assert.deepEqual(y.dims, [3, 4]);
    assertClose(y.data as Float32Array, denseForward(model.layers, x, 3), 1e-5);
  });

  test('scale multiplies by the factor', async () => {
    const s = await session(scale(2.5).onnx);
    const x = floats(8, (i) => i - 3);
    const y = output(await s.run({ INPUT0: new ort.Tensor('float32', x, [2, 4]) }), 'OUTPUT0');
    assert.deepEqual(
      Array.from(y.data as Float32Array),
      Array.from(x, (v) => v * 2.5),
    );
  });

  test('sizedModel is about the requested size and still adds its offset row', async () => {
    for (const target of [4_096, 250_000, 3_000_000]) {
      const model = sizedModel(target);
      assert.ok(Math.abs(model.onnx.length - target) <= 64, `${model.onnx.length} vs ${target}`);
    }
    const s = await session(sizedModel(1_000_000).onnx);
    const x = floats(12, (i) => i);
    const y = output(await s.run({ INPUT0: new ort.Tensor('float32', x, [3, 4]) }), 'OUTPUT0');
    assert.deepEqual(
      Array.from(y.data as Float32Array),
      Array.from(x, (v, i) => v + (SIZED_MODEL_OFFSET[i % 4] ?? 0)),
    );
  });

  test('ensemble steps chained by hand give classifier(factor * x)', async () => {
    const repo = ensembleRepository();
    const pre = repo.models.preprocess;
    const cls = repo.models.classifier;
    assert.ok(pre?.onnx && cls?.onnx);
    const x = floats(2 * 4, (i) => i * 0.5 - 1);
    const scaled = output(await (await session(pre.onnx)).run({ INPUT0: new ort.Tensor('float32', x, [2, 4]) }), 'OUTPUT0');
    const y = output(await (await session(cls.onnx)).run({ INPUT0: scaled }), 'OUTPUT0');
    assert.deepEqual(y.dims, [2, 3]);
    const expected = denseForward(
      repo.classifier.layers,
      Float32Array.from(x, (v) => v * repo.factor),
      2,
    );
    assertClose(y.data as Float32Array, expected, 1e-5);

    const ensemble = repo.models[repo.name];
    assert.ok(ensemble?.config);
    assert.equal(ensemble.onnx, undefined);
    assert.match(ensemble.config, /^name: "pipeline"$/m);
    assert.match(ensemble.config, /platform: "ensemble"/);
    assert.match(ensemble.config, /model_name: "preprocess"[\s\S]*model_name: "classifier"/);
    assert.match(ensemble.config, /input_map \{ key: "INPUT0" value: "scaled" \}/);
    assert.match(pre.config ?? '', /^name: "preprocess"$/m);
  });
});

describe('repository writers and packaging', () => {
  let root = '';
  before(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'zoo-test-'));
  });
  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  async function tree(dir: string, rel = ''): Promise<string[]> {
    const out: string[] = [];
    for (const e of (await readdir(path.join(dir, rel), { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = rel === '' ? e.name : `${rel}/${e.name}`;
      if (e.isDirectory()) out.push(`${p}/`, ...(await tree(dir, p)));
      else out.push(p);
    }
    return out;
  }

  async function listing(file: string): Promise<string[]> {
    const entries: string[] = [];
    await tar.list({ file, onReadEntry: (e) => void entries.push(e.path) });
    return entries;
  }

  test('writeModelDir writes versions, and no config.pbtxt when none is given', async () => {
    const dir = await writeModelDir(root, 'versions', { onnx: scale(3).onnx, versions: [1, 3] });
    assert.deepEqual(await tree(dir), ['1/', '1/model.onnx', '3/', '3/model.onnx']);
    // Rewriting replaces the directory, so stale versions disappear.
    await writeModelDir(root, 'versions', { ...scale(3), versions: [2] });
    assert.deepEqual(await tree(dir), ['2/', '2/model.onnx', 'config.pbtxt']);
  });

  test('writeEnsembleRepository lays out the Triton repository', async () => {
    const repoRoot = path.join(root, 'ensemble');
    await writeEnsembleRepository(repoRoot);
    assert.deepEqual(await tree(repoRoot), [
      'classifier/',
      'classifier/1/',
      'classifier/1/model.onnx',
      'classifier/config.pbtxt',
      'pipeline/',
      'pipeline/1/',
      'pipeline/config.pbtxt',
      'preprocess/',
      'preprocess/1/',
      'preprocess/1/model.onnx',
      'preprocess/config.pbtxt',
    ]);
  });

  test('packTarGz: model dir under a prefix, config.pbtxt at the root, or a whole repository', async () => {
    const modelDir = await writeModelDir(path.join(root, 'src'), 'add_sub', addSub());
    const prefixed = path.join(root, 'out', 'add_sub.tar.gz');
    await packTarGz(modelDir, prefixed, { prefix: 'add_sub' });
    assert.deepEqual(await listing(prefixed), ['add_sub/', 'add_sub/1/', 'add_sub/1/model.onnx', 'add_sub/config.pbtxt']);

    const flat = path.join(root, 'out', 'flat.tar.gz');
    await packTarGz(modelDir, flat);
    assert.deepEqual(await listing(flat), ['1/', '1/model.onnx', 'config.pbtxt']);

    const repoRoot = path.join(root, 'repo');
    await writeRepository(repoRoot, { a: identity('INT32'), b: { onnx: tiny().onnx } });
    const repoTar = path.join(root, 'out', 'repo.tar.gz');
    await packTarGz(repoRoot, repoTar);
    assert.deepEqual(await listing(repoTar), ['a/', 'a/1/', 'a/1/model.onnx', 'a/config.pbtxt', 'b/', 'b/1/', 'b/1/model.onnx']);

    // Same tree, same bytes; and the extracted model is the one written.
    const again = path.join(root, 'out', 'again.tar.gz');
    await packTarGz(modelDir, again, { prefix: 'add_sub' });
    assert.deepEqual(await readFile(again), await readFile(prefixed));
    const extracted = path.join(root, 'extracted');
    await import('node:fs/promises').then((fs) => fs.mkdir(extracted));
    await tar.extract({ file: prefixed, cwd: extracted });
    assert.deepEqual(await readFile(path.join(extracted, 'add_sub/1/model.onnx')), Buffer.from(addSub().onnx));
  });

  test('the demo builder writes every output once, then skips', async () => {
    const outDir = path.join(root, 'demo');
    const lines: string[] = [];
    const first = await buildDemoRepository(outDir, { log: (l) => lines.push(l) });
    assert.equal(first.skipped, false);
    assert.equal(first.written.length, 5);
    assert.deepEqual(await listing(path.join(outDir, 'add_sub.tar.gz')), ['add_sub/', 'add_sub/1/', 'add_sub/1/model.onnx', 'add_sub/config.pbtxt']);
    assert.deepEqual(await listing(path.join(outDir, 'mlp.tar.gz')), ['1/', '1/model.onnx', 'config.pbtxt']);
    const pipeline = await listing(path.join(outDir, 'pipeline.tar.gz'));
    for (const p of ['pipeline/1/', 'pipeline/config.pbtxt', 'preprocess/1/model.onnx', 'classifier/1/model.onnx']) {
      assert.ok(pipeline.includes(p), `${p} in ${pipeline.join(', ')}`);
    }
    assert.deepEqual(await tree(path.join(outDir, 'tiny')), ['1/', '1/model.onnx', 'config.pbtxt']);
    assert.deepEqual(await tree(path.join(outDir, 'autocomplete')), ['1/', '1/model.onnx']);
    const names = (await readdir(outDir)).filter((n) => !n.startsWith('.')).sort();
    assert.deepEqual(names, ['add_sub.tar.gz', 'autocomplete', 'mlp.tar.gz', 'pipeline.tar.gz', 'tiny']);

    const mtime = (await stat(path.join(outDir, 'mlp.tar.gz'))).mtimeMs;
    const second = await buildDemoRepository(outDir, { log: () => undefined });
    assert.equal(second.skipped, true);
    assert.equal((await stat(path.join(outDir, 'mlp.tar.gz'))).mtimeMs, mtime);

    // A missing output triggers a rebuild.
    await rm(path.join(outDir, 'tiny'), { recursive: true });
    const third = await buildDemoRepository(outDir, { log: () => undefined });
    assert.equal(third.skipped, false);
    assert.ok((await stat(path.join(outDir, 'tiny', 'config.pbtxt'))).isFile());
  });
});
