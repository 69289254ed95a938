/**
 * @module backends/js-step-frames
 * The wire format between the server and a js step's process
 * (js-step-worker.ts ↔ js-step-host.ts), over a socket pair (the child's
 * fd 3). A frame is
 *
 *   u32 LE header length | header | section 0 | section 1 | …
 *
 * where the header is `{ msg, bins }` and each `bins` entry names a tensor
 * whose typed-array data was lifted out of `msg` and travels as raw bytes in
 * a section of its own. Everything else (shapes, BYTES string arrays, plain
 * arrays of numbers, Maps, errors) rides in the header. A call's two
 * messages (the batch and a usual answer) go as one flat JSON array
 * (flatHeader; the protocol says how its messages flatten); other messages
 * as JSON when JSON gives them back exactly (plain objects and arrays of
 * strings, booleans, null and finite numbers), else as V8's structured
 * serialization writes them. The first byte tells which (`[`, `{` or V8's
 * version tag). Headers are most of a small call's encoding: the nested
 * JSON costs a third of V8's serializer (2 + 3 µs against 8.5 + 6 µs for a
 * 1×16 batch), and the flat array about two thirds of the nested JSON for a
 * whole call (6.9 against 10.7 µs, both ends' encode and decode). The sections are copied into
 * the frame's one buffer when it is encoded (one write per frame, and what
 * a step does to its output array after returning it cannot reach the
 * answer). What is read lands in one fresh, aligned ArrayBuffer per tensor.
 *
 * With a BulkLink (js-step-bulk.ts), a section of BULK_MIN_BYTES or more
 * is written to a file both processes hold instead, and its `bins` entry
 * says at which offset (`at`): one kernel copy each way, no turns on the
 * socket. The header then carries the frame's sequence number (`seq`) and,
 * always, the last one its writer read (`ack`), which frees the regions.
 *
 * Tensors are lifted from one place per message: `tensorsOf(msg)`, the
 * batch's inputs or what execute() returned (a Map or an object of tensors).
 */
import v8 from 'node:v8';
import { BULK_MIN_BYTES, type BulkLink } from './js-step-bulk.js';

/** A header larger than this is a broken or hostile peer, not a message. */
export const MAX_HEADER_BYTES = 256 * 1024 * 1024;
/** Nor is a tensor section larger than this. */
export const MAX_SECTION_BYTES = 2 ** 32 - 1;

type TypedArray =
  | Int8Array
  | Uint8Array
  | Uint8ClampedArray
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | Float32Array
  | Float64Array
  | BigInt64Array
  | BigUint64Array;
type TypedArrayCtor = new (buffer: ArrayBuffer) => TypedArray;

const TYPES: Readonly<Record<string, TypedArrayCtor>> = {
  Int8Array,
  Uint8Array,
  Uint8ClampedArray,
  Int16Array,
  Uint16Array,
  Int32Array,
  Uint32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
};
const TYPE_NAMES = Object.keys(TYPES);
const TYPE_BY_CTOR = new Map<unknown, string>(TYPE_NAMES.map((n) => [TYPES[n], n]));

/** The name of the typed-array type `data` is (a Buffer is a Uint8Array), or undefined for anything else. */
function typeOf(data: unknown): string | undefined {
  if (!ArrayBuffer.isView(data) || data instanceof DataView) return undefined;
  return TYPE_BY_CTOR.get(data.constructor) ?? TYPE_NAMES.find((n) => data instanceof TYPES[n]!);
}

/** The frames of a tick up to this many bytes leave as one buffer (copied together); more, as they are, in one writev. */
const CONCAT_BYTES = 256 * 1024;
/** The first byte of a JSON header; V8's serialization starts with its version tag (0xff). */
const JSON_OPEN = 0x7b;
/** The first byte of a flat header (flatHeader). */
const FLAT_OPEN = 0x5b;
/** Deeper headers go through V8's serializer (JSON's recursion is not worth checking past this). */
const JSON_MAX_DEPTH = 32;
/**
 * Headers with more values than this go through V8's serializer: JSON wins
 * on the few values of a batch's header, V8 on many (1M doubles: 9 + 107 ms
 * against 164 + 74 ms, at half the bytes), and the check stays short.
 */
