/**
 * @module http/admission
 * What an inference request must pass before its body is read, and how much
 * request work one event-loop turn may start.
 *
 * Bytes in flight: request bodies and the answers to them are memory the
 * server holds while a request is in progress. Each request reserves its
 * declared Content-Length on arrival (a body without one reserves as it is
 * read); the answer's bytes are added once it is made; everything is released
 * when the response closes. A request that would take the total over
 * MME_MAX_INFLIGHT_BYTES is refused (OVERLOADED: 429, 503 on the KServe
 * routes) before a byte of its body is read, so a flood of large or stalled
 * uploads cannot grow the process until the kernel kills it.
 *
 * Work per turn: node reads every ready socket in one poll phase, so a
 * handler (read, decode, validate, schedule, and under overload the refusal)
 * that ran inside it would run for every ready request at once: with 512
 * keep-alive connections that phase takes seconds, and a /ping on a new
 * connection waits for all of it (measured: 5-7 s to first byte). So at most
 * PER_TURN inference requests start per turn; the rest wait in a FIFO that
 * later turns drain (setImmediate, so every drain step is followed by a
 * poll phase that answers /ping). The FIFO is bounded: beyond `maxQueued`
 * waiting requests, new ones are refused at once, unread.
 *
 * Text per turn: starting a request is cheap, but parsing its JSON body and
 * writing its JSON answer are not, and they happen later (when the body has
 * arrived, when the run is done), many in one turn: 32 connections sending
 * 5.7 MB JSON bodies keep the main thread busy for seconds per turn, and a
 * /ping waits 6.3 s. So the decode and the answer of each request also take
 * their bytes of text from a per-turn budget (textBytesPerTurn); past it they
 * wait, in arrival order, for a later turn. One larger than the whole budget
 * runs alone in a turn. The waiters are bounded by the requests in flight.
 *
 * Requests and queues: a request waiting for a turn, for its body, or for
 * text budget is on its way to a model, and counts against that model's queue
 * (its max_queue_size, else MME_MAX_QUEUE_SIZE) from the moment its headers
 * are read until it joins the model's own queue (then the scheduler counts
 * it), and against MME_MAX_INFLIGHT_REQUESTS until its response closes.
 * `admit` decides when the headers arrive, in the same call, and a request
 * over either limit is answered at once, unread: counted only once it joined
 * the model's queue, a flood held in the turn stage would never fill that
 * queue, and its refusals would wait a turn and a body first.
 *
 * No express and no registry here: the front (http/inference-front.ts) and
 * the route handler (http/infer-route.ts) call it; the front asks the service
 * for the model's queue (QueueDepth).
 */
import { ServingError } from '../errors.js';

export interface AdmissionLimits {
  /** Most request-body plus answer bytes held at once (MME_MAX_INFLIGHT_BYTES). */
  readonly maxInflightBytes: number;
  /** Most inference requests waiting for a turn before new ones are refused unread. */
  readonly maxQueued: number;
  /** Most inference requests admitted and not yet answered (MME_MAX_INFLIGHT_REQUESTS); default: no bound here. */
  readonly maxRequests?: number;
  /** Most inference requests started per event-loop turn. */
  readonly perTurn?: number;
  /** Most bytes of request and answer text (JSON, CSV) parsed or written per event-loop turn. */
  readonly textBytesPerTurn?: number;
}

/** Enough to keep both cores busy with batches; few enough that one turn stays a few milliseconds. */
export const DEFAULT_PER_TURN = 16;

/**
 * About 10-30 ms of JSON parsing or writing on this class of machine: large
 * text bodies take a turn each (a 6 MB JSON body is ~70 ms to parse and
 * ~100 ms to answer), small ones share a turn by the hundred.
 */
export const DEFAULT_TEXT_BYTES_PER_TURN = 1024 * 1024;

/** Bytes a request holds; released once, when its response closes. */
export interface ByteTicket {
  /** Add bytes read or produced after admission; false (nothing added) when that would pass the limit. */
  grow(bytes: number): boolean;
  /** Add bytes that exist already (an answer): counted even past the limit, so later requests are refused. */
  add(bytes: number): void;
  release(): void;
}

/** The model queue a request is headed for, as the front sees it when the headers arrive. */
export interface ModelQueue {
  /** Whose queue: every request to the same model has the same key. */
  readonly key: string;
  /** The model as messages name it (the label the client used). */
  readonly model: string;
  /** Requests waiting in the model's own queue now (0 while the model is not loaded). */
  readonly queued: number;
  /** Most requests that may wait for the model: its max_queue_size, else MME_MAX_QUEUE_SIZE. */
  readonly limit: number;
}

/** An admitted request's place in the counts. */
export interface RequestTicket {
  /** The request joined its model's queue (the scheduler counts it from now); idempotent. */
  arrived(): void;
  /** Its response closed; idempotent. */
  release(): void;
}

/**
 * OVERLOADED without a stack trace: under a flood most answers are refusals,
 * nothing logs their stack (only 5xx lines carry one), and capturing it was
 * the largest single cost of a refusal in a CPU profile of one.
 */
function refusal(message: string, model: string): ServingError {
  const depth = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return new ServingError('OVERLOADED', message, { model });
  } finally {
    Error.stackTraceLimit = depth;
  }
}

export class Admission {
  private bytes = 0;
  private requests = 0;
  /** Requests admitted for each model's queue and not yet in it (keys removed at 0, so the map holds only models with some). */
  private readonly onTheWay = new Map<string, number>();
  private readonly queue: (() => void)[] = [];
  private startedThisTurn = 0;
  private turnScheduled = false;
  private readonly perTurn: number;
  private textBytesThisTurn = 0;
  private readonly textWaiters: { readonly bytes: number; readonly resolve: () => void }[] = [];
  private readonly textPerTurn: number;

