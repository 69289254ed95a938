/**
 * @module test/unit/backends/js-step-frames
 * The frames between the server and a js step's process with their bulk
 * files (js-step-frames.ts, js-step-bulk.ts), both ends in this process over
 * the real files: a large tensor travels through the file (the frame itself
 * stays small) and arrives intact in a buffer of its own, a small one rides
 * inline; regions are reused once acknowledged and a frame that finds no
 * room goes inline; a typed array left in a header survives the read buffer
 * being reused; a section named past the end of the file is refused; a
 * header comes back exactly whether JSON can carry it or not.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';
import v8 from 'node:v8';
import { BULK_MIN_BYTES, BulkLink, openBulkFiles } from '../../../src/backends/js-step-bulk.js';
import { encodeFrame, FrameReader } from '../../../src/backends/js-step-frames.js';
import { JS_STEP_TENSORS } from '../../../src/backends/js-step-protocol.js';

function pair(capBytes?: number): { server: BulkLink; step: BulkLink; serverFileBytes(): number; close(): void } {
  const files = openBulkFiles(capBytes);
  assert.ok(files, 'the bulk files could be made in the temp directory');
  const [stepRead, stepWrite] = files.childFds;
  return {
    server: files.link,
    step: new BulkLink(stepRead, stepWrite, capBytes),
    serverFileBytes: () => fs.fstatSync(stepRead).size,
    close: () => {
      files.link.close();
      files.handedOver();
    },
  };
}

function execute(id: number, data: Float32Array): Record<string, unknown> {
  return { op: 'execute', id, batch: { inputs: { x: { datatype: 'FP32', shape: [1, data.length], data } }, outputs: ['y'], rows: 1 } };
}

function inputOf(msg: Record<string, unknown> | undefined): Float32Array {
  return (msg as { batch: { inputs: { x: { data: Float32Array } } } }).batch.inputs.x.data;
}

test('a 4 MiB tensor goes through the bulk file and arrives intact in a buffer of its own; a small one rides inline', () => {
  const p = pair();
  try {
    const big = Float32Array.from({ length: 1 << 20 }, (_, i) => i % 997);
    const frame = encodeFrame(execute(1, big), JS_STEP_TENSORS, p.server);
    assert.ok(Buffer.concat(frame).length < 1024, 'the frame carries the offset, not the bytes');
    const [msg] = new FrameReader(JS_STEP_TENSORS, undefined, p.step).push(Buffer.concat(frame));
    const got = inputOf(msg);
    assert.ok(got instanceof Float32Array);
    assert.notEqual(got.buffer, big.buffer);
    assert.equal(got.buffer.byteLength, big.byteLength);
    assert.deepEqual(got, big);

    const small = new Float32Array(BULK_MIN_BYTES / 4 - 1).fill(3);
    const inline = Buffer.concat(encodeFrame(execute(2, small), JS_STEP_TENSORS, p.server));
    assert.ok(inline.length > small.byteLength, 'a tensor under BULK_MIN_BYTES is in the frame');
    assert.deepEqual(inputOf(new FrameReader(JS_STEP_TENSORS, undefined, p.step).push(inline)[0]), small);
  } finally {
    p.close();
  }
});

test('regions are reused once the peer acknowledged their frame; without room a section goes inline, intact', () => {
  const p = pair(8 * 1024 * 1024);
  try {
    const reader = new FrameReader(JS_STEP_TENSORS, undefined, p.step);
    const replyReader = new FrameReader(JS_STEP_TENSORS, undefined, p.server);
    const big = (v: number): Float32Array => new Float32Array(1 << 20).fill(v);
    for (let i = 1; i <= 5; i++) {
      const [msg] = reader.push(Buffer.concat(encodeFrame(execute(i, big(i)), JS_STEP_TENSORS, p.server)));
      assert.equal(inputOf(msg)[0], i);
      // The step's answer carries its acknowledgement: the server's region is free for the next request.
      replyReader.push(Buffer.concat(encodeFrame({ op: 'finalized', id: i, error: undefined }, JS_STEP_TENSORS, p.step)));
    }
    assert.equal(p.serverFileBytes(), 4 * 1024 * 1024, 'one region, reused');

    // Unacknowledged: two fit under the 8 MiB cap, the third goes inline.
    const frames = [6, 7, 8].map((i) => Buffer.concat(encodeFrame(execute(i, big(i)), JS_STEP_TENSORS, p.server)));
    assert.ok(frames[0]!.length < 1024 && frames[1]!.length < 1024);
    assert.ok(frames[2]!.length > 4 * 1024 * 1024, 'no room: the bytes ride in the frame');
    assert.equal(p.serverFileBytes(), 8 * 1024 * 1024);
    for (const [k, f] of frames.entries()) assert.equal(inputOf(reader.push(f)[0])[1000], 6 + k);
  } finally {
    p.close();
  }
});

test('a typed array left in a header is copied out of the read buffer, which may then be reused', () => {
  class Holder {
    constructor(readonly data: Float64Array) {}
  }
  const msg = {
    op: 'result',
    id: 1,
    ok: true,
    value: { y: { datatype: 'FP32', shape: [1, 2], data: new Float32Array([1, 2]) }, kept: new Holder(new Float64Array([4, 5])) },
  };
  const bytes = Buffer.concat(encodeFrame(msg, JS_STEP_TENSORS));
  const [got] = new FrameReader(JS_STEP_TENSORS).push(bytes);
  bytes.fill(0);
  const value = (got as { value: { y: { data: Float32Array }; kept: { data: Float64Array } } }).value;
  assert.deepEqual([...value.y.data], [1, 2]);
  assert.deepEqual([...value.kept.data], [4, 5]);
});

test('a section named past the end of the bulk file, or at a bad offset, is a malformed frame', () => {
  const p = pair();
  try {
    for (const at of [1e12, -1, 0.5]) {
      const header = v8.serialize({
        msg: { op: 'result', id: 1, ok: true, value: { y: { datatype: 'FP32', shape: [1, 4], data: null } } },
        bins: [{ key: 'y', type: 'Float32Array', bytes: 16, at }],
        ack: 0,
      });
      const length = Buffer.alloc(4);
      length.writeUInt32LE(header.length, 0);
      assert.throws(
        () => new FrameReader(JS_STEP_TENSORS, undefined, p.server).push(Buffer.concat([length, header])),
        /past the end of its file|malformed bulk tensor section/,
      );
    }
  } finally {
    p.close();
  }
});

test('every message comes back exactly, whether its header can go as JSON or needs V8 serialization', () => {
  const odd = '\ud800 é \u0000 "quoted" 𝄞';
  const messages: Record<string, unknown>[] = [
    execute(1, new Float32Array([1, -0, Number.NaN, 3.5])),
    {
      op: 'execute',
      id: 2,
      batch: {
        inputs: { s: { datatype: 'BYTES', shape: [1, 3], data: [odd, '', 'x'] }, ünï: { datatype: 'FP64', shape: [1], data: new Float64Array([0.1]) } },
        outputs: ['y'],
        rows: 1,
      },
    },
    { op: 'result', id: 3, ok: true, value: { y: { datatype: 'FP32', shape: [1, 2], data: [1.5, 2] }, extra: { nested: [true, null, 'z'] } } },
    { op: 'result', id: 4, ok: true, value: { y: { datatype: 'FP32', shape: [1, 2], data: [-0, Number.NaN] } } },
    { op: 'result', id: 5, ok: true, value: new Map([['y', { datatype: 'INT64', shape: [1], data: new BigInt64Array([-(2n ** 63n)]) }]]) },
    { op: 'result', id: 6, ok: true, value: { y: { datatype: 'INT64', shape: [1], data: [2n ** 70n] }, u: undefined, hole: [1, , 3] } },
    { op: 'result', id: 7, ok: false, what: 'execute() failed', error: { message: odd, code: undefined } },
    { op: 'crash', cause: odd },
    { op: 'result', id: 8, ok: true, value: { y: { datatype: 'FP64', shape: [1, 5000], data: Array.from({ length: 5000 }, (_, i) => i / 7) } } },
  ];
  for (const msg of messages) {
    const [got] = new FrameReader(JS_STEP_TENSORS).push(Buffer.concat(encodeFrame(msg, JS_STEP_TENSORS)));
    assert.deepStrictEqual(got, msg);
  }
  const jsonFirst = Buffer.concat(encodeFrame(messages[1]!, JS_STEP_TENSORS))[4];
  assert.equal(String.fromCharCode(jsonFirst!), '{', 'a batch of plain values goes as JSON');
});

/** The frame of `msg` and the first byte of its header. */
function firstHeaderByte(msg: Record<string, unknown>): string {
  return String.fromCharCode(Buffer.concat(encodeFrame(msg, JS_STEP_TENSORS))[4]!);
}

