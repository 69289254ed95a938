/**
 * @module service/admission
 * What an inference request must pass before its body is read, on every
 * route (HTTP and gRPC alike): the server's requests in flight, the model's
 * queue, and the bytes in flight. Transport-free: the HTTP front and the gRPC
 * handlers both call it, so admission is the same whichever way a request
 * comes.
 *
 * Requests and queues: a request on its way to a model (waiting for a turn,
 * for its body, or for text budget) counts against that model's queue (its
 * max_queue_size, else MME_MAX_QUEUE_SIZE) from the moment its headers are
 * read until it joins the model's own queue (then the scheduler counts it),
 * and against MME_MAX_INFLIGHT_REQUESTS until its response closes. `admit`
 * decides when the headers arrive, in the same call: a request over a limit
 * is answered at once, unread, so a refusal costs a parse of its headers and
 * one small write.
 *
 * A refusal says when to come back (details.retryAfterSeconds, the HTTP
 * Retry-After header), and every freed place is announced (`onFreed`), so the
 * HTTP front can hold a refused keep-alive connection unread until a place
 * frees for it (http/held-connections.ts): a retry storm then costs the
 * server one refusal per freed place instead of one per retry.
 *
 * Bytes in flight: each request reserves its declared Content-Length on
 * arrival (a body without one reserves as it is read); the answer's bytes are
 * added once it is made; everything is released when the response closes. A
 * request that would take the total over MME_MAX_INFLIGHT_BYTES is refused
 * before a byte of its body is read.
 */
import { retryAfter, ServingError } from '../errors.js';
import { EventLoopTurns } from './event-loop-turns.js';

export { DEFAULT_PER_TURN, DEFAULT_TEXT_BYTES_PER_TURN } from './event-loop-turns.js';

export interface AdmissionLimits {
  /** Most request-body plus answer bytes held at once (MME_MAX_INFLIGHT_BYTES). */
  readonly maxInflightBytes: number;
  /** Most inference requests waiting for a turn before new ones are refused unread. */
  readonly maxQueued: number;
  /** Most inference requests admitted and not yet answered (MME_MAX_INFLIGHT_REQUESTS); default: no bound here. */
  readonly maxRequests?: number;
  /** Most inference requests started per event-loop turn. */
  readonly perTurn?: number;
  /** The same while several models are in use (MME_SHARED_TURN_REQUESTS). */
  readonly sharedPerTurn?: number;
  /** Most bytes of request and answer text (JSON, CSV) parsed or written per event-loop turn. */
  readonly textBytesPerTurn?: number;
}

/** Why a request was refused: the `reason` label of onnx_mme_admission_refusals_total. */
export type RefusalReason = 'queue_full' | 'inflight_requests' | 'inflight_bytes' | 'turn_queue_full';

/** The Retry-After of an overload refusal (errors.ts): HTTP's smallest, and what a held connection waits at most. */
export { RETRY_AFTER_SECONDS } from '../errors.js';

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

/** Told of every refusal (metrics, the refusal log); `model` is the label the request used. */
export type RefusalListener = (reason: RefusalReason, model: string) => void;

/**
 * OVERLOADED without a stack trace: under a flood most answers are refusals,
 * nothing logs their stack, and capturing it was the largest single cost of
 * a refusal in a CPU profile of one.
 */
export function overloaded(message: string, model: string | undefined, reason: RefusalReason): ServingError {
  const depth = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return new ServingError('OVERLOADED', message, {
      ...(model === undefined ? {} : { model }),
      details: { reason, ...retryAfter() },
    });
  } finally {
    Error.stackTraceLimit = depth;
  }
}

/** The reason an OVERLOADED error carries, when it came from here. */
export function refusalReasonOf(err: ServingError): RefusalReason | undefined {
  const reason = err.code === 'OVERLOADED' ? err.details?.['reason'] : undefined;
  return typeof reason === 'string' ? (reason as RefusalReason) : undefined;
}

