/**
 * @module test/unit/scheduler/fakes
 * What the batcher tests drive by hand: a clock whose time moves only when
 * the test says so, and an executor whose runs finish only when the test says
 * so. No sleeps: `settle()` lets promise callbacks run (two macrotask turns),
 * which is all the batcher needs between steps.
 */
import type { ModelConfig } from '../../../src/config/model-config-types.js';
import { modelConfigFromJson } from '../../../src/config/model-config.js';
import { parseModelConfigJson } from '../../../src/config/model-config-text.js';
import type { Tensor } from '../../../src/protocol/tensor.js';
import type { Clock } from '../../../src/clock.js';
import type { BatchLoad, ModelExecutor } from '../../../src/scheduler/model-scheduler.js';

/**
 * Let queued microtasks and promise chains run, and the batcher's pump: while
 * a batch is in flight it runs in the check phase (setImmediate), possibly
 * queued after settle's first turn, so settle waits two turns.
 */
export async function settle(): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
}

interface FakeTimer {
  readonly atUs: number;
  readonly fn: () => void;
}

export class FakeClock implements Clock {
  private now = 0;
  private timers: FakeTimer[] = [];

  nowUs(): number {
    return this.now;
  }

  setTimer(delayUs: number, fn: () => void): () => void {
    const timer = { atUs: this.now + delayUs, fn };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  }

  /** Timers still armed. */
  get pendingTimers(): number {
    return this.timers.length;
  }

  /** Move time forward by `us`, firing due timers in order (each at its own time), settling after each. */
  async advance(us: number): Promise<void> {
    const target = this.now + us;
    for (let fired = 0; ; fired++) {
      // A scheduler that keeps re-arming a timer for "now" would spin here forever: fail instead.
      if (fired > 10_000) throw new Error('FakeClock: more than 10000 timers fired in one advance (a timer re-arming itself at the same time?)');
      const due = this.timers.filter((t) => t.atUs <= target).sort((a, b) => a.atUs - b.atUs)[0];
      if (!due) break;
      this.timers = this.timers.filter((t) => t !== due);
      this.now = Math.max(this.now, due.atUs);
      due.fn();
      await settle();
    }
    this.now = target;
    await settle();
  }
}

export interface Call {
  readonly inputs: ReadonlyMap<string, Tensor>;
  readonly outputNames: readonly string[];
  /** Rows of the first input (the batch size the model saw). */
  readonly rows: number;
  /** The facts the batcher passed with this run (ModelExecutor.execute's `load`). */
  readonly load: BatchLoad | undefined;
  finish(outputs?: Map<string, Tensor>): void;
  fail(err: Error): void;
}

/**
 * An executor whose runs wait for the test. `finish()` without outputs
 * answers what `compute` makes of the inputs (by default OUTPUT0 = INPUT0 × 2,
 * so every row is traceable to the request it came from).
 */
export class ManualExecutor implements ModelExecutor {
  readonly calls: Call[] = [];
  running = 0;
  maxRunning = 0;

  constructor(private readonly compute: (inputs: ReadonlyMap<string, Tensor>) => Map<string, Tensor> = doubleInput) {}

  execute(inputs: ReadonlyMap<string, Tensor>, outputNames: readonly string[], load?: BatchLoad): Promise<Map<string, Tensor>> {
    this.running++;
    this.maxRunning = Math.max(this.maxRunning, this.running);
    return new Promise((resolve, reject) => {
      const done = (): void => void this.running--;
      this.calls.push({
        inputs,
        outputNames,
        rows: inputs.values().next().value?.shape[0] ?? 0,
        load,
        finish: (outputs) => {
          done();
          resolve(outputs ?? this.compute(inputs));
        },
        fail: (err) => {
          done();
          reject(err);
        },
      });
    });
  }

  /** The call at `index`, or a clear failure. */
  call(index: number): Call {
    const c = this.calls[index];
    if (!c) throw new Error(`expected execute call #${index}, got ${this.calls.length} calls`);
    return c;
  }
}

export function doubleInput(inputs: ReadonlyMap<string, Tensor>): Map<string, Tensor> {
  const x = inputs.get('INPUT0')!;
  const data = Float32Array.from(x.data as Float32Array, (v) => v * 2);
  return new Map([['OUTPUT0', { datatype: 'FP32', shape: [...x.shape], data }]]);
}

/** A request of `rows` rows of `width` FP32 values; row r of request `id` holds id*100 + r. */
export function rowsRequest(id: number, rows: number, width = 2): Map<string, Tensor> {
  const data = new Float32Array(rows * width);
  for (let r = 0; r < rows; r++) data.fill(id * 100 + r, r * width, (r + 1) * width);
  return new Map([['INPUT0', { datatype: 'FP32', shape: [rows, width], data }]]);
}

/** What a request of rowsRequest(id, rows, width) must get back from doubleInput. */
export function expectedRows(id: number, rows: number, width = 2): number[] {
  const out: number[] = [];
  for (let r = 0; r < rows; r++) for (let c = 0; c < width; c++) out.push((id * 100 + r) * 2);
  return out;
}

/** A typed ModelConfig from config.pbtxt text, through the real parser. */
export function config(text: string): ModelConfig {
  return modelConfigFromJson(parseModelConfigJson(text, 'm/config.pbtxt'), { sourceName: 'm/config.pbtxt', directoryName: 'm' });
}

/** config.pbtxt of a batching FP32 model `[-1, -1] → [-1, -1]` plus `extra`. */
export function batchingConfig(maxBatchSize: number, extra = ''): ModelConfig {
  return config(
    `max_batch_size: ${maxBatchSize}\nplatform: "onnxruntime_onnx"\n` +
      `input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n` +
      `output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n${extra}\n`,
  );
}
