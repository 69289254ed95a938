/**
 * @module scheduler/dynamic-batcher
 * The scheduler of every model with sessions: Triton's dynamic batcher
 * (core `dynamic_batch_scheduler.cc` GetDynamicBatch, `scheduler_utils.cc`
 * priority queue), with up to `instances.length × batchesPerInstance`
 * batches dispatched at once.
 *
 * - Requests wait in a bounded FIFO per priority level (level 1 first).
 * - When an instance is free, a batch is formed from the front of the queue:
 *   it grows while the next request has the same signature (inputs,
 *   datatypes, non-batch dims) and the rows still fit in maxBatchSize. Batches
 *   count rows, not requests.
 * - It is sent at once when it reaches a preferred size, when it cannot grow
 *   (the next request does not match, or would pass the largest preferred
 *   size), when the delay is 0, or when its oldest request has waited
 *   maxQueueDelayUs; otherwise the batcher waits for more rows until then.
 * - Queue policy per level: a full queue refuses at once (OVERLOADED, 429); a
 *   request that waits past its timeout is refused (REJECT → TIMEOUT, 504) or
 *   moved behind the others (DELAY). Deadlines are enforced by a timer even
 *   while every instance is busy. A request whose cancellation fires leaves the
 *   queue (CANCELLED).
 * - Results are split back row-exactly. A failed batch of several requests is
 *   re-run one request at a time on the same instance, so one bad request
 *   fails alone and its batch-mates still get their answers; except a batch
 *   that failed with TIMEOUT (a deadline of the whole batch: re-running would
 *   wait it once per request), whose requests all get that error.
 * - With preserveOrdering, answers go out in dispatch order even when a later
 *   batch (on another instance) finishes first.
 * - Instances may be added and retired while it serves (a hot model's,
 *   registry/hot-instances.ts), which it is told of by `onSaturation`: when
 *   every instance has its batches and requests still wait, and when that ends.
 *
 * Time comes from an injected Clock, so tests drive it by hand.
 */
import type { Cancellation } from '../cancellation.js';
import { retryAfter, ServingError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Tensor } from '../protocol/tensor.js';
import { batchSignature, concatInputs, requestRows, splitOutputs } from './batch-merge.js';
import { recordExecution, runAlone, type Outcome, type SchedulerMetrics } from './batch-execution.js';
import type { BatchPolicy } from './batch-policy.js';
import { systemClock, type Clock } from '../clock.js';
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

export type { SchedulerMetrics } from './batch-execution.js';

export interface DynamicBatcherOptions {
  /** The model as messages and logs name it (the package label). */
  readonly model: string;
  readonly policy: BatchPolicy;
  /** One executor per instance (session). */
  readonly instances: readonly ModelExecutor[];
  /**
   * Batches handed to one instance at a time (default 1). A session in a
   * runtime worker runs its batches one after another; with 2, the next
   * batch already waits in the worker when one ends, instead of the worker
   * idling while the main thread answers the first batch and forms the next
   * (registry/package-loader.ts says when, with the measurement). Instances
   * fill first: the second batch goes to an instance only when every
   * instance has one.
   */
  readonly batchesPerInstance?: number;
  /** The model version's metric cells; omitted in tests that do not look. */
  readonly metrics?: SchedulerMetrics;
  readonly clock?: Clock;
  readonly logger?: Logger;
  /**
   * Told when saturation starts and when it ends, only on changes. Saturated: every dispatch slot busy and
   * something waiting for one: a request in the queue, or, with two batches an instance, the batch each
   * instance holds behind the one it runs.
   */
  readonly onSaturation?: (saturated: boolean) => void;
}

type State = 'queued' | 'delayed' | 'running' | 'settled';

interface Pending extends Answerable {
  readonly inputs: ReadonlyMap<string, Tensor>;
  readonly outputs: readonly string[];
  readonly rows: number;
  /** undefined: never merged with another request. */
  readonly signature: string | undefined;
  readonly enqueuedUs: number;
  /** Infinity when the request may wait forever (or has been delayed already). */
  deadlineUs: number;
  /** 0-based priority level. */
  readonly level: number;
  state: State;
}

/**
 * A FIFO whose members are the entries in `state`; entries that left (ran,
 * timed out, were cancelled, were delayed) are skipped and dropped lazily,
 * so removal from the middle is O(1).
 */
class Fifo {
  private items: Pending[] = [];
  private head = 0;

  constructor(private readonly state: State) {}

  push(p: Pending): void {
    this.items.push(p);
  }

