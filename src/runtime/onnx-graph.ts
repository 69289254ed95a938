/**
 * @module runtime/onnx-graph
 * The shape of an ONNX model's main graph, read from the file's protobuf
 * bytes: its nodes (operator, inputs, outputs, integer attributes) and the
 * dims of its constants (initializers and Constant nodes). Session placement
 * (runtime/session-placement.ts) estimates a run's cost from it
 * (runtime/run-estimate.ts), so a model lands on the same thread on every
 * start; and the inputs and outputs the graph declares, so placement can be
 * decided before a session exists (session-placement.ts creationPlacement).
 * onnxruntime-node exposes only a session's inputs and outputs, and a
 * protobuf library is not a dependency of the server, so this reads the few
 * fields it needs from the wire format and skips the rest (tensor data
 * included: a 64 MiB model is walked, not copied).
 */
import type { DataType } from '../protocol/tensor.js';
import { BYTES, ProtobufReader as Reader, VARINT } from './protobuf-wire.js';

export interface GraphNode {
  readonly opType: string;
  /** '' for the default ONNX operator set. */
  readonly domain: string;
  /** Input names in order; '' marks an omitted optional input. */
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  /** Integer and integer-list attributes by name (e.g. Gemm's transB, Transpose's perm). */
  readonly ints: ReadonlyMap<string, readonly number[]>;
  /** Whether a node holds a subgraph (If, Loop, Scan): its cost is not the node's own. */
  readonly hasSubgraph: boolean;
  /** A Constant node's value dims (its `value` tensor; [] for a scalar, [n] for a list). */
  readonly constantDims?: readonly number[];
}

/** A graph input or output as the file declares it (the fields a session's own inputs and outputs give). */
export interface GraphValue {
  readonly name: string;
  /** undefined: not a tensor, or an element type onnx-mme does not serve. */
  readonly datatype: DataType | undefined;
  /** Fixed dims as numbers, symbolic or unknown dims as -1; undefined when the graph gives no shape. */
  readonly shape: readonly number[] | undefined;
}

export interface GraphSummary {
  readonly nodes: readonly GraphNode[];
  /** Dims of each initializer (sparse ones included). */
  readonly constants: ReadonlyMap<string, readonly number[]>;
  /** The graph's inputs (those an initializer gives excluded, as onnxruntime excludes them) and outputs, in order. */
  readonly inputs: readonly GraphValue[];
  readonly outputs: readonly GraphValue[];
}

/** TensorProto.DataType numbers → the datatypes onnx-mme serves. */
const ELEM_DATATYPES: Readonly<Record<number, DataType>> = {
  1: 'FP32',
  2: 'UINT8',
  3: 'INT8',
  4: 'UINT16',
  5: 'INT16',
  6: 'INT32',
  7: 'INT64',
  8: 'BYTES',
  9: 'BOOL',
  10: 'FP16',
  11: 'FP64',
  12: 'UINT32',
  13: 'UINT64',
};

/** TensorShapeProto: dim (1), each a dim_value (1) or a dim_param (2, symbolic: -1). */
function readShape(r: Reader): number[] {
  const dims: number[] = [];
  r.fields((field, wire) => {
    if (field !== 1 || wire !== BYTES) return false;
    let dim = -1;
    const d = r.sub();
    d.fields((f, w) => {
      if (f !== 1 || w !== VARINT) return false;
      dim = d.varint();
      return true;
    });
    dims.push(dim);
    return true;
  });
  return dims;
}

/** ValueInfoProto: name (1), type (2: TypeProto, whose tensor_type (1) holds elem_type (1) and shape (2)). */
function readValue(r: Reader): GraphValue {
  let name = '';
  let datatype: DataType | undefined;
  let shape: number[] | undefined;
  r.fields((field, wire) => {
    if (field === 1 && wire === BYTES) name = r.string();
    else if (field === 2 && wire === BYTES) {
      const type = r.sub();
      type.fields((tField, tWire) => {
        if (tField !== 1 || tWire !== BYTES) return false;
        const tensor = type.sub();
        tensor.fields((f, w) => {
          if (f === 1 && w === VARINT) datatype = ELEM_DATATYPES[tensor.varint()];
          else if (f === 2 && w === BYTES) shape = readShape(tensor.sub());
          else return false;
          return true;
        });
        return true;
      });
    } else return false;
    return true;
  });
  return { name, datatype, shape };
}

