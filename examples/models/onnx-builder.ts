/**
 * @module examples/models/onnx-builder
 * A small typed layer over onnx-proto for generating ONNX test models in
 * TypeScript (the repository never commits binary models). It covers exactly
 * what the zoo needs: value infos with fixed or symbolic dims, initializers
 * from typed arrays, nodes with attributes, and a `buildModel` that returns the
 * serialized ModelProto bytes that `ort.InferenceSession.create` accepts.
 *
 * Element types are named with the KServe v2 datatype names the server uses
 * (`FP32`, `INT64`, `BYTES`, …) so tests read like requests; `BYTES` is ONNX
 * `STRING`, as in Triton's mapping.
 */
import onnxProto from 'onnx-proto';
import { DATA_TYPES, type DataType } from '../../src/protocol/tensor.js';

// onnx-proto is CommonJS whose exports cjs-module-lexer cannot see, so under
// ESM only the default export (module.exports) carries the `onnx` namespace.
const { onnx } = onnxProto;

export type OnnxModelProto = onnxProto.onnx.IModelProto;
export type OnnxTensorProto = onnxProto.onnx.ITensorProto;
export type OnnxValueInfoProto = onnxProto.onnx.IValueInfoProto;
export type OnnxNodeProto = onnxProto.onnx.INodeProto;
export type OnnxAttributeProto = onnxProto.onnx.IAttributeProto;

/** KServe v2 datatype names (config.pbtxt's `TYPE_STRING` is `BYTES`): the server's own list. */
export type ElementType = DataType;
export const ELEMENT_TYPES: readonly ElementType[] = DATA_TYPES;

/** ONNX `TensorProto.DataType` numbers, spelled out so callers need not import onnx-proto. */
export const OnnxDataType = Object.freeze({
  UNDEFINED: 0,
  FLOAT: 1,
  UINT8: 2,
  INT8: 3,
  UINT16: 4,
  INT16: 5,
  INT32: 6,
  INT64: 7,
  STRING: 8,
  BOOL: 9,
  FLOAT16: 10,
  DOUBLE: 11,
  UINT32: 12,
  UINT64: 13,
  COMPLEX64: 14,
  COMPLEX128: 15,
  BFLOAT16: 16,
} as const);

const ONNX_ELEMENT_TYPE: Readonly<Record<ElementType, number>> = Object.freeze({
  BOOL: OnnxDataType.BOOL,
  UINT8: OnnxDataType.UINT8,
  UINT16: OnnxDataType.UINT16,
  UINT32: OnnxDataType.UINT32,
  UINT64: OnnxDataType.UINT64,
  INT8: OnnxDataType.INT8,
  INT16: OnnxDataType.INT16,
  INT32: OnnxDataType.INT32,
  INT64: OnnxDataType.INT64,
  FP16: OnnxDataType.FLOAT16,
  FP32: OnnxDataType.FLOAT,
  FP64: OnnxDataType.DOUBLE,
  BYTES: OnnxDataType.STRING,
  BF16: OnnxDataType.BFLOAT16,
});

/** ONNX TensorProto.DataType number for a KServe datatype name. */
export function onnxElementType(type: ElementType): number {
  return ONNX_ELEMENT_TYPE[type];
}

/** config.pbtxt `data_type` for a KServe datatype name (`BYTES` → `TYPE_STRING`). */
export function tritonDataType(type: ElementType): string {
  return type === 'BYTES' ? 'TYPE_STRING' : `TYPE_${type}`;
}

/** A dimension: a fixed size, or a symbolic name (e.g. `'batch'`) for a dynamic one. */
export type Dim = number | string;

/** A graph input/output description. */
export function valueInfo(name: string, type: ElementType, dims: readonly Dim[]): OnnxValueInfoProto {
  return {
    name,
    type: {
      tensorType: {
        elemType: onnxElementType(type),
        shape: {
          dim: dims.map((d) => (typeof d === 'string' ? { dimParam: d } : { dimValue: checkedInt(d, 'dim') })),
        },
      },
    },
  };
}

/**
 * Values accepted for an initializer, per element type. FP16 (and BF16) take
 * raw bits in a Uint16Array (as onnxruntime-node does) or plain numbers that
 * are rounded; BYTES takes strings (UTF-8) or byte arrays.
 */
export type TensorValues =
  | Float32Array
  | Float64Array
  | Int8Array
  | Int16Array
  | Int32Array
  | BigInt64Array
  | Uint8Array
  | Uint16Array
  | Uint32Array
  | BigUint64Array
  | readonly number[]
  | readonly bigint[]
  | readonly boolean[]
  | readonly string[]
  | readonly Uint8Array[];

