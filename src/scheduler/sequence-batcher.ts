/**
 * @module scheduler/sequence-batcher
 * The scheduler of a stateful model (`sequence_batching`): Triton's sequence
 * batcher (core `sequence_batch_scheduler.cc`) with implicit state.
 *
 * - Every request names its sequence (`sequence_id`), the first says
 *   `sequence_start`, the last `sequence_end`. A sequence holds a slot of one
 *   instance from its start until it ends; its requests run one after
 *   another, in arrival order, never two at once, so each sees the state the
 *   previous one left.
 * - Slots: `direct` gives each instance max(1, max_batch_size) slots and a
 *   batch is the slots with a request ready (sent once
 *   `minimum_slot_utilization` of the slots are ready, or its oldest request
 *   waited `max_queue_delay_microseconds`); `oldest` gives each instance
 *   `max_candidate_sequences` slots and batches the oldest ready requests of
 *   its candidates up to max_batch_size (sent at a preferred batch size, at
 *   max_batch_size, or after the delay). One request per sequence per batch.
 * - A sequence that finds no free slot waits in the backlog, in order of
 *   arrival, until a sequence ends; its requests wait there with a deadline
 *   (the request's `timeout` parameter, else SLOT_WAIT_DEFAULT_US), after
 *   which the sequence ends (TIMEOUT).
 * - Control inputs (START, END, READY, CORRID) are made here, never sent by
 *   the client; the implicit state (`state { input_name output_name }`) is
 *   the initial state at the start, then the previous request's output state,
 *   kept here per sequence and removed from the answer. A failed run leaves
 *   the state as it was (the client may resend that request).
 * - A sequence ends at its `sequence_end`, after max_sequence_idle_microseconds
 *   without a request, when one of its queued requests is cancelled, or when
 *   the model is unloaded (close(): queued work runs, then every live
 *   sequence ends). A request of a sequence that ended on its own is told why.
 * - A `sequence_start` on a live id restarts it, as Triton's
 *   SequenceBatchScheduler::Enqueue does: a warning, the old sequence ends
 *   (reason `restart`), and the new one takes its place in the same slot (or
 *   backlog entry), behind the old one's queued requests, which still run in
 *   order on the old state. The new sequence's first request runs on the
 *   initial state; the old state is freed then (at once when nothing of the
 *   old sequence is queued or running).
 *
 * Time comes from an injected Clock, so tests drive it by hand.
 */
import type { Cancellation } from '../cancellation.js';
import type { SequenceBatchingConfig } from '../config/model-config-types.js';
import { retryAfter, ServingError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Tensor } from '../protocol/tensor.js';
import { batchSignature, concatInputs, requestRows, splitOutputs } from './batch-merge.js';
import { systemClock, type Clock } from '../clock.js';
import { recordExecution, runAlone, type Outcome, type SchedulerMetrics } from './batch-execution.js';
import {
  answerOf,
  nothing,
  QueueingScheduler,
  type Answerable,
  type BatchLoad,
  type ModelExecutor,
  type QueueDepth,
  type ScheduleOptions,
} from './model-scheduler.js';
import { PumpTrigger, WakeTimer } from './pump-triggers.js';
import {
  controlTensors,
  ownedCopy,
  sequenceKey,
  showSequenceId,
  tensorBytes,
  type ControlTensors,
  type SequenceId,
  type SequenceRequest,
} from './sequence-tensors.js';
import type { SequenceEndReason, SequenceTracker } from './sequence-tracker.js';

/** What a sequence batcher reports besides the batch cells. */
export interface SequenceMetrics {
  readonly batch?: SchedulerMetrics;
  /** Live sequences of the model changed by `delta` (+1 at a start, -1 at an end). */
  liveChanged(delta: number): void;
  /** A sequence found every slot taken and waited in the backlog. */
  slotWait(): void;
  ended(reason: SequenceEndReason): void;
}

