/**
 * @module backends/tensor-steps
 * The built-in tensor post-processing steps, each a small loop over typed
 * arrays on the main thread (they touch each element once or twice, which
 * costs less than a hop to a worker would):
 *
 * - `mean_pooling`: token embeddings `[..., L, H]` and an optional attention
 *   mask `[..., L]` → `[..., H]`, the mean of the embeddings whose mask is
 *   non-zero (sentence-transformers' pooling: sum(mask·x) / max(sum(mask), 1e-9)).
 * - `l2_normalize`: x / max(‖x‖₂, epsilon) along the last axis (torch's F.normalize).
 * - `softmax`: along the last axis, max-subtracted for stability.
 * - `topk` / `argmax`: the k largest values along the last axis (ties: lower
 *   index first; NaN ranks last), optionally after a softmax; outputs chosen
 *   by datatype: a float output gets the scores, an INT64/INT32 output the
 *   indices, a BYTES output the labels from the output's `label_filename`
 *   (one label per line, line i = class i; an index without a line is written
 *   as its number).
 *
 * Every step works on any leading (batch) dims and keeps them, so rows stay
 * rows and the batcher can split them back.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { TensorConfig } from '../config/model-config-types.js';
import { formatShape, type NumericArray, type Tensor } from '../protocol/tensor.js';
import type { LoadedStep, StepLoadContext } from './step-backend.js';
import {
  configShape,
  FLOAT_TYPES,
  INDEX_TYPES,
  invalidInput,
  MASK_TYPES,
  numberAt,
  requireInput,
  setNumber,
  StepParameters,
  throwIfProblems,
  typedArrayOf,
  wanted,
} from './step-support.js';

export const TENSOR_STEP_BACKENDS: readonly string[] = Object.freeze(['mean_pooling', 'l2_normalize', 'softmax', 'topk', 'argmax']);

function dimsCompatible(a: number | undefined, b: number | undefined): boolean {
  return a === -1 || b === -1 || a === b;
}

function checkFloat(t: TensorConfig, role: string, problems: string[]): void {
  if (!FLOAT_TYPES.includes(t.dataType)) problems.push(`${role} '${t.name}' must be FP32 or FP64, got ${t.dataType}`);
}

function product(dims: readonly number[]): number {
  return dims.reduce((a, b) => a * b, 1);
}

/** Checks the run-time tensor: numeric, rank, and that its fixed config dims hold. */
function checkRuntime(t: Tensor, want: readonly number[], name: string): NumericArray {
  if (t.datatype === 'BYTES' || !(t.data instanceof Object) || Array.isArray(t.data)) throw invalidInput(`input '${name}' must be numeric, got ${t.datatype}`);
  if (t.shape.length !== want.length || t.shape.some((d, i) => want[i] !== -1 && want[i] !== d)) {
    throw invalidInput(`input '${name}' has shape ${formatShape(t.shape)}, expected ${formatShape(want)}`);
  }
  return t.data;
}

// ---------------------------------------------------------------------------- mean_pooling

function meanPooling(ctx: StepLoadContext): LoadedStep {
  const { config } = ctx;
  const params = new StepParameters(config.parameters, 'mean_pooling');
  const problems = params.problems;
  const embName = params.string('embeddings_input');
  const maskName = params.string('mask_input');
  params.checkUnknown();
  const { emb, mask } = poolingInputs(config, embName, maskName, problems);
  if (config.output.length !== 1) problems.push(`needs exactly 1 output (the pooled embedding), got ${config.output.length}`);
  const out = config.output[0];
  if (emb) checkPoolingShapes(config, emb, mask, out, problems);
  throwIfProblems('mean_pooling', problems);
  const embCfg = emb!;
  const outCfg = out!;
  const embShape = configShape(embCfg, config);
  const maskShape = mask ? configShape(mask, config) : undefined;
  return stateless(async (inputs, outputNames) => {
    const result = new Map<string, Tensor>();
    if (!wanted(outputNames, outCfg.name)) return result;
    const e = requireInput(inputs, embCfg.name);
    const x = checkRuntime(e, embShape, embCfg.name);
    let m: NumericArray | undefined;
    if (mask && maskShape) {
      const mt = requireInput(inputs, mask.name);
      m = checkRuntime(mt, maskShape, mask.name);
      if (mt.shape.length !== e.shape.length - 1 || mt.shape.some((d, i) => d !== e.shape[i])) {
        throw invalidInput(`mask '${mask.name}' has shape ${formatShape(mt.shape)} but the embeddings '${embCfg.name}' have ${formatShape(e.shape)}`);
      }
    }
    result.set(outCfg.name, meanPool(e.shape, x, m, outCfg));
    return result;
  });
}

