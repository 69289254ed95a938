/**
 * @module protocol/npy-codec
 * NumPy's `.npy` format (application/x-npy), read and written here without
 * NumPy: the magic `\x93NUMPY`, a version, a little header that is a Python
 * dict literal `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`,
 * then the raw C-order elements. Only what maps onto a tensor is accepted:
 * plain numeric and bool dtypes (either byte order) and fixed-width byte
 * strings (`|S<n>`, as BYTES); Fortran order, objects, unicode, complex,
 * dates and structured dtypes are a 400 that says so. The header is parsed by
 * a small tokenizer, never evaluated.
 */
import { ServingError } from '../errors.js';
import { LITTLE_ENDIAN_HOST } from './binary-tensor.js';
import { DATA_TYPE_INFO, elementCount, formatShape, type DataType, type NumericArray, type Tensor } from './tensor.js';

export const NPY_CONTENT_TYPE = 'application/x-npy';

const MAGIC = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]); // \x93NUMPY
/** NumPy aligns the data to 64 bytes (so memory-mapped arrays are aligned). */
const ALIGN = 64;
/** Triton's JSON nesting cap is 100; a shape has far fewer dims. */
const MAX_DIMS = 64;

export interface NpyArray {
  readonly datatype: DataType;
  readonly shape: readonly number[];
  readonly data: NumericArray | string[];
}

function bad(model: string, message: string): ServingError {
  return new ServingError('INVALID_INPUT', `model '${model}': application/x-npy: ${message}`, { model });
}

/** dtype kind + size (without the byte-order character) → datatype. */
const NUMERIC: Readonly<Record<string, DataType>> = {
  b1: 'BOOL',
  u1: 'UINT8',
  i1: 'INT8',
  u2: 'UINT16',
  i2: 'INT16',
  u4: 'UINT32',
  i4: 'INT32',
  u8: 'UINT64',
  i8: 'INT64',
  f2: 'FP16',
  f4: 'FP32',
  f8: 'FP64',
};

const DESCR_OF: Partial<Record<DataType, string>> = Object.fromEntries(Object.entries(NUMERIC).map(([k, dt]) => [dt, `${k.endsWith('1') ? '|' : '<'}${k}`]));

// ------------------------------------------------------------------ header

type PyValue = string | number | boolean | PyValue[] | { readonly [k: string]: PyValue };

/** A tokenizer-parser for the literal subset NumPy writes: dicts, tuples, lists, strings, ints, True/False. */
class HeaderParser {
  private i = 0;

  constructor(
    private readonly s: string,
    private readonly model: string,
  ) {}

  parse(): PyValue {
    const v = this.value(0);
    this.ws();
    if (this.i !== this.s.length) throw this.err('unexpected text after the header dict');
    return v;
  }

  private err(message: string): ServingError {
    return bad(this.model, `malformed header at character ${this.i}: ${message}`);
  }

  private ws(): void {
    while (this.i < this.s.length && /\s/.test(this.s[this.i]!)) this.i++;
  }

  private value(depth: number): PyValue {
    if (depth > 8) throw this.err('nested too deeply');
    this.ws();
    const c = this.s[this.i];
    if (c === '{') return this.dict(depth);
    if (c === '(' || c === '[') return this.sequence(depth, c === '(' ? ')' : ']');
    if (c === "'" || c === '"') return this.string(c);
    const m = /^(?:True|False|-?\d+L?)/.exec(this.s.slice(this.i, this.i + 32));
    if (!m) throw this.err(`unexpected ${c === undefined ? 'end' : `'${c}'`}`);
    this.i += m[0].length;
    if (m[0] === 'True') return true;
    if (m[0] === 'False') return false;
    const n = Number(m[0].replace(/L$/, ''));
    if (!Number.isSafeInteger(n)) throw this.err(`integer ${m[0]} is too large`);
    return n;
  }

  private string(quote: string): string {
    const end = this.s.indexOf(quote, this.i + 1);
    if (end < 0) throw this.err('unterminated string');
    const text = this.s.slice(this.i + 1, end);
    if (text.includes('\\')) throw this.err('escapes in strings are not supported');
    this.i = end + 1;
    return text;
  }

