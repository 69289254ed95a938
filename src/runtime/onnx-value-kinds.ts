/**
 * @module runtime/onnx-value-kinds
 * What an ONNX graph declares for inputs and outputs that are not tensors
 * (a sequence, an optional, a map, a sparse tensor), in ONNX's own notation:
 * `seq(tensor(float))`, `optional(tensor(int64))`, `map(int64,tensor(float))`.
 * onnxruntime-node says only `isTensor: false`, and a refusal that names
 * the value but not its kind leaves the user guessing, so the graph's
 * ValueInfoProtos are read from the model file: only when a model has such
 * a value (the load is refused then anyway), walking the protobuf fields and
 * skipping everything else (initializers are skipped by length, not read).
 */
import { readFile } from 'node:fs/promises';
import { BYTES, ProtobufReader, VARINT } from './protobuf-wire.js';

/** ONNX TensorProto.DataType numbers → ONNX's type names. */
const ELEM_TYPES: readonly string[] = [
  'undefined',
  'float',
  'uint8',
  'int8',
  'uint16',
  'int16',
  'int32',
  'int64',
  'string',
  'bool',
  'float16',
  'double',
  'uint32',
  'uint64',
  'complex64',
  'complex128',
  'bfloat16',
  'float8e4m3fn',
  'float8e4m3fnuz',
  'float8e5m2',
  'float8e5m2fnuz',
  'uint4',
  'int4',
  'float4e2m1',
];

interface Field {
  readonly no: number;
  readonly wire: number;
  /** varint value (wire 0) */
  readonly value: number;
  /** bytes (wire 2) */
  readonly bytes: Uint8Array | undefined;
}

/** The top-level varint and length-delimited fields of one protobuf message (others skipped). Throws on a malformed message. */
function fields(buf: Uint8Array): Field[] {
  const out: Field[] = [];
  const r = new ProtobufReader(buf);
  r.fields((no, wire) => {
    if (wire === VARINT) out.push({ no, wire, value: r.varint(), bytes: undefined });
    else if (wire === BYTES) out.push({ no, wire, value: 0, bytes: r.bytes() });
    else return false;
    return true;
  });
  return out;
}

const first = (fs: readonly Field[], no: number): Field | undefined => fs.find((f) => f.no === no);

/** A TypeProto in ONNX's notation. */
function typeText(bytes: Uint8Array | undefined, depth = 0): string {
  if (bytes === undefined || depth > 16) return 'unknown';
  const fs = fields(bytes);
  const elem = (f: Field | undefined): string => ELEM_TYPES[first(fields(f?.bytes ?? new Uint8Array()), 1)?.value ?? 0] ?? 'unknown';
  const inner = (f: Field, no: number): string => typeText(first(fields(f.bytes!), no)?.bytes, depth + 1);
  for (const f of fs) {
    if (f.wire !== 2) continue;
    if (f.no === 1) return `tensor(${elem(f)})`;
    if (f.no === 4) return `seq(${inner(f, 1)})`;
    if (f.no === 5) {
      const key = ELEM_TYPES[first(fields(f.bytes!), 1)?.value ?? 0] ?? 'unknown';
      return `map(${key},${inner(f, 2)})`;
    }
    if (f.no === 8) return `sparse_tensor(${elem(f)})`;
    if (f.no === 9) return `optional(${inner(f, 1)})`;
    if (f.no === 7) return 'opaque';
  }
  return 'unknown';
}

/**
 * name → declared type for every graph input and output of the model file
 * (ModelProto.graph = 7; GraphProto.input = 11, output = 12; ValueInfoProto
 * name = 1, type = 2). Empty when the file cannot be read as a model.
 */
export async function graphValueTypes(modelPath: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  try {
    const model = fields(await readFile(modelPath));
    const graph = first(model, 7)?.bytes;
    if (graph === undefined) return out;
    for (const f of fields(graph)) {
      if ((f.no !== 11 && f.no !== 12) || f.bytes === undefined) continue;
      const vi = fields(f.bytes);
      const name = first(vi, 1)?.bytes;
      if (name !== undefined) out.set(Buffer.from(name).toString('utf8'), typeText(first(vi, 2)?.bytes));
    }
  } catch {
    // Only a better message depends on this: without it the value is "not a tensor".
  }
  return out;
}