export interface SequenceBatcherOptions {
  readonly model: string;
  readonly config: SequenceBatchingConfig;
  /** The model's max_batch_size (0: every request runs alone, one slot per instance). */
  readonly maxBatchSize: number;
  readonly instances: readonly ModelExecutor[];
  /** Batches in flight per instance at once (as DynamicBatcherOptions.batchesPerInstance; default 1). */
  readonly batchesPerInstance?: number;
  /** Each state input's tensor at the start of a sequence (with the leading 1 when batching). */
  readonly initialStates: ReadonlyMap<string, Tensor>;
  /** The server's live-sequence bound and memory of ended sequences. */
  readonly tracker: SequenceTracker;
  /** Most requests waiting in the model (slots and backlog together); more are refused with 429. */
  readonly maxQueued: number;
  /** Bytes of implicit state held changed by `delta` (the registry counts them in the memory budget). */
  readonly onStateBytes?: (delta: number) => void;
  /** The model's live sequences changed (the registry pins a model while it has any). */
  readonly onLiveChange?: (live: number) => void;
  readonly metrics?: SequenceMetrics;
  readonly clock?: Clock;
  readonly logger?: Logger;
}

interface Pending extends Answerable {
  readonly seq: Sequence;
  readonly inputs: ReadonlyMap<string, Tensor>;
  readonly outputs: readonly string[];
  readonly controls: readonly [string, Tensor][];
  readonly start: boolean;
  readonly end: boolean;
  readonly enqueuedUs: number;
  readonly deadlineUs: number;
  /** The sequence's generation when this request came (a restart starts the next one). */
  readonly generation: number;
  state: 'queued' | 'running' | 'settled';
}

interface Slot {
  readonly instance: number;
  seq: Sequence | undefined;
}

interface Sequence {
  readonly key: string;
  readonly id: SequenceId;
  slot: Slot | undefined;
  readonly queue: Pending[];
  running: boolean;
  /** The state outputs of its last successful request; undefined = the initial state. */
  state: Map<string, Tensor> | undefined;
  stateBytes: number;
  lastUs: number;
  /** In the live map (its sequence_end has not arrived). */
  open: boolean;
  done: boolean;
  /** Restarts so far: the requests of earlier generations belong to sequences that ended early. */
  generation: number;
}

/**
 * How long a sequence waits for a slot when its request names no `timeout`:
 * as long as a load waits for memory (MME_MEMORY_WAIT_SECONDS' default),
 * since both wait for other work to end. Triton's backlog waits without limit.
 */
export const SLOT_WAIT_DEFAULT_US = 30_000_000;

export class SequenceBatcher extends QueueingScheduler {
  private readonly model: string;
  private readonly clock: Clock;
  private readonly controls: ControlTensors;
  private readonly stateOutputs: readonly string[];
  private readonly slots: Slot[] = [];
  private readonly slotsPerInstance: number;
  private readonly inflight: number[];
  private readonly capacity: number;
  private readonly live = new Map<string, Sequence>();
  /** Sequences (alive or ended) holding a slot or waiting for one: what close() waits for. */
  private readonly backlog: Sequence[] = [];
  private queued = 0;
  private running = 0;
  private liveCount = 0;
  private closed = false;
  private closeWaiters: (() => void)[] = [];
  private readonly pumpTrigger: PumpTrigger;
  private readonly batchTimer: WakeTimer;
  private idleTimer: (() => void) | undefined;

  constructor(private readonly options: SequenceBatcherOptions) {
    super();
    if (options.instances.length === 0) throw new Error(`model '${options.model}': a scheduler needs at least one instance`);
    this.model = options.model;
    this.clock = options.clock ?? systemClock;
    const batching = options.maxBatchSize > 0;
    this.controls = controlTensors(options.config.controls, batching, options.model);
    this.stateOutputs = options.config.states.map((s) => s.outputName);
    const strategy = options.config.strategy;
    this.slotsPerInstance = strategy.kind === 'oldest' ? strategy.maxCandidateSequences : Math.max(1, options.maxBatchSize);
    options.instances.forEach((_, instance) => {
      for (let i = 0; i < this.slotsPerInstance; i++) this.slots.push({ instance, seq: undefined });
    });
    this.inflight = options.instances.map(() => 0);
    this.capacity = Math.max(1, Math.floor(options.batchesPerInstance ?? 1));
    this.pumpTrigger = new PumpTrigger(options.maxBatchSize > 1, () => this.pump());
    this.batchTimer = new WakeTimer(this.clock, () => this.pump());
  }