  /** The first member, if any (no generator: the unbatched path asks this once per request). */
  first(): Pending | undefined {
    for (let i = this.head; i < this.items.length; i++) {
      const p = this.items[i]!;
      if (p.state === this.state) return p;
    }
    return undefined;
  }

  *[Symbol.iterator](): Generator<Pending> {
    for (let i = this.head; i < this.items.length; i++) {
      const p = this.items[i]!;
      if (p.state === this.state) yield p;
    }
  }

  /** Drop departed entries at the front, and compact once they are most of the array. */
  trim(): void {
    while (this.head < this.items.length && this.items[this.head]!.state !== this.state) this.head++;
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head > 64 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
  }
}

interface Level {
  readonly waiting: Fifo;
  /** Requests past their timeout under timeout_action DELAY: served after every `waiting` one of the level. */
  readonly delayed: Fifo;
  /** Queued requests of this level (waiting + delayed): what max_queue_size bounds. */
  size: number;
}

type Decision = { readonly kind: 'send'; readonly batch: readonly Pending[] } | { readonly kind: 'wait'; readonly untilUs: number };

export class DynamicBatcher extends QueueingScheduler {
  private readonly model: string;
  private readonly policy: BatchPolicy;
  private readonly clock: Clock;
  private readonly levels: Level[];
  private readonly preferred: ReadonlySet<number>;
  private readonly maxPreferred: number;
  /** The instances by index; a retired one's index is undefined until an added one reuses it. */
  private readonly executors: (ModelExecutor | undefined)[];
  private readonly perInstance: number;
  /** Batches in flight per instance index. */
  private readonly busy: number[];
  /** Retiring instances (by index): told once their last batch ended. */
  private readonly retiring = new Map<number, () => void>();
  /** Free dispatch slots, as instance indices: each instance appears once per batch it may take. */
  private readonly free: number[];
  private saturated = false;
  private queued = 0;
  private running = 0;
  private closed = false;
  private closeWaiters: (() => void)[] = [];
  private readonly pumpTrigger: PumpTrigger;
  private readonly timer: WakeTimer;
  /** Earliest deadline among queued requests (may be stale-early: then one extra scan). */
  private nextDeadlineUs = Number.POSITIVE_INFINITY;
  /** preserve_ordering: batches are numbered at dispatch and answered in that order. */
  private nextBatch = 0;
  private nextToAnswer = 0;
  private readonly finished = new Map<number, () => void>();

  constructor(private readonly options: DynamicBatcherOptions) {
    super();
    if (options.instances.length === 0) throw new Error(`model '${options.model}': a scheduler needs at least one instance`);
    this.model = options.model;
    this.policy = options.policy;
    this.clock = options.clock ?? systemClock;
    this.levels = options.policy.levels.map(() => ({ waiting: new Fifo('queued'), delayed: new Fifo('delayed'), size: 0 }));
    this.preferred = new Set(options.policy.preferredBatchSizes);
    this.maxPreferred = options.policy.preferredBatchSizes.at(-1) ?? options.policy.maxBatchSize;
    const n = options.instances.length;
    this.executors = [...options.instances];
    this.busy = this.executors.map(() => 0);
    this.perInstance = Math.max(1, Math.floor(options.batchesPerInstance ?? 1));
    const slots = n * this.perInstance;
    // A stack popped from the end: instance 0 first, every instance once before any gets a second batch.
    this.free = Array.from({ length: slots }, (_, i) => (slots - 1 - i) % n);
    this.pumpTrigger = new PumpTrigger(options.policy.maxBatchSize > 1, () => this.pump());
    this.timer = new WakeTimer(this.clock, () => this.pump());
  }

  /** Requests waiting (not yet running). */
  get queueLength(): number {
    return this.queued;
  }

  queueDepth(): QueueDepth {
    const level = this.levelOf(undefined);
    return { queued: this.levels[level]!.size, limit: this.policy.levels[level]!.maxQueueSize };
  }

  /** Batches dispatched and not yet answered (running, or waiting in their instance's worker). */
  get inFlight(): number {
    return this.running;
  }

  /** Instances batches are given to (retiring ones not counted). */
  get instanceCount(): number {
    return this.executors.filter((e, i) => e !== undefined && !this.retiring.has(i)).length;
  }

  /** Another instance to run batches on; its slots are taken before any instance's second batch. */
  addInstance(executor: ModelExecutor): void {
    let index = this.executors.findIndex((e, i) => e === undefined && !this.retiring.has(i));
    if (index < 0) index = this.executors.length;
    this.executors[index] = executor;
    this.busy[index] = 0;
    // Its first batch next (popped from the end); its others after every instance's free slots, as at the start.
    for (let b = 1; b < this.perInstance; b++) this.free.unshift(index);
    this.free.push(index);
    this.schedulePump();
  }

