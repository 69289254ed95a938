/**
 * @module test/support/raw-tar
 * A minimal ustar writer for entries that `tar.c` refuses to create (path
 * traversal, absolute names, links, devices, FIFOs): the hostile archives the
 * extraction must reject.
 */
import assert from 'node:assert/strict';
import { gzipSync } from 'node:zlib';

export interface RawEntry {
  readonly name: string;
  /** ustar typeflag: '0' file, '1' hard link, '2' symlink, '3' char dev, '4' block dev, '5' dir, '6' FIFO, ... */
  readonly type?: string;
  readonly body?: Buffer | string;
  readonly linkname?: string;
  readonly mode?: number;
}

function octal(buf: Buffer, offset: number, length: number, value: number): void {
  buf.write(`${value.toString(8).padStart(length - 1, '0')}\0`, offset, length, 'latin1');
}

/** The 512-byte ustar header of `entry` with a body of `size` bytes (for archives streamed body by body). */
export function header(entry: RawEntry, size: number): Buffer {
  const h = Buffer.alloc(512);
  assert.ok(Buffer.byteLength(entry.name) <= 100, 'raw entry names must fit the ustar name field');
  h.write(entry.name, 0, 100, 'utf8');
  octal(h, 100, 8, entry.mode ?? 0o644);
  octal(h, 108, 8, 0);
  octal(h, 116, 8, 0);
  octal(h, 124, 12, size);
  octal(h, 136, 12, 1_700_000_000);
  h.fill(0x20, 148, 156);
  h.write(entry.type ?? '0', 156, 1, 'latin1');
  if (entry.linkname !== undefined) h.write(entry.linkname, 157, 100, 'utf8');
  h.write('ustar\0', 257, 6, 'latin1');
  h.write('00', 263, 2, 'latin1');
  let sum = 0;
  for (const byte of h) sum += byte;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'latin1');
  return h;
}

export function tarBytes(entries: readonly RawEntry[], options: { end?: boolean } = {}): Buffer {
  const parts: Buffer[] = [];
  for (const entry of entries) {
    const body = typeof entry.body === 'string' ? Buffer.from(entry.body) : (entry.body ?? Buffer.alloc(0));
    parts.push(header(entry, body.length), body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  if (options.end !== false) parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

export function tgz(entries: readonly RawEntry[]): Buffer {
  return gzipSync(tarBytes(entries));
}