const JSON_MAX_VALUES = 1024;

/**
 * Whether JSON.parse(JSON.stringify(value)) gives `value` back exactly: plain
 * objects and dense plain arrays of strings, booleans, null and finite
 * numbers other than -0. Anything else (undefined, a Map, a bigint, a typed
 * array, a class instance, NaN, …), or more than JSON_MAX_VALUES values,
 * sends the header through V8's serializer.
 */
function jsonExact(value: unknown, depth = 0, budget = { left: JSON_MAX_VALUES }): boolean {
  if (--budget.left < 0) return false;
  if (value === null) return true;
  const kind = typeof value;
  if (kind === 'string' || kind === 'boolean') return true;
  if (kind === 'number') return Number.isFinite(value) && !Object.is(value, -0);
  if (kind !== 'object' || depth > JSON_MAX_DEPTH) return false;
  if (Array.isArray(value)) {
    if (Object.getPrototypeOf(value) !== Array.prototype || value.length > budget.left) return false;
    for (let i = 0; i < value.length; i++) if (!(i in value) || !jsonExact(value[i], depth + 1, budget)) return false;
    return true;
  }
  if (Object.getPrototypeOf(value) !== Object.prototype) return false;
  for (const key in value) {
    if (!Object.hasOwn(value, key) || !jsonExact((value as Record<string, unknown>)[key], depth + 1, budget)) return false;
  }
  return true;
}

/**
 * length | header | sections, in one buffer: the frame holds what the
 * tensors held when it was encoded, whatever the step does to its arrays
 * before the tick's write (a section is under BULK_MIN_BYTES unless there
 * are no bulk files).
 */
function frameBuffer(header: Buffer | string, sections: readonly Buffer[]): Buffer {
  const headerBytes = typeof header === 'string' ? Buffer.byteLength(header) : header.length;
  let bytes = 4 + headerBytes;
  for (const s of sections) bytes += s.length;
  const frame = Buffer.allocUnsafe(bytes);
  frame.writeUInt32LE(headerBytes, 0);
  if (typeof header === 'string') frame.write(header, 4);
  else header.copy(frame, 4);
  let at = 4 + headerBytes;
  for (const s of sections) at += s.copy(frame, at);
  return frame;
}

/** A lifted tensor: where its data goes back, its type, its byte length, and its offset in the bulk file when it went there. */
interface Bin {
  readonly key: string;
  readonly type: string;
  readonly bytes: number;
  readonly at?: number;
}

/** The tensors of a message: a Map or an object of `{ data }` (anything else has none). */
export type TensorHolder = Map<unknown, unknown> | Record<string, unknown>;

/** Where a protocol's messages keep their tensors: found, and replaced in a copy; and its hot messages' flat form. */
export interface TensorPlaces {
  tensorsOf(msg: Record<string, unknown>): TensorHolder | undefined;
  withTensors(msg: Record<string, unknown>, tensors: TensorHolder): Record<string, unknown>;
  /**
   * `msg` (its typed arrays already lifted: `data: null`) as a flat array of
   * strings and numbers that JSON carries exactly, or undefined when it has
   * no flat form (then the header is the nested JSON or V8's serialization).
   */
  flatten?(msg: Record<string, unknown>): (string | number)[] | undefined;
  /** The message `flatten` made, from `flat` at `at`; throws on anything `flatten` cannot have made. */
  unflatten?(flat: readonly unknown[], at: number): Record<string, unknown>;
}

/**
 * A frame for `msg`, as buffers to write in order. `places` says where
 * its tensors are; their typed arrays travel as sections, the rest of `msg`
 * in the header. Throws what v8.serialize throws (a function, a symbol, …).
 */
