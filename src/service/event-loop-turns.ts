/**
 * @module service/event-loop-turns
 * How much request work one event-loop turn may start, and in which order
 * the rest waits.
 *
 * Node reads every ready socket in one poll phase, and each request's
 * handler (read, decode, validate, schedule) runs inside it. With hundreds of
 * keep-alive connections that phase would take seconds and a /ping on a new
 * connection would wait for all of it. So at most `perTurn` inference
 * requests start per turn; the rest wait and later turns drain them
 * (setImmediate, so every drain step is followed by a poll phase that answers
 * health checks).
 *
 * Fair across models: the waiting requests are kept in one FIFO per model,
 * and each turn takes one from each model in turn (round robin), so a model
 * flooded by hundreds of connections holds the same share of a turn as a
 * model sending one request at a time, never the whole turn. The waiters are
 * bounded (`maxQueued`); past it a request is refused at once, unread.
 *
 * Short turns while models share the server: a request's work after its
 * start (decode, batch, run, answer) runs in the microtasks of its turn,
 * interleaved with the work of every other request started in that turn, so
 * a light model's request waits for the whole turn, twice (the one under way
 * when it arrives, and its own), whatever its place in the round robin. While
 * requests of two or more models arrived within SHARED_WINDOW_US, a turn
 * starts at most `sharedPerTurn` (MME_SHARED_TURN_REQUESTS). It is a trade:
 * measured on the 2-core bench box (overload.bench's neighbours, medians of
 * 3), a 16→4 model sending one request at a time beside the MLP flooded by
 * 128 connections had p50 0.50 ms and p99 4.2 ms with 4 a turn, 0.86 ms and
 * 5.1 ms with 16, and the MLP kept 0.83 of its throughput alone with 4, 0.90
 * with 16. Short turns leave a flooded model's batches with empty queues
 * behind them, so the runtime learns that the server is busy from the
 * requests waiting here (`queued`), not from the batches. A model served
 * alone keeps `perTurn`: smaller turns there only split its batches (the
 * tiny model at 64 connections: 11-14k req/s with 16 a turn, 8k with 4).
 */
import { systemClock, type Clock } from '../clock.js';
import { DEFAULT_SHARED_TURN_REQUESTS, TURN_REQUESTS } from '../config/server-config.js';

/** Enough to keep both cores busy with batches; few enough that one turn stays a few milliseconds. */
export const DEFAULT_PER_TURN = TURN_REQUESTS;

/** Starts per turn while several models are in use (MME_SHARED_TURN_REQUESTS; the module header has the measurement). */
export const DEFAULT_SHARED_PER_TURN = DEFAULT_SHARED_TURN_REQUESTS;

/**
 * Requests of two models within this long make turns short; a model alone
 * this long gets long turns back. Long against one request at a time (a
 * light tenant's gap between requests is its own latency, well under this),
 * short against a tenant leaving.
 */
export const SHARED_WINDOW_US = 250_000;

/**
 * About 10-30 ms of JSON parsing or writing on this class of machine: large
 * text bodies take a turn each (a 6 MB JSON body is ~70 ms to parse and
 * ~100 ms to answer), small ones share a turn by the hundred.
 */
export const DEFAULT_TEXT_BYTES_PER_TURN = 1024 * 1024;

export interface TurnLimits {
  /** Most requests waiting for a turn; past it `schedule` returns false. */
  readonly maxQueued: number;
  readonly perTurn?: number;
  /** Starts per turn while requests of two or more models arrived within SHARED_WINDOW_US. */
  readonly sharedPerTurn?: number;
  readonly textBytesPerTurn?: number;
  /** Decides when several models count as in use (default: the system clock). */
  readonly clock?: Pick<Clock, 'nowUs'>;
}

export class EventLoopTurns {
  /** Requests waiting for a turn, one FIFO per model key; a key is present only while its FIFO is non-empty. */
  private readonly waiting = new Map<string, (() => void)[]>();
  /** Keys with waiters, in the order the round robin visits them. */
  private readonly rotation: string[] = [];
  private waiters = 0;
  private startedThisTurn = 0;
  private arrivalsThisTurn = 0;
  private turnScheduled = false;
  private readonly perTurn: number;
  private readonly sharedPerTurn: number;
  private textBytesThisTurn = 0;
  private readonly textWaiters: { readonly bytes: number; readonly resolve: () => void }[] = [];
  private readonly textPerTurn: number;
  private readonly clock: Pick<Clock, 'nowUs'>;
  /** The window in progress: when it began, the first model seen in it, and whether another followed. */
  private windowStartUs = Number.NEGATIVE_INFINITY;
  private windowKey: string | undefined;
  private windowShared = false;
  /** The window just before was shared (and ended less than a window ago). */
  private previousShared = false;