  /** Live sequences (started, not ended), in a slot or waiting for one. */
  get liveSequences(): number {
    return this.liveCount;
  }

  /** Requests waiting (not yet running). */
  get queueLength(): number {
    return this.queued;
  }

  queueDepth(): QueueDepth {
    return { queued: this.queued, limit: this.options.maxQueued };
  }

  /** Sequences waiting for a slot. */
  get backlogLength(): number {
    return this.backlog.length;
  }

  private error(
    code: 'INVALID_REQUEST' | 'INVALID_INPUT' | 'OVERLOADED' | 'MODEL_NOT_FOUND' | 'CANCELLED' | 'TIMEOUT',
    message: string,
    details?: Readonly<Record<string, unknown>>,
  ): ServingError {
    return new ServingError(code, `model '${this.model}': ${message}`, { model: this.model, ...(details === undefined ? {} : { details }) });
  }

  protected enqueue(
    inputs: ReadonlyMap<string, Tensor>,
    outputNames: readonly string[],
    cancel: Cancellation | undefined,
    options: ScheduleOptions,
  ): Promise<Map<string, Tensor>> {
    const request = this.admit(inputs, cancel, options.sequence);
    // Before any bookkeeping: a CORRID that cannot hold the id is the client's error, and nothing has changed yet.
    const controls = this.controls.forRequest(request.id, request.start, request.end);
    const now = this.clock.nowUs();
    const seq = this.sequenceFor(request, now);
    seq.lastUs = now;
    if (request.end) {
      // Triton forgets the id at once: a new sequence may reuse it while this one's last request still waits.
      seq.open = false;
      this.live.delete(seq.key);
    }
    const waitUs = options.timeoutUs !== undefined && options.timeoutUs > 0 ? options.timeoutUs : SLOT_WAIT_DEFAULT_US;
    const p: Pending = {
      seq,
      inputs,
      outputs: outputNames,
      controls,
      start: request.start,
      end: request.end,
      enqueuedUs: now,
      deadlineUs: now + waitUs,
      generation: seq.generation,
      state: 'queued',
      resolve: nothing,
      reject: nothing,
      detach: nothing,
    };
    const answer = answerOf(p);
    if (cancel) p.detach = cancel.onCancel(() => this.cancel(p));
    seq.queue.push(p);
    this.queued++;
    this.schedulePump();
    return answer;
  }

  /** The request's sequence flags, once it may be queued at all: an id, the model still loaded, one row, room in the queue. */
  private admit(inputs: ReadonlyMap<string, Tensor>, cancel: Cancellation | undefined, request: SequenceRequest | undefined): SequenceRequest {
    if (request === undefined || request.id === 0 || request.id === '') {
      throw this.error(
        'INVALID_REQUEST',
        `inference request to a model with sequence_batching must specify a non-zero or non-empty correlation ID (request parameter sequence_id, with sequence_start on the first request and sequence_end on the last)`,
      );
    }
    const shown = showSequenceId(request.id);
    if (this.closed) throw this.error('MODEL_NOT_FOUND', `the model is being unloaded; sequence ${shown} cannot continue (its live sequences end)`);
    if (cancel?.aborted) throw this.error('CANCELLED', `request cancelled before it was queued`);
    if (this.options.maxBatchSize > 0 && requestRows(inputs, this.options.maxBatchSize, this.model) !== 1) {
      throw this.error(
        'INVALID_INPUT',
        `inference request must specify batch-size 1 due to requirements of sequence batcher (one request is one step of one sequence)`,
      );
    }
    if (this.queued >= this.options.maxQueued) {
      throw this.error(
        'OVERLOADED',
        `the queue is full (${this.queued} requests waiting, MME_MAX_QUEUE_SIZE ${this.options.maxQueued}); retry later`,
        retryAfter(),
      );
    }
    return request;
  }

