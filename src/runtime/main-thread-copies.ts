/**
 * @module runtime/main-thread-copies
 * The bounded set of main-thread session copies (runtime/session-placement.ts).
 * A copy is a second full session of a small model (its weights again, and
 * its own intra-op threads) kept on the main thread so that a lone request
 * skips the hop to a runtime worker. A copy for every small model would double
 * its memory and add a thread pool per model (measured: 2.07× onnxruntime's
 * own RSS per ~1 MB model, +4 threads a model at a 16-core machine's
 * defaults), so at most `capacity` copies exist at once. Memory and threads of copies are
 * thus bounded by the capacity, not by the number of models, and each copy is
 * booked in the memory budget by its session while it exists.
 *
 * Which models hold them is decided by how often each runs, not by which ran
 * last. A copy costs the main thread a session create and, when dropped, a
 * release (together about 3 ms for a tiny model on the 2-core bench box: the
 * create, and joining the copy's intra-op thread), and saves a run the hop to
 * its worker (about 0.07 ms of latency). Dropping the least recently used copy
 * for any model that ran twice makes a copy per request once more models are
 * in use than there are copies (measured: 2,000 tiny models, Zipf(1.1), 16
 * copies: 7 ms of server CPU a request, hits p50 12 ms). So, as TinyLFU admits to a cache:
 * when the copies are full, a model gets one only if it ran more often,
 * recently, than the held model that ran least, which then gives up its
 * copy. Counts are halved every AGE_RUNS_PER_COPY × capacity runs of all
 * models, so the models hot now take over from those hot before.
 */

/** What holds a copy: told to drop it when a model that runs more often needs the room. */
export interface CopyHolder {
  dropCopy(): void;
}

/**
 * Runs (of all models) per copy between halvings of the counts. A copy pays
 * for itself after about 40 runs (3 ms ÷ 0.07 ms), so a held model is judged
 * over a window in which the capacity's copies together see 64 runs each;
 * with 16 copies, 1,024 runs.
 */
export const AGE_RUNS_PER_COPY = 64;

interface Count {
  n: number;
  /** The age (MainThreadCopies.age) `n` was last brought up to. */
  age: number;
}

export class MainThreadCopies {
  /** Insertion order is recency: the first entry is the least recently run (ties in frequency go to it). */
  private readonly held = new Set<CopyHolder>();
  /** Runs of every model that may hold a copy, aged; weak so that a released session needs no forgetting. */
  private readonly counts = new WeakMap<CopyHolder, Count>();
  private readonly agePeriod: number;
  private sinceAged = 0;
  private age = 0;

  constructor(readonly capacity: number) {
    if (!(capacity >= 0)) throw new RangeError(`capacity must be >= 0, got ${capacity}`);
    this.agePeriod = Math.max(1, capacity) * AGE_RUNS_PER_COPY;
  }

  get size(): number {
    return this.held.size;
  }

  /** `holder` ran (on its copy or not): counted, and if it holds a copy it becomes the most recently run. */
  ran(holder: CopyHolder): void {
    if (this.capacity === 0) return;
    const count = this.current(holder);
    if (count === undefined) this.counts.set(holder, { n: 1, age: this.age });
    else count.n++;
    if (++this.sinceAged >= this.agePeriod) {
      this.sinceAged = 0;
      this.age++;
    }
    if (this.held.delete(holder)) this.held.add(holder);
  }

  /** How often `holder` ran recently (halved once per period since). */
  frequency(holder: CopyHolder): number {
    return this.current(holder)?.n ?? 0;
  }

  /** Whether `admit` would give `holder` a copy now (nothing changes). */
  wouldAdmit(holder: CopyHolder): boolean {
    if (this.capacity === 0) return false;
    if (this.held.has(holder) || this.held.size < this.capacity) return true;
    return this.frequency(holder) > this.frequency(this.victim()!);
  }

  /**
   * Give `holder` a place for its copy: a free one, or that of the held model
   * that ran least often (which drops its copy) if `holder` ran more often.
   * False when there is no place for it, or copies are off (capacity 0).
   */
  admit(holder: CopyHolder): boolean {
    if (!this.wouldAdmit(holder)) return false;
    if (!this.held.has(holder) && this.held.size >= this.capacity) {
      const victim = this.victim()!;
      this.held.delete(victim);
      victim.dropCopy();
    }
    this.held.delete(holder);
    this.held.add(holder);
    return true;
  }

  /** `holder` dropped its copy (or is released). */
  forget(holder: CopyHolder): void {
    this.held.delete(holder);
  }

  /** The held model that ran least often; of equals, the least recently run. */
  private victim(): CopyHolder | undefined {
    let victim: CopyHolder | undefined;
    let least = Infinity;
    for (const holder of this.held) {
      const f = this.frequency(holder);
      if (f < least) {
        least = f;
        victim = holder;
      }
    }
    return victim;
  }

  private current(holder: CopyHolder): Count | undefined {
    const count = this.counts.get(holder);
    if (count !== undefined && count.age !== this.age) {
      const halvings = this.age - count.age;
      count.n = halvings >= 31 ? 0 : count.n >>> halvings;
      count.age = this.age;
    }
    return count;
  }
}