  constructor(private readonly limits: AdmissionLimits) {
    this.perTurn = limits.perTurn ?? DEFAULT_PER_TURN;
    this.textPerTurn = limits.textBytesPerTurn ?? DEFAULT_TEXT_BYTES_PER_TURN;
  }

  /**
   * Take `bytes` of main-thread text work (parse a JSON body, write a JSON
   * answer) from this turn's budget: undefined when it fits now (do the work
   * at once, no await), else a promise that resolves in a later turn with
   * room. Nothing is refused here: the request was admitted already.
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

  /** Whether `bytes` of text fit what is left of this turn's budget; the first in a turn always does (one larger than the budget runs alone). */
  private textFits(bytes: number): boolean {
    return this.textBytesThisTurn === 0 || this.textBytesThisTurn + bytes <= this.textPerTurn;
  }

  /** Requests waiting for a turn to parse or write their text. */
  get textQueued(): number {
    return this.textWaiters.length;
  }

  /** MME_MAX_INFLIGHT_BYTES as resolved. */
  get limit(): number {
    return this.limits.maxInflightBytes;
  }

  /** Request and answer bytes held now. */
  get bytesInFlight(): number {
    return this.bytes;
  }

  /** Inference requests waiting for a turn now. */
  get queued(): number {
    return this.queue.length;
  }

  /** Inference requests admitted and not yet answered. */
  get requestsInFlight(): number {
    return this.requests;
  }

  /** Requests admitted for `key`'s queue that have not reached it. */
  onTheWayTo(key: string): number {
    return this.onTheWay.get(key) ?? 0;
  }

  /**
   * Count a request whose headers just arrived, or throw OVERLOADED (429, 503
   * on the KServe routes) at once when the server holds MME_MAX_INFLIGHT_REQUESTS
   * already, or when the model's queue plus the requests on their way to it
   * reach its limit.
   */
  admit(target: ModelQueue): RequestTicket {
    const max = this.limits.maxRequests;
    if (max !== undefined && this.requests >= max) {
      throw refusal(`server is at its limit of ${max} requests in progress (MME_MAX_INFLIGHT_REQUESTS); retry later`, target.model);
    }
    const coming = this.onTheWay.get(target.key) ?? 0;
    if (target.queued + coming >= target.limit) {
      throw refusal(
        `model '${target.model}': the queue is full (${target.queued} requests waiting, ${coming} more on their way to it; max_queue_size ${target.limit}); retry later`,
        target.model,
      );
    }
    this.requests++;
    this.onTheWay.set(target.key, coming + 1);
    let arrived = false;
    let released = false;
    const arrive = (): void => {
      if (arrived) return;
      arrived = true;
      const n = (this.onTheWay.get(target.key) ?? 1) - 1;
      if (n > 0) this.onTheWay.set(target.key, n);
      else this.onTheWay.delete(target.key);
    };
    return {
      arrived: arrive,
      release: () => {
        if (released) return;
        released = true;
        arrive();
        this.requests--;
      },
    };
  }

  /**
   * Reserve `declared` bytes (the Content-Length; 0 when unknown) for a
   * request, or throw OVERLOADED when they do not fit.
   */
  reserve(declared: number): ByteTicket {
    if (this.bytes + declared > this.limits.maxInflightBytes && declared > 0) throw this.overBytes(declared);
    this.bytes += declared;
    let held = declared;
    let released = false;
    return {
      grow: (more) => {
        if (released) return true;
        if (this.bytes + more > this.limits.maxInflightBytes) return false;
        this.bytes += more;
        held += more;
        return true;
      },
      add: (more) => {
        if (released) return;
        this.bytes += more;
        held += more;
      },
      release: () => {
        if (released) return;
        released = true;
        this.bytes -= held;
      },
    };
  }

  /** The refusal for bytes that do not fit (also for a body without Content-Length that grows past the limit). */
  overBytes(bytes: number): ServingError {
    return new ServingError(
      'OVERLOADED',
      `the server holds ${this.bytes} bytes of requests and answers in flight; ${bytes} more would pass its limit of ${this.limits.maxInflightBytes} (MME_MAX_INFLIGHT_BYTES); retry later`,
    );
  }

  /**
   * Run `start` in this turn if the turn has room and nobody waits, else in a
   * later one (in arrival order). Throws OVERLOADED, running nothing, when
   * `maxQueued` requests wait already.
   */
  schedule(start: () => void): void {
    if (this.queue.length === 0 && this.startedThisTurn < this.perTurn) {
      this.startedThisTurn++;
      this.endTurnSoon();
      start();
      return;
    }
    if (this.queue.length >= this.limits.maxQueued) {
      throw new ServingError('OVERLOADED', `${this.queue.length} requests are waiting to be read; retry later`);
    }
    this.queue.push(start);
    this.endTurnSoon();
  }

  private endTurnSoon(): void {
    if (this.turnScheduled) return;
    this.turnScheduled = true;
    setImmediate(this.nextTurn);
  }

  private readonly nextTurn = (): void => {
    this.turnScheduled = false;
    this.startedThisTurn = 0;
    this.textBytesThisTurn = 0;
    while (this.queue.length > 0 && this.startedThisTurn < this.perTurn) {
      this.startedThisTurn++;
      this.queue.shift()!();
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
