/**
 * @module scheduler/batch-merge
 * Merging requests into one batch along the first (batch) dimension and
 * splitting the results back, row-exactly. Works for every datatype: typed
 * arrays are copied into one array of the same type, BYTES (string arrays)
 * are concatenated. Results are split as views (subarray), not copies.
 *
 * Two requests may share a batch only when they carry the same inputs with
 * the same datatypes and the same non-batch dims (Triton's equal-shape rule;
 * `allow_ragged_batch` inputs are held to it too, since the ragged
 * `batch_input` tensors they need are not supported).
 */
import { ServingError } from '../errors.js';
import { DATA_TYPE_INFO, formatShape, type NumericArray, type Tensor, type TensorData } from '../protocol/tensor.js';

/** The non-batch dims as text, `3,4` for [n,3,4]. */
function innerDims(shape: readonly number[]): string {
  let out = '';
  for (let i = 1; i < shape.length; i++) out += i === 1 ? String(shape[i]) : `,${shape[i]}`;
  return out;
}

/** Equal signatures ⇔ the requests can be concatenated along dim 0. */
export function batchSignature(inputs: ReadonlyMap<string, Tensor>): string {
  if (inputs.size === 1) {
    // The common one-input request (computed per request): the same string, without the array and the sort.
    for (const [name, t] of inputs) return `${name}\u0000${t.datatype}\u0000${innerDims(t.shape)}`;
  }
  const parts: string[] = [];
  for (const [name, t] of inputs) parts.push(`${name}\u0000${t.datatype}\u0000${innerDims(t.shape)}`);
  // Sorted: the same inputs in another order (JSON order is the client's) still match.
  return parts.sort().join('\u0001');
}

/**
 * Rows (first dim) of a request to a batching model. Throws INVALID_INPUT when
 * the inputs disagree, or the count is outside [1, maxBatchSize].
 */
export function requestRows(inputs: ReadonlyMap<string, Tensor>, maxBatchSize: number, model: string): number {
  let rows: number | undefined;
  let from = '';
  for (const [name, t] of inputs) {
    const r = t.shape[0];
    if (r === undefined) {
      throw new ServingError('INVALID_INPUT', `model '${model}': input '${name}' has shape [] but the model batches, so its first dim is the batch size`, {
        model,
      });
    }
    if (rows === undefined) {
      rows = r;
      from = name;
    } else if (r !== rows) {
      throw new ServingError('INVALID_INPUT', `model '${model}': input '${name}' batch size ${r} does not match input '${from}' batch size ${rows}`, { model });
    }
  }
  const n = rows ?? 1;
  if (n < 1 || n > maxBatchSize) {
    throw new ServingError('INVALID_INPUT', `model '${model}': inference request batch-size must be between 1 and ${maxBatchSize} (max_batch_size), got ${n}`, {
      model,
    });
  }
  return n;
}

function concatData(parts: readonly TensorData[], total: number, datatype: Tensor['datatype']): TensorData {
  const Ctor = DATA_TYPE_INFO[datatype].arrayType;
  if (!Ctor) {
    const out: string[] = [];
    for (const p of parts) for (const s of p as string[]) out.push(s);
    return out;
  }
  const out = new Ctor(total);
  let offset = 0;
  for (const p of parts) {
    // Same datatype ⇒ same typed-array class (the signature guarantees it).
    (out as unknown as { set(a: ArrayLike<unknown>, o: number): void }).set(p as NumericArray, offset);
    offset += p.length;
  }
  return out;
}

/** One input map for the whole batch: each input concatenated along dim 0, in request order. */
export function concatInputs(requests: readonly ReadonlyMap<string, Tensor>[]): Map<string, Tensor> {
  const first = requests[0];
  if (!first) return new Map();
  if (requests.length === 1) return new Map(first);
  const merged = new Map<string, Tensor>();
  for (const [name, t] of first) {
    const parts: TensorData[] = [];
    let rows = 0;
    let total = 0;
    for (const r of requests) {
      const part = r.get(name)!; // equal signatures: every request has every input
      parts.push(part.data);
      rows += part.shape[0] ?? 0;
      total += part.data.length;
    }
    merged.set(name, { datatype: t.datatype, shape: [rows, ...t.shape.slice(1)], data: concatData(parts, total, t.datatype) });
  }
  return merged;
}

function sliceRows(t: Tensor, start: number, rows: number, perRow: number): Tensor {
  const from = start * perRow;
  const to = from + rows * perRow;
  const data = Array.isArray(t.data) ? t.data.slice(from, to) : t.data.subarray(from, to);
  return { datatype: t.datatype, shape: [rows, ...t.shape.slice(1)], data };
}

/**
 * Split a batch's outputs back to its requests: request i gets rows
 * [sum(rows[0..i)), +rows[i]) of each output it asked for. Throws INTERNAL
 * when an output does not have one row per input row (a model whose outputs
 * are not per-row cannot be batched).
 */
export function splitOutputs(
  outputs: ReadonlyMap<string, Tensor>,
  rows: readonly number[],
  wanted: readonly (readonly string[])[],
  model: string,
): Map<string, Tensor>[] {
  const total = rows.reduce((a, b) => a + b, 0);
  const perRow = new Map<string, number>();
  for (const [name, t] of outputs) {
    if (t.shape[0] !== total) {
      throw new ServingError(
        'INTERNAL',
        `model '${model}': output '${name}' has shape ${formatShape(t.shape)} for a batch of ${total} rows; ` +
          `a batched model must return one row per input row (set max_batch_size: 0 if it cannot)`,
        { model },
      );
    }
    const inner = t.shape.slice(1).reduce((a, b) => a * b, 1);
    perRow.set(name, inner);
  }
  const result: Map<string, Tensor>[] = [];
  let start = 0;
  rows.forEach((n, i) => {
    const mine = new Map<string, Tensor>();
    for (const name of wanted[i] ?? []) {
      const t = outputs.get(name);
      if (t) mine.set(name, sliceRows(t, start, n, perRow.get(name)!));
    }
    result.push(mine);
    start += n;
  });
  return result;
}