/** TensorProto: dims (1) and name (8). */
function readTensor(r: Reader): { name: string; dims: number[] } {
  let name = '';
  const dims: number[] = [];
  r.fields((field, wire) => {
    if (field === 1) r.ints(wire, dims);
    else if (field === 8 && wire === BYTES) name = r.string();
    else return false;
    return true;
  });
  return { name, dims };
}

/** SparseTensorProto: values (1, its name) and dims (3). */
function readSparse(r: Reader): { name: string; dims: number[] } {
  let name = '';
  const dims: number[] = [];
  r.fields((field, wire) => {
    if (field === 1 && wire === BYTES) name = readTensor(r.sub()).name;
    else if (field === 3) r.ints(wire, dims);
    else return false;
    return true;
  });
  return { name, dims };
}

interface Attribute {
  name: string;
  ints: number[];
  tensorDims?: number[];
  floats: number;
  subgraph: boolean;
}

/** AttributeProto: name (1), i (3), t (5), g (6), floats (7), ints (8), graphs (11). */
function readAttribute(r: Reader): Attribute {
  const a: Attribute = { name: '', ints: [], floats: 0, subgraph: false };
  r.fields((field, wire) => {
    if (field === 1 && wire === BYTES) a.name = r.string();
    else if (field === 3 && wire === VARINT) a.ints.push(r.varint());
    else if (field === 8) r.ints(wire, a.ints);
    else if (field === 5 && wire === BYTES) a.tensorDims = readTensor(r.sub()).dims;
    else if (field === 7 && wire === BYTES) {
      const packed = r.sub();
      a.floats += (packed.end - packed.pos) / 4;
    } else if (field === 7) {
      a.floats++;
      return false;
    } else if ((field === 6 || field === 11) && wire === BYTES) {
      a.subgraph = true;
      return false;
    } else return false;
    return true;
  });
  return a;
}

/** NodeProto: input (1), output (2), op_type (4), attribute (5), domain (7). */
function readNode(r: Reader): GraphNode {
  const inputs: string[] = [];
  const outputs: string[] = [];
  const ints = new Map<string, number[]>();
  let opType = '';
  let domain = '';
  let hasSubgraph = false;
  let constantDims: number[] | undefined;
  r.fields((field, wire) => {
    if (wire !== BYTES) return false;
    if (field === 1) inputs.push(r.string());
    else if (field === 2) outputs.push(r.string());
    else if (field === 4) opType = r.string();
    else if (field === 7) domain = r.string();
    else if (field === 5) {
      const a = readAttribute(r.sub());
      if (a.ints.length > 0) ints.set(a.name, a.ints);
      hasSubgraph ||= a.subgraph;
      if (a.tensorDims !== undefined) constantDims = a.tensorDims;
      else if (a.name.startsWith('value_')) constantDims = a.name.endsWith('s') ? [Math.max(a.ints.length, a.floats)] : [];
    } else return false;
    return true;
  });
  return { opType, domain: domain === 'ai.onnx' ? '' : domain, inputs, outputs, ints, hasSubgraph, ...(opType === 'Constant' ? { constantDims } : {}) };
}

/** The main graph (ModelProto field 7) of an ONNX file's bytes; throws on bytes that are not a well-formed protobuf message. */
export function readGraphSummary(bytes: Uint8Array): GraphSummary {
  const nodes: GraphNode[] = [];
  const constants = new Map<string, number[]>();
  const inputs: GraphValue[] = [];
  const outputs: GraphValue[] = [];
  let sawGraph = false;
  const model = new Reader(bytes);
  model.fields((field, wire) => {
    if (field !== 7 || wire !== BYTES) return false;
    sawGraph = true;
    const graph = model.sub();
    graph.fields((gField, gWire) => {
      if (gWire !== BYTES) return false;
      if (gField === 1) nodes.push(readNode(graph.sub()));
      else if (gField === 11) inputs.push(readValue(graph.sub()));
      else if (gField === 12) outputs.push(readValue(graph.sub()));
      else if (gField === 5 || gField === 15) {
        const t = gField === 5 ? readTensor(graph.sub()) : readSparse(graph.sub());
        constants.set(t.name, t.dims);
      } else return false;
      return true;
    });
    return true;
  });
  if (!sawGraph) throw new Error('no graph in the model file');
  return { nodes, constants, inputs: inputs.filter((i) => !constants.has(i.name)), outputs };
}
