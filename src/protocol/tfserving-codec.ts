/**
 * @module protocol/tfserving-codec
 * TensorFlow Serving's REST "predict" JSON, which many SageMaker clients send:
 *  - row format `{"instances": [item, item, ...]}` → the batch is the list;
 *    an item is the value of the single input, or an object naming inputs;
 *  - columnar format `{"inputs": value}` or `{"inputs": {"name": value}}`.
 * Shapes come from the nesting (ragged lists are a 400), datatypes from the
 * model's config, so the request is bound to the model once it is known.
 * Answers mirror the request: `{"predictions": [...]}` per item for the row
 * format, `{"outputs": ...}` for the columnar one. BYTES values may be sent
 * as `{"b64": "..."}`.
 */
import { ServingError } from '../errors.js';
import { type DataType, type Tensor } from './tensor.js';
import { JSON_NON_FINITE, numericElementTexts } from './tensor-text.js';
import { decodeTensorData } from './v2-json-codec.js';

export type TfStyle = 'row' | 'columnar';

/** What the codec needs to know about a model input (config.pbtxt's TensorConfig fits). */
export interface TfInputSpec {
  readonly name: string;
  readonly dataType: DataType;
}

/** Triton's HTTP_MAX_JSON_NESTING_DEPTH. */
const MAX_NESTING = 100;

const utf8 = new TextDecoder('utf-8', { fatal: true });