  /** Give `executor` no more batches; resolves once the batches it runs have ended (then its session may be released). */
  retireInstance(executor: ModelExecutor): Promise<void> {
    const index = this.executors.indexOf(executor);
    if (index < 0 || this.retiring.has(index)) return Promise.resolve();
    if (this.instanceCount === 1) throw new Error(`model '${this.model}': its last instance cannot be retired`);
    for (let i = this.free.length - 1; i >= 0; i--) if (this.free[i] === index) this.free.splice(i, 1);
    if (this.busy[index] === 0) {
      this.executors[index] = undefined;
      return Promise.resolve();
    }
    return new Promise((resolve) =>
      this.retiring.set(index, () => {
        this.retiring.delete(index);
        this.executors[index] = undefined;
        resolve();
      }),
    );
  }

  protected enqueue(
    inputs: ReadonlyMap<string, Tensor>,
    outputNames: readonly string[],
    cancel: Cancellation | undefined,
    options: ScheduleOptions,
  ): Promise<Map<string, Tensor>> {
    const model = this.model;
    if (this.closed) throw new ServingError('MODEL_NOT_FOUND', `model '${model}' is being unloaded`, { model });
    if (cancel?.aborted) throw new ServingError('CANCELLED', `model '${model}': request cancelled before it was queued`, { model });
    const limit = this.policy.modelMaxBatchSize;
    const rows = limit > 0 ? requestRows(inputs, limit, model) : 1;
    const level = this.levelOf(options.priority);
    const policy = this.policy.levels[level]!;
    const queue = this.levels[level]!;
    if (queue.size >= policy.maxQueueSize) {
      const where = this.levels.length > 1 ? ` at priority ${level + 1}` : '';
      throw new ServingError(
        'OVERLOADED',
        `model '${model}': the queue is full (${queue.size} requests waiting${where}, max_queue_size ${policy.maxQueueSize}); retry later`,
        { model, details: retryAfter() },
      );
    }
    const now = this.clock.nowUs();
    let timeoutUs = policy.defaultTimeoutUs;
    const asked = options.timeoutUs ?? 0;
    // A request may only shorten the wait (0 = no limit), as Triton documents allow_timeout_override.
    if (policy.allowTimeoutOverride && asked > 0 && (timeoutUs === 0 || asked < timeoutUs)) timeoutUs = asked;
    const signature = this.policy.maxBatchSize > 0 && inputs.size > 0 ? batchSignature(inputs) : undefined;

    const p: Pending = {
      inputs,
      outputs: outputNames,
      rows,
      signature,
      enqueuedUs: now,
      deadlineUs: timeoutUs > 0 ? now + timeoutUs : Number.POSITIVE_INFINITY,
      level,
      state: 'queued',
      resolve: nothing,
      reject: nothing,
      detach: nothing,
    };
    const answer = answerOf(p);
    if (cancel) p.detach = cancel.onCancel(() => this.cancel(p));
    queue.waiting.push(p);
    queue.size++;
    this.queued++;
    if (p.deadlineUs < this.nextDeadlineUs) this.nextDeadlineUs = p.deadlineUs;
    this.schedulePump();
    return answer;
  }

  close(): Promise<void> {
    this.closed = true;
    // Whatever is queued runs now, without waiting for more rows.
    this.schedulePump();
    if (this.queued === 0 && this.running === 0) return Promise.resolve();
    return new Promise((resolve) => this.closeWaiters.push(resolve));
  }

  // ------------------------------------------------------------------ queue

  private levelOf(priority: number | undefined): number {
    const n = this.levels.length;
    // Triton: 0 or a level above priority_levels means the default level.
    const level = priority === undefined || priority < 1 || priority > n ? this.policy.defaultPriorityLevel : priority;
    return Math.min(Math.max(1, level), n) - 1;
  }

  /** Queued requests in service order: level 1 waiting, level 1 delayed, level 2 waiting, … */
  private *inOrder(): Generator<Pending> {
    for (const level of this.levels) {
      yield* level.waiting;
      yield* level.delayed;
    }
  }

  /** Take a queued request out of the queue (it is about to run or be answered). */
  private leave(p: Pending, next: State): void {
    const level = this.levels[p.level]!;
    const from = p.state;
    p.state = next;
    p.detach();
    level.size--;
    this.queued--;
    (from === 'delayed' ? level.delayed : level.waiting).trim();
  }

