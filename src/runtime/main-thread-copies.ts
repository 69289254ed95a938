/**
 * @module runtime/main-thread-copies
 * The bounded set of main-thread session copies (runtime/session-placement.ts).
 * A copy is a second full session of a small model (its weights again, and
 * its own intra-op threads) kept on the main thread so that a lone request
 * skips the hop to a runtime worker. Giving every small model one doubled its
 * memory and added a thread pool per model (issue 28: 2.07× onnxruntime's own
 * RSS per ~1 MB model, +4 threads a model at a 16-core machine's defaults),
 * so copies are held only for the models used most recently: at most
 * `capacity` at once, the least recently run one dropped when another model
 * needs one. Memory and threads of copies are thus bounded by the capacity,
 * not by the number of models, and each copy is booked in the memory budget
 * by its session while it exists.
 */

/** What holds a copy: told to drop it when it is the least recently used and room is needed. */
export interface CopyHolder {
  dropCopy(): void;
}

export class MainThreadCopies {
  /** Insertion order is recency: the first entry is the least recently used. */
  private readonly held = new Set<CopyHolder>();

  constructor(readonly capacity: number) {
    if (!(capacity >= 0)) throw new RangeError(`capacity must be >= 0, got ${capacity}`);
  }

  get size(): number {
    return this.held.size;
  }

  /** Make room for `holder`'s copy, dropping the least recently used others; false when copies are off (capacity 0). */
  admit(holder: CopyHolder): boolean {
    if (this.capacity === 0) return false;
    this.held.delete(holder);
    while (this.held.size >= this.capacity) {
      const oldest = this.held.values().next().value as CopyHolder;
      this.held.delete(oldest);
      oldest.dropCopy();
    }
    this.held.add(holder);
    return true;
  }

  /** `holder`'s copy ran: it becomes the most recently used. */
  touch(holder: CopyHolder): void {
    if (this.held.delete(holder)) this.held.add(holder);
  }

  /** `holder` dropped its copy (or is released). */
  forget(holder: CopyHolder): void {
    this.held.delete(holder);
  }
}
