/**
 * @module examples/models/zoo
 * Generators for the test and demo models, plus writers that lay them out as
 * Triton model repositories and SageMaker-style `.tar.gz` packages.
 *
 * Every model is generated from code (no binary fixtures in git) and is
 * deterministic: the same arguments give byte-identical ONNX files, so tests
 * can compare numbers across builds and the demo builder can skip work.
 *
 * Conventions shared by the zoo: tensors are named `INPUT0`/`OUTPUT0`… as in
 * Triton's "simple" models; the batch dimension is symbolic (`batch`) in the
 * ONNX graph and expressed as `max_batch_size: 8` in config.pbtxt; generated
 * configs omit `name` (Triton takes it from the directory) unless the writer
 * knows the directory name, as for the ensemble repository.
 */
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import * as tar from 'tar';
import {
  attr,
  ELEMENT_TYPES,
  buildModel,
  node,
  tensor,
  tritonDataType,
  valueInfo,
  type ElementType,
  type OnnxNodeProto,
  type OnnxTensorProto,
} from './onnx-builder.js';

/** A generated model: ONNX bytes and, usually, a matching config.pbtxt. */
export interface ZooModel {
  readonly onnx: Uint8Array;
  readonly config?: string;
}

/** The batch size every zoo config allows. */
export const ZOO_MAX_BATCH_SIZE = 8;

// ---------------------------------------------------------------------------
// config.pbtxt text

export interface TensorConfigSpec {
  readonly name: string;
  readonly dataType: ElementType;
  /** Dims without the batch dim when max_batch_size > 0; -1 = variable. */
  readonly dims: readonly number[];
}

export interface ConfigSpec {
  /** Omit to let Triton (and us) take the name from the model directory. */
  readonly name?: string;
  /** Defaults to `onnxruntime_onnx`; `ensemble` for ensembles. */
  readonly platform?: string;
  readonly maxBatchSize: number;
  readonly inputs: readonly TensorConfigSpec[];
  readonly outputs: readonly TensorConfigSpec[];
  /** Extra top-level text appended verbatim (e.g. `dynamic_batching { }`). */
  readonly extra?: string;
}

function tensorConfigList(tensors: readonly TensorConfigSpec[]): string {
  const entries = tensors.map((t) => `  { name: ${quote(t.name)} data_type: ${tritonDataType(t.dataType)} dims: [ ${t.dims.join(', ')} ] }`);
  return `[\n${entries.join(',\n')}\n]`;
}

/** Protobuf text-format string literal. */
function quote(s: string): string {
  return JSON.stringify(s);
}

/** Triton config.pbtxt text for a model. */
export function configText(spec: ConfigSpec): string {
  const lines: string[] = [];
  if (spec.name !== undefined) lines.push(`name: ${quote(spec.name)}`);
  lines.push(`platform: ${quote(spec.platform ?? 'onnxruntime_onnx')}`);
  lines.push(`max_batch_size: ${spec.maxBatchSize}`);
  lines.push(`input ${tensorConfigList(spec.inputs)}`);
  lines.push(`output ${tensorConfigList(spec.outputs)}`);
  if (spec.extra !== undefined && spec.extra.trim() !== '') lines.push(spec.extra.trim());
  return `${lines.join('\n')}\n`;
}

// ---------------------------------------------------------------------------
// Deterministic weights

/** mulberry32: a tiny seeded PRNG, good enough for reproducible weights. Returns [0, 1). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A fully connected layer: y = x · weight + bias, optionally followed by ReLU. */
export interface DenseLayer {
  readonly inFeatures: number;
  readonly outFeatures: number;
  /** Row-major `[inFeatures, outFeatures]`. */
  readonly weight: Float32Array;
  readonly bias: Float32Array;
  readonly relu: boolean;
}

/** A zoo model made of dense layers, with the weights kept for reference maths. */
export interface DenseModel extends ZooModel {
  readonly layers: readonly DenseLayer[];
}