  private cancel(p: Pending): void {
    if (p.state !== 'queued' && p.state !== 'delayed') return; // running: it finishes, the transport drops the answer
    this.leave(p, 'settled');
    p.reject(new ServingError('CANCELLED', `model '${this.model}': request cancelled while waiting in the queue`, { model: this.model }));
    this.schedulePump(); // the oldest request may have changed
    this.notifyIfIdle();
  }

  /** Apply the queue policy to requests past their deadline. */
  private expire(now: number): void {
    let next = Number.POSITIVE_INFINITY;
    const timedOut: Pending[] = [];
    for (const p of this.inOrder()) {
      if (p.deadlineUs <= now) timedOut.push(p);
      else if (p.deadlineUs < next) next = p.deadlineUs;
    }
    for (const p of timedOut) {
      const policy = this.policy.levels[p.level]!;
      if (policy.timeoutAction === 'DELAY') {
        // Behind every request that has not timed out (Triton's delayed queue); it may wait indefinitely now.
        p.deadlineUs = Number.POSITIVE_INFINITY;
        p.state = 'delayed';
        const level = this.levels[p.level]!;
        level.delayed.push(p);
        level.waiting.trim();
        continue;
      }
      const waited = Math.round(now - p.enqueuedUs);
      this.leave(p, 'settled');
      p.reject(
        new ServingError(
          'TIMEOUT',
          `model '${this.model}': request timed out after waiting ${waited} µs in the queue (queue policy timeout ` +
            `${Math.round(p.deadlineUs - p.enqueuedUs)} µs); the model is busy, retry later`,
          // A refusal for overload like a full queue: the client may come back as soon.
          { model: this.model, details: retryAfter() },
        ),
      );
    }
    this.nextDeadlineUs = next;
    if (timedOut.length > 0) this.notifyIfIdle();
  }

  // --------------------------------------------------------------- batching

  /** Soon, and after the I/O phase while a batch is in flight (pump-triggers.ts says why). */
  private schedulePump(): void {
    this.pumpTrigger.request(this.running);
  }

  private pump(): void {
    const now = this.clock.nowUs();
    if (now >= this.nextDeadlineUs) this.expire(now);
    let wakeUs = Number.POSITIVE_INFINITY;
    while (this.free.length > 0 && this.queued > 0) {
      const decision = this.formBatch(now);
      if (decision.kind === 'wait') {
        wakeUs = decision.untilUs;
        break;
      }
      this.dispatch(decision.batch, now);
    }
    // Deadlines are enforced even while every instance is busy (a timeout does not wait for a batch to end).
    if (this.queued > 0) wakeUs = Math.min(wakeUs, this.nextDeadlineUs);
    this.timer.arm(wakeUs, now);
    const saturated = this.free.length === 0 && (this.queued > 0 || this.perInstance > 1);
    if (saturated !== this.saturated) {
      this.saturated = saturated;
      this.options.onSaturation?.(saturated);
    }
  }

  /** The request inOrder() would yield first (only called while something is queued). */
  private front(): Pending {
    for (const level of this.levels) {
      const p = level.waiting.first() ?? level.delayed.first();
      if (p !== undefined) return p;
    }
    throw new Error(`model '${this.model}': the queue count says ${this.queued} but no request is queued`);
  }

  /** Triton's GetDynamicBatch over the front of the queue. */
  private formBatch(now: number): Decision {
    const head = this.front();
    if (head.signature === undefined) return { kind: 'send', batch: [head] };
    const it = this.inOrder();
    const first = it.next().value as Pending;
    const maxRows = this.policy.maxBatchSize;
    const batch: Pending[] = [first];
    let rows = first.rows;
    let oldest = first.enqueuedUs;
    // Requests in the largest preferred-size prefix found (0: none).
    let best = this.preferred.has(rows) ? 1 : 0;
    let cannotGrow = false;
    for (const p of it) {
      if (p.signature !== first.signature) {
        cannotGrow = true; // FIFO: a different shape ends the batch, it is not skipped over
        break;
      }
      // The next request would pass the largest preferred size: what is pending is as good as it gets.
      if (best === 0 && rows + p.rows > this.maxPreferred) best = batch.length;
      if (rows + p.rows > maxRows) {
        cannotGrow = true;
        break;
      }
      batch.push(p);
      rows += p.rows;
      if (p.enqueuedUs < oldest) oldest = p.enqueuedUs;
      if (this.preferred.has(rows)) best = batch.length;
    }
    const delay = this.policy.maxQueueDelayUs;
    const delayExceeded = this.closed || (delay > 0 && now - oldest >= delay);
    if (best > 0 && !delayExceeded) return { kind: 'send', batch: batch.slice(0, best) };
    if (cannotGrow || delayExceeded || delay === 0 || rows >= this.maxPreferred) return { kind: 'send', batch };
    return { kind: 'wait', untilUs: oldest + delay };
  }

