/**
 * @module protocol/classification
 * Triton's classification extension: an output requested with
 * `parameters.classification: k` comes back as BYTES strings
 * `"<value>:<index>[:<label>]"`, the k largest values in descending order,
 * per batch item (shape [batch, min(k, classes)]) or over the whole tensor
 * when the model does not batch (shape [min(k, classes)]). Values are written
 * as C++'s std::to_string writes them ("3.300000" for floats), as Triton does.
 */
import { ServingError } from '../errors.js';
import { fromFloat16Bits } from './float16.js';
import type { RequestedOutput } from './infer-types.js';
import type { DataType, Tensor } from './tensor.js';

/** Triton's limit on the elements a classification output may scan. */
export const MAX_CLASSIFICATION_ELEMENTS = 1_000_000;

const UNSUPPORTED: ReadonlySet<DataType> = new Set<DataType>(['BYTES', 'BOOL', 'BF16']);

/** The requested k for an output, or undefined when it asked for no classification. */
export function classificationOf(output: RequestedOutput | undefined): number | undefined {
  const k = output?.parameters['classification'];
  return typeof k === 'number' ? k : undefined;
}

/** Throws when a tensor of this datatype cannot be classified (checked before the model runs). */
export function checkClassifiable(model: string, output: string, dt: DataType): void {
  if (UNSUPPORTED.has(dt)) {
    throw new ServingError('INVALID_INPUT', `model '${model}': output '${output}' is ${dt}; classification needs a numeric output`, { model });
  }
}

/** C's "%f": six decimals; nan/inf spelled the C way. */
function formatFloat(v: number): string {
  if (Number.isNaN(v)) return v < 0 ? '-nan' : 'nan';
  if (v === Infinity) return 'inf';
  if (v === -Infinity) return '-inf';
  return v.toFixed(6);
}

function isFloat(dt: DataType): boolean {
  return dt === 'FP16' || dt === 'FP32' || dt === 'FP64';
}

/** Values as numbers or bigints, indexable; FP16 bits are widened. */
function readable(tensor: Tensor): ArrayLike<number | bigint> {
  const data = tensor.data as ArrayLike<number | bigint>;
  if (tensor.datatype !== 'FP16') return data;
  const bits = tensor.data as Uint16Array;
  const out = new Float64Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = fromFloat16Bits(bits[i]!);
  return out;
}

/** a before b when a is larger; NaN sorts last; ties keep the lower index first. */
function greater(values: ArrayLike<number | bigint>, a: number, b: number): boolean {
  const x = values[a]!;
  const y = values[b]!;
  if (x === y) return a < b;
  if (typeof x === 'number' && Number.isNaN(x)) return false;
  if (typeof y === 'number' && Number.isNaN(y)) return true;
  return x > y;
}

/** Indices of the k largest of values[from, from+n), best first. */
function topK(values: ArrayLike<number | bigint>, from: number, n: number, k: number): number[] {
  const best: number[] = [];
  for (let i = from; i < from + n; i++) {
    if (best.length === k && !greater(values, i, best[k - 1]!)) continue;
    // Insertion into a sorted list of at most k: cheap for the small k classification asks for.
    let j = best.length === k ? k - 1 : best.length;
    if (best.length < k) best.push(i);
    while (j > 0 && greater(values, i, best[j - 1]!)) {
      best[j] = best[j - 1]!;
      j--;
    }
    best[j] = i;
  }
  return best;
}

/**
 * Replace `tensor` by its top-k classification strings. `labels[i]` is the
 * label of class i (from the output's label_filename), when there is one.
 */
export function classify(model: string, output: string, tensor: Tensor, k: number, batching: boolean, labels: readonly string[] | undefined): Tensor {
  checkClassifiable(model, output, tensor.datatype);
  const values = readable(tensor);
  if (values.length > MAX_CLASSIFICATION_ELEMENTS) {
    throw new ServingError(
      'INVALID_INPUT',
      `model '${model}': output '${output}' has ${values.length} elements; classification handles at most ${MAX_CLASSIFICATION_ELEMENTS}`,
      { model },
    );
  }
  const batch = batching ? (tensor.shape[0] ?? 1) : 1;
  const classes = batch === 0 ? 0 : values.length / batch;
  const take = Math.min(k, classes);
  const float = isFloat(tensor.datatype);
  const out: string[] = [];
  for (let b = 0; b < batch; b++) {
    for (const i of topK(values, b * classes, classes, take)) {
      const v = values[i]!;
      const index = i - b * classes;
      const text = float ? formatFloat(Number(v)) : String(v);
      const label = labels?.[index];
      out.push(label === undefined ? `${text}:${index}` : `${text}:${index}:${label}`);
    }
  }
  return Object.freeze({ datatype: 'BYTES', shape: Object.freeze(batching ? [batch, take] : [take]), data: out });
}
