/**
 * @module perf/load-step
 * One step of a run: a fixed concurrency (closed loop: N requests always in
 * flight, each sent when the previous one answered) or a fixed request rate
 * (open loop: Poisson arrivals, sent whether or not earlier ones answered,
 * so a server that falls behind shows its queue in the latencies).
 *
 * A step is measured in windows (perf_analyzer's stable-window idea): load
 * runs continuously, completions are sliced into windows by completion time,
 * and the step ends once the last two windows agree within the tolerance on
 * throughput and mean latency, or when its time cap is reached (reported as
 * unstable; a step whose last windows got no answer at all waits up to a
 * request timeout longer, since that is no measurement). The step's figures are those two windows merged; earlier
 * windows are warm-up. Open-loop latency is counted from the scheduled
 * arrival, not the actual send, so a generator that falls behind cannot hide
 * it (coordinated omission).
 */
import { performance } from 'node:perf_hooks';
import type { PreparedRequest, Target } from './http-target.js';
import { summarize, type LatencySummary } from './latency-stats.js';

export interface StepSettings {
  readonly mode: 'concurrency' | 'rate';
  /** Requests in flight (concurrency) or arrivals per second (rate). */
  readonly value: number;
  readonly windowMs: number;
  /** Longest the step may run (windows), before the drain. */
  readonly maxStepMs: number;
  /** Two windows agree when throughput and mean latency differ by at most this fraction. */
  readonly tolerance: number;
  readonly requestTimeoutMs: number;
  /** Open loop: most requests outstanding; arrivals beyond it are dropped (counted, never sent). */
  readonly maxInflight: number;
}

interface Window {
  readonly startedAt: number;
  durationMs: number;
  readonly latenciesMs: number[];
  readonly errors: Map<string, number>;
}

export interface StepResult {
  readonly mode: 'concurrency' | 'rate';
  /** Closed loop: the setting; open loop: the mean requests in flight (throughput × mean latency). */
  readonly concurrency: number;
  /** Open loop: the target arrival rate. */
  readonly rateRps: number | undefined;
  /** Successful answers per second over the measured windows. */
  readonly throughputRps: number;
  /** Latency of successful answers. */
  readonly latency: LatencySummary;
  /** Answers (successful or not) in the measured windows. */
  readonly requests: number;
  readonly errors: number;
  readonly errorsByStatus: Readonly<Record<string, number>>;
  /** Every request this step sent (warm-up windows and the final drain included): what the server saw. */
  readonly requestsSent: number;
  /** Open loop: arrivals dropped because maxInflight requests were outstanding. */
  readonly dropped: number;
  readonly stable: boolean;
  readonly windows: number;
  readonly measuredMs: number;
  /** The generator's CPU (user + system, all its threads) over the measured windows, % of one core. */
  readonly clientCpuPct: number;
  /** How busy the generator's event loop was over the measured windows, %. */
  readonly clientEventLoopPct: number;
}

function newWindow(): Window {
  return { startedAt: performance.now(), durationMs: 0, latenciesMs: [], errors: new Map() };
}

function rate(w: Window): number {
  return w.durationMs > 0 ? (w.latenciesMs.length * 1000) / w.durationMs : 0;
}

function mean(values: readonly number[]): number {
  let s = 0;
  for (const v of values) s += v;
  return values.length === 0 ? 0 : s / values.length;
}

function close(a: number, b: number, tolerance: number): boolean {
  const scale = Math.max(Math.abs(a), Math.abs(b));
  return scale === 0 || Math.abs(a - b) <= tolerance * scale;
}