export function encodeFrame(msg: Record<string, unknown>, places: TensorPlaces, bulk?: BulkLink): Buffer[] {
  const bins: Bin[] = [];
  const sections: Buffer[] = [];
  const tensors = places.tensorsOf(msg);
  let sent = msg;
  let seq: number | undefined;
  if (tensors) {
    const lift = (key: unknown, t: unknown): unknown => {
      const data = (t as { data?: unknown } | null)?.data;
      const type = typeof key === 'string' ? typeOf(data) : undefined;
      if (type === undefined || (t as object).constructor !== Object) return t;
      const view = data as TypedArray;
      const bytes = Buffer.from(view.buffer, view.byteOffset, view.byteLength);
      const at = bulk && bytes.length >= BULK_MIN_BYTES ? bulk.put((seq ??= bulk.nextSeq()), bytes) : undefined;
      bins.push(at === undefined ? { key: key as string, type, bytes: bytes.length } : { key: key as string, type, bytes: bytes.length, at });
      if (at === undefined) sections.push(bytes);
      return { ...(t as object), data: null };
    };
    const lifted =
      tensors instanceof Map
        ? new Map([...tensors].map(([k, t]) => [k, lift(k, t)]))
        : Object.fromEntries(Object.entries(tensors).map(([k, t]) => [k, lift(k, t)]));
    sent = places.withTensors(msg, lifted);
  }
  const ack = bulk ? bulk.lastRead : undefined;
  const flat = places.flatten?.(sent);
  if (flat) return [frameBuffer(flatHeader(flat, bins, seq, ack), sections)];
  const header: Record<string, unknown> = { msg: sent, bins };
  if (seq !== undefined) header['seq'] = seq;
  if (ack !== undefined) header['ack'] = ack;
  return [frameBuffer(jsonExact(header) ? JSON.stringify(header) : v8.serialize(header), sections)];
}

/**
 * The header of a message with a flat form: one JSON array
 *
 *   [seq, ack, bins, (key, type, bytes, at) per bin, ...the message's flat form]
 *
 * with -1 for an absent seq, ack or at, and a bin's type as its index in
 * TYPE_NAMES. JSON.parse reads a flat array of a batch's header in about a
 * fifth of the time it takes for the same values nested in objects (0.4
 * against 2.2 µs for a 1×16 batch, measured), and a small call is mostly
 * its headers: four per call, one each way in each process.
 */
function flatHeader(flat: readonly (string | number)[], bins: readonly Bin[], seq: number | undefined, ack: number | undefined): string {
  const head: (string | number)[] = [seq ?? -1, ack ?? -1, bins.length];
  for (const b of bins) head.push(b.key, TYPE_NAMES.indexOf(b.type), b.bytes, b.at ?? -1);
  for (const v of flat) head.push(v);
  return JSON.stringify(head);
}

/** A flat header's frame fields and message (the bins and the message are checked where every header is). */
function readFlatHeader(head: unknown, places: TensorPlaces): Header {
  if (!Array.isArray(head) || places.unflatten === undefined) throw new Error('a malformed frame header');
  const count = head[2] as unknown;
  if (!Number.isSafeInteger(count) || (count as number) < 0 || 3 + 4 * (count as number) > head.length) throw new Error('a malformed frame header');
  const bins: Bin[] = [];
  for (let i = 0, at = 3; i < (count as number); i++, at += 4) {
    const place = head[at + 3] as unknown;
    const type = TYPE_NAMES[head[at + 1] as number];
    bins.push({
      key: head[at] as string,
      type: type ?? '',
      bytes: head[at + 2] as number,
      ...(place === -1 ? {} : { at: place as number }),
    });
  }
  const optional = (v: unknown): number | undefined => (v === -1 ? undefined : (v as number));
  return { msg: places.unflatten(head, 3 + 4 * (count as number)), bins, seq: optional(head[0]), ack: optional(head[1]) };
}

/**
 * Writes frames to `socket`, the frames of one tick together: with several
 * batches in flight, their answers (resolved in the same microtask run)
 * leave in one write, one buffer when they are small, instead of one each.
 */
export class FrameWriter {
  private queued: Buffer[] = [];
  private queuedBytes = 0;

  constructor(
    private readonly socket: { cork(): void; uncork(): void; write(b: Buffer, done?: () => void): boolean },
    private readonly places: TensorPlaces,
    private readonly bulk?: BulkLink,
  ) {}

  /** Throws, writing nothing, when `msg` cannot be encoded. */
  write(msg: Record<string, unknown>): void {
    const buffers = encodeFrame(msg, this.places, this.bulk);
    if (this.queued.length === 0) process.nextTick(() => this.flush());
    for (const b of buffers) {
      this.queued.push(b);
      this.queuedBytes += b.length;
    }
  }