/** Byte width per element for the types that go into rawData. */
const ELEMENT_BYTES: Readonly<Record<Exclude<ElementType, 'BYTES'>, number>> = Object.freeze({
  BOOL: 1,
  UINT8: 1,
  INT8: 1,
  UINT16: 2,
  INT16: 2,
  FP16: 2,
  BF16: 2,
  UINT32: 4,
  INT32: 4,
  FP32: 4,
  UINT64: 8,
  INT64: 8,
  FP64: 8,
});

/**
 * An initializer (constant tensor). Numeric data goes into `rawData`, written
 * little-endian explicitly (the ONNX spec fixes LE regardless of host), which
 * is far more compact than the repeated varint fields; BYTES uses stringData
 * because ONNX forbids rawData for strings.
 */
export function tensor(name: string, type: ElementType, dims: readonly number[], values: TensorValues): OnnxTensorProto {
  const count = dims.reduce((n, d) => n * checkedInt(d, 'dim'), 1);
  if (values.length !== count) {
    throw new RangeError(`tensor '${name}': ${values.length} values for shape [${dims.join(', ')}] (${count} elements)`);
  }
  const base: OnnxTensorProto = { name, dims: [...dims], dataType: onnxElementType(type) };
  if (type === 'BYTES') {
    const encoder = new TextEncoder();
    const stringData = Array.from(values as ArrayLike<unknown>, (v) => {
      if (typeof v === 'string') return encoder.encode(v);
      if (v instanceof Uint8Array) return v;
      throw new TypeError(`tensor '${name}': BYTES values must be strings or Uint8Arrays`);
    });
    return { ...base, stringData };
  }
  return { ...base, rawData: encodeRaw(type, values) };
}

function encodeRaw(type: Exclude<ElementType, 'BYTES'>, values: TensorValues): Uint8Array {
  const width = ELEMENT_BYTES[type];
  const out = new Uint8Array(values.length * width);
  const view = new DataView(out.buffer);
  const at = (i: number): unknown => (values as ArrayLike<unknown>)[i];
  for (let i = 0; i < values.length; i++) {
    const v = at(i);
    const offset = i * width;
    switch (type) {
      case 'BOOL':
        view.setUint8(offset, v === true || (typeof v === 'number' && v !== 0) || v === 1n ? 1 : 0);
        break;
      case 'UINT8':
        view.setUint8(offset, toNumber(v));
        break;
      case 'INT8':
        view.setInt8(offset, toNumber(v));
        break;
      case 'UINT16':
        view.setUint16(offset, toNumber(v), true);
        break;
      case 'INT16':
        view.setInt16(offset, toNumber(v), true);
        break;
      case 'FP16':
        // A Uint16Array already holds half bits; plain numbers are values to round.
        view.setUint16(offset, values instanceof Uint16Array ? toNumber(v) : float32ToFloat16Bits(toNumber(v)), true);
        break;
      case 'BF16':
        view.setUint16(offset, values instanceof Uint16Array ? toNumber(v) : float32ToBfloat16Bits(toNumber(v)), true);
        break;
      case 'UINT32':
        view.setUint32(offset, toNumber(v), true);
        break;
      case 'INT32':
        view.setInt32(offset, toNumber(v), true);
        break;
      case 'FP32':
        view.setFloat32(offset, toNumber(v), true);
        break;
      case 'FP64':
        view.setFloat64(offset, toNumber(v), true);
        break;
      case 'UINT64':
        view.setBigUint64(offset, toBigInt(v), true);
        break;
      case 'INT64':
        view.setBigInt64(offset, toBigInt(v), true);
        break;
    }
  }
  return out;
}

function toNumber(v: unknown): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  if (typeof v === 'boolean') return v ? 1 : 0;
  throw new TypeError(`expected a number, got ${typeof v}`);
}

function toBigInt(v: unknown): bigint {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number') return BigInt(Math.trunc(v));
  if (typeof v === 'boolean') return v ? 1n : 0n;
  throw new TypeError(`expected an integer, got ${typeof v}`);
}

function checkedInt(v: number, what: string): number {
  if (!Number.isSafeInteger(v)) throw new RangeError(`${what} must be a safe integer, got ${v}`);
  return v;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE 754 half bits for a number (round to nearest even; overflow → ±Inf; NaN kept). */
export function float32ToFloat16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0] ?? 0;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    // Subnormal half: shift the implicit leading 1 in, then round to nearest even.
    mant |= 0x800000;
    const shift = 14 - e;
    const half = mant >>> shift;
    const rest = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    return sign | (rest > mid || (rest === mid && (half & 1) === 1) ? half + 1 : half);
  }
  const half = (e << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  // Rounding may carry into the exponent, which correctly yields the next binade or Inf.
  return sign | (rest > 0x1000 || (rest === 0x1000 && (half & 1) === 1) ? half + 1 : half);
}