/** Which input holds the embeddings and which the mask: as the parameters name them, else the one with a dim more is the embeddings. */
function poolingInputs(
  config: StepLoadContext['config'],
  embName: string | undefined,
  maskName: string | undefined,
  problems: string[],
): { emb: TensorConfig | undefined; mask: TensorConfig | undefined } {
  let emb: TensorConfig | undefined;
  let mask: TensorConfig | undefined;
  const byName = (n: string | undefined): TensorConfig | undefined => config.input.find((t) => t.name === n);
  if (config.input.length < 1 || config.input.length > 2) {
    problems.push(`needs 1 input (embeddings) or 2 (embeddings and attention mask), got ${config.input.length}`);
  } else if (embName !== undefined || maskName !== undefined) {
    emb = byName(embName);
    if (!emb) problems.push(`parameter embeddings_input names '${embName ?? ''}', which is not an input`);
    if (maskName !== undefined) {
      mask = byName(maskName);
      if (!mask) problems.push(`parameter mask_input names '${maskName}', which is not an input`);
    } else if (emb) {
      mask = config.input.find((t) => t !== emb);
    }
  } else if (config.input.length === 1) {
    emb = config.input[0];
  } else {
    const [a, b] = [config.input[0]!, config.input[1]!];
    if (a.dims.length === b.dims.length + 1) [emb, mask] = [a, b];
    else if (b.dims.length === a.dims.length + 1) [emb, mask] = [b, a];
    else
      problems.push(
        `cannot tell the embeddings from the mask (the embeddings have one more dim than the mask); name them with parameters embeddings_input and mask_input`,
      );
  }
  return { emb, mask };
}

/** Embeddings `[..., L, H]`, a mask `[..., L]`, an output `[..., H]`. */
function checkPoolingShapes(
  config: StepLoadContext['config'],
  emb: TensorConfig,
  mask: TensorConfig | undefined,
  out: TensorConfig | undefined,
  problems: string[],
): void {
  checkFloat(emb, 'embeddings input', problems);
  const e = configShape(emb, config);
  if (e.length < 2) problems.push(`embeddings input '${emb.name}' must have a token and a hidden dim ([..., tokens, hidden]), got ${formatShape(e)}`);
  if (mask) {
    if (!MASK_TYPES.includes(mask.dataType)) problems.push(`mask input '${mask.name}' must be one of ${MASK_TYPES.join(', ')}, got ${mask.dataType}`);
    const m = configShape(mask, config);
    if (m.length !== e.length - 1 || m.some((d, i) => !dimsCompatible(d, e[i]))) {
      problems.push(`mask input '${mask.name}' ${formatShape(m)} must be the embeddings' shape ${formatShape(e)} without the hidden dim`);
    }
  }
  if (out) {
    checkFloat(out, 'output', problems);
    const o = configShape(out, config);
    const expected = [...e.slice(0, -2), e.at(-1)!];
    if (o.length !== expected.length || o.some((d, i) => !dimsCompatible(d, expected[i]))) {
      problems.push(`output '${out.name}' ${formatShape(o)} must be the embeddings' shape ${formatShape(e)} without the token dim, ${formatShape(expected)}`);
    }
  }
}