  private dispatch(batch: readonly Pending[], now: number): void {
    const index = this.free.pop()!;
    this.busy[index]!++;
    const metrics = this.options.metrics;
    let queuedUs = 0;
    for (const p of batch) {
      this.leave(p, 'running');
      queuedUs += now - p.enqueuedUs;
    }
    metrics?.queueUs.add(queuedUs, batch.length);
    this.running++;
    const seq = this.nextBatch++;
    // Facts for the executor (ModelExecutor.execute): what waits behind this batch. Where it runs is the runtime's call.
    const load: BatchLoad = { queued: this.queued, inFlight: this.running };
    void this.execute(this.executors[index]!, batch, load).then((outcomes) => {
      this.busy[index]!--;
      const retired = this.retiring.size === 0 ? undefined : this.retiring.get(index);
      if (retired === undefined) this.free.push(index);
      else if (this.busy[index] === 0) retired();
      this.running--;
      this.answer(seq, batch, outcomes);
      this.schedulePump();
      this.notifyIfIdle();
    });
  }

  /** Never rejects: every request gets an outcome. */
  private async execute(executor: ModelExecutor, batch: readonly Pending[], load: BatchLoad): Promise<Outcome[]> {
    if (batch.length === 1) return [await this.runOne(executor, batch[0]!, load)];
    // The union of what the requests asked for; each gets back only its own.
    const names = [...new Set(batch.flatMap((p) => p.outputs))];
    const rows = batch.map((p) => p.rows);
    const totalRows = rows.reduce((a, b) => a + b, 0);
    try {
      // Batch statistics: merging the inputs is the batch's input phase, splitting the outputs its output phase.
      const merging = this.clock.nowUs();
      const inputs = concatInputs(batch.map((p) => p.inputs));
      const started = this.clock.nowUs();
      const outputs = await executor.execute(inputs, names, load);
      const ran = this.clock.nowUs();
      const split = splitOutputs(
        outputs,
        rows,
        batch.map((p) => p.outputs),
        this.model,
      );
      recordExecution(this.options.metrics, totalRows, batch.length, ran - started, started - merging, this.clock.nowUs() - ran);
      return split.map((o) => ({ ok: true, outputs: o }));
    } catch (err) {
      // A deadline that passed for the batch as a whole (a js step's call deadline): running each request
      // alone would wait it once per request. The batch fails together, as TorchServe's response timeout does.
      if (err instanceof ServingError && err.code === 'TIMEOUT') return batch.map(() => ({ ok: false, error: err }));
      // One bad request must not fail its batch-mates: run each alone, so only the culprit fails.
      const message = err instanceof Error ? err.message : String(err);
      this.options.logger?.warn(
        { model: this.model, requests: batch.length, rows: totalRows, err: message },
        'batch failed; running its requests one at a time',
      );
      const outcomes: Outcome[] = [];
      for (const p of batch) outcomes.push(await this.runOne(executor, p, load));
      return outcomes;
    }
  }

  private runOne(executor: ModelExecutor, p: Pending, load: BatchLoad): Promise<Outcome> {
    return runAlone(executor, p.inputs, p.outputs, p.rows, load, this.clock, this.options.metrics);
  }

  private answer(seq: number, batch: readonly Pending[], outcomes: readonly Outcome[]): void {
    const deliver = (): void => {
      batch.forEach((p, i) => {
        p.state = 'settled';
        const o = outcomes[i]!;
        if (o.ok) p.resolve(o.outputs);
        else p.reject(o.error);
      });
    };
    if (!this.policy.preserveOrdering) {
      deliver();
      return;
    }
    this.finished.set(seq, deliver);
    for (let next = this.finished.get(this.nextToAnswer); next; next = this.finished.get(this.nextToAnswer)) {
      this.finished.delete(this.nextToAnswer);
      this.nextToAnswer++;
      next();
    }
  }

  private notifyIfIdle(): void {
    if (!this.closed || this.queued > 0 || this.running > 0) return;
    this.timer.cancel();
    for (const resolve of this.closeWaiters.splice(0)) resolve();
  }
}
