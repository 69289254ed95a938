/**
 * @module backends/js-step-bulk
 * Large tensors between the server and a js step's process go through two
 * files instead of the socket pair (js-step-frames.ts names them in the
 * frame by offset): one the server writes and the step only reads, one the
 * step writes and the server only reads. A 4 MiB section then costs one
 * pwrite and one pread (one kernel copy each) instead of some 60 socket
 * reads and writes in 64 KiB pieces with both processes taking turns.
 *
 * The files are made in a fresh 0700 directory under the temp directory,
 * opened, and unlinked at once with their directory: nothing is left on any
 * path, and the step holds them only as the inherited descriptors 4
 * (read-only) and 5 (write-only). Node's permission model does not check
 * descriptors, and grants no path there. What the step writes to its file
 * is bounded by RLIMIT_FSIZE (its memory bound, js-step-sandbox.ts), as
 * every file it writes is. The temp directory, not /dev/shm: on the 2-core
 * VM this was measured on, a 4 MiB pwrite into /dev/shm's tmpfs took 0.37 ms
 * against 0.13 ms into the page cache of the disk's /tmp, and a whole 4 MiB
 * call cost 1.5-3 ms more CPU through /dev/shm. The files are never synced;
 * their pages are overwritten in place, and the kernel may write dirty ones
 * back to the disk in the background (at most the files' size per writeback
 * period) until the process ends. A TMPDIR on tmpfs avoids that.
 *
 * Regions are reused: each frame that placed sections in a file has a
 * sequence number, every frame carries the number of the last frame its
 * writer read, and a region is free again once the frame that used it was
 * acknowledged that way. A section that finds no room (the file at its cap,
 * a full /dev/shm, a write error) travels inline in the frame instead.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** Sections smaller than this ride in the frame (a pwrite + pread costs more than copying them). */
export const BULK_MIN_BYTES = 64 * 1024;
/** The most either file grows to; sections beyond it go inline. */
export const BULK_CAP_BYTES = 1024 * 1024 * 1024;
/** The descriptors the step's process finds its two files on (server → step, step → server). */
export const STEP_BULK_FDS = { read: 4, write: 5 } as const;

const PAGE = 4096;

interface Region {
  readonly seq: number;
  readonly start: number;
  readonly end: number;
}

/** One side's view of the two files: where it writes sections, where it reads the peer's. */
export class BulkLink {
  /** The regions of frames written and not yet acknowledged, by start. */
  private used: Region[] = [];
  /** The sequence number of the last frame written with sections here. */
  private seq = 0;
  /** The sequence number of the last frame read from the peer (sent back as its acknowledgement). */
  lastRead = 0;
  private closed = false;

  constructor(
    private readonly readFd: number,
    private readonly writeFd: number,
    private readonly capBytes = BULK_CAP_BYTES,
  ) {}

  /** The sequence number the sections of the next frame are placed under. */
  nextSeq(): number {
    return ++this.seq;
  }

  /** Write `view` at a free place for frame `seq`: its offset, or undefined when it found no room. */
  put(seq: number, view: Uint8Array): number | undefined {
    if (this.closed) return undefined;
    const start = this.allocate(seq, view.byteLength);
    if (start === undefined) return undefined;
    try {
      for (let done = 0; done < view.byteLength;) {
        const n = fs.writeSync(this.writeFd, view, done, view.byteLength - done, start + done);
        if (n <= 0) throw new Error('short write');
        done += n;
      }
      return start;
    } catch {
      this.used = this.used.filter((r) => r.start !== start);
      return undefined;
    }
  }

  /** The `bytes` at `offset` of the peer's file, in a fresh ArrayBuffer; throws when the file holds fewer. */
  get(offset: number, bytes: number): ArrayBuffer {
    if (this.closed) throw new Error('a tensor section in a closed file');
    const buffer = Buffer.allocUnsafeSlow(bytes);
    for (let done = 0; done < bytes;) {
      const n = fs.readSync(this.readFd, buffer, done, bytes - done, offset + done);
      if (n <= 0) throw new Error('a tensor section past the end of its file');
      done += n;
    }
    return buffer.buffer as ArrayBuffer;
  }

  /** Close both descriptors (once): nothing is placed or read after that, so a reused descriptor number is never touched. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    fs.closeSync(this.readFd);
    fs.closeSync(this.writeFd);
  }

  /** The peer read every frame up to `seq`: their regions are free. */
  acknowledged(seq: number): void {
    if (this.used.length > 0) this.used = this.used.filter((r) => r.seq > seq);
  }

  /** First fit, page-aligned. */
  private allocate(seq: number, bytes: number): number | undefined {
    const size = Math.ceil(bytes / PAGE) * PAGE;
    let start = 0;
    let index = 0;
    for (; index < this.used.length; index++) {
      const r = this.used[index]!;
      if (r.start - start >= size) break;
      start = r.end;
    }
    if (start + size > this.capBytes) return undefined;
    this.used.splice(index, 0, { seq, start, end: start + size });
    return start;
  }
}

/** The server's side of a step's two files: its own descriptors, and those the step inherits. */
export interface BulkFiles {
  readonly link: BulkLink;
  /** For spawn's stdio at STEP_BULK_FDS.read and .write. */
  readonly childFds: readonly [number, number];
  /** Close the step's descriptors here, once its process holds its own copies (after spawn). */
  handedOver(): void;
}

/** Make the two files (see the module's comment), or undefined when the temp directory does not allow it (everything then goes inline). */
export function openBulkFiles(capBytes = BULK_CAP_BYTES): BulkFiles | undefined {
  const opened: number[] = [];
  let dir: string | undefined;
  try {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'onnx-mme-js-bulk-'));
    const toStep = path.join(dir, 'in');
    const fromStep = path.join(dir, 'out');
    const open = (file: string, flags: number): number => {
      const fd = fs.openSync(file, flags, 0o600);
      opened.push(fd);
      return fd;
    };
    const { O_RDONLY, O_WRONLY, O_RDWR, O_CREAT, O_EXCL } = fs.constants;
    const serverWrite = open(toStep, O_RDWR | O_CREAT | O_EXCL);
    const stepRead = open(toStep, O_RDONLY);
    const stepWrite = open(fromStep, O_WRONLY | O_CREAT | O_EXCL);
    const serverRead = open(fromStep, O_RDONLY);
    fs.rmSync(dir, { recursive: true, force: true });
    let handed = false;
    return {
      // The link closes the server's two (BulkLink.close: the files vanish once the step's process is gone too).
      link: new BulkLink(serverRead, serverWrite, capBytes),
      childFds: [stepRead, stepWrite],
      handedOver: () => {
        if (handed) return;
        handed = true;
        fs.closeSync(stepRead);
        fs.closeSync(stepWrite);
      },
    };
  } catch {
    for (const fd of opened) fs.closeSync(fd);
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
    return undefined;
  }
}