  /** The live sequence the request continues, or the one it starts (a start on a live id restarts it). */
  private sequenceFor(request: SequenceRequest, now: number): Sequence {
    const model = this.model;
    const shown = showSequenceId(request.id);
    const key = sequenceKey(request.id);
    const seq = this.live.get(key);
    if (request.start && seq !== undefined) this.restart(seq, shown);
    if (!request.start && seq === undefined) {
      const why = this.options.tracker.endedBecause(model, key);
      throw this.error(
        'INVALID_REQUEST',
        `inference request for sequence ${shown} must specify the START flag on the first request of the sequence (sequence_start: true); ` +
          (why !== undefined ? `sequence ${shown} ${why}` : `no live sequence has this id (it never started, or already ended with sequence_end)`),
      );
    }
    return seq ?? this.startSequence(request, key, now);
  }

  /** A new live sequence: in a slot when one is free, else in the backlog. */
  private startSequence(request: SequenceRequest, key: string, now: number): Sequence {
    this.options.tracker.admit(this.model);
    this.options.tracker.forget(this.model, key);
    const seq: Sequence = {
      key,
      id: request.id,
      slot: undefined,
      queue: [],
      running: false,
      state: undefined,
      stateBytes: 0,
      lastUs: now,
      open: true,
      done: false,
      generation: 0,
    };
    this.live.set(key, seq);
    this.changeLive(1);
    if (!this.assign(seq)) {
      this.backlog.push(seq);
      this.options.metrics?.slotWait();
    }
    this.armIdle();
    return seq;
  }

  close(): Promise<void> {
    this.closed = true;
    this.schedulePump();
    return new Promise((resolve) => {
      this.closeWaiters.push(resolve);
      this.notifyIfIdle();
    });
  }

  // --------------------------------------------------------------- sequences

  private changeLive(delta: number): void {
    this.liveCount += delta;
    this.options.metrics?.liveChanged(delta);
    this.options.onLiveChange?.(this.liveCount);
  }

  /**
   * A `sequence_start` on the live sequence `seq`: Triton's conflict. The old
   * sequence ends here (counted, logged with Triton's words); the new one
   * continues in its slot or backlog entry, its requests behind the old
   * one's, and its first request runs on the initial state.
   */
  private restart(seq: Sequence, shown: string): void {
    this.options.logger?.warn(
      { model: this.model, sequence: shown },
      `sequence ${shown} for model '${this.model}' has a conflict. The previous sequence did not end before this sequence start. Previous sequence will be terminated early.`,
    );
    this.options.metrics?.ended('restart');
    seq.generation++;
    // Nothing of the old sequence left to run: its state goes now, not when the new start runs.
    if (!seq.running && seq.queue.length === 0) this.dropState(seq);
  }

  private dropState(seq: Sequence): void {
    if (seq.stateBytes > 0) this.options.onStateBytes?.(-seq.stateBytes);
    seq.state = undefined;
    seq.stateBytes = 0;
  }

  /** Give the sequence a free slot, on the instance with the most free slots; false when none is free. */
  private assign(seq: Sequence): boolean {
    const free = new Map<number, Slot[]>();
    for (const s of this.slots) if (s.seq === undefined) (free.get(s.instance) ?? free.set(s.instance, []).get(s.instance)!).push(s);
    let best: Slot[] | undefined;
    for (const list of free.values()) if (best === undefined || list.length > best.length) best = list;
    const slot = best?.[0];
    if (slot === undefined) return false;
    slot.seq = seq;
    seq.slot = slot;
    return true;
  }

