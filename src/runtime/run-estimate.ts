/**
 * @module runtime/run-estimate
 * How long one run of a model takes at a given batch, estimated from its
 * graph (runtime/onnx-graph.ts) and the per-row sizes of its inputs: the
 * figure session placement (runtime/session-placement.ts) sets against
 * MME_MAIN_THREAD_MAX_RUN_US and MME_MAIN_THREAD_ONLY_MAX_RUN_US. A timed
 * probe read a tiny model at 6-18 µs from one start to the next (the host's
 * noise, cold caches), right across the 15 µs main-thread-only limit, so the
 * same model landed on a different thread on each start; an estimate from
 * the file lands it the same way every time.
 *
 * The estimate is a call's fixed cost, a cost per node, and per row the
 * multiply-adds of MatMul and Gemm against constant weights plus the
 * elements every other node writes, at rates of one core of the 2-core bench
 * box (the calibration below); a convolution's multiply-adds follow from its
 * weights, the input's positions and its strides. It errs high: the main-thread limits bound how
 * long a run may hold the event loop. A graph whose cost does not follow
 * from its weights and input sizes (a product of two activations, a loop,
 * an operator outside the default set or this list)
 * has no estimate, and its model stays in its runtime worker.
 */
import type { GraphNode, GraphSummary } from './onnx-graph.js';

/**
 * The calibration, one core of the 2-core bench box (onnxruntime-node, one
 * intra-op thread, medians): a 16→4 model (two nodes, 68 weights) runs in
 * 5.5-8 µs at 1 to 64 rows, nearly all of it the call; the
 * 256→1024→1024→16 MLP (1.3 M weights) in 84 µs at 1 row, 250-295 µs at 8
 * and 2.0-2.7 ms at 64: about 42,000 multiply-adds a µs once a batch has a
 * few rows, 15,000 at one row. 20,000 a µs keeps the MLP's 8-row batch
 * (about 560 µs estimated) well inside the 1 ms copy limit and its 64-row
 * batch (about 4.3 ms) outside it.
 */
export const CALL_US = 5;
export const NODE_US = 1;
export const MACS_PER_US = 20_000;
/** Elements an elementwise or data-movement node writes per µs (about 1 ns each, a cache miss's worth: errs high). */
export const ELEMENTS_PER_US = 1_000;

/** A model's run cost: fixed per run, and per row of the batch. */
export interface RunCost {
  readonly nodes: number;
  /** Multiply-adds per row. */
  readonly macsPerRow: number;
  /** Elements written per row by nodes other than MatMul and Gemm. */
  readonly elementsPerRow: number;
}

/** µs of one run at `rows` rows. */
export function estimateRunUs(cost: RunCost, rows: number): number {
  return CALL_US + cost.nodes * NODE_US + rows * (cost.macsPerRow / MACS_PER_US + cost.elementsPerRow / ELEMENTS_PER_US);
}

/** Nodes whose output has the shape of their largest input (broadcasting): their cost is the elements they write. */
const ELEMENTWISE = new Set([
  'Abs', 'Add', 'And', 'BatchNormalization', 'Cast', 'Ceil', 'Clip', 'Div', 'Dropout', 'Elu', 'Equal', 'Erf', 'Exp', 'Floor',
  'Gelu', 'Greater', 'GreaterOrEqual', 'HardSigmoid', 'HardSwish', 'Identity', 'InstanceNormalization', 'IsNaN', 'LayerNormalization',
  'LeakyRelu', 'Less', 'LessOrEqual', 'Log', 'LogSoftmax', 'Max', 'Mean', 'Min', 'Mish', 'Mod', 'Mul', 'Neg', 'Not', 'Or', 'Pow',
  'PRelu', 'Reciprocal', 'Relu', 'Round', 'Selu', 'Sigmoid', 'Sign', 'Sin', 'Cos', 'Softmax', 'Softplus', 'Softsign', 'Sqrt', 'Sub',
  'Sum', 'Tanh', 'ThresholdedRelu', 'Where', 'Xor',
]); // prettier-ignore
/** Nodes whose output holds at most the elements of their first input (views, reductions, selections). */
const AT_MOST_FIRST = new Set([
  'ArgMax', 'ArgMin', 'Flatten', 'ReduceL1', 'ReduceL2', 'ReduceLogSumExp', 'ReduceMax', 'ReduceMean', 'ReduceMin', 'ReduceProd',
  'ReduceSum', 'ReduceSumSquare', 'Reshape', 'Slice', 'Split', 'Squeeze', 'TopK', 'Transpose', 'Unsqueeze',
]); // prettier-ignore
/** A Shape node writes the rank: a few elements. */
const SHAPE_ELEMENTS = 8;

type Size = { readonly perRow: number } | { readonly dims: readonly number[] };

const elementsOf = (dims: readonly number[]): number => dims.reduce((a, b) => a * b, 1);

/**
 * The run cost of `graph` whose inputs hold `perRowInputs` elements per row
 * (graph input name → elements of one row), or why it cannot be estimated.
 */
