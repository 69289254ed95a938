/**
 * @module store/pinned-flights
 * Single flight for localizations whose result is a pinned disk-cache entry.
 * Concurrent callers for one key share one download/extraction; each caller
 * gets a pin of its own (released through `LocalModel.release`), and the
 * flight's own pin is dropped only after every waiting caller has taken
 * theirs, so the entry cannot be evicted in between.
 */
import { abortable, cancelled } from './abort.js';
import type { CachePin, DiskCache } from './disk-cache.js';
import type { LocalModel } from './model-source.js';

export interface PinnedResult {
  readonly pin: CachePin;
  readonly version: string;
}

export class PinnedFlights {
  private readonly flights = new Map<string, Promise<PinnedResult>>();

  constructor(private readonly cache: DiskCache) {}

  async run(key: string, target: string, signal: AbortSignal | undefined, work: () => Promise<PinnedResult>): Promise<LocalModel> {
    if (signal?.aborted) throw cancelled(target, signal);
    let flight = this.flights.get(key);
    if (!flight) {
      const started = work();
      flight = started.finally(() => {
        if (this.flights.get(key) === flight) this.flights.delete(key);
      });
      this.flights.set(key, flight);
      // Waiting callers resume in microtasks once the flight settles; a macrotask later they all hold pins.
      started.then(
        (result) => setImmediate(() => result.pin.release()),
        () => undefined,
      );
    }
    // The shared work is not tied to any one caller's signal: a caller that
    // gives up stops waiting, and the others (or SageMaker's retry) still get
    // the finished entry.
    const result = await abortable(flight, signal, target);
    const pin = this.cache.addPin(result.pin);
    return { target, dir: pin.entry.contentDir, version: result.version, release: () => pin.release() };
  }
}