test("a call's two messages go as a flat header and come back exactly; the rest goes nested", () => {
  const flat: Record<string, unknown>[] = [
    {
      op: 'execute',
      id: 2 ** 40,
      batch: {
        inputs: {
          x: { datatype: 'FP32', shape: [2, 3], data: new Float32Array([1, -0, Number.NaN, 4, 5, 6]) },
          ünï: { datatype: 'INT64', shape: [], data: new BigInt64Array([-(2n ** 63n)]) },
          empty: { datatype: 'UINT8', shape: [0, 4], data: new Uint8Array(0) },
        },
        outputs: ['y', 'z "quoted"'],
        rows: 2,
      },
    },
    { op: 'result', id: 9, ok: true, value: { y: { shape: [1, 2], data: new Float64Array([0.1, 2]), datatype: 'FP64' } } },
    { op: 'result', id: 10, ok: true, value: {} },
  ];
  const nested: Record<string, unknown>[] = [
    // A tensor with a key more, without a datatype, with a shape JSON would change or that is not a shape, under '__proto__'.
    { op: 'result', id: 1, ok: true, value: { y: { datatype: 'FP32', shape: [1], data: new Float32Array(1), note: 'kept' } } },
    { op: 'result', id: 2, ok: true, value: { y: { shape: [1], data: new Float32Array(1) } } },
    { op: 'result', id: 3, ok: true, value: { y: { datatype: 'FP32', shape: [-0], data: new Float32Array(0) } } },
    { op: 'result', id: 4, ok: true, value: { y: { datatype: 'FP32', shape: [1.5], data: new Float32Array(1) } } },
    { op: 'result', id: 5, ok: true, value: { ['__proto__']: { datatype: 'FP32', shape: [1], data: new Float32Array(1) } } },
    { op: 'result', id: 6, ok: true, value: new Map([['y', { datatype: 'FP32', shape: [1], data: new Float32Array([7]) }]]) },
    { op: 'result', id: 7, ok: true, value: { y: { datatype: 'FP32', shape: [1], data: [7] } } },
    { op: 'result', id: 8.5, ok: true, value: { y: { datatype: 'FP32', shape: [1], data: new Float32Array(1) } } },
    { op: 'finalized', id: 11, error: undefined },
  ];
  for (const [msgs, first] of [
    [flat, '['],
    [nested, undefined],
  ] as const) {
    for (const msg of msgs) {
      if (first)
        assert.equal(
          firstHeaderByte(msg),
          first,
          JSON.stringify(msg, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)),
        );
      else assert.notEqual(firstHeaderByte(msg), '[');
      const [got] = new FrameReader(JS_STEP_TENSORS).push(Buffer.concat(encodeFrame(msg, JS_STEP_TENSORS)));
      assert.deepStrictEqual(got, msg);
    }
  }
});

