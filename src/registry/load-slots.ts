/**
 * @module registry/load-slots
 * How many model loads run at once (MME_LOAD_CONCURRENCY): a counting
 * semaphore whose waiters leave when their load is cancelled. First come,
 * first served.
 */
export class LoadSlots {
  private busy = 0;
  private readonly waiting: { grant: () => void }[] = [];

  constructor(readonly size: number) {
    if (!(size >= 1)) throw new RangeError(`load concurrency must be >= 1, got ${size}`);
  }

  /** Loads holding a slot now. */
  get inUse(): number {
    return this.busy;
  }

  /** Loads waiting for a slot now. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Wait for a slot (or for `signal`: then its reason); call the returned function once to give it back. */
  async acquire(signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) throw signal.reason as Error;
    if (this.busy < this.size) {
      this.busy++;
      return this.releaser();
    }
    await new Promise<void>((resolve, reject) => {
      const waiter = {
        grant: (): void => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = (): void => {
        const i = this.waiting.indexOf(waiter);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(signal!.reason as Error);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(waiter);
    });
    return this.releaser();
  }

  private releaser(): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const next = this.waiting.shift();
      // The slot passes straight to the next waiter: the count stays.
      if (next !== undefined) next.grant();
      else this.busy--;
    };
  }
}