  /** End a sequence: its waiting requests fail with `error`, its slot goes to the backlog's first, its state is freed. */
  private finish(seq: Sequence, reason: SequenceEndReason, why: string | undefined, error: ServingError | undefined): void {
    if (seq.done) return;
    seq.done = true;
    if (seq.open) {
      seq.open = false;
      this.live.delete(seq.key);
    }
    if (why !== undefined) this.options.tracker.noteEnded(this.model, seq.key, why);
    for (const p of seq.queue.splice(0)) {
      if (p.state !== 'queued') continue;
      p.state = 'settled';
      p.detach();
      this.queued--;
      p.reject(error ?? this.error('INVALID_REQUEST', `sequence ${showSequenceId(seq.id)} ${why ?? 'ended'}`));
    }
    this.dropState(seq);
    const i = this.backlog.indexOf(seq);
    if (i >= 0) this.backlog.splice(i, 1);
    if (seq.slot !== undefined) {
      seq.slot.seq = undefined;
      seq.slot = undefined;
      this.fillSlots();
    }
    this.options.tracker.release();
    this.options.metrics?.ended(reason);
    this.changeLive(-1);
    if (reason !== 'end') {
      this.options.logger?.info({ model: this.model, sequence: showSequenceId(seq.id), reason }, `sequence ended: ${why ?? reason}`);
    }
    this.schedulePump();
  }

  /** Backlogged sequences take the free slots, first come first served. */
  private fillSlots(): void {
    while (this.backlog.length > 0) {
      const next = this.backlog[0]!;
      if (!this.assign(next)) return;
      this.backlog.shift();
    }
  }

  private cancel(p: Pending): void {
    if (p.state !== 'queued') return; // running: it finishes, the transport drops the answer
    p.state = 'settled';
    p.detach();
    this.queued--;
    p.reject(this.error('CANCELLED', `request of sequence ${showSequenceId(p.seq.id)} cancelled while waiting in the queue`));
    // A request of a sequence that a restart ended early: that sequence is over already, the new one goes on.
    if (p.generation !== p.seq.generation) {
      p.seq.queue.splice(p.seq.queue.indexOf(p), 1);
      this.schedulePump();
      return;
    }
    // A skipped step would leave the state behind what the client believes: the sequence ends.
    this.finish(p.seq, 'cancelled', 'ended because one of its requests was cancelled while it waited (the client went away)', undefined);
    this.notifyIfIdle();
  }

  /** Sequences without a request for max_sequence_idle_microseconds end; checked on one timer, at the earliest possible end. */
  private armIdle(): void {
    if (this.idleTimer !== undefined || this.live.size === 0) return;
    const idleUs = this.options.config.maxSequenceIdleMicroseconds;
    let next = Number.POSITIVE_INFINITY;
    for (const seq of this.live.values()) if (seq.lastUs + idleUs < next) next = seq.lastUs + idleUs;
    const delay = Math.max(0, next - this.clock.nowUs());
    this.idleTimer = this.clock.setTimer(delay, () => {
      this.idleTimer = undefined;
      this.reapIdle();
      this.armIdle();
    });
  }

  private reapIdle(): void {
    const now = this.clock.nowUs();
    const idleUs = this.options.config.maxSequenceIdleMicroseconds;
    for (const seq of [...this.live.values()]) {
      // A sequence with work queued or running is not idle (Triton's reaper skips the backlog too).
      if (seq.running || seq.queue.length > 0 || now - seq.lastUs < idleUs) continue;
      this.finish(seq, 'idle', `ended after ${idleUs} µs without a request (max_sequence_idle_microseconds); start it again with sequence_start`, undefined);
    }
  }

  /** Backlogged sequences whose first waiting request passed its deadline end (TIMEOUT). */
  private expireBacklog(now: number): number {
    let next = Number.POSITIVE_INFINITY;
    for (const seq of [...this.backlog]) {
      const head = seq.queue.find((p) => p.state === 'queued');
      if (head === undefined) continue;
      if (head.deadlineUs > now) {
        next = Math.min(next, head.deadlineUs);
        continue;
      }
      const waited = Math.round(now - head.enqueuedUs);
      const why = `ended because it waited ${waited} µs for a free sequence slot (all ${this.slots.length} slots held by live sequences)`;
      this.finish(
        seq,
        'slot_timeout',
        `${why}; start it again with sequence_start`,
        this.error('TIMEOUT', `sequence ${showSequenceId(seq.id)} ${why}; retry later`, retryAfter()),
      );
    }
    return next;
  }