/** Do the last two windows agree (perf_analyzer checks throughput and average latency)? */
export function windowsAgree(a: { throughput: number; meanMs: number }, b: { throughput: number; meanMs: number }, tolerance: number): boolean {
  return close(a.throughput, b.throughput, tolerance) && close(a.meanMs, b.meanMs, tolerance);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** An exponential inter-arrival gap (ms) for `rps` arrivals a second. */
function poissonGapMs(rps: number): number {
  return (-Math.log(1 - Math.random()) * 1000) / rps;
}

export interface StepProgress {
  readonly window: number;
  readonly throughputRps: number;
  readonly meanMs: number;
}

export async function runStep(
  target: Target,
  requests: readonly PreparedRequest[],
  s: StepSettings,
  onWindow?: (p: StepProgress) => void,
): Promise<StepResult> {
  if (requests.length === 0) throw new Error('no requests to send');
  const load = new LoadGenerator(target, requests, s);
  load.start();
  const measurement = await measureWindows(load, s, onWindow);
  await load.stop();
  return stepResult(s, measurement, load);
}

/**
 * The step's load: a closed loop (`value` requests always in flight) or an
 * open one (Poisson arrivals at `value` a second, at most maxInflight out),
 * each answer recorded into the window current when it arrives.
 */
class LoadGenerator {
  current = newWindow();
  sent = 0;
  dropped = 0;
  private stopping = false;
  private next = 0;
  private readonly running: Promise<void>[] = [];
  private openTimer: NodeJS.Timeout | undefined;
  private outstanding = 0;
  private drained: (() => void) | undefined;

  constructor(
    private readonly target: Target,
    private readonly requests: readonly PreparedRequest[],
    private readonly s: StepSettings,
  ) {}

  start(): void {
    if (this.s.mode === 'concurrency') this.startClosedLoop();
    else this.startOpenLoop();
  }

  /** Ends the current window, opens the next, and returns the one ended. */
  rotate(): Window {
    const w = this.current;
    this.current = newWindow();
    w.durationMs = this.current.startedAt - w.startedAt;
    return w;
  }

  /** Sends no more and waits for every request out to answer. */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.openTimer !== undefined) clearTimeout(this.openTimer);
    if (this.s.mode === 'rate' && this.outstanding === 0) this.drained?.();
    await Promise.all(this.running);
  }

  private pick(): PreparedRequest {
    const r = this.requests[this.next]!;
    this.next = (this.next + 1) % this.requests.length;
    return r;
  }

  private record(startedAt: number, status: string): void {
    const w = this.current;
    if (status.length === 3 && status.startsWith('2')) w.latenciesMs.push(performance.now() - startedAt);
    else w.errors.set(status, (w.errors.get(status) ?? 0) + 1);
  }

  private startClosedLoop(): void {
    const worker = async (): Promise<void> => {
      while (!this.stopping) {
        const startedAt = performance.now();
        this.sent++;
        this.record(startedAt, await this.target.send(this.pick(), this.s.requestTimeoutMs));
      }
    };
    for (let i = 0; i < this.s.value; i++) this.running.push(worker());
  }

  private startOpenLoop(): void {
    let nextAt = performance.now();
    const tick = (): void => {
      if (this.stopping) return;
      const now = performance.now();
      // Timers fire late and coarse (≥ 1 ms): every arrival due by now goes out, each timed from its own schedule.
      while (nextAt <= now) {
        this.fire(nextAt);
        nextAt += poissonGapMs(this.s.value);
      }
      this.openTimer = setTimeout(tick, Math.max(0, nextAt - performance.now()));
    };
    tick();
    this.running.push(
      new Promise<void>((resolve) => {
        this.drained = resolve;
      }),
    );
  }

  /** One open-loop arrival, timed from when it was scheduled; dropped when maxInflight are out. */
  private fire(scheduledAt: number): void {
    if (this.outstanding >= this.s.maxInflight) {
      this.dropped++;
      return;
    }
    this.outstanding++;
    this.sent++;
    void this.target.send(this.pick(), this.s.requestTimeoutMs).then((status) => {
      this.outstanding--;
      this.record(scheduledAt, status);
      if (this.stopping && this.outstanding === 0) this.drained?.();
    });
  }
}

/** The windows of a step, and the CPU and event-loop readings at the boundaries of its last ones. */
interface WindowedMeasurement {
  readonly windows: readonly Window[];
  readonly stable: boolean;
  readonly cpu: NodeJS.CpuUsage[];
  readonly elu: ReturnType<typeof performance.eventLoopUtilization>[];
}