function denseLayer(rand: () => number, inFeatures: number, outFeatures: number, relu: boolean): DenseLayer {
  // Scaled by 1/sqrt(fan-in) so activations stay O(1) through deep stacks.
  const scale = 1 / Math.sqrt(inFeatures);
  const weight = new Float32Array(inFeatures * outFeatures);
  for (let i = 0; i < weight.length; i++) weight[i] = (rand() * 2 - 1) * scale;
  const bias = new Float32Array(outFeatures);
  for (let i = 0; i < bias.length; i++) bias[i] = (rand() * 2 - 1) * 0.1;
  return { inFeatures, outFeatures, weight, bias, relu };
}

/**
 * Reference forward pass in plain JS (float64 accumulation), for checking what
 * onnxruntime computes. `input` is row-major `[batch, layers[0].inFeatures]`.
 */
export function denseForward(layers: readonly DenseLayer[], input: Float32Array, batch: number): Float32Array {
  let x = input;
  for (const layer of layers) {
    const y = new Float32Array(batch * layer.outFeatures);
    for (let b = 0; b < batch; b++) {
      for (let o = 0; o < layer.outFeatures; o++) {
        let acc = layer.bias[o] ?? 0;
        for (let i = 0; i < layer.inFeatures; i++) {
          acc += (x[b * layer.inFeatures + i] ?? 0) * (layer.weight[i * layer.outFeatures + o] ?? 0);
        }
        y[b * layer.outFeatures + o] = layer.relu ? Math.max(0, acc) : acc;
      }
    }
    x = y;
  }
  return x;
}

/**
 * ONNX graph for dense layers. Hidden layers use MatMul + Add + Relu and the
 * last uses Gemm, so the zoo exercises both spellings of a linear layer.
 */
function denseGraph(
  layers: readonly DenseLayer[],
  input: string,
  output: string,
): {
  nodes: OnnxNodeProto[];
  initializers: OnnxTensorProto[];
} {
  const nodes: OnnxNodeProto[] = [];
  const initializers: OnnxTensorProto[] = [];
  let x = input;
  layers.forEach((layer, i) => {
    const last = i === layers.length - 1;
    const w = `layer${i}.weight`;
    const b = `layer${i}.bias`;
    initializers.push(tensor(w, 'FP32', [layer.inFeatures, layer.outFeatures], layer.weight));
    initializers.push(tensor(b, 'FP32', [layer.outFeatures], layer.bias));
    const linear = last && !layer.relu ? output : `layer${i}.linear`;
    if (last) {
      nodes.push(node('Gemm', [x, w, b], [linear], { attributes: { alpha: attr.float(1), beta: attr.float(1) } }));
    } else {
      nodes.push(node('MatMul', [x, w], [`layer${i}.matmul`]));
      nodes.push(node('Add', [`layer${i}.matmul`, b], [linear]));
    }
    if (layer.relu) {
      const activated = last ? output : `layer${i}.relu`;
      nodes.push(node('Relu', [linear], [activated]));
      x = activated;
    } else {
      x = linear;
    }
  });
  return { nodes, initializers };
}

function denseModel(layers: readonly DenseLayer[], docString: string): DenseModel {
  const first = layers[0];
  const last = layers[layers.length - 1];
  if (first === undefined || last === undefined) throw new RangeError('a dense model needs at least one layer');
  const { nodes, initializers } = denseGraph(layers, 'INPUT0', 'OUTPUT0');
  const onnx = buildModel({
    inputs: [valueInfo('INPUT0', 'FP32', ['batch', first.inFeatures])],
    outputs: [valueInfo('OUTPUT0', 'FP32', ['batch', last.outFeatures])],
    nodes,
    initializers,
    docString,
  });
  const config = configText({
    maxBatchSize: ZOO_MAX_BATCH_SIZE,
    inputs: [{ name: 'INPUT0', dataType: 'FP32', dims: [first.inFeatures] }],
    outputs: [{ name: 'OUTPUT0', dataType: 'FP32', dims: [last.outFeatures] }],
  });
  return { onnx, config, layers };
}

// ---------------------------------------------------------------------------
// Models