/** sum(mask·x) / max(sum(mask), 1e-9) over the token dim of each row (every token counts 1 without a mask). */
function meanPool(shape: readonly number[], x: NumericArray, m: NumericArray | undefined, outCfg: TensorConfig): Tensor {
  const hidden = shape.at(-1)!;
  const tokens = shape.at(-2)!;
  const lead = shape.slice(0, -2);
  const rows = product(lead);
  const y = typedArrayOf(outCfg.dataType, rows * hidden) as Float32Array | Float64Array;
  const acc = new Float64Array(hidden);
  for (let r = 0; r < rows; r++) {
    acc.fill(0);
    let weight = 0;
    for (let t = 0; t < tokens; t++) {
      const w = m ? numberAt(m, r * tokens + t) : 1;
      if (w === 0) continue;
      weight += w;
      const base = (r * tokens + t) * hidden;
      for (let h = 0; h < hidden; h++) acc[h]! += w * (x[base + h] as number);
    }
    const denom = Math.max(weight, 1e-9);
    for (let h = 0; h < hidden; h++) y[r * hidden + h] = acc[h]! / denom;
  }
  return { datatype: outCfg.dataType, shape: [...lead, hidden], data: y };
}

// ---------------------------------------------------------------------------- l2_normalize, softmax

function lastAxisMap(ctx: StepLoadContext, backend: 'l2_normalize' | 'softmax'): LoadedStep {
  const { config } = ctx;
  const params = new StepParameters(config.parameters, backend);
  const problems = params.problems;
  const epsilon = backend === 'l2_normalize' ? params.number('epsilon', 1e-12, (n) => n >= 0, 'a number >= 0') : 0;
  params.checkUnknown();
  if (config.input.length !== 1) problems.push(`needs exactly 1 input, got ${config.input.length}`);
  if (config.output.length !== 1) problems.push(`needs exactly 1 output, got ${config.output.length}`);
  const inp = config.input[0];
  const out = config.output[0];
  if (inp && out) {
    checkFloat(inp, 'input', problems);
    checkFloat(out, 'output', problems);
    const i = configShape(inp, config);
    const o = configShape(out, config);
    if (o.length !== i.length || o.some((d, k) => !dimsCompatible(d, i[k])))
      problems.push(`output '${out.name}' ${formatShape(o)} must have the input's shape ${formatShape(i)}`);
  }
  throwIfProblems(backend, problems);
  const inCfg = inp!;
  const outCfg = out!;
  const inShape = configShape(inCfg, config);
  return stateless(async (inputs, outputNames) => {
    const result = new Map<string, Tensor>();
    if (!wanted(outputNames, outCfg.name)) return result;
    const t = requireInput(inputs, inCfg.name);
    const x = checkRuntime(t, inShape, inCfg.name);
    const n = t.shape.at(-1) ?? 1;
    const rows = n === 0 ? 0 : x.length / n;
    const y = typedArrayOf(outCfg.dataType, x.length) as Float32Array | Float64Array;
    for (let r = 0; r < rows; r++) {
      const base = r * n;
      if (backend === 'l2_normalize') {
        let sum = 0;
        for (let k = 0; k < n; k++) sum += (x[base + k] as number) ** 2;
        const norm = Math.max(Math.sqrt(sum), epsilon);
        for (let k = 0; k < n; k++) y[base + k] = (x[base + k] as number) / norm;
      } else {
        softmaxRow(x, base, n, y);
      }
    }
    result.set(outCfg.name, { datatype: outCfg.dataType, shape: [...t.shape], data: y });
    return result;
  });
}

function softmaxRow(x: ArrayLike<number | bigint>, base: number, n: number, y: Float32Array | Float64Array): void {
  let max = Number.NEGATIVE_INFINITY;
  for (let k = 0; k < n; k++) max = Math.max(max, x[base + k] as number);
  let sum = 0;
  for (let k = 0; k < n; k++) sum += Math.exp((x[base + k] as number) - max);
  for (let k = 0; k < n; k++) y[base + k] = Math.exp((x[base + k] as number) - max) / sum;
}

// ---------------------------------------------------------------------------- topk, argmax

async function readLabels(file: string): Promise<string[] | undefined> {
  try {
    const text = await readFile(file, 'utf8');
    const lines = text.split('\n').map((l) => l.replace(/\r$/, ''));
    if (lines.at(-1) === '') lines.pop();
    return lines;
  } catch {
    return undefined;
  }
}