/** Windows until the last two agree, or the time cap (stretched while nothing answered) ends the step. */
async function measureWindows(load: LoadGenerator, s: StepSettings, onWindow: ((p: StepProgress) => void) | undefined): Promise<WindowedMeasurement> {
  const windows: Window[] = [];
  const stepStarted = performance.now();
  let cpu: NodeJS.CpuUsage[] = [process.cpuUsage()];
  let elu = [performance.eventLoopUtilization()];
  let stable = false;
  for (;;) {
    await sleep(s.windowMs);
    const w = load.rotate();
    windows.push(w);
    // Readings at window boundaries; the last three span the two windows that may be the measured ones.
    cpu = [...cpu.slice(-2), process.cpuUsage()];
    elu = [...elu.slice(-2), performance.eventLoopUtilization()];
    onWindow?.({ window: windows.length, throughputRps: rate(w), meanMs: mean(w.latenciesMs) });
    if (windows.length >= 2) {
      const [a, b] = windows.slice(-2) as [Window, Window];
      if (windowsAgree({ throughput: rate(a), meanMs: mean(a.latenciesMs) }, { throughput: rate(b), meanMs: mean(b.latenciesMs) }, s.tolerance)) {
        stable = true;
        break;
      }
    }
    // The time cap ends the step, unless no answer at all came in the last two windows while requests were out
    // (a first connection, a cold model): that is no measurement, so it waits, at most a request timeout longer.
    const late = performance.now() - stepStarted + s.windowMs;
    const answered = windows.slice(-2).reduce((n, x) => n + x.latenciesMs.length + x.errors.size, 0) > 0;
    if (late > s.maxStepMs && (answered || late > s.maxStepMs + s.requestTimeoutMs)) break;
  }
  return { windows, stable, cpu, elu };
}

/** The step's figures: its last two windows merged. */
function stepResult(s: StepSettings, m: WindowedMeasurement, load: { readonly sent: number; readonly dropped: number }): StepResult {
  const measured = m.windows.slice(-2);
  const measuredMs = measured.reduce((n, w) => n + w.durationMs, 0);
  const latencies = measured.flatMap((w) => w.latenciesMs);
  const errorsByStatus: Record<string, number> = {};
  for (const w of measured) for (const [k, v] of w.errors) errorsByStatus[k] = (errorsByStatus[k] ?? 0) + v;
  const errors = Object.values(errorsByStatus).reduce((a, b) => a + b, 0);
  const latency = summarize(latencies);
  const throughputRps = measuredMs > 0 ? (latencies.length * 1000) / measuredMs : 0;
  return {
    mode: s.mode,
    concurrency: s.mode === 'concurrency' ? s.value : throughputRps * (Number.isNaN(latency.meanMs) ? 0 : latency.meanMs / 1000),
    rateRps: s.mode === 'rate' ? s.value : undefined,
    throughputRps,
    latency,
    requests: latencies.length + errors,
    errors,
    errorsByStatus,
    requestsSent: load.sent,
    dropped: load.dropped,
    stable: m.stable,
    windows: m.windows.length,
    measuredMs,
    ...clientLoad(m.cpu, m.elu, measuredMs),
  };
}

/** CPU and event-loop use from the start of the measured windows (the first reading kept) to their end (the last). */
function clientLoad(
  cpu: NodeJS.CpuUsage[],
  elu: ReturnType<typeof performance.eventLoopUtilization>[],
  measuredMs: number,
): { clientCpuPct: number; clientEventLoopPct: number } {
  const c0 = cpu[0]!;
  const c1 = cpu[cpu.length - 1]!;
  const cpuUs = c1.user - c0.user + (c1.system - c0.system);
  const loop = performance.eventLoopUtilization(elu[elu.length - 1]!, elu[0]!);
  return { clientCpuPct: measuredMs > 0 ? (cpuUs / 1000 / measuredMs) * 100 : 0, clientEventLoopPct: loop.utilization * 100 };
}