export class Admission {
  private bytes = 0;
  private requests = 0;
  /** Requests admitted for each model's queue and not yet in it (keys removed at 0, so the map holds only models with some). */
  private readonly onTheWay = new Map<string, number>();
  private readonly turns: EventLoopTurns;
  /** Places kept for woken connections (http/held-connections.ts), by model key (`*`: any model); keys removed at 0. */
  private readonly kept = new Map<string, number>();
  private keptTotal = 0;
  private readonly freedListeners: ((key: string) => void)[] = [];
  private readonly refusalListeners: RefusalListener[] = [];
  private held: { readonly size: number } | undefined;

  constructor(private readonly limits: AdmissionLimits) {
    this.turns = new EventLoopTurns({
      maxQueued: limits.maxQueued,
      ...(limits.perTurn === undefined ? {} : { perTurn: limits.perTurn }),
      ...(limits.sharedPerTurn === undefined ? {} : { sharedPerTurn: limits.sharedPerTurn }),
      ...(limits.textBytesPerTurn === undefined ? {} : { textBytesPerTurn: limits.textBytesPerTurn }),
    });
  }

  /** Called with the model key each time an admitted request's place frees (its response closed). */
  onFreed(listener: (key: string) => void): void {
    this.freedListeners.push(listener);
  }

  /** Called for every refusal made here. */
  onRefusal(listener: RefusalListener): void {
    this.refusalListeners.push(listener);
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
    return this.turns.queued;
  }

  /** Requests waiting for a turn to parse or write their text. */
  get textQueued(): number {
    return this.turns.textQueued;
  }

  /** Refused connections the front holds unread (http/held-connections.ts), which count as its work. */
  countHeld(held: { readonly size: number }): void {
    this.held = held;
  }

  /**
   * Whether the front has concurrent work now: requests admitted together
   * in this event-loop turn (HTTP or gRPC), requests waiting for a turn, or
   * refused connections held. The runtime keeps main-thread copies idle
   * then (runtime/quiet-window.ts).
   */
  get busy(): boolean {
    return this.turns.arrivals > 1 || this.turns.queued > 0 || this.turns.textQueued > 0 || (this.held !== undefined && this.held.size > 0);
  }

  /** Inference requests admitted and not yet answered. */
  get requestsInFlight(): number {
    return this.requests;
  }

  /** Requests admitted for `key`'s queue that have not reached it. */
  onTheWayTo(key: string): number {
    return this.onTheWay.get(key) ?? 0;
  }

  private refuse(message: string, model: string | undefined, reason: RefusalReason): ServingError {
    for (const listener of this.refusalListeners) listener(reason, model ?? '');
    return overloaded(message, model, reason);
  }

  /**
   * Keep a freed place for the request a woken connection is about to send
   * (`key`: its model, or `*` for a server-wide limit): until it claims the
   * place (`admit` with `claimed`) or the place is dropped, other requests
   * are refused as if it were taken, so the place goes to the client refused
   * longest ago instead of whoever's retry is read first.
   */
  keepPlace(key: string): void {
    this.kept.set(key, (this.kept.get(key) ?? 0) + 1);
    this.keptTotal++;
  }

  /** A kept place nobody claimed (its connection closed or sent nothing in time); idempotence is the caller's. */
  dropPlace(key: string): void {
    const n = (this.kept.get(key) ?? 0) - 1;
    if (n < 0) return;
    if (n > 0) this.kept.set(key, n);
    else this.kept.delete(key);
    this.keptTotal--;
  }

  /**
   * Count a request whose headers just arrived, or throw OVERLOADED (429, 503
   * on the KServe routes) at once when the server holds MME_MAX_INFLIGHT_REQUESTS
   * already, or when the model's queue plus the requests on their way to it
   * reach its limit. Places kept for woken connections count as taken, except
   * for the request that claims one (`claimed`: the key it was kept under).
   */
  admit(target: ModelQueue, claimed?: string): RequestTicket {
    if (claimed !== undefined) this.dropPlace(claimed);
    const max = this.limits.maxRequests;
    if (max !== undefined && this.requests + this.keptTotal >= max) {
      throw this.refuse(`server is at its limit of ${max} requests in progress (MME_MAX_INFLIGHT_REQUESTS); retry later`, target.model, 'inflight_requests');
    }
    const coming = (this.onTheWay.get(target.key) ?? 0) + (this.kept.get(target.key) ?? 0);
    if (target.queued + coming >= target.limit) {
      throw this.refuse(
        `model '${target.model}': the queue is full (${target.queued} requests waiting, ${coming} more on their way to it; max_queue_size ${target.limit}); retry later`,
        target.model,
        'queue_full',
      );
    }
    this.requests++;
    this.onTheWay.set(target.key, (this.onTheWay.get(target.key) ?? 0) + 1);
    this.turns.noteArrival();
    return this.ticket(target.key);
  }

