/**
 * @module registry/hot-instances
 * A hot heavy model grows instances across runtime workers, and gives them
 * back when it cools.
 *
 * Each session runs with one intra-op thread on its runtime worker, so that
 * threads do not grow with the number of models (docs/batching-and-performance.md,
 * "The thread budget"). A model whose config sets no `instance_group` then
 * has one instance: one core, however busy it is and however many workers
 * idle. A model placed in the workers only (its batch costs more than the
 * main thread may spend, runtime/session-placement.ts) that spends half of a
 * HOT_WINDOW_US window saturated (every batch slot busy and a batch or
 * request waiting behind one, scheduler/dynamic-batcher.ts) gets another session on a
 * runtime worker that holds none of its instances, up to `maxInstances`
 * (MME_HOT_MODEL_MAX_INSTANCES), one a window. Each added session is booked
 * in the model's reservation from room the memory budget has now (never by
 * evicting another model: the grown model is served either way), and is
 * retired, one at a time, once the model has had fewer batches in flight
 * than one instance less could run at every window's end for COOL_AFTER_US
 * (a calm that saturation alone would not show: the added instances are
 * what ended it). Instances change only how many batches run at once, never
 * an answer. Time and timers come from the injected Clock.
 */
import type { Clock } from '../clock.js';
import type { Logger } from '../observability/logger.js';
import type { ModelExecutor } from '../scheduler/model-scheduler.js';

/** The window saturation is judged over: longer than a burst, shorter than a user notices. */
export const HOT_WINDOW_US = 500_000;
/** Share of a window the model must spend saturated to get another instance (saturation flips with every batch). */
export const HOT_SHARE = 0.5;
/** How long the model must stay calm (fewer batches in flight than one instance less could run) before an added instance is given back. */
export const COOL_AFTER_US = 30_000_000;

/** An instance added for heat: run batches on `executor`; `release` frees its session and its booking. */
export interface GrownInstance {
  readonly executor: ModelExecutor;
  readonly worker: number;
  release(): Promise<void>;
}

/** What growing can say: an instance, no room now (the budget or the workers), or never (not a model that grows). */
export type Growth = GrownInstance | 'no room' | 'never';

export interface ElasticScheduler {
  /** Batches dispatched and not yet answered. */
  readonly inFlight: number;
  addInstance(executor: ModelExecutor): void;
  retireInstance(executor: ModelExecutor): Promise<void>;
}

export interface HotInstancesOptions {
  /** The model as logs name it, and its version. */
  readonly model: string;
  readonly version: number;
  /** Instances at most, the first included; 1: never grows. */
  readonly maxInstances: number;
  /** Batches one instance takes at a time (DynamicBatcherOptions.batchesPerInstance). */
  readonly batchesPerInstance: number;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Told each time an instance is added (+1) or given back (-1): the model's onnx_mme_model_instances_added. */
  readonly onChange?: (delta: number) => void;
}

export class HotInstances {
  private readonly added: GrownInstance[] = [];
  private scheduler: ElasticScheduler | undefined;
  private grow: (() => Promise<Growth>) | undefined;
  /** Since when the scheduler is saturated (undefined: it is not). */
  private saturatedSinceUs: number | undefined;
  /** Saturated time in the current window, before saturatedSinceUs. */
  private saturatedUs = 0;
  private windowStartUs = 0;
  /** Since when every window ended calm (undefined: the last did not). */
  private calmSinceUs: number | undefined;
  private growing = false;
  private closed = false;
  private cancelTimer: (() => void) | undefined;

  constructor(private readonly options: HotInstancesOptions) {}

  /** Instances now: the first and those added. */
  get instances(): number {
    return 1 + this.added.length;
  }

  /** The runtime workers the added instances run on. */
  get addedWorkers(): number[] {
    return this.added.map((g) => g.worker);
  }

