/**
 * @module http/held-connections
 * A keep-alive connection whose request was refused for overload is not read
 * again until a place frees for it, or until its Retry-After has passed.
 *
 * Why: clients under a retry storm (SDK retry loops, load balancers, batch
 * jobs) send the next request the moment a refusal arrives. Answered at once
 * and read again at once, every retry costs a parse and a write, and with
 * hundreds of connections the server spends its time refusing while the
 * admitted work starves (goodput fell to 3-6% of capacity at 1,024
 * connections). Held, a refused connection's next request waits in the
 * kernel's socket buffer at no cost to the server.
 *
 * When an admitted request's place frees (service/admission.ts `onFreed`)
 * and the connection refused longest ago for that model (else for a
 * server-wide limit) has been held for WAKE_AFTER of its Retry-After, it is
 * read again and the place is kept for it (Admission.keepPlace) until its
 * request arrives and claims it, so its retry is admitted rather than beaten
 * to the place by a fresh request. A place freed earlier stays with the
 * connection that held it: every woken connection displaces one client
 * whose next request is refused, and a refusal costs the server about what
 * a small answer does (node's request parse and socket write; measured with
 * the 256→1024→1024→16 MLP: 110-160 µs against 130-180 µs an answer), so
 * waking on every freed place (one refusal per answer) held goodput at
 * 0.54-0.67 of capacity under 1,024 retrying connections. Waking only the
 * connections that have waited most of their Retry-After bounds the refusals
 * to about the held connections per second. Refusals stay immediate (the
 * client learns at once, with Retry-After), and refused clients are served
 * in the order they were refused, within their Retry-After.
 *
 * Every wait has a deadline: a held connection is read again after
 * RETRY_AFTER_SECONDS at the latest, and a kept place that is not claimed in
 * the next poll phase (the client's retry, if it sent one, is in the socket
 * buffer already and is read there) is given back, so an idle woken
 * connection keeps nobody waiting.
 */
import type { Socket } from 'node:net';
import { RETRY_AFTER_SECONDS } from '../service/admission.js';

/** The key of connections refused for a server-wide limit: any freed place is theirs. */
export const ANY = '*';

/** The share of its Retry-After a held connection waits before a freed place may go to it. */
export const WAKE_AFTER = 0.75;

/** What holding needs of admission: keeping a freed place for a woken connection, and giving it back. */
export interface PlaceKeeper {
  keepPlace(key: string): void;
  dropPlace(key: string): void;
}

interface Held {
  readonly socket: Socket;
  readonly key: string;
  /** When it was held (ms, `now`). */
  readonly since: number;
  timer: NodeJS.Timeout | undefined;
}

interface Woken {
  readonly key: string;
}

export class HeldConnections {
  /** One FIFO per model key: the connections refused for that model, oldest first. */
  private readonly byKey = new Map<string, Held[]>();
  private readonly bySocket = new Map<Socket, Held>();
  /** Connections read again with a place kept for them, until they claim it. */
  private readonly woken = new Map<Socket, Woken>();
  /** Sockets with our close listener (one per socket, however often it is held). */
  private readonly watched = new WeakSet<Socket>();

  constructor(
    private readonly places: PlaceKeeper,
    private readonly holdMs = RETRY_AFTER_SECONDS * 1000,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Connections held now. */
  get size(): number {
    return this.bySocket.size;
  }

  /**
   * Hold `socket` (its refusal was just written) until a place frees for
   * `key` or holdMs passes. Node resumes a connection's socket when a
   * response finishes, so the pause is taken after that, in the check phase
   * of this turn: before the client's next request can be read.
   */
  hold(socket: Socket, key: string): void {
    if (this.bySocket.has(socket) || socket.destroyed) return;
    setImmediate(() => this.pause(socket, key));
  }

  /** The key a place was kept under for this connection's request, taken by it now; undefined when none was. */
  claim(socket: Socket): string | undefined {
    const woken = this.woken.get(socket);
    if (woken === undefined) return undefined;
    this.woken.delete(socket);
    return woken.key;
  }

  /**
   * A place for `key` freed: read the connection refused longest ago for that model, else for a server-wide limit,
   * if it has waited WAKE_AFTER of its Retry-After. Bound once, so the admission calls it directly for every freed place.
   */
  readonly wake = (key: string): void => {
    const held = this.byKey.get(key)?.[0] ?? this.byKey.get(ANY)?.[0];
    if (held === undefined || this.now() - held.since < this.holdMs * WAKE_AFTER || !this.forget(held)) return;
    if (held.socket.destroyed) return;
    this.places.keepPlace(held.key);
    const woken: Woken = { key: held.key };
    this.woken.set(held.socket, woken);
    held.socket.resume();
    // The first immediate runs in this loop iteration's check phase, the second after the next poll phase: where the
    // resumed socket's waiting request is read and claims the place.
    setImmediate(() => setImmediate(() => this.unclaimed(held.socket, woken)));
  };

  /** Gives back the place kept for `socket` (only `woken`'s, when given: a later wake keeps a place of its own). */
  private unclaimed(socket: Socket, woken?: Woken): void {
    if (woken !== undefined && this.woken.get(socket) !== woken) return;
    const key = this.claim(socket);
    if (key !== undefined) this.places.dropPlace(key);
  }

  private pause(socket: Socket, key: string): void {
    if (socket.destroyed || this.bySocket.has(socket)) return;
    const held: Held = { socket, key, since: this.now(), timer: undefined };
    held.timer = setTimeout(() => this.timedOut(held), this.holdMs);
    held.timer.unref();
    this.bySocket.set(socket, held);
    let fifo = this.byKey.get(key);
    if (fifo === undefined) this.byKey.set(key, (fifo = []));
    fifo.push(held);
    if (!this.watched.has(socket)) {
      this.watched.add(socket);
      socket.once('close', () => this.closed(socket));
    }
    socket.pause();
  }

  /** Its Retry-After passed: read it again, with no place kept (it is admitted if there is room). */
  private timedOut(held: Held): void {
    if (this.forget(held) && !held.socket.destroyed) held.socket.resume();
  }

  private closed(socket: Socket): void {
    const held = this.bySocket.get(socket);
    if (held !== undefined) this.forget(held);
    this.unclaimed(socket);
  }

  /** False when `held` was gone already. */
  private forget(held: Held): boolean {
    if (this.bySocket.get(held.socket) !== held) return false;
    this.bySocket.delete(held.socket);
    clearTimeout(held.timer);
    const fifo = this.byKey.get(held.key)!;
    const i = fifo.indexOf(held);
    if (i >= 0) fifo.splice(i, 1);
    if (fifo.length === 0) this.byKey.delete(held.key);
    return true;
  }
}