  private ticket(key: string): RequestTicket {
    return new AdmittedRequest(this, key);
  }

  /** An admitted request for `key` joined its model's queue (AdmittedRequest calls it once). */
  arrivedAt(key: string): void {
    const n = (this.onTheWay.get(key) ?? 1) - 1;
    if (n > 0) this.onTheWay.set(key, n);
    else this.onTheWay.delete(key);
  }

  /** An admitted request's response closed (AdmittedRequest calls it once, after arrivedAt). */
  releasedAt(key: string): void {
    this.requests--;
    for (const listener of this.freedListeners) listener(key);
  }

  /**
   * Reserve `declared` bytes (the Content-Length; 0 when unknown) for a
   * request, or throw OVERLOADED when they do not fit.
   */
  reserve(declared: number, model?: string): ByteTicket {
    if (this.bytes + declared > this.limits.maxInflightBytes && declared > 0) throw this.overBytes(declared, model);
    this.bytes += declared;
    return new HeldBytes(this, declared);
  }

  /** Bytes more for a ticket (HeldBytes), or false when they would pass the limit. */
  tryHold(bytes: number): boolean {
    if (this.bytes + bytes > this.limits.maxInflightBytes) return false;
    this.bytes += bytes;
    return true;
  }

  /** Bytes that exist already, counted even past the limit (HeldBytes.add), or given back (negative, at release). */
  hold(bytes: number): void {
    this.bytes += bytes;
  }

  /** The refusal for bytes that do not fit (also for a body without Content-Length that grows past the limit). */
  overBytes(bytes: number, model?: string): ServingError {
    return this.refuse(
      `the server holds ${this.bytes} bytes of requests and answers in flight; ${bytes} more would pass its limit of ${this.limits.maxInflightBytes} (MME_MAX_INFLIGHT_BYTES); retry later`,
      model,
      'inflight_bytes',
    );
  }

  /** Take `bytes` of main-thread text work from this turn's budget (service/event-loop-turns.ts). */
  textTurn(bytes: number): Promise<void> | undefined {
    return this.turns.textTurn(bytes);
  }

  /**
   * Run `start` in this turn if the turn has room and nobody waits, else in a
   * later one (fair across model keys, service/event-loop-turns.ts). Throws
   * OVERLOADED, running nothing, when `maxQueued` requests wait already.
   */
  schedule(start: () => void, key = '', model?: string): void {
    if (!this.turns.schedule(key, start)) {
      throw this.refuse(`${this.turns.queued} requests are waiting to be read; retry later`, model, 'turn_queue_full');
    }
  }
}

/*
 * The tickets are classes, not objects of closures: every request waiting
 * for its model holds one of each, and under a flood thousands wait long
 * enough to be copied by every scavenge (bench/README.md, "overload.bench").
 */

class AdmittedRequest implements RequestTicket {
  private hasArrived = false;
  private released = false;

  constructor(
    private readonly admission: Admission,
    private readonly key: string,
  ) {}

  arrived(): void {
    if (this.hasArrived) return;
    this.hasArrived = true;
    this.admission.arrivedAt(this.key);
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.arrived();
    this.admission.releasedAt(this.key);
  }
}

class HeldBytes implements ByteTicket {
  private released = false;

  constructor(
    private readonly admission: Admission,
    private held: number,
  ) {}

  grow(more: number): boolean {
    if (this.released) return true;
    if (!this.admission.tryHold(more)) return false;
    this.held += more;
    return true;
  }

  add(more: number): void {
    if (this.released) return;
    this.admission.hold(more);
    this.held += more;
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.admission.hold(-this.held);
  }
}