function bad(model: string, message: string): ServingError {
  return new ServingError('INVALID_INPUT', `model '${model}': ${message}`, { model });
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isB64(v: unknown): v is { b64: string } {
  return isRecord(v) && typeof v['b64'] === 'string' && Object.keys(v).length === 1;
}

/**
 * The TF Serving style of a parsed JSON body, or undefined when it is a
 * KServe v2 request (`"inputs"` is a list of tensor objects).
 */
export function detectTfServing(body: unknown): TfStyle | undefined {
  if (!isRecord(body)) return undefined;
  if ('instances' in body) return 'row';
  if (!('inputs' in body)) return undefined;
  const inputs = body['inputs'];
  if (Array.isArray(inputs) && (inputs.length === 0 || isRecord(inputs[0]))) return undefined;
  return 'columnar';
}

function leaf(model: string, input: string, v: unknown, dt: DataType): unknown {
  if (!isB64(v)) return v;
  if (dt !== 'BYTES') throw bad(model, `input '${input}': {"b64": ...} values need a BYTES input, the model expects ${dt}`);
  try {
    return utf8.decode(Buffer.from(v.b64, 'base64'));
  } catch {
    throw bad(model, `input '${input}': a b64 value is not valid UTF-8 (onnxruntime-node string tensors hold text)`);
  }
}

/** A nested list as a tensor of `dt`: shape from the nesting, every level rectangular. */
export function nestedToTensor(model: string, input: string, dt: DataType, value: unknown): Tensor {
  const shape: number[] = [];
  for (let cur: unknown = value; Array.isArray(cur); cur = cur[0]) {
    if (shape.length >= MAX_NESTING) throw bad(model, `input '${input}': values are nested deeper than ${MAX_NESTING} levels`);
    shape.push(cur.length);
    if (cur.length === 0) break;
  }
  const leaves: unknown[] = [];
  const walk = (v: unknown, depth: number, path: string): void => {
    if (depth === shape.length) {
      if (Array.isArray(v))
        throw bad(
          model,
          `input '${input}': ragged values: ${path} is a list where the other entries are ${shape.length === 0 ? 'single values' : 'not lists'}`,
        );
      leaves.push(leaf(model, input, v, dt));
      return;
    }
    if (!Array.isArray(v) || v.length !== shape[depth]) {
      throw bad(
        model,
        `input '${input}': ragged values: ${path} has ${Array.isArray(v) ? `${v.length} entries` : 'a single value'} where ${shape[depth]} entries are expected (shape ${JSON.stringify(shape)})`,
      );
    }
    for (let i = 0; i < v.length; i++) walk(v[i], depth + 1, `${path}[${i}]`);
  };
  walk(value, 0, 'value');
  return Object.freeze({ datatype: dt, shape: Object.freeze(shape), data: decodeTensorData(model, input, dt, leaves) });
}

function inputNamed(model: string, inputs: readonly TfInputSpec[], name: string): TfInputSpec {
  const spec = inputs.find((i) => i.name === name);
  if (!spec) throw bad(model, `unexpected input '${name}'; the model's inputs are ${inputs.map((i) => `'${i.name}'`).join(', ')}`);
  return spec;
}

function single(model: string, inputs: readonly TfInputSpec[], what: string): TfInputSpec {
  if (inputs.length !== 1) {
    throw bad(
      model,
      `${what} without input names needs a model with exactly one input; this one has ${inputs.map((i) => `'${i.name}'`).join(', ')}: name them (an object per instance, or "inputs": {"name": ...})`,
    );
  }
  return inputs[0]!;
}

/** Bind a TF Serving body to the model's inputs. */
export function tfServingInputs(model: string, style: TfStyle, body: Record<string, unknown>, inputs: readonly TfInputSpec[]): Map<string, Tensor> {
  const out = new Map<string, Tensor>();
  if ('instances' in body && 'inputs' in body) throw bad(model, 'send either "instances" (row format) or "inputs" (columnar format), not both');
  if (style === 'columnar') {
    const v = body['inputs'];
    if (isRecord(v) && !isB64(v)) {
      for (const [name, value] of Object.entries(v)) {
        const spec = inputNamed(model, inputs, name);
        out.set(name, nestedToTensor(model, name, spec.dataType, value));
      }
      return out;
    }
    const spec = single(model, inputs, '"inputs"');
    out.set(spec.name, nestedToTensor(model, spec.name, spec.dataType, v));
    return out;
  }
  const instances = body['instances'];
  if (!Array.isArray(instances) || instances.length === 0) throw bad(model, '"instances" must be a non-empty list (one entry per batch item)');
  const named = isRecord(instances[0]) && !isB64(instances[0]);
  if (!named) {
    const spec = single(model, inputs, '"instances"');
    out.set(spec.name, nestedToTensor(model, spec.name, spec.dataType, instances));
    return out;
  }
  const names = new Set<string>();
  instances.forEach((inst, i) => {
    if (!isRecord(inst) || isB64(inst)) throw bad(model, `instances[${i}] must be an object naming the inputs, like instances[0]`);
    for (const k of Object.keys(inst)) names.add(k);
  });
  for (const name of names) {
    const spec = inputNamed(model, inputs, name);
    const column = instances.map((inst: Record<string, unknown>, i) => {
      if (!(name in inst)) throw bad(model, `instances[${i}] has no '${name}' (instances[0] names it)`);
      return inst[name];
    });
    out.set(name, nestedToTensor(model, name, spec.dataType, column));
  }
  return out;
}

// ---------------------------------------------------------------- encoding

function elementTexts(t: Tensor): string[] {
  return Array.isArray(t.data) ? t.data.map((s) => JSON.stringify(s)) : numericElementTexts(t, JSON_NON_FINITE);
}

/** JSON text of texts[from ...] nested as `shape`. */
function nested(texts: readonly string[], shape: readonly number[], dim: number, from: number): string {
  if (dim === shape.length) return texts[from] ?? 'null';
  const n = shape[dim]!;
  const stride = shape.slice(dim + 1).reduce((a, b) => a * b, 1);
  if (dim === shape.length - 1) return `[${texts.slice(from, from + n).join(',')}]`;
  const parts = new Array<string>(n);
  for (let i = 0; i < n; i++) parts[i] = nested(texts, shape, dim + 1, from + i * stride);
  return `[${parts.join(',')}]`;
}

/** Items along the first dimension, each as nested JSON text. */
function items(t: Tensor): string[] {
  const texts = elementTexts(t);
  if (t.shape.length === 0) return [texts[0] ?? 'null'];
  const n = t.shape[0]!;
  const inner = t.shape.slice(1);
  const stride = inner.reduce((a, b) => a * b, 1);
  const out = new Array<string>(n);
  for (let i = 0; i < n; i++) out[i] = nested(texts, inner, 0, i * stride);
  return out;
}

/** The TF Serving answer for the outputs, in the style of the request. */
export function encodeTfServingResponse(model: string, style: TfStyle, outputs: ReadonlyMap<string, Tensor>): string {
  const entries = [...outputs];
  if (style === 'columnar') {
    if (entries.length === 1) {
      const t = entries[0]![1];
      return `{"outputs":${nested(elementTexts(t), t.shape, 0, 0)}}`;
    }
    return `{"outputs":{${entries.map(([name, t]) => `${JSON.stringify(name)}:${nested(elementTexts(t), t.shape, 0, 0)}`).join(',')}}}`;
  }
  if (entries.length === 1) return `{"predictions":[${items(entries[0]![1]).join(',')}]}`;
  const perOutput = entries.map(([name, t]) => [JSON.stringify(name), items(t)] as const);
  const n = perOutput[0]?.[1].length ?? 0;
  if (perOutput.some(([, v]) => v.length !== n)) {
    throw new ServingError(
      'INVALID_REQUEST',
      `model '${model}': the outputs have different first dimensions, so they cannot be listed per instance; use the columnar format ("inputs")`,
      { model },
    );
  }
  const rows = new Array<string>(n);
  for (let i = 0; i < n; i++) rows[i] = `{${perOutput.map(([name, v]) => `${name}:${v[i]}`).join(',')}}`;
  return `{"predictions":[${rows.join(',')}]}`;
}