  private sequence(depth: number, close: string): PyValue[] {
    this.i++;
    const out: PyValue[] = [];
    for (;;) {
      this.ws();
      if (this.s[this.i] === close) {
        this.i++;
        return out;
      }
      out.push(this.value(depth + 1));
      this.ws();
      if (this.s[this.i] === ',') this.i++;
      else if (this.s[this.i] !== close) throw this.err(`expected ',' or '${close}'`);
    }
  }

  private dict(depth: number): { [k: string]: PyValue } {
    this.i++;
    const out: { [k: string]: PyValue } = {};
    for (;;) {
      this.ws();
      if (this.s[this.i] === '}') {
        this.i++;
        return out;
      }
      const c = this.s[this.i];
      if (c !== "'" && c !== '"') throw this.err('dict keys must be strings');
      const key = this.string(c);
      this.ws();
      if (this.s[this.i] !== ':') throw this.err("expected ':'");
      this.i++;
      if (Object.hasOwn(out, key)) throw this.err(`key '${key}' appears twice`);
      out[key] = this.value(depth + 1);
      this.ws();
      if (this.s[this.i] === ',') this.i++;
      else if (this.s[this.i] !== '}') throw this.err("expected ',' or '}'");
    }
  }
}

interface NpyHeader {
  readonly datatype: DataType;
  /** Element width in bytes (for |S<n>, n). */
  readonly itemSize: number;
  readonly swap: boolean;
  readonly shape: number[];
}

function parseDescr(model: string, descr: PyValue): Pick<NpyHeader, 'datatype' | 'itemSize' | 'swap'> {
  if (typeof descr !== 'string') throw bad(model, `unsupported dtype ${JSON.stringify(descr)}: structured arrays cannot be a tensor`);
  const m = /^([<>|=])?([a-zA-Z])(\d+)$/.exec(descr);
  if (m) {
    const order = m[1] ?? '|';
    const kind = m[2]!;
    const size = Number(m[3]);
    if (kind === 'S' && size >= 1) return { datatype: 'BYTES', itemSize: size, swap: false };
    const dt = NUMERIC[`${kind}${size}`];
    if (dt !== undefined) {
      const bigEndian = order === '>' || (order === '=' && !LITTLE_ENDIAN_HOST);
      return { datatype: dt, itemSize: size, swap: bigEndian && size > 1 };
    }
  }
  throw bad(model, `unsupported dtype '${descr}'; supported: bool, int8-64, uint8-64, float16/32/64 and fixed-width bytes (|S<n>)`);
}

function parseHeader(model: string, text: string): NpyHeader {
  const dict = new HeaderParser(text, model).parse();
  if (typeof dict !== 'object' || dict === null || Array.isArray(dict)) throw bad(model, 'the header is not a dict');
  const keys = Object.keys(dict).sort();
  if (keys.join(',') !== 'descr,fortran_order,shape') {
    throw bad(model, `the header must have exactly the keys 'descr', 'fortran_order' and 'shape', got ${keys.map((k) => `'${k}'`).join(', ')}`);
  }
  const { descr, fortran_order: fortran, shape } = dict as { descr: PyValue; fortran_order: PyValue; shape: PyValue };
  if (typeof fortran !== 'boolean') throw bad(model, "'fortran_order' must be True or False");
  if (fortran) throw bad(model, 'Fortran-order (column-major) arrays are not supported; send a C-order array (numpy.ascontiguousarray)');
  if (!Array.isArray(shape) || shape.length > MAX_DIMS || !shape.every((d) => typeof d === 'number' && Number.isSafeInteger(d) && d >= 0)) {
    throw bad(model, `'shape' must be a tuple of at most ${MAX_DIMS} non-negative integers, got ${JSON.stringify(shape)}`);
  }
  return { ...parseDescr(model, descr), shape: shape as number[] };
}

