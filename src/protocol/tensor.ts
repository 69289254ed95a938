/**
 * @module protocol/tensor
 * The tensor every layer passes around: a KServe v2 datatype, a shape and a
 * flat row-major payload. Pure data; knows nothing about models or runtimes.
 */
import { didYouMean } from './did-you-mean.js';

export const DATA_TYPES = ['BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP16', 'FP32', 'FP64', 'BYTES', 'BF16'] as const;

/** KServe v2 protocol datatype names (config.pbtxt's TYPE_STRING is BYTES here). */
export type DataType = (typeof DATA_TYPES)[number];

export type NumericArray =
  Uint8Array | Int8Array | Uint16Array | Int16Array | Uint32Array | Int32Array | BigUint64Array | BigInt64Array | Float32Array | Float64Array;

/**
 * BYTES tensors hold one string per element (onnxruntime-node string tensors are
 * JS strings); every other datatype holds a typed array. FP16 and BF16 hold raw
 * 16-bit patterns in a Uint16Array; BOOL holds 0/1 bytes.
 */
export type TensorData = NumericArray | string[];

export interface Tensor {
  readonly datatype: DataType;
  readonly shape: readonly number[];
  readonly data: TensorData;
}

type TypedArrayConstructor = {
  new (length: number): NumericArray;
  new (buffer: ArrayBufferLike, byteOffset?: number, length?: number): NumericArray;
  readonly BYTES_PER_ELEMENT: number;
};

export interface DataTypeInfo {
  /** Bytes per element on the wire; 0 for BYTES (variable). */
  readonly byteSize: number;
  /** Typed array holding the elements; undefined for BYTES. */
  readonly arrayType: TypedArrayConstructor | undefined;
  /** config.pbtxt enum name. */
  readonly configName: string;
}

export const DATA_TYPE_INFO: Readonly<Record<DataType, DataTypeInfo>> = Object.freeze({
  BOOL: { byteSize: 1, arrayType: Uint8Array, configName: 'TYPE_BOOL' },
  UINT8: { byteSize: 1, arrayType: Uint8Array, configName: 'TYPE_UINT8' },
  UINT16: { byteSize: 2, arrayType: Uint16Array, configName: 'TYPE_UINT16' },
  UINT32: { byteSize: 4, arrayType: Uint32Array, configName: 'TYPE_UINT32' },
  UINT64: { byteSize: 8, arrayType: BigUint64Array, configName: 'TYPE_UINT64' },
  INT8: { byteSize: 1, arrayType: Int8Array, configName: 'TYPE_INT8' },
  INT16: { byteSize: 2, arrayType: Int16Array, configName: 'TYPE_INT16' },
  INT32: { byteSize: 4, arrayType: Int32Array, configName: 'TYPE_INT32' },
  INT64: { byteSize: 8, arrayType: BigInt64Array, configName: 'TYPE_INT64' },
  FP16: { byteSize: 2, arrayType: Uint16Array, configName: 'TYPE_FP16' },
  FP32: { byteSize: 4, arrayType: Float32Array, configName: 'TYPE_FP32' },
  FP64: { byteSize: 8, arrayType: Float64Array, configName: 'TYPE_FP64' },
  BYTES: { byteSize: 0, arrayType: undefined, configName: 'TYPE_STRING' },
  BF16: { byteSize: 2, arrayType: Uint16Array, configName: 'TYPE_BF16' },
} satisfies Record<DataType, DataTypeInfo>);

const BY_CONFIG_NAME: ReadonlyMap<string, DataType> = new Map(DATA_TYPES.map((t) => [DATA_TYPE_INFO[t].configName, t] as const));

/** `TYPE_FP32` → `FP32`; `TYPE_STRING` → `BYTES`. Undefined for unknown names (and TYPE_INVALID). */
export function dataTypeFromConfigName(name: string): DataType | undefined {
  return BY_CONFIG_NAME.get(name);
}

export function isDataType(value: unknown): value is DataType {
  return typeof value === 'string' && (DATA_TYPES as readonly string[]).includes(value);
}

/** `unknown datatype "fp32"; did you mean "FP32"? (expected one of BOOL, …)`: the codecs' one message for a datatype that is not one. */
export function unknownDataTypeMessage(datatype: unknown): string {
  const hint =
    typeof datatype === 'string'
      ? didYouMean(datatype, DATA_TYPES, { list: true, quote: (s) => JSON.stringify(s) })
      : ` (expected one of ${DATA_TYPES.join(', ')})`;
  return `unknown datatype ${JSON.stringify(datatype)}${hint}`;
}

/** Product of the dims. Throws on negative, fractional or overflowing counts. */
export function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) {
    if (!Number.isSafeInteger(d) || d < 0) throw new RangeError(`invalid dimension ${d} in shape [${shape.join(',')}]`);
    n *= d;
    if (!Number.isSafeInteger(n)) throw new RangeError(`shape [${shape.join(',')}] has too many elements`);
  }
  return n;
}

export function formatShape(shape: readonly number[]): string {
  return `[${shape.join(',')}]`;
}