test('a flat header a broken or hostile peer wrote is a malformed frame, never a message', () => {
  const frameOf = (head: unknown): Buffer => {
    const text = Buffer.from(JSON.stringify(head));
    const length = Buffer.alloc(4);
    length.writeUInt32LE(text.length, 0);
    return Buffer.concat([length, text]);
  };
  const result = ['r', 1, 1, 'y', 'FP32', 1, 1];
  // The well-formed one first, so the rest fail for what they change.
  const [ok] = new FrameReader(JS_STEP_TENSORS).push(Buffer.concat([frameOf([-1, -1, 1, 'y', 7, 4, -1, ...result]), Buffer.alloc(4)]));
  assert.deepEqual((ok as { value: { y: { data: Float32Array } } }).value.y.data, new Float32Array(1));
  const hostile: unknown[] = [
    { not: 'an array' },
    [-1, -1, 5, ...result],
    [-1, -1, -1, ...result],
    [-1, -1, 1, 'y', 99, 4, -1, ...result],
    [-1, -1, 1, 'y', 'Float32Array', 4, -1, ...result],
    [-1, -1, 1, 'y', 7, 4.5, -1, ...result],
    [-1, -1, 1, 'y', 7, 4, -7, ...result],
    [-1, -1, 0, 'q', 1],
    [-1, -1, 0, 'r', 1, 1, 'y', 'FP32', 1],
    [-1, -1, 0, 'r', 1, 1, 'y', 'FP32', 1, 1, 'extra'],
    [-1, -1, 0, 'r', 1, 2, 'y', 'FP32', 0, 'y', 'FP32', 0],
    [-1, -1, 0, 'r', 1, 1, '__proto__', 'FP32', 0],
    [-1, -1, 0, 'r', '1', 0],
    [-1, -1, 0, 'r', 1, 1, 'y', 'FP32', 1, -1],
    [-1, -1, 0, 'x', 1, 1, 1, 7, 0],
    [-1, -1, 0, 'x', 1, 1, 2 ** 60, 'y', 0],
  ];
  for (const head of hostile) {
    assert.throws(() => new FrameReader(JS_STEP_TENSORS).push(frameOf(head)), /malformed/, JSON.stringify(head));
  }
  // A bin's type that names a property every object has is no type either (nested header).
  const nested = {
    msg: { op: 'result', id: 1, ok: true, value: { y: { datatype: 'FP32', shape: [1], data: null } } },
    bins: [{ key: 'y', type: 'toString', bytes: 4 }],
  };
  assert.throws(() => new FrameReader(JS_STEP_TENSORS).push(frameOf(nested)), /malformed/);
});