/**
 * Element types addSub can use: onnxruntime-node 1.30 (CPU) runs Add/Sub for
 * every numeric type it can feed (checked by running each); BOOL and STRING
 * have no Add kernel and BF16 tensors cannot cross the JS binding.
 */
export type AddSubType = Exclude<ElementType, 'BOOL' | 'BYTES' | 'BF16'>;

export const ADD_SUB_TYPES: readonly AddSubType[] = Object.freeze(ELEMENT_TYPES.filter((t): t is AddSubType => t !== 'BOOL' && t !== 'BYTES' && t !== 'BF16'));

/**
 * Triton's classic "simple" model: OUTPUT0 = INPUT0 + INPUT1,
 * OUTPUT1 = INPUT0 - INPUT1, all `[-1, dims]`, max_batch_size 8.
 */
export function addSub(dtype: AddSubType = 'FP32', dims = 16): ZooModel {
  const io = (name: string) => valueInfo(name, dtype, ['batch', dims]);
  const onnx = buildModel({
    inputs: [io('INPUT0'), io('INPUT1')],
    outputs: [io('OUTPUT0'), io('OUTPUT1')],
    nodes: [node('Add', ['INPUT0', 'INPUT1'], ['OUTPUT0']), node('Sub', ['INPUT0', 'INPUT1'], ['OUTPUT1'])],
    docString: 'add_sub: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1',
  });
  const t = (name: string): TensorConfigSpec => ({ name, dataType: dtype, dims: [dims] });
  const config = configText({
    maxBatchSize: ZOO_MAX_BATCH_SIZE,
    inputs: [t('INPUT0'), t('INPUT1')],
    outputs: [t('OUTPUT0'), t('OUTPUT1')],
  });
  return { onnx, config };
}

/**
 * Element types onnxruntime-node 1.30 (CPU) runs through Identity, verified by
 * running each one (the zoo tests keep checking). BF16 is left out: creating a
 * session whose inputs or outputs are BF16 rejects with `Unsupported data
 * type: 16`, because the JS binding has no tensor type for it.
 */
/** Every datatype but BF16, which onnxruntime-node 1.30 cannot hold. */
export const IDENTITY_TYPES: readonly ElementType[] = Object.freeze(ELEMENT_TYPES.filter((t) => t !== 'BF16'));

/** OUTPUT0 = Identity(INPUT0), `[-1, ...dims]` of `dtype`, max_batch_size 8. */
export function identity(dtype: ElementType = 'FP32', dims: readonly number[] = [4]): ZooModel {
  const shape = ['batch', ...dims];
  const onnx = buildModel({
    inputs: [valueInfo('INPUT0', dtype, shape)],
    outputs: [valueInfo('OUTPUT0', dtype, shape)],
    nodes: [node('Identity', ['INPUT0'], ['OUTPUT0'])],
    docString: `identity ${dtype}`,
  });
  const config = configText({
    maxBatchSize: ZOO_MAX_BATCH_SIZE,
    inputs: [{ name: 'INPUT0', dataType: dtype, dims }],
    outputs: [{ name: 'OUTPUT0', dataType: dtype, dims }],
  });
  return { onnx, config };
}

export interface MlpOptions {
  readonly in?: number;
  readonly hidden?: readonly number[];
  readonly out?: number;
  readonly seed?: number;
}

/** A ReLU MLP (default 256 → 1024 → 1024 → 16) with seeded weights; FP32, batch dim symbolic. */
export function mlp(options: MlpOptions = {}): DenseModel {
  const sizes = [options.in ?? 256, ...(options.hidden ?? [1024, 1024]), options.out ?? 16];
  const rand = seededRandom(options.seed ?? 1);
  const layers: DenseLayer[] = [];
  for (let i = 0; i + 1 < sizes.length; i++) {
    layers.push(denseLayer(rand, sizes[i] ?? 0, sizes[i + 1] ?? 0, i + 2 < sizes.length));
  }
  return denseModel(layers, `mlp ${sizes.join('->')} seed ${options.seed ?? 1}`);
}

export interface TinyOptions {
  readonly in?: number;
  readonly out?: number;
  readonly seed?: number;
}