  // ---------------------------------------------------------------- batching

  /** Soon, and after the I/O phase while a batch that others could have joined is in flight (pump-triggers.ts says why). */
  private schedulePump(): void {
    this.pumpTrigger.request(this.running);
  }

  private pump(): void {
    const now = this.clock.nowUs();
    let wakeUs = this.backlog.length > 0 ? this.expireBacklog(now) : Number.POSITIVE_INFINITY;
    for (let instance = 0; instance < this.inflight.length; instance++) {
      while (this.inflight[instance]! < this.capacity) {
        const decision = this.formBatch(instance, now);
        if (decision === undefined) break;
        if (decision.kind === 'wait') {
          wakeUs = Math.min(wakeUs, decision.untilUs);
          break;
        }
        this.dispatch(instance, decision.batch, now);
      }
    }
    this.batchTimer.arm(wakeUs, now);
    this.notifyIfIdle();
  }

  private signature(p: Pending): string {
    const state = p.start ? undefined : p.seq.state;
    let s = batchSignature(p.inputs);
    for (const name of this.options.initialStates.keys()) {
      const t = state?.get(name) ?? this.options.initialStates.get(name)!;
      s += `\u0002${t.shape.slice(1).join(',')}`;
    }
    return s;
  }

  /** The batch the instance runs next, a time to look again, or undefined when none of its slots has a request ready. */
  private formBatch(instance: number, now: number): { kind: 'send'; batch: Pending[] } | { kind: 'wait'; untilUs: number } | undefined {
    const ready: Pending[] = [];
    for (const slot of this.slots) {
      if (slot.instance !== instance) continue;
      const seq = slot.seq;
      if (seq === undefined || seq.running) continue;
      const head = seq.queue[0];
      if (head !== undefined && head.state === 'queued') ready.push(head);
    }
    if (ready.length === 0) return undefined;
    ready.sort((a, b) => a.enqueuedUs - b.enqueuedUs);
    const first = ready[0]!;
    const mbs = this.options.maxBatchSize;
    if (mbs === 0) return { kind: 'send', batch: [first] };
    const sig = this.signature(first);
    const batch = [first];
    for (let i = 1; i < ready.length && batch.length < mbs; i++) if (this.signature(ready[i]!) === sig) batch.push(ready[i]!);
    const strategy = this.options.config.strategy;
    const delay = strategy.maxQueueDelayMicroseconds;
    const late = this.closed || delay === 0 || now - first.enqueuedUs >= delay;
    if (late || batch.length >= mbs) return { kind: 'send', batch };
    if (strategy.kind === 'direct') {
      if (batch.length >= strategy.minimumSlotUtilization * this.slotsPerInstance) return { kind: 'send', batch };
    } else {
      const preferred = strategy.preferredBatchSize;
      if (preferred.includes(batch.length) || batch.length >= (preferred.at(-1) ?? mbs)) return { kind: 'send', batch };
    }
    return { kind: 'wait', untilUs: first.enqueuedUs + delay };
  }

  /** The model's inputs for one request: the client's, the controls, the implicit state. */
  private feeds(p: Pending): Map<string, Tensor> {
    const m = new Map(p.inputs);
    for (const [name, t] of p.controls) m.set(name, t);
    const state = p.start ? undefined : p.seq.state;
    for (const [name, initial] of this.options.initialStates) m.set(name, state?.get(name) ?? initial);
    return m;
  }