// ------------------------------------------------------------------ decode

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Read a `.npy` body. Numeric data is a view on `body` when aligned (the format aligns it), else a copy. */
export function decodeNpy(model: string, body: Uint8Array): NpyArray {
  const buf = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (buf.length < 10 || !buf.subarray(0, 6).equals(MAGIC)) throw bad(model, 'not a .npy file (missing the \\x93NUMPY magic)');
  const major = buf[6]!;
  let headerLen: number;
  let start: number;
  if (major === 1) {
    headerLen = buf.readUInt16LE(8);
    start = 10;
  } else if (major === 2 || major === 3) {
    if (buf.length < 12) throw bad(model, 'truncated header');
    headerLen = buf.readUInt32LE(8);
    start = 12;
  } else {
    throw bad(model, `unsupported format version ${major}.${buf[7]!}`);
  }
  if (headerLen > buf.length - start) throw bad(model, `the header claims ${headerLen} bytes but the body has only ${buf.length - start} after the preamble`);
  const headerText = buf.subarray(start, start + headerLen).toString(major === 3 ? 'utf8' : 'latin1');
  const header = parseHeader(model, headerText);
  let count: number;
  try {
    count = elementCount(header.shape);
  } catch (err) {
    throw bad(model, (err as Error).message);
  }
  const dataStart = start + headerLen;
  const available = buf.length - dataStart;
  const need = count * header.itemSize;
  if (need !== available) {
    throw bad(model, `shape ${formatShape(header.shape)} of ${header.itemSize}-byte elements needs ${need} bytes of data, but the body has ${available}`);
  }
  const raw = buf.subarray(dataStart);
  const shape = Object.freeze(header.shape);
  if (header.datatype === 'BYTES') {
    const out = new Array<string>(count);
    for (let i = 0; i < count; i++) {
      let el = raw.subarray(i * header.itemSize, (i + 1) * header.itemSize);
      let end = el.length;
      while (end > 0 && el[end - 1] === 0) end--; // numpy pads |S<n> with NULs
      el = el.subarray(0, end);
      try {
        out[i] = utf8.decode(el);
      } catch {
        throw bad(model, `element ${i} is not valid UTF-8 (onnxruntime-node string tensors hold text)`);
      }
    }
    return { datatype: 'BYTES', shape, data: out };
  }
  const Ctor = DATA_TYPE_INFO[header.datatype].arrayType!;
  const width = header.itemSize;
  if (!header.swap && raw.byteOffset % width === 0) return { datatype: header.datatype, shape, data: new Ctor(raw.buffer, raw.byteOffset, count) };
  const out = new Ctor(count);
  const bytes = new Uint8Array(out.buffer, out.byteOffset, need);
  bytes.set(raw);
  if (header.swap) for (let i = 0; i < need; i += width) bytes.subarray(i, i + width).reverse();
  return { datatype: header.datatype, shape, data: out };
}

// ------------------------------------------------------------------ encode

/** Whether a tensor of this datatype can be written as .npy (BF16 has no NumPy dtype). */
export function npyWritable(dt: DataType): boolean {
  return dt === 'BYTES' || DESCR_OF[dt] !== undefined;
}

function headerBytes(descr: string, shape: readonly number[]): Buffer {
  const dims = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  const dict = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${dims}, }`;
  // Version 1.0: 10-byte preamble; pad with spaces and end with '\n' so the data starts 64-aligned.
  const total = Math.ceil((10 + dict.length + 1) / ALIGN) * ALIGN;
  const text = `${dict}${' '.repeat(total - 10 - dict.length - 1)}\n`;
  const out = Buffer.alloc(total);
  MAGIC.copy(out, 0);
  out[6] = 1;
  out[7] = 0;
  out.writeUInt16LE(text.length, 8);
  out.write(text, 10, 'latin1');
  return out;
}

/**
 * A tensor as `.npy` bytes: the header and the data as separate chunks (the
 * data is the tensor's own memory for numeric tensors on little-endian hosts).
 * BYTES become `|S<n>` with n the longest element's UTF-8 length.
 */
export function encodeNpy(tensor: Tensor): Buffer[] {
  const { datatype, shape, data } = tensor;
  if (Array.isArray(data)) {
    const encoded = data.map((s) => Buffer.from(s, 'utf8'));
    const width = encoded.reduce((w, b) => Math.max(w, b.length), 1);
    const out = Buffer.alloc(width * encoded.length);
    encoded.forEach((b, i) => b.copy(out, i * width));
    return [headerBytes(`|S${width}`, shape), out];
  }
  const descr = DESCR_OF[datatype];
  if (descr === undefined) throw new ServingError('NOT_ACCEPTABLE', `a ${datatype} tensor cannot be written as application/x-npy (NumPy has no such dtype)`);
  let bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (!LITTLE_ENDIAN_HOST && data.BYTES_PER_ELEMENT > 1) {
    bytes = Buffer.from(bytes);
    for (let i = 0; i < bytes.length; i += data.BYTES_PER_ELEMENT) bytes.subarray(i, i + data.BYTES_PER_ELEMENT).reverse();
  }
  return [headerBytes(descr, shape), bytes];
}
