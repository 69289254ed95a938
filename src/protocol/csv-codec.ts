/**
 * @module protocol/csv-codec
 * text/csv for tabular models (SageMaker's classic format): each line is one
 * row of a batch, each field one feature; no header line. Parsing is
 * model-agnostic (rows of field strings, every row the same width); the
 * values become a tensor of the model's input datatype only once the model
 * is known. The answer is one output tensor written back the same way.
 */
import { ServingError } from '../errors.js';
import type { DataType, Tensor } from './tensor.js';
import { CSV_NON_FINITE, numericElementTexts } from './tensor-text.js';
import { decodeTensorData } from './v2-json-codec.js';

export const CSV_CONTENT_TYPE = 'text/csv';

export interface CsvTable {
  readonly rows: number;
  readonly columns: number;
  /** Row-major field texts, unquoted. */
  readonly fields: readonly string[];
}

function bad(model: string, message: string): ServingError {
  return new ServingError('INVALID_INPUT', `model '${model}': text/csv: ${message}`, { model });
}

/** Split one line into fields, honouring RFC 4180 double quotes ("" is a literal quote). */
function splitQuoted(model: string, line: string, lineNo: number): string[] {
  const out: string[] = [];
  let i = 0;
  for (;;) {
    if (line[i] === '"') {
      let field = '';
      i++;
      for (;;) {
        const q = line.indexOf('"', i);
        if (q < 0) throw bad(model, `line ${lineNo}: unterminated quoted field`);
        field += line.slice(i, q);
        if (line[q + 1] === '"') {
          field += '"';
          i = q + 2;
        } else {
          i = q + 1;
          break;
        }
      }
      out.push(field);
      if (i === line.length) return out;
      if (line[i] !== ',') throw bad(model, `line ${lineNo}: unexpected text after a quoted field`);
      i++;
    } else {
      const c = line.indexOf(',', i);
      if (c < 0) {
        out.push(line.slice(i));
        return out;
      }
      out.push(line.slice(i, c));
      i = c + 1;
    }
  }
}

/** Parse a CSV body: blank lines are skipped; ragged rows are a 400 naming the line. */
export function parseCsv(model: string, body: Uint8Array): CsvTable {
  let text = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  const lines = text.split(/\r?\n/);
  const fields: string[] = [];
  let columns = -1;
  let firstLine = 0;
  let rows = 0;
  for (let n = 0; n < lines.length; n++) {
    const line = lines[n]!;
    if (line.trim() === '') continue;
    const row = line.includes('"') ? splitQuoted(model, line, n + 1) : line.split(',');
    if (columns < 0) {
      columns = row.length;
      firstLine = n + 1;
    } else if (row.length !== columns) {
      throw bad(model, `line ${n + 1} has ${row.length} values but line ${firstLine} has ${columns}; every row must have the same number of columns`);
    }
    for (const f of row) fields.push(f);
    rows++;
  }
  if (rows === 0) throw bad(model, 'the body has no rows');
  return { rows, columns, fields };
}

const NUMBER = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;
const SPECIAL: Readonly<Record<string, number>> = {
  nan: Number.NaN,
  '+nan': Number.NaN,
  '-nan': Number.NaN,
  inf: Infinity,
  '+inf': Infinity,
  infinity: Infinity,
  '+infinity': Infinity,
  '-inf': -Infinity,
  '-infinity': -Infinity,
};

/** The field as a number, or a 400 naming its line and column. */
function toNumber(model: string, table: CsvTable, i: number): number | string {
  const raw = table.fields[i]!;
  const f = raw.trim();
  if (NUMBER.test(f)) {
    // Long integers stay text so INT64/UINT64 keep every digit (the JSON decoder reads them exactly).
    return /^[+-]?\d{16,}$/.test(f) ? f.replace(/^\+/, '') : Number(f);
  }
  const special = SPECIAL[f.toLowerCase()];
  if (special !== undefined) return special;
  const row = Math.floor(i / table.columns) + 1;
  const col = (i % table.columns) + 1;
  throw bad(model, `row ${row}, column ${col}: ${f === '' ? 'empty value' : `'${f.slice(0, 40)}' is not a number`}`);
}

/**
 * The table as a tensor of `dt` with `shape` (rows × columns elements).
 * Numbers are range-checked for integer types; long integers stay exact for
 * INT64/UINT64. BYTES keeps the field texts.
 */
export function csvToTensor(model: string, input: string, dt: DataType, shape: readonly number[], table: CsvTable): Tensor {
  const n = table.fields.length;
  if (dt === 'BYTES') return Object.freeze({ datatype: dt, shape: Object.freeze([...shape]), data: table.fields.slice() });
  if (dt === 'FP32' || dt === 'FP64') {
    const out = dt === 'FP32' ? new Float32Array(n) : new Float64Array(n);
    for (let i = 0; i < n; i++) out[i] = Number(toNumber(model, table, i));
    return Object.freeze({ datatype: dt, shape: Object.freeze([...shape]), data: out });
  }
  const exact = dt === 'INT64' || dt === 'UINT64';
  const values = new Array<number | string>(n);
  for (let i = 0; i < n; i++) {
    const v = toNumber(model, table, i);
    values[i] = exact ? v : Number(v);
  }
  return Object.freeze({ datatype: dt, shape: Object.freeze([...shape]), data: decodeTensorData(model, input, dt, values) });
}

/** RFC 4180 quoting, only when needed. */
function quote(s: string): string {
  return /[",\r\n]/.test(s) || s !== s.trim() ? `"${s.replace(/"/g, '""')}"` : s;
}

/**
 * One tensor as CSV: rank ≥ 2 → shape[0] lines of the remaining elements;
 * rank 1 → one value per line (a batch of scalars); rank 0 → one value.
 * Numbers are written as in the JSON answer (NaN, Infinity spelled out).
 */
export function encodeCsv(tensor: Tensor): string {
  const texts = Array.isArray(tensor.data) ? tensor.data.map(quote) : numericElementTexts(tensor, CSV_NON_FINITE);
  const perRow = tensor.shape.length >= 2 ? tensor.shape.slice(1).reduce((a, b) => a * b, 1) : 1;
  if (perRow === 0 || texts.length === 0) return '';
  const lines: string[] = [];
  for (let i = 0; i < texts.length; i += perRow) lines.push(texts.slice(i, i + perRow).join(','));
  return `${lines.join('\n')}\n`;
}