export function runCostOf(graph: GraphSummary, perRowInputs: ReadonlyMap<string, number>): RunCost | { readonly unbounded: string } {
  const sizes = new Map<string, Size>();
  for (const [name, dims] of graph.constants) sizes.set(name, { dims });
  for (const [name, n] of perRowInputs) sizes.set(name, { perRow: n });
  let macsPerRow = 0;
  let elementsPerRow = 0;
  let nodes = 0;
  for (const node of graph.nodes) {
    const inputs: (Size | undefined)[] = node.inputs.map((name) => (name === '' ? undefined : sizes.get(name)));
    const missing = node.inputs.find((name, i) => name !== '' && inputs[i] === undefined);
    if (missing !== undefined) return { unbounded: `${node.opType} reads '${missing}', which no input or earlier node gives` };
    const present = inputs.filter((s): s is Size => s !== undefined);
    // Constants only: folded by onnxruntime when the session is created.
    if (present.every((s) => 'dims' in s)) {
      const dims = constantOutputDims(node, present);
      for (const out of node.outputs) sizes.set(out, { dims });
      continue;
    }
    const step = nodeCost(node, inputs);
    if ('unbounded' in step) return step;
    nodes++;
    macsPerRow += step.macs;
    elementsPerRow += step.elements;
    for (const out of node.outputs) sizes.set(out, { perRow: step.out });
  }
  return { nodes, macsPerRow, elementsPerRow };
}

function constantOutputDims(node: GraphNode, inputs: readonly Size[]): readonly number[] {
  if (node.constantDims !== undefined) return node.constantDims;
  const first = inputs[0];
  const dims = first !== undefined && 'dims' in first ? first.dims : [];
  if (node.opType !== 'Transpose') return dims;
  const perm = node.ints.get('perm') ?? dims.map((_, i) => dims.length - 1 - i);
  return perm.map((i) => dims[i] ?? 1);
}

const rowsOf = (s: Size): number => ('perRow' in s ? s.perRow : elementsOf(s.dims));

/**
 * A convolution over a per-row input (N, C, spatial…) with constant weights
 * (M, C / group, kernel…): each output element costs C / group × kernel
 * multiply-adds, and the output holds M channels of the input's positions
 * divided by the strides (padding at most keeps them: the estimate errs high).
 */
function convCost(
  node: GraphNode,
  x: Size | undefined,
  w: Size | undefined,
  bias: boolean,
): { macs: number; elements: number; out: number } | { unbounded: string } {
  if (x === undefined || w === undefined || !('perRow' in x) || !('dims' in w) || w.dims.length < 3) return { unbounded: 'Conv without constant weights' };
  const [m = 1, perGroup = 1, ...kernel] = w.dims;
  const channels = perGroup * (node.ints.get('group')?.[0] ?? 1);
  const positions = x.perRow / Math.max(1, channels) / (node.ints.get('strides') ?? []).reduce((a, b) => a * b, 1);
  const out = positions * m;
  return { macs: out * perGroup * elementsOf(kernel), elements: bias ? out : 0, out };
}

/** One node with at least one per-row input: its multiply-adds and elements per row, and its output's elements per row. */
function nodeCost(node: GraphNode, inputs: readonly (Size | undefined)[]): { macs: number; elements: number; out: number } | { unbounded: string } {
  const op = node.domain === '' ? node.opType : `${node.domain}.${node.opType}`;
  if (node.hasSubgraph) return { unbounded: `${op} runs a subgraph` };
  if (node.domain !== '') return { unbounded: `operator ${op} is outside the default operator set` };
  const [a, b] = inputs;
  if (op === 'MatMul' || op === 'Gemm') {
    if (a === undefined || b === undefined || !('perRow' in a) || !('dims' in b)) return { unbounded: `${op} of two activations` };
    if (op === 'Gemm' && (node.ints.get('transA')?.[0] ?? 0) !== 0) return { unbounded: 'Gemm with transA' };
    const transB = op === 'Gemm' && (node.ints.get('transB')?.[0] ?? 0) !== 0;
    const d = b.dims;
    const k = (transB ? d[d.length - 1] : d.length >= 2 ? d[d.length - 2] : d[0]) ?? 1;
    const n = (transB ? d[d.length - 2] : d.length >= 2 ? d[d.length - 1] : 1) ?? 1;
    const out = (a.perRow / Math.max(1, k)) * n;
    // A Gemm's bias is one add per output element.
    return { macs: a.perRow * n, elements: op === 'Gemm' && inputs[2] !== undefined ? out : 0, out };
  }
  if (op === 'Conv') return convCost(node, a, b, inputs[2] !== undefined);
  const present = inputs.filter((s): s is Size => s !== undefined);
  if (op === 'MaxPool' || op === 'AveragePool') {
    // Each output element reads a kernel's window of the input.
    const strides = node.ints.get('strides') ?? [];
    const out = rowsOf(present[0]!) / strides.reduce((x, y) => x * y, 1);
    return { macs: 0, elements: out * elementsOf(node.ints.get('kernel_shape') ?? []), out };
  }
  if (ELEMENTWISE.has(op)) {
    const out = Math.max(...present.map(rowsOf));
    return { macs: 0, elements: out, out };
  }
  if (AT_MOST_FIRST.has(op)) {
    const out = rowsOf(present[0]!);
    return { macs: 0, elements: out, out };
  }
  if (op === 'Concat') {
    const out = present.reduce((sum, s) => sum + rowsOf(s), 0);
    return { macs: 0, elements: out, out };
  }
  if (op === 'Gather' && a !== undefined && b !== undefined) {
    // An embedding lookup: each index picks a row of the table.
    const out = 'dims' in a ? rowsOf(b) * elementsOf(a.dims.slice(1)) : rowsOf(a);
    return { macs: 0, elements: out, out };
  }
  if (op === 'Shape') return { macs: 0, elements: SHAPE_ELEMENTS, out: SHAPE_ELEMENTS };
  return { unbounded: `operator ${op} has no estimate` };
}
