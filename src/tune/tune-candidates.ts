/**
 * @module tune/tune-candidates
 * Measuring one candidate config for `onnx-mme tune`: a copy of the package
 * with the candidate's config.pbtxt is loaded through the loopback server's
 * v2 repository API, swept with perf's engine on a worker thread
 * (tune/load-worker.ts), unloaded and removed. The bench remembers every
 * point and which server behaviour each measured, so the search never pays
 * twice for configs that run the same.
 */
import { cp, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { ModelConfigDescriptor } from '../config/model-config-schema.js';
import { printTextFormat } from '../config/pbtxt/parser.js';
import type { PerfRun } from '../perf/perf-run.js';
import type { StopRule, WorkerMessage, WorkerRequest } from './load-worker.js';
import type { Objective, TuneOptions, TunePoint, TuneStep } from './tune-run.js';
import { applySetting, describeSetting, effectKey, type Dimension, type KnobSetting, type ServerDefaults } from './tune-space.js';

/** Prints a raw JSON-form config; without a user config.pbtxt, the empty config prints as a comment. */
export function printConfig(json: Readonly<Record<string, unknown>>): string {
  return printTextFormat(json, ModelConfigDescriptor);
}

/** A candidate's score: the most throughput among its steps that met the objective with no error (0 when none did). */
export function scoreOf(run: Pick<PerfRun, 'steps'>, objective: Objective): { score: number; at: TuneStep | undefined; steps: TuneStep[] } {
  const steps: TuneStep[] = run.steps.map((s) => ({
    concurrency: s.concurrency,
    throughputRps: s.throughputRps,
    p50Ms: s.latency.p50Ms,
    p99Ms: s.latency.p99Ms,
    errors: s.errors,
    serverBatchSize: s.server?.batchSize,
  }));
  let at: TuneStep | undefined;
  for (const s of steps) {
    if (s.errors > 0 || !Number.isFinite(s.p99Ms)) continue;
    if (objective.kind === 'latency' && s.p99Ms > objective.p99Ms) continue;
    if (at === undefined || s.throughputRps > at.throughputRps) at = s;
  }
  return { score: at?.throughputRps ?? 0, at, steps };
}

export async function post(url: string): Promise<{ status: number; text: string }> {
  const res = await fetch(url, { method: 'POST', signal: AbortSignal.timeout(300_000) });
  return { status: res.status, text: await res.text() };
}

async function metricValue(url: string, name: string): Promise<number | undefined> {
  try {
    const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
    return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
  } catch {
    return undefined;
  }
}

function measureInWorker(request: WorkerRequest, progress: (line: string) => void): Promise<PerfRun> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL('./load-worker.js', import.meta.url), { workerData: request });
    let settled = false;
    worker.on('message', (m: WorkerMessage) => {
      if (m.type === 'progress') progress(m.line);
      else {
        settled = true;
        void worker.terminate();
        if (m.type === 'done') resolve(m.run);
        else reject(new Error(m.message));
      }
    });
    worker.once('error', (err: unknown) => {
      if (!settled) reject(err instanceof Error ? err : new Error(String(err)));
    });
    worker.once('exit', (code) => {
      if (!settled) reject(new Error(`the load worker exited with code ${code}`));
    });
  });
}

/** What the bench needs to know about the tune run it serves. */
export interface BenchSetup {
  readonly options: TuneOptions;
  /** The loopback server's base URL. */
  readonly url: string;
  /** The scratch model source the server reads; candidates are copied under it. */
  readonly source: string;
  /** The package's config without its `name` (candidates live under their own directory names). */
  readonly nameless: Readonly<Record<string, unknown>>;
  readonly userSetting: KnobSetting;
  readonly defaults: ServerDefaults;
  /** Milliseconds since the tune run started. */
  readonly elapsed: () => number;
}

/** How loading and sweeping one candidate went. */
interface CandidateRun {
  readonly error: string | undefined;
  readonly run: PerfRun | undefined;
  readonly loadMs: number;
  readonly modelBytes: number | undefined;
  readonly warnings: readonly string[];
}

export class CandidateBench {
  /** Every point measured, in order. */
  readonly points: TunePoint[] = [];
  /** Measured points by what the server runs (tune-space's effectKey): a candidate equal in effect to one measured is not measured again. */
  private readonly byEffect = new Map<string, TunePoint>();
  private readonly stop: StopRule;
  private counter = 0;