/** A single linear layer (default 16 → 4), FP32 `[-1, in]` → `[-1, out]`. */
export function tiny(options: TinyOptions = {}): DenseModel {
  const layer = denseLayer(seededRandom(options.seed ?? 7), options.in ?? 16, options.out ?? 4, false);
  return denseModel([layer], 'tiny linear');
}

export interface MatMulOptions {
  readonly in?: number;
  readonly out?: number;
  readonly seed?: number;
}

/**
 * OUTPUT0 = INPUT0 · W, one MatMul with a seeded `[in, out]` FP32 weight
 * (default 512 → 6144: 12 MiB of weights), `[-1, in]` → `[-1, out]`. The
 * memory tests' model: its footprint is its weights, every seed's file differs.
 */
export function matmul(options: MatMulOptions = {}): DenseModel {
  const inFeatures = options.in ?? 512;
  const outFeatures = options.out ?? 6144;
  const rand = seededRandom(options.seed ?? 11);
  const weight = new Float32Array(inFeatures * outFeatures);
  for (let i = 0; i < weight.length; i++) weight[i] = rand() * 2 - 1;
  const layer: DenseLayer = { inFeatures, outFeatures, weight, bias: new Float32Array(outFeatures), relu: false };
  const onnx = buildModel({
    inputs: [valueInfo('INPUT0', 'FP32', ['batch', inFeatures])],
    outputs: [valueInfo('OUTPUT0', 'FP32', ['batch', outFeatures])],
    nodes: [node('MatMul', ['INPUT0', 'W'], ['OUTPUT0'])],
    initializers: [tensor('W', 'FP32', [inFeatures, outFeatures], weight)],
    docString: `matmul ${inFeatures}->${outFeatures} seed ${options.seed ?? 11}`,
  });
  const config = configText({
    maxBatchSize: ZOO_MAX_BATCH_SIZE,
    inputs: [{ name: 'INPUT0', dataType: 'FP32', dims: [inFeatures] }],
    outputs: [{ name: 'OUTPUT0', dataType: 'FP32', dims: [outFeatures] }],
  });
  return { onnx, config, layers: [layer] };
}

/** OUTPUT0 = INPUT0 * factor, FP32 `[-1, features]` (default 4). */
export function scale(factor: number, features = 4): ZooModel {
  const onnx = buildModel({
    inputs: [valueInfo('INPUT0', 'FP32', ['batch', features])],
    outputs: [valueInfo('OUTPUT0', 'FP32', ['batch', features])],
    nodes: [node('Mul', ['INPUT0', 'factor'], ['OUTPUT0'])],
    // A scalar broadcasts over any batch.
    initializers: [tensor('factor', 'FP32', [], [factor])],
    docString: `scale x${factor}`,
  });
  const t = (name: string): TensorConfigSpec => ({ name, dataType: 'FP32', dims: [features] });
  const config = configText({ maxBatchSize: ZOO_MAX_BATCH_SIZE, inputs: [t('INPUT0')], outputs: [t('OUTPUT0')] });
  return { onnx, config };
}

/** The row that sizedModel adds to its input. */
export const SIZED_MODEL_OFFSET: readonly number[] = Object.freeze([1, 2, 3, 4]);

function sizedModelWithRows(rows: number): Uint8Array {
  const table = new Float32Array(rows * 4);
  table.set(SIZED_MODEL_OFFSET);
  // Pseudo-random filler so the file does not shrink under gzip (tarball-size tests).
  const rand = seededRandom(rows);
  for (let i = 4; i < table.length; i++) table[i] = rand();
  return buildModel({
    inputs: [valueInfo('INPUT0', 'FP32', ['batch', 4])],
    outputs: [valueInfo('OUTPUT0', 'FP32', ['batch', 4])],
    // OUTPUT0 = INPUT0 + table[idx] with idx = batch - batch (= 0). The index
    // depends on the input's shape, so ORT cannot constant-fold the table
    // away: the whole initializer stays in session memory, as memory-budget
    // tests want, while the run costs one row lookup.
    nodes: [
      node('Shape', ['INPUT0'], ['batch_dim'], { attributes: { start: attr.int(0), end: attr.int(1) } }),
      node('Sub', ['batch_dim', 'batch_dim'], ['row_index']),
      node('Gather', ['table', 'row_index'], ['row'], { attributes: { axis: attr.int(0) } }),
      node('Add', ['INPUT0', 'row'], ['OUTPUT0']),
    ],
    initializers: [tensor('table', 'FP32', [rows, 4], table)],
    docString: 'sized model',
  });
}