/** The number an IEEE 754 half bit pattern encodes. */
export function float16BitsToNumber(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >>> 10) & 0x1f;
  const mant = bits & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant === 0 ? sign * Infinity : NaN;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** bfloat16 bits for a number (round to nearest even). */
export function float32ToBfloat16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0] ?? 0;
  if ((x & 0x7fffffff) > 0x7f800000) return ((x >>> 16) | 0x40) & 0xffff;
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}

/**
 * A node attribute value. Tagged because a JS number cannot say whether it is
 * an ONNX INT or FLOAT attribute, and ONNX operators are strict about it.
 */
export type AttributeValue =
  | { readonly int: number }
  | { readonly float: number }
  | { readonly ints: readonly number[] }
  | { readonly floats: readonly number[] }
  | { readonly string: string }
  | { readonly tensor: OnnxTensorProto };

/** Shorthands: `attr.int(1)`, `attr.floats([0.5])`, … */
export const attr = Object.freeze({
  int: (v: number): AttributeValue => ({ int: v }),
  float: (v: number): AttributeValue => ({ float: v }),
  ints: (v: readonly number[]): AttributeValue => ({ ints: v }),
  floats: (v: readonly number[]): AttributeValue => ({ floats: v }),
  string: (v: string): AttributeValue => ({ string: v }),
  tensor: (v: OnnxTensorProto): AttributeValue => ({ tensor: v }),
});

function attributeProto(name: string, value: AttributeValue): OnnxAttributeProto {
  const T = onnx.AttributeProto.AttributeType;
  if ('int' in value) return { name, type: T.INT, i: checkedInt(value.int, `attribute ${name}`) };
  if ('float' in value) return { name, type: T.FLOAT, f: value.float };
  if ('ints' in value) return { name, type: T.INTS, ints: value.ints.map((v) => checkedInt(v, `attribute ${name}`)) };
  if ('floats' in value) return { name, type: T.FLOATS, floats: [...value.floats] };
  if ('string' in value) return { name, type: T.STRING, s: new TextEncoder().encode(value.string) };
  return { name, type: T.TENSOR, t: value.tensor };
}

export interface NodeOptions {
  /** Node name; defaults to `<opType>_<first output>` for readable ORT errors. */
  readonly name?: string;
  readonly attributes?: Readonly<Record<string, AttributeValue>>;
  /** Operator domain; '' is the default ONNX domain. */
  readonly domain?: string;
}

/** A graph node. Inputs may contain '' for omitted optional inputs. */
export function node(opType: string, inputs: readonly string[], outputs: readonly string[], options: NodeOptions = {}): OnnxNodeProto {
  const attributes = Object.entries(options.attributes ?? {}).map(([k, v]) => attributeProto(k, v));
  return {
    name: options.name ?? `${opType}_${outputs[0] ?? 'out'}`,
    opType,
    domain: options.domain ?? '',
    input: [...inputs],
    output: [...outputs],
    attribute: attributes,
  };
}

export interface ModelSpec {
  readonly inputs: readonly OnnxValueInfoProto[];
  readonly outputs: readonly OnnxValueInfoProto[];
  readonly nodes: readonly OnnxNodeProto[];
  readonly initializers?: readonly OnnxTensorProto[];
  /** Default-domain opset; 17 unless given. */
  readonly opset?: number;
  /** ONNX IR version; 8 (ONNX 1.10–1.12) unless given, which every ORT 1.x since 1.10 reads. */
  readonly irVersion?: number;
  readonly graphName?: string;
  readonly producerName?: string;
  readonly docString?: string;
}

/** Serialize a model. The result is what `ort.InferenceSession.create(bytes)` takes. */
export function buildModel(spec: ModelSpec): Uint8Array {
  const model = onnx.ModelProto.create({
    irVersion: spec.irVersion ?? 8,
    opsetImport: [{ domain: '', version: spec.opset ?? 17 }],
    producerName: spec.producerName ?? 'onnx-mme-zoo',
    producerVersion: '1',
    docString: spec.docString ?? '',
    graph: {
      name: spec.graphName ?? 'graph',
      node: [...spec.nodes],
      initializer: [...(spec.initializers ?? [])],
      input: [...spec.inputs],
      output: [...spec.outputs],
    },
  });
  return onnx.ModelProto.encode(model).finish();
}

/** Parse model bytes back (handy for tests that inspect what was generated). */
export function decodeModel(bytes: Uint8Array): OnnxModelProto {
  return onnx.ModelProto.decode(bytes);
}