  constructor(private readonly setup: BenchSetup) {
    const objective = setup.options.objective;
    this.stop = { p99Ms: objective.kind === 'latency' ? objective.p99Ms : undefined, flatGain: setup.options.minGain };
  }

  /** The config.pbtxt text a setting produces. */
  textOf(setting: KnobSetting): string {
    return printConfig(applySetting(this.setup.nameless, setting, this.setup.userSetting));
  }

  /** The point already measured for a setting that runs the same as this one, if any. */
  measuredLike(setting: KnobSetting): TunePoint | undefined {
    return this.byEffect.get(effectKey(setting, this.setup.defaults));
  }

  sameEffect(a: KnobSetting, b: KnobSetting): boolean {
    return effectKey(a, this.setup.defaults) === effectKey(b, this.setup.defaults);
  }

  async measure(setting: KnobSetting, phase: TunePoint['phase'], dimension: Dimension | undefined): Promise<TunePoint> {
    const { options, source } = this.setup;
    const text = this.textOf(setting);
    const id = `c${this.counter++}`;
    const pointStarted = performance.now();
    const dir = path.join(source, id);
    await cp(options.modelDir, dir, { recursive: true });
    if (options.configText !== undefined || text !== '') await writeFile(path.join(dir, 'config.pbtxt'), text);
    const { error, run, loadMs, modelBytes, warnings } = await this.loadAndSweep(id);
    await rm(dir, { recursive: true, force: true });
    const scored = run === undefined ? { score: 0, at: undefined, steps: [] } : scoreOf(run, options.objective);
    const point: TunePoint = {
      id,
      phase,
      dimension,
      setting,
      configText: text,
      error,
      loadMs,
      modelBytes,
      rssBytes: process.memoryUsage().rss,
      ...scored,
      durationMs: performance.now() - pointStarted,
      warnings,
    };
    this.points.push(point);
    if (phase !== 'confirm') this.byEffect.set(effectKey(setting, this.setup.defaults), point);
    options.progress(this.progressLine(point));
    return point;
  }

  /** Loads the candidate copied under `id`, sweeps it when it loaded, and unloads it. */
  private async loadAndSweep(id: string): Promise<CandidateRun> {
    const { options, url } = this.setup;
    const warnings: string[] = [];
    let error: string | undefined;
    let run: PerfRun | undefined;
    const loadStarted = performance.now();
    const load = await post(`${url}/v2/repository/models/${id}/load`);
    const loadMs = performance.now() - loadStarted;
    const modelBytes = load.status === 200 ? await metricValue(url, 'onnx_mme_loaded_model_bytes') : undefined;
    if (load.status !== 200) {
      error = `load failed (${load.status}): ${load.text.slice(0, 300)}`;
    } else {
      try {
        run = await measureInWorker(
          {
            options: {
              baseUrl: url,
              model: id,
              mode: 'concurrency',
              values: options.concurrency,
              windowMs: options.windowMs,
              maxStepMs: options.maxStepMs,
              tolerance: options.tolerance,
              requestTimeoutMs: 60_000,
              maxInflight: 1024,
              binary: true,
              inputData: { kind: 'random' },
              shape: { shapes: new Map(), batchSize: 1, fillDims: 1 },
            },
            stop: this.stop,
          },
          () => undefined,
        );
        warnings.push(...run.warnings);
      } catch (err) {
        error = (err as Error).message;
      }
    }
    await post(`${url}/v2/repository/models/${id}/unload`).catch(() => undefined);
    return { error, run, loadMs, modelBytes, warnings };
  }

  private progressLine(point: TunePoint): string {
    const { id, phase, dimension, setting, error, at } = point;
    return `tune: ${id} ${phase}${dimension ? ` (${dimension})` : ''}: ${describeSetting(setting)} → ${
      error
        ? `failed: ${error}`
        : at
          ? `${at.throughputRps.toFixed(1)} req/s at concurrency ${at.concurrency}, p99 ${at.p99Ms.toFixed(2)} ms`
          : 'no step met the objective'
    } [${(this.setup.elapsed() / 1000).toFixed(0)}/${(this.setup.options.budgetMs / 1000).toFixed(0)} s]`;
  }
}