  constructor(private readonly limits: TurnLimits) {
    this.perTurn = limits.perTurn ?? DEFAULT_PER_TURN;
    this.sharedPerTurn = Math.min(this.perTurn, limits.sharedPerTurn ?? DEFAULT_SHARED_PER_TURN);
    this.textPerTurn = limits.textBytesPerTurn ?? DEFAULT_TEXT_BYTES_PER_TURN;
    this.clock = limits.clock ?? systemClock;
  }

  /** Whether turns are short now: requests of two or more models arrived within SHARED_WINDOW_US. */
  get shared(): boolean {
    return this.windowShared || this.previousShared;
  }

  /** Starts the turn may hold now. */
  private get turnLimit(): number {
    return this.shared ? this.sharedPerTurn : this.perTurn;
  }

  /** Counts `key` in the window; two keys (not how many) are all the decision needs, so nothing grows with the models. */
  private noteKey(key: string): void {
    const now = this.clock.nowUs();
    const age = now - this.windowStartUs;
    if (age >= SHARED_WINDOW_US) {
      this.previousShared = this.windowShared && age < 2 * SHARED_WINDOW_US;
      this.windowStartUs = now;
      this.windowKey = key;
      this.windowShared = false;
    } else if (!this.windowShared && key !== this.windowKey) {
      this.windowShared = true;
    }
  }

  /** Requests waiting for a turn now. */
  get queued(): number {
    return this.waiters;
  }

  /** Requests admitted in the turn under way (noteArrival): more than one means requests arrive together. */
  get arrivals(): number {
    return this.arrivalsThisTurn;
  }

  /** Count a request admitted now, on any transport; the count starts again with the next turn. */
  noteArrival(): void {
    this.arrivalsThisTurn++;
    this.endTurnSoon();
  }

  /** Requests waiting for a turn to parse or write their text. */
  get textQueued(): number {
    return this.textWaiters.length;
  }

  /**
   * Run `start` in this turn if the turn has room and nobody waits, else in a
   * later one (round robin across keys, arrival order within a key). False,
   * running nothing, when `maxQueued` requests wait already.
   */
  schedule(key: string, start: () => void): boolean {
    this.noteKey(key);
    if (this.waiters === 0 && this.startedThisTurn < this.turnLimit) {
      this.startedThisTurn++;
      this.endTurnSoon();
      start();
      return true;
    }
    if (this.waiters >= this.limits.maxQueued) return false;
    let fifo = this.waiting.get(key);
    if (fifo === undefined) {
      this.waiting.set(key, (fifo = []));
      this.rotation.push(key);
    }
    fifo.push(start);
    this.waiters++;
    this.endTurnSoon();
    return true;
  }

  /**
   * Take `bytes` of main-thread text work from this turn's budget: undefined
   * when it fits now (do the work at once, no await), else a promise that
   * resolves in a later turn with room.
   */
  textTurn(bytes: number): Promise<void> | undefined {
    if (bytes <= 0) return undefined;
    if (this.textWaiters.length === 0 && this.textFits(bytes)) {
      this.textBytesThisTurn += bytes;
      this.endTurnSoon();
      return undefined;
    }
    return new Promise<void>((resolve) => {
      this.textWaiters.push({ bytes, resolve });
      this.endTurnSoon();
    });
  }

  /** The first in a turn always fits (one larger than the budget runs alone). */
  private textFits(bytes: number): boolean {
    return this.textBytesThisTurn === 0 || this.textBytesThisTurn + bytes <= this.textPerTurn;
  }

  private endTurnSoon(): void {
    if (this.turnScheduled) return;
    this.turnScheduled = true;
    setImmediate(this.nextTurn);
  }

  /** One waiter from the next key in the rotation; the key goes to the back, or away when its FIFO is empty. */
  private startNext(): void {
    const key = this.rotation.shift()!;
    const fifo = this.waiting.get(key)!;
    const start = fifo.shift()!;
    this.waiters--;
    if (fifo.length > 0) this.rotation.push(key);
    else this.waiting.delete(key);
    start();
  }

  private readonly nextTurn = (): void => {
    this.turnScheduled = false;
    this.startedThisTurn = 0;
    this.arrivalsThisTurn = 0;
    this.textBytesThisTurn = 0;
    const limit = this.turnLimit;
    while (this.waiters > 0 && this.startedThisTurn < limit) {
      this.startedThisTurn++;
      this.startNext();
    }
    while (this.textWaiters.length > 0 && this.textFits(this.textWaiters[0]!.bytes)) {
      const waiter = this.textWaiters.shift()!;
      this.textBytesThisTurn += waiter.bytes;
      // The work itself runs in the microtasks right after this callback: in this turn, before the next poll phase.
      waiter.resolve();
    }
    // Reset the counts again after this turn; the wait in between is a poll phase, where /ping is answered.
    if (this.startedThisTurn > 0 || this.textBytesThisTurn > 0) this.endTurnSoon();
  };
}