/**
 * A model whose file is about `bytes` long (within a few dozen bytes, and never
 * under a few hundred) because of one FP32 initializer, yet runs as
 * OUTPUT0 = INPUT0 + [1, 2, 3, 4] on FP32 `[-1, 4]`.
 */
export function sizedModel(bytes: number): ZooModel {
  const rowBytes = 16;
  const overhead = sizedModelWithRows(1).length - rowBytes;
  const rows = Math.max(1, Math.round((bytes - overhead) / rowBytes));
  const t = (name: string): TensorConfigSpec => ({ name, dataType: 'FP32', dims: [4] });
  return {
    onnx: sizedModelWithRows(rows),
    config: configText({ maxBatchSize: ZOO_MAX_BATCH_SIZE, inputs: [t('INPUT0')], outputs: [t('OUTPUT0')] }),
  };
}

// ---------------------------------------------------------------------------
// Repository writers

/** What goes into one Triton model directory. */
export interface ModelDirContents {
  /** Written as `<version>/model.onnx`; omit for ensembles (empty version dirs). */
  readonly onnx?: Uint8Array;
  /** config.pbtxt text; omit to exercise auto-complete. */
  readonly config?: string;
  /** Version directories to create; default `[1]`. */
  readonly versions?: readonly number[];
}

/**
 * Write `<root>/<name>/{config.pbtxt, <v>/model.onnx}`, replacing whatever was
 * there so stale versions never linger. Returns the model directory.
 */
export async function writeModelDir(root: string, name: string, contents: ModelDirContents): Promise<string> {
  const dir = path.join(root, name);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  if (contents.config !== undefined) await writeFile(path.join(dir, 'config.pbtxt'), contents.config);
  for (const version of contents.versions ?? [1]) {
    if (!Number.isSafeInteger(version) || version < 1) throw new RangeError(`invalid model version ${version}`);
    const versionDir = path.join(dir, String(version));
    await mkdir(versionDir, { recursive: true });
    if (contents.onnx !== undefined) await writeFile(path.join(versionDir, 'model.onnx'), contents.onnx);
  }
  return dir;
}

/** Write several model directories under `root`. Returns their paths by name. */
export async function writeRepository(root: string, models: Readonly<Record<string, ModelDirContents>>): Promise<Record<string, string>> {
  await mkdir(root, { recursive: true });
  const dirs: Record<string, string> = {};
  for (const [name, contents] of Object.entries(models)) dirs[name] = await writeModelDir(root, name, contents);
  return dirs;
}

export interface EnsembleOptions {
  /** Ensemble model name (directory and config name); default `pipeline`. */
  readonly name?: string;
  /** The preprocess step's factor; default 2. */
  readonly factor?: number;
  /** Features in, and classes out of, the classifier; default 4 → 3. */
  readonly features?: number;
  readonly classes?: number;
  readonly seed?: number;
}

/** The ensemble repository's models plus what a test needs to check its maths. */
export interface EnsembleRepository {
  readonly name: string;
  readonly factor: number;
  readonly classifier: DenseModel;
  /** `preprocess`, `classifier` and the ensemble, ready for writeRepository. */
  readonly models: Readonly<Record<string, ModelDirContents>>;
}

/**
 * A two-step ensemble: `preprocess` (scale × factor) → `classifier` (tiny).
 * Ensemble tensors: `INPUT` → `scaled` → `OUTPUT`; shapes `[-1, features]` →
 * `[-1, classes]`, max_batch_size 8 on every model (the ensemble's must not
 * exceed its steps').
 */