/** The outputs of topk/argmax, by datatype: a float output gets the scores, an index output the indices, a BYTES output the labels. */
interface TopkOutputs {
  readonly scores: TensorConfig | undefined;
  readonly indices: TensorConfig | undefined;
  readonly labelsOut: TensorConfig | undefined;
}

async function topk(ctx: StepLoadContext, backend: 'topk' | 'argmax'): Promise<LoadedStep> {
  const { config } = ctx;
  const params = new StepParameters(config.parameters, backend);
  const problems = params.problems;
  const k = backend === 'topk' ? params.int('k', 1, 1, 1_000_000) : 1;
  const withSoftmax = params.bool('softmax', false);
  const labelsParam = params.string('labels');
  params.checkUnknown();
  if (config.input.length !== 1) problems.push(`needs exactly 1 input (the scores or logits), got ${config.input.length}`);
  const inp = config.input[0];
  if (inp) checkFloat(inp, 'input', problems);
  const inShape = inp ? configShape(inp, config) : [];
  const classes = inShape.at(-1);
  if (inp && inShape.length < 1) problems.push(`input '${inp.name}' needs a class dim`);
  if (classes !== undefined && classes !== -1 && k > classes) problems.push(`k ${k} is larger than the ${classes} classes of input '${inp!.name}'`);
  const outputs = topkOutputs(config, inp, inShape, k, problems);
  const labels = await topkLabels(ctx, outputs.labelsOut, labelsParam, problems);
  throwIfProblems(backend, problems);
  const inCfg = inp!;
  const { scores, indices, labelsOut } = outputs;
  return stateless(async (inputs, outputNames) => {
    const t = requireInput(inputs, inCfg.name);
    const x = checkRuntime(t, inShape, inCfg.name);
    const n = t.shape.at(-1) ?? 0;
    if (n < k) throw invalidInput(`input '${inCfg.name}' has ${n} classes, fewer than k=${k}`);
    const rows = n === 0 ? 0 : x.length / n;
    const lead = t.shape.slice(0, -1);
    const probs = withSoftmax ? new Float64Array(x.length) : undefined;
    if (probs) for (let r = 0; r < rows; r++) softmaxRow(x, r * n, n, probs);
    const sinks: TopkSinks = {
      scores: scores && wanted(outputNames, scores.name) ? (typedArrayOf(scores.dataType, rows * k) as Float32Array | Float64Array) : undefined,
      indices: indices && wanted(outputNames, indices.name) ? typedArrayOf(indices.dataType, rows * k) : undefined,
      labels: labelsOut && wanted(outputNames, labelsOut.name) ? new Array<string>(rows * k) : undefined,
    };
    selectTopk(probs ?? x, rows, n, k, labels, sinks);
    const result = new Map<string, Tensor>();
    const shape = [...lead, k];
    if (sinks.scores && scores) result.set(scores.name, { datatype: scores.dataType, shape, data: sinks.scores });
    if (sinks.indices && indices) result.set(indices.name, { datatype: indices.dataType, shape, data: sinks.indices });
    if (sinks.labels && labelsOut) result.set(labelsOut.name, { datatype: 'BYTES', shape, data: sinks.labels });
    return result;
  });
}

/** Each output's role by its datatype (one output per role), shaped as the input with k in the last dim. */
function topkOutputs(config: StepLoadContext['config'], inp: TensorConfig | undefined, inShape: readonly number[], k: number, problems: string[]): TopkOutputs {
  let scores: TensorConfig | undefined;
  let indices: TensorConfig | undefined;
  let labelsOut: TensorConfig | undefined;
  for (const o of config.output) {
    const role = FLOAT_TYPES.includes(o.dataType) ? 'scores' : INDEX_TYPES.includes(o.dataType) ? 'indices' : o.dataType === 'BYTES' ? 'labels' : undefined;
    if (!role) {
      problems.push(`output '${o.name}' is ${o.dataType}; outputs are FP32/FP64 (scores), INT64/INT32 (indices) or BYTES (labels)`);
      continue;
    }
    const taken = role === 'scores' ? scores : role === 'indices' ? indices : labelsOut;
    if (taken) problems.push(`outputs '${taken.name}' and '${o.name}' are both ${role}`);
    else if (role === 'scores') scores = o;
    else if (role === 'indices') indices = o;
    else labelsOut = o;
    const os = configShape(o, config);
    const expected = [...inShape.slice(0, -1), k];
    if (inp && (os.length !== expected.length || os.some((d, i) => !dimsCompatible(d, expected[i])))) {
      problems.push(`output '${o.name}' ${formatShape(os)} must be the input's shape with k=${k} in the last dim, ${formatShape(expected)}`);
    }
  }
  if (config.output.length === 0) problems.push('needs at least one output (scores, indices or labels)');
  return { scores, indices, labelsOut };
}

