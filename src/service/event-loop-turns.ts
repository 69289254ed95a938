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
 * Text: parsing a JSON body and writing a JSON answer happen later (when the
 * body has arrived, when the run is done) and are not cheap, so each takes
 * its bytes from a per-turn budget (`textBytesPerTurn`); past it the work
 * waits, in arrival order, for a later turn. One larger than the whole budget
 * runs alone in a turn.
 */

/** Enough to keep both cores busy with batches; few enough that one turn stays a few milliseconds. */
export const DEFAULT_PER_TURN = 16;

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
  readonly textBytesPerTurn?: number;
}

export class EventLoopTurns {
  /** Requests waiting for a turn, one FIFO per model key; a key is present only while its FIFO is non-empty. */
  private readonly waiting = new Map<string, (() => void)[]>();
  /** Keys with waiters, in the order the round robin visits them. */
  private readonly rotation: string[] = [];
  private waiters = 0;
  private startedThisTurn = 0;
  private turnScheduled = false;
  private readonly perTurn: number;
  private textBytesThisTurn = 0;
  private readonly textWaiters: { readonly bytes: number; readonly resolve: () => void }[] = [];
  private readonly textPerTurn: number;

  constructor(private readonly limits: TurnLimits) {
    this.perTurn = limits.perTurn ?? DEFAULT_PER_TURN;
    this.textPerTurn = limits.textBytesPerTurn ?? DEFAULT_TEXT_BYTES_PER_TURN;
  }

  /** Requests waiting for a turn now. */
  get queued(): number {
    return this.waiters;
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
    if (this.waiters === 0 && this.startedThisTurn < this.perTurn) {
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
    this.textBytesThisTurn = 0;
    while (this.waiters > 0 && this.startedThisTurn < this.perTurn) {
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