export function ensembleRepository(options: EnsembleOptions = {}): EnsembleRepository {
  const name = options.name ?? 'pipeline';
  const factor = options.factor ?? 2;
  const features = options.features ?? 4;
  const classes = options.classes ?? 3;
  const preprocess = scale(factor, features);
  const classifier = tiny({ in: features, out: classes, seed: options.seed ?? 11 });
  const ensembleConfig = configText({
    name,
    platform: 'ensemble',
    maxBatchSize: ZOO_MAX_BATCH_SIZE,
    inputs: [{ name: 'INPUT', dataType: 'FP32', dims: [features] }],
    outputs: [{ name: 'OUTPUT', dataType: 'FP32', dims: [classes] }],
    extra: [
      'ensemble_scheduling {',
      '  step [',
      '    {',
      '      model_name: "preprocess"',
      '      model_version: -1',
      '      input_map { key: "INPUT0" value: "INPUT" }',
      '      output_map { key: "OUTPUT0" value: "scaled" }',
      '    },',
      '    {',
      '      model_name: "classifier"',
      '      model_version: -1',
      '      input_map { key: "INPUT0" value: "scaled" }',
      '      output_map { key: "OUTPUT0" value: "OUTPUT" }',
      '    }',
      '  ]',
      '}',
    ].join('\n'),
  });
  const named = (model: ZooModel, modelName: string): ModelDirContents => ({
    onnx: model.onnx,
    config: `name: ${quote(modelName)}\n${model.config ?? ''}`,
  });
  return {
    name,
    factor,
    classifier,
    models: {
      preprocess: named(preprocess, 'preprocess'),
      classifier: named(classifier, 'classifier'),
      // No model file, but Triton still requires a version directory.
      [name]: { config: ensembleConfig, versions: [1] },
    },
  };
}

/** Write the two-step ensemble repository under `root`. */
export async function writeEnsembleRepository(root: string, options: EnsembleOptions = {}): Promise<EnsembleRepository> {
  const repo = ensembleRepository(options);
  await writeRepository(root, repo.models);
  return repo;
}

// ---------------------------------------------------------------------------
// Packaging

/** Fixed entry mtime so archives of the same tree are byte-identical. */
const PACK_MTIME = new Date('2024-01-01T00:00:00Z');

export interface PackOptions {
  /** Put entries under this directory in the archive (e.g. the model name). */
  readonly prefix?: string;
}

/** Every path under `dir` (directories before their contents), sorted, relative, POSIX. */
async function listTree(dir: string, rel = ''): Promise<string[]> {
  const entries = await readdir(path.join(dir, rel), { withFileTypes: true });
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const out: string[] = [];
  for (const entry of entries) {
    const child = rel === '' ? entry.name : `${rel}/${entry.name}`;
    if (entry.isDirectory()) out.push(`${child}/`, ...(await listTree(dir, child)));
    else if (entry.isFile()) out.push(child);
  }
  return out;
}

/**
 * Pack the contents of `dir` into a gzip tarball, SageMaker style: the archive
 * root holds what `dir` holds (model directories for a repository, or
 * `config.pbtxt` + version dirs for a single model), or sits under `prefix/`.
 * Entries are sorted, with fixed mtimes and no owner data, so the same tree
 * always gives the same bytes.
 */
export async function packTarGz(dir: string, outFile: string, options: PackOptions = {}): Promise<void> {
  const prefix = options.prefix?.replace(/^\/+|\/+$/g, '') ?? '';
  const entries = await listTree(dir);
  await mkdir(path.dirname(outFile), { recursive: true });
  await tar.create(
    {
      gzip: true,
      file: outFile,
      cwd: dir,
      // With a prefix, './' becomes the `prefix/` directory entry that
      // `tar czf x.tar.gz model/` would write; without one it is not needed.
      ...(prefix === '' ? {} : { prefix }),
      portable: true,
      noDirRecurse: true,
      mtime: PACK_MTIME,
    },
    prefix === '' ? entries : ['./', ...entries],
  );
}