/** The labels file for a BYTES output: the output's label_filename or parameter labels, inside the model directory. */
async function topkLabels(
  ctx: StepLoadContext,
  labelsOut: TensorConfig | undefined,
  labelsParam: string | undefined,
  problems: string[],
): Promise<string[] | undefined> {
  let labels: string[] | undefined;
  if (labelsOut) {
    const file = labelsParam ?? labelsOut.labelFilename;
    if (file === undefined) {
      problems.push(`output '${labelsOut.name}' (labels) needs label_filename on the output, or parameter labels, naming a file in the model directory`);
    } else if (path.isAbsolute(file) || file.split(/[\\/]/).includes('..')) {
      problems.push(`label file '${file}' must be a relative path inside the model directory`);
    } else {
      labels = await readLabels(path.join(ctx.modelDir, file));
      if (!labels) problems.push(`label file '${file}' cannot be read in the model directory`);
    }
  } else if (labelsParam !== undefined) {
    problems.push('parameter labels is set but no output is BYTES (labels)');
  }
  return labels;
}

/** Where the k best of each row go; an output not wanted has none. */
interface TopkSinks {
  readonly scores: Float32Array | Float64Array | undefined;
  readonly indices: NumericArray | undefined;
  readonly labels: string[] | undefined;
}

/** The k largest of each row of `src` (ties: lower index first; NaN ranks last), written to the sinks. */
function selectTopk(src: ArrayLike<number | bigint>, rows: number, n: number, k: number, labels: readonly string[] | undefined, sinks: TopkSinks): void {
  const best = new Int32Array(k);
  const bestVal = new Float64Array(k);
  for (let r = 0; r < rows; r++) {
    const base = r * n;
    let filled = 0;
    for (let c = 0; c < n; c++) {
      let v = src[base + c] as number;
      if (Number.isNaN(v)) v = Number.NEGATIVE_INFINITY;
      if (filled === k && !(v > bestVal[k - 1]!)) continue;
      // Insert after every value >= v: equal values keep the lower index first.
      let pos = filled < k ? filled : k - 1;
      while (pos > 0 && v > bestVal[pos - 1]!) {
        bestVal[pos] = bestVal[pos - 1]!;
        best[pos] = best[pos - 1]!;
        pos--;
      }
      bestVal[pos] = v;
      best[pos] = c;
      if (filled < k) filled++;
    }
    for (let j = 0; j < k; j++) {
      const c = best[j]!;
      if (sinks.scores) sinks.scores[r * k + j] = src[base + c] as number;
      if (sinks.indices) setNumber(sinks.indices, r * k + j, c);
      if (sinks.labels) sinks.labels[r * k + j] = labels?.[c] ?? String(c);
    }
  }
}

// ----------------------------------------------------------------------------

function stateless(execute: LoadedStep['execute']): LoadedStep {
  return { execute, release: async () => {} };
}

export async function loadTensorStep(ctx: StepLoadContext): Promise<LoadedStep> {
  switch (ctx.config.backend) {
    case 'mean_pooling':
      return meanPooling(ctx);
    case 'l2_normalize':
    case 'softmax':
      return lastAxisMap(ctx, ctx.config.backend);
    case 'topk':
    case 'argmax':
      return topk(ctx, ctx.config.backend);
    default:
      throw new Error(`not a tensor step: ${ctx.config.backend}`);
  }
}