  /** Write what is queued now, `msg` last (when it can be encoded), and call `done` once the socket took it. */
  writeNow(msg: Record<string, unknown>, done: () => void): void {
    try {
      this.write(msg);
    } finally {
      this.flush(done);
    }
  }

  private flush(done?: () => void): void {
    const buffers = this.queued;
    if (buffers.length === 0) {
      done?.();
      return;
    }
    this.queued = [];
    const bytes = this.queuedBytes;
    this.queuedBytes = 0;
    if (buffers.length === 1 || bytes <= CONCAT_BYTES) {
      this.socket.write(buffers.length === 1 ? buffers[0]! : Buffer.concat(buffers, bytes), done);
      return;
    }
    this.socket.cork();
    buffers.forEach((b, i) => this.socket.write(b, i === buffers.length - 1 ? done : undefined));
    this.socket.uncork();
  }
}

/**
 * V8's deserializer, except that a typed array left in a header is copied
 * out: the default one makes it a view of the bytes it reads, and a header
 * may be read where it lies in a read buffer that is then reused.
 */
class OwningDeserializer extends v8.DefaultDeserializer {
  _readHostObject(): unknown {
    const read = (v8.DefaultDeserializer.prototype as unknown as { _readHostObject(this: v8.Deserializer): ArrayBufferView })._readHostObject;
    const view = read.call(this);
    const bytes = new Uint8Array(view.byteLength);
    bytes.set(new Uint8Array(view.buffer, view.byteOffset, view.byteLength));
    if (Buffer.isBuffer(view)) return Buffer.from(bytes.buffer);
    if (view instanceof DataView) return new DataView(bytes.buffer);
    return new (view.constructor as new (b: ArrayBuffer) => ArrayBufferView)(bytes.buffer);
  }
}

function deserialize(bytes: Uint8Array): unknown {
  const deserializer = new OwningDeserializer(bytes);
  deserializer.readHeader();
  return deserializer.readValue();
}

interface Header {
  readonly msg: Record<string, unknown>;
  readonly bins: readonly Bin[];
  readonly seq?: number;
  readonly ack?: number;
}

/**
 * Reads frames from a byte stream: `push` each chunk, get the messages
 * completed by it, their tensors' data restored where encodeFrame took it
 * from. Throws on a malformed frame; the stream is unusable after that.
 */
export class FrameReader {
  private target: Uint8Array = new Uint8Array(4);
  private filled = 0;
  private stage: 'length' | 'header' | 'bins' = 'length';
  private header: Header | undefined;
  /** The sections of the current frame by bin, those from the bulk file read at once. */
  private buffers: (ArrayBuffer | undefined)[] = [];
  private binIndex = 0;

  /**
   * `maxFrameBytes`: the most a frame may hold, its tensors included; a
   * larger one is refused before anything is allocated for it (the server
   * reads a step's answers with it: a step cannot have sent more than its
   * memory bound lets it hold).
   */
  constructor(
    private readonly places: TensorPlaces,
    private readonly maxFrameBytes = Number.POSITIVE_INFINITY,
    private readonly bulk?: BulkLink,
  ) {}

  push(chunk: Buffer): Record<string, unknown>[] {
    const done: Record<string, unknown>[] = [];
    let at = 0;
    while (at < chunk.length || (this.stage === 'bins' && this.filled === this.target.length)) {
      if (this.stage === 'length' && this.filled === 0 && chunk.length - at >= 4) {
        // The usual case: the whole header in this chunk, read where it lies (no copy, no buffer of its own).
        const length = this.checkLength(chunk.readUInt32LE(at));
        if (chunk.length - at - 4 >= length) {
          at += 4 + length;
          const msg = this.takeHeader(chunk.subarray(at - length, at));
          if (msg) done.push(msg);
          continue;
        }
      }
      const n = Math.min(this.target.length - this.filled, chunk.length - at);
      this.target.set(chunk.subarray(at, at + n), this.filled);
      this.filled += n;
      at += n;
      if (this.filled < this.target.length) break;
      const msg = this.advance();
      if (msg) done.push(msg);
    }
    return done;
  }