  /** From placement: this model may grow (on `scheduler`, with `grow`); until then saturation changes nothing. */
  enable(scheduler: ElasticScheduler, grow: () => Promise<Growth>): void {
    if (this.options.maxInstances <= 1 || this.closed) return;
    this.scheduler = scheduler;
    this.grow = grow;
  }

  /** The scheduler's saturation changed (DynamicBatcherOptions.onSaturation): cheap, called on every change. */
  saturation(saturated: boolean): void {
    if (this.grow === undefined || this.closed) return;
    const now = this.options.clock.nowUs();
    if (saturated) {
      this.saturatedSinceUs = now;
      if (this.cancelTimer === undefined) this.startWindow(now);
    } else if (this.saturatedSinceUs !== undefined) {
      this.saturatedUs += now - this.saturatedSinceUs;
      this.saturatedSinceUs = undefined;
    }
  }

  /** The model is unloaded (its scheduler closed first): every added instance released. */
  async release(): Promise<void> {
    this.closed = true;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    const added = this.added.splice(0);
    if (added.length > 0) this.options.onChange?.(-added.length);
    await Promise.allSettled(added.map(async (g) => (await this.scheduler?.retireInstance(g.executor), g.release())));
  }

  /** Windows run while the model is saturated now and then, or holds added instances; an idle model has no timer. */
  private startWindow(now: number): void {
    this.windowStartUs = now;
    this.saturatedUs = 0;
    this.cancelTimer = this.options.clock.setTimer(HOT_WINDOW_US, () => {
      this.cancelTimer = undefined;
      this.windowEnded();
    });
  }

  private windowEnded(): void {
    if (this.closed) return;
    const now = this.options.clock.nowUs();
    let saturated = this.saturatedUs;
    if (this.saturatedSinceUs !== undefined) {
      saturated += now - this.saturatedSinceUs;
      this.saturatedSinceUs = now;
    }
    const share = saturated / Math.max(1, now - this.windowStartUs);
    const calm = this.scheduler!.inFlight < (this.instances - 1) * this.options.batchesPerInstance;
    if (!calm) this.calmSinceUs = undefined;
    else this.calmSinceUs ??= now;
    if (share >= HOT_SHARE && this.instances < this.options.maxInstances) void this.growOne();
    else if (this.calmSinceUs !== undefined && now - this.calmSinceUs >= COOL_AFTER_US) {
      this.calmSinceUs = now;
      void this.retireOne();
    }
    if (share > 0 || this.saturatedSinceUs !== undefined || this.added.length > 0) this.startWindow(now);
  }

  private async growOne(): Promise<void> {
    if (this.closed || this.growing || this.grow === undefined) return;
    this.growing = true;
    let growth: Growth;
    try {
      growth = await this.grow();
    } catch (err) {
      growth = 'no room';
      this.options.logger.warn(
        { model: this.options.model, version: this.options.version, err: (err as Error).message },
        'a hot model could not get another instance',
      );
    } finally {
      this.growing = false;
    }
    if (growth === 'never') {
      this.grow = undefined;
      return;
    }
    if (growth === 'no room') return; // tried again at the next hot window
    if (this.closed) {
      await growth.release();
      return;
    }
    this.scheduler!.addInstance(growth.executor);
    this.added.push(growth);
    this.options.onChange?.(1);
    this.calmSinceUs = undefined;
    this.options.logger.info(
      { model: this.options.model, version: this.options.version, instances: this.instances, worker: growth.worker },
      `model is hot: instance ${this.instances} added (at most ${this.options.maxInstances}, MME_HOT_MODEL_MAX_INSTANCES)`,
    );
  }

  private async retireOne(): Promise<void> {
    const last = this.added.pop();
    if (last === undefined) return;
    await this.scheduler!.retireInstance(last.executor);
    await last.release();
    this.options.onChange?.(-1);
    this.options.logger.info(
      { model: this.options.model, version: this.options.version, instances: this.instances, worker: last.worker },
      `model cooled: an added instance released after ${COOL_AFTER_US / 1e6} s with fewer batches in flight than one instance less could run`,
    );
  }
}