  private dispatch(instance: number, batch: readonly Pending[], now: number): void {
    let queuedUs = 0;
    for (const p of batch) {
      p.state = 'running';
      p.detach();
      // A (re)start runs on the initial state: what a restarted sequence left is freed now.
      if (p.start) this.dropState(p.seq);
      p.seq.running = true;
      this.queued--;
      queuedUs += now - p.enqueuedUs;
    }
    this.options.metrics?.batch?.queueUs.add(queuedUs, batch.length);
    this.inflight[instance]!++;
    this.running++;
    const load: BatchLoad = { queued: this.queued, inFlight: this.running };
    void this.execute(this.options.instances[instance]!, batch, load).then((outcomes) => {
      this.inflight[instance]!--;
      this.running--;
      batch.forEach((p, i) => this.settle(p, outcomes[i]!));
      this.schedulePump();
    });
  }

  /** Never rejects: every request gets an outcome. */
  private async execute(executor: ModelExecutor, batch: readonly Pending[], load: BatchLoad): Promise<Outcome[]> {
    const names = [...new Set([...batch.flatMap((p) => p.outputs), ...this.stateOutputs])];
    if (batch.length === 1) return [await this.runOne(executor, batch[0]!, names, load)];
    try {
      const started = this.clock.nowUs();
      const outputs = await executor.execute(concatInputs(batch.map((p) => this.feeds(p))), names, load);
      const split = splitOutputs(
        outputs,
        batch.map(() => 1),
        batch.map(() => names),
        this.model,
      );
      // One row per request: a sequence's step is one row.
      recordExecution(this.options.metrics?.batch, batch.length, batch.length, this.clock.nowUs() - started, 0, 0);
      return split.map((o) => ({ ok: true, outputs: o }));
    } catch (err) {
      this.options.logger?.warn(
        { model: this.model, requests: batch.length, err: err instanceof Error ? err.message : String(err) },
        'sequence batch failed; running its requests one at a time',
      );
      const outcomes: Outcome[] = [];
      for (const p of batch) outcomes.push(await this.runOne(executor, p, names, load));
      return outcomes;
    }
  }

  private runOne(executor: ModelExecutor, p: Pending, names: readonly string[], load: BatchLoad): Promise<Outcome> {
    return runAlone(executor, this.feeds(p), names, 1, load, this.clock, this.options.metrics?.batch);
  }

  /** Keep the state a request produced, answer it, and end its sequence at its sequence_end. */
  private settle(p: Pending, outcome: Outcome): void {
    const seq = p.seq;
    seq.running = false;
    seq.lastUs = this.clock.nowUs();
    const at = seq.queue.indexOf(p);
    if (at >= 0) seq.queue.splice(at, 1);
    p.state = 'settled';
    if (!outcome.ok) {
      p.reject(outcome.error);
    } else {
      const outputs = outcome.outputs;
      const missing = this.stateOutputs.filter((n) => !outputs.has(n));
      if (missing.length > 0) {
        p.reject(
          new ServingError('INTERNAL', `model '${this.model}': the model did not produce state output ${missing.map((n) => `'${n}'`).join(', ')}`, {
            model: this.model,
          }),
        );
      } else if (!seq.done) {
        const next = new Map<string, Tensor>();
        let bytes = 0;
        this.options.config.states.forEach((s) => {
          const t = ownedCopy(outputs.get(s.outputName)!);
          next.set(s.inputName, t);
          bytes += tensorBytes(t);
        });
        if (bytes !== seq.stateBytes) this.options.onStateBytes?.(bytes - seq.stateBytes);
        seq.state = next;
        seq.stateBytes = bytes;
      }
      for (const n of this.stateOutputs) if (!p.outputs.includes(n)) outputs.delete(n);
      if (outcome.ok && missing.length === 0) p.resolve(outputs);
    }
    if (p.end) this.finish(seq, 'end', undefined, undefined);
  }

  private notifyIfIdle(): void {
    if (!this.closed || this.queued > 0 || this.running > 0) return;
    // Everything accepted has run: the sequences still live end with the model.
    for (const seq of [...this.live.values()]) this.finish(seq, 'unload', 'ended when the model was unloaded; start it again with sequence_start', undefined);
    this.batchTimer.cancel();
    this.idleTimer?.();
    this.idleTimer = undefined;
    for (const resolve of this.closeWaiters.splice(0)) resolve();
  }
}