  /** The current target is full: move to the next one; a whole message when it was the last. */
  private advance(): Record<string, unknown> | undefined {
    if (this.stage === 'length') {
      const length = this.checkLength(Buffer.from(this.target.buffer, this.target.byteOffset, 4).readUInt32LE(0));
      this.stage = 'header';
      this.expect(new Uint8Array(length));
      return undefined;
    }
    if (this.stage === 'header') return this.takeHeader(this.target);
    this.buffers[this.binIndex] = this.target.buffer as ArrayBuffer;
    this.binIndex++;
    return this.nextBin();
  }

  private checkLength(length: number): number {
    if (length === 0 || length > MAX_HEADER_BYTES || length > this.maxFrameBytes) throw new Error(`a frame header of ${length} bytes`);
    return length;
  }

  /** A frame's header, read: its sections expected next (or the message, when it has none inline). */
  private takeHeader(bytes: Uint8Array): Record<string, unknown> | undefined {
    const text = (): string => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('utf8');
    const header = (
      bytes[0] === FLAT_OPEN ? readFlatHeader(JSON.parse(text()), this.places) : bytes[0] === JSON_OPEN ? JSON.parse(text()) : deserialize(bytes)
    ) as Header;
    if (header === null || typeof header !== 'object' || typeof header.msg !== 'object' || !Array.isArray(header.bins))
      throw new Error('a malformed frame header');
    this.checkBins(header, bytes.length);
    this.header = header;
    this.buffers = this.fromBulk(header);
    this.binIndex = 0;
    this.stage = 'bins';
    return this.nextBin();
  }

  private checkBins(header: Header, headerBytes: number): void {
    for (const b of header.bins) {
      if (!(typeof b.key === 'string' && Object.hasOwn(TYPES, b.type) && Number.isSafeInteger(b.bytes) && b.bytes >= 0 && b.bytes <= MAX_SECTION_BYTES)) {
        throw new Error('a malformed tensor section');
      }
      if (b.at !== undefined && !(this.bulk && Number.isSafeInteger(b.at) && b.at >= 0)) throw new Error('a malformed bulk tensor section');
    }
    const total = header.bins.reduce((sum, b) => sum + b.bytes, headerBytes);
    if (total > this.maxFrameBytes) throw new Error(`a frame of ${total} bytes, over the ${this.maxFrameBytes} it may hold`);
  }

  /** The sections the frame placed in the bulk file, read now; its acknowledgement noted. */
  private fromBulk(header: Header): (ArrayBuffer | undefined)[] {
    const buffers = header.bins.map((b) => (b.at === undefined ? undefined : this.bulk!.get(b.at, b.bytes)));
    if (this.bulk) {
      if (Number.isSafeInteger(header.ack)) this.bulk.acknowledged(header.ack!);
      if (Number.isSafeInteger(header.seq)) this.bulk.lastRead = header.seq!;
    }
    return buffers;
  }

  /** Expect the next inline section (a fresh buffer of its size), or finish the message. */
  private nextBin(): Record<string, unknown> | undefined {
    const header = this.header!;
    while (this.binIndex < header.bins.length && this.buffers[this.binIndex] !== undefined) this.binIndex++;
    if (this.binIndex < header.bins.length) {
      // Not zeroed: every byte of it is read from the stream before anyone sees it.
      this.expect(new Uint8Array(Buffer.allocUnsafeSlow(header.bins[this.binIndex]!.bytes).buffer));
      return undefined;
    }
    const { msg, bins } = header;
    const lifted = bins.length > 0 ? this.places.tensorsOf(msg) : undefined;
    if (bins.length > 0) {
      if (lifted === undefined) throw new Error('tensor sections without tensors');
      bins.forEach((b, i) => {
        const Ctor = TYPES[b.type]!;
        if (b.bytes % (Ctor as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT !== 0) throw new Error('a tensor section of a partial element');
        const t = lifted instanceof Map ? lifted.get(b.key) : lifted[b.key];
        if (t === null || typeof t !== 'object') throw new Error('a tensor section without its tensor');
        (t as { data: unknown }).data = new Ctor(this.buffers[i]!);
      });
    }
    this.header = undefined;
    this.buffers = [];
    this.stage = 'length';
    this.expect(new Uint8Array(4));
    return msg;
  }

  private expect(target: Uint8Array): void {
    this.target = target;
    this.filled = 0;
  }
}
