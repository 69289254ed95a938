/**
 * @module runtime/protobuf-wire
 * A reader of protobuf's wire format over an ONNX file's bytes, for the few
 * fields the server reads without a protobuf library (not a dependency of
 * the server): the graph's shape for placement (runtime/onnx-graph.ts) and
 * the declared kinds of non-tensor inputs and outputs
 * (runtime/onnx-value-kinds.ts). Length-delimited fields are walked, not
 * copied, so tensor data is skipped by its length.
 */

export const VARINT = 0;
export const FIXED64 = 1;
export const BYTES = 2;
export const FIXED32 = 5;

/** One message's extent of the buffer; `sub()` gives a nested message's. Throws on malformed bytes. */
export class ProtobufReader {
  pos: number;
  constructor(
    private readonly buf: Uint8Array,
    start = 0,
    readonly end = buf.length,
  ) {
    this.pos = start;
  }

  get done(): boolean {
    return this.pos >= this.end;
  }

  varint(): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      const byte = this.buf[this.pos++];
      if (byte === undefined || this.pos > this.end) throw new Error('truncated varint');
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 128;
    }
    throw new Error('varint too long');
  }

  /** A length-delimited field's extent, skipped over. */
  sub(): ProtobufReader {
    const length = this.varint();
    const start = this.pos;
    this.pos += length;
    if (this.pos > this.end) throw new Error('truncated field');
    return new ProtobufReader(this.buf, start, this.pos);
  }

  /** A length-delimited field's bytes (a view, not a copy). */
  bytes(): Uint8Array {
    const r = this.sub();
    return this.buf.subarray(r.pos, r.end);
  }

  string(): string {
    const r = this.sub();
    return Buffer.from(this.buf.buffer, this.buf.byteOffset + r.pos, r.end - r.pos).toString('utf8');
  }

  skip(wire: number): void {
    if (wire === VARINT) this.varint();
    else if (wire === FIXED64) this.pos += 8;
    else if (wire === BYTES) this.sub();
    else if (wire === FIXED32) this.pos += 4;
    else throw new Error(`unsupported wire type ${wire}`);
  }

  /** Each field of this message in order: `visit` reads it or returns false to have it skipped. */
  fields(visit: (field: number, wire: number) => boolean): void {
    while (!this.done) {
      const key = this.varint();
      const field = Math.floor(key / 8);
      const wire = key & 7;
      if (!visit(field, wire)) this.skip(wire);
    }
  }

  /** A repeated int64 field's values, packed or not. */
  ints(wire: number, into: number[]): void {
    if (wire === VARINT) into.push(this.varint());
    else {
      const r = this.sub();
      while (!r.done) into.push(r.varint());
    }
  }
}
