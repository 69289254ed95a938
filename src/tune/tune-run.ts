/**
 * @module tune/tune-run
 * `onnx-mme tune`: Inference Recommender's and model-analyzer's job, on this
 * machine. It starts the real server in this process on a free loopback
 * port, over a scratch model source holding a COPY of the package once per
 * candidate config (the user's package is only read), and measures each
 * candidate with perf's engine on a worker thread (tune/load-worker.ts):
 * a concurrency sweep that stops once throughput is flat or the latency
 * objective is exceeded.
 *
 * The search (model-analyzer's "quick" idea, not its grid): the user's own
 * config is measured first; then one dimension at a time (tune/tune-space.ts),
 * from the best setting so far, values are tried walking away from the
 * current one, and the walk stops at the first value that does not pay at
 * least `minGain` more. Before each candidate the budget is checked against
 * the slowest candidate so far, keeping room for the confirmation: the user's
 * config and the best candidate measured again back to back, so the gain
 * reported is of two measurements taken under the same conditions. If the
 * best does not beat the user's config there, the user's config is the
 * recommendation.
 */
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { Worker } from 'node:worker_threads';
import { ModelConfigDescriptor } from '../config/model-config-schema.js';
import { printTextFormat } from '../config/pbtxt/parser.js';
import { loadServerConfig } from '../config/server-config.js';
import { createLogger } from '../observability/logger.js';
import { createMetrics } from '../observability/metrics.js';
import type { PerfRun } from '../perf/perf-run.js';
import { startServer, type RunningServer } from '../server.js';
import type { StopRule, WorkerMessage, WorkerRequest } from './load-worker.js';
import { applySetting, describeSetting, effectKey, searchSpace, settingOf, withValue, type Dimension, type KnobSetting } from './tune-space.js';

/** Most confirmation pairs (user, best) measured at the end, budget permitting: on a noisy machine one pair can flip. */
const CONFIRM_ROUNDS = 3;

export type Objective = { readonly kind: 'throughput' } | { readonly kind: 'latency'; readonly p99Ms: number };

export interface TuneOptions {
  /** The model's directory (config.pbtxt and version dirs), read only. */
  readonly modelDir: string;
  /** The user's config.pbtxt text; undefined when the package has none (auto-complete). */
  readonly configText: string | undefined;
  /** The user's config, raw JSON form (as parsed, not normalised), {} without one. */
  readonly configJson: Readonly<Record<string, unknown>>;
  readonly objective: Objective;
  readonly budgetMs: number;
  readonly concurrency: readonly number[];
  readonly windowMs: number;
  readonly maxStepMs: number;
  readonly tolerance: number;
  /** A candidate must beat the best so far by this fraction to count (noise on a shared machine is a few %). */
  readonly minGain: number;
  /** Environment the in-process server reads (the user's MME_* settings), plus tune's own overrides. */
  readonly env: NodeJS.ProcessEnv;
  /** Where the server's log lines go (out-dir/server.log). */
  readonly serverLog: Writable;
  readonly progress: (line: string) => void;
}

export interface TuneStep {
  readonly concurrency: number;
  readonly throughputRps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly errors: number;
  readonly serverBatchSize: number | undefined;
}

export interface TunePoint {
  readonly id: string;
  readonly phase: 'default' | 'search' | 'confirm';
  /** The dimension this candidate varied (search), for the report. */
  readonly dimension: Dimension | undefined;
  readonly setting: KnobSetting;
  readonly configText: string;
  readonly error: string | undefined;
  readonly loadMs: number;
  /** Memory the server counts for the model (onnx_mme_loaded_model_bytes while only it is loaded). */
  readonly modelBytes: number | undefined;
  /** This process's resident set after the candidate's measurement (server + tune). */
  readonly rssBytes: number;
  readonly steps: readonly TuneStep[];
  /** Throughput at the objective: the best step that met it (0 when none did). */
  readonly score: number;
  /** The step the score comes from. */
  readonly at: TuneStep | undefined;
  readonly durationMs: number;
  readonly warnings: readonly string[];
}

export interface TuneResult {
  readonly objective: Objective;
  readonly points: readonly TunePoint[];
  readonly userSetting: KnobSetting;
  readonly recommended: KnobSetting;
  /** The recommended config.pbtxt (the user's with the chosen knobs). */
  readonly recommendedText: string;
  /** The user's config printed the same way, for the diff. */
  readonly userText: string;
  /**
   * Confirmation: the user's config and the best candidate measured again,
   * alternately, `rounds` pairs; the means decide, and `user`/`recommended`
   * are the pair whose ratio is closest to the means' ratio.
   */
  readonly confirmation:
    | { readonly user: TunePoint; readonly recommended: TunePoint; readonly rounds: number; readonly userMeanRps: number; readonly recommendedMeanRps: number }
    | undefined;
  /** Why the user's config stayed, when it did. */
  readonly keptUserConfig: string | undefined;
  /** Dimensions walked, with how each ended. */
  readonly dimensions: readonly { readonly dimension: Dimension; readonly outcome: string }[];
  readonly elapsedMs: number;
  readonly budgetMs: number;
  readonly machine: string;
  readonly workers: number;
}

/** Prints a raw JSON-form config; without a user config.pbtxt, the empty config prints as a comment. */
function printConfig(json: Readonly<Record<string, unknown>>): string {
  return printTextFormat(json, ModelConfigDescriptor);
}

/** The instance count the server loads for a config (instance_group's count, CPU default 2 for count 0, 1 without a group; at most one per worker). */
function effectiveInstances(json: Readonly<Record<string, unknown>>, workers: number): number {
  const groups = Array.isArray(json['instance_group']) ? (json['instance_group'] as Record<string, unknown>[]) : [];
  if (groups.length === 0) return 1;
  const total = groups.reduce((n, g) => n + (Number(g['count'] ?? 0) > 0 ? Number(g['count']) : 2), 0);
  return Math.max(1, Math.min(workers, total));
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

async function metricValue(url: string, name: string): Promise<number | undefined> {
  try {
    const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
    return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
  } catch {
    return undefined;
  }
}

async function post(url: string): Promise<{ status: number; text: string }> {
  const res = await fetch(url, { method: 'POST', signal: AbortSignal.timeout(300_000) });
  return { status: res.status, text: await res.text() };
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

export async function runTune(options: TuneOptions): Promise<TuneResult> {
  const started = performance.now();
  const elapsed = (): number => performance.now() - started;
  const work = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-tune-'));
  const source = path.join(work, 'source');
  await mkdir(source, { recursive: true });
  // The user's server settings apply (workers, threads, memory budget), except where tune must own them.
  const env: NodeJS.ProcessEnv = { ...options.env };
  for (const owned of [
    'MME_METRICS_PORT',
    'MME_DRAIN_SECONDS',
    'MME_PRELOAD',
    'MME_DEFAULT_MODEL',
    'MME_HOST',
    'SAGEMAKER_BIND_TO_PORT',
    'MME_MODEL_SOURCE',
    'MME_CACHE_DIR',
    'MME_MODEL_CONTROL',
    'MME_MODEL_URL_ROOTS',
    'MME_HTTP_RESTRICTED_API',
    'MME_GRPC_RESTRICTED_PROTOCOL',
  ])
    delete env[owned];
  const config = loadServerConfig({
    ...env,
    MME_HOST: '127.0.0.1',
    SAGEMAKER_BIND_TO_PORT: '0',
    MME_MODEL_SOURCE: source,
    MME_CACHE_DIR: path.join(work, 'cache'),
    MME_LOG_LEVEL: env['MME_LOG_LEVEL'] ?? 'info',
    // No balancer in front of tune's own loopback server: nothing to drain for.
    MME_DRAIN_SECONDS: '0',
    // Tune loads and unloads each candidate through the v2 repository API of its own loopback server, from its work directory.
    MME_MODEL_CONTROL: 'explicit',
    MME_MODEL_URL_ROOTS: work,
  });
  const workers = config.runtimeWorkers;
  const cores = os.availableParallelism();
  let running: RunningServer | undefined;
  try {
    running = await startServer(config, createLogger(config.logLevel, options.serverLog), createMetrics({ collectProcessMetrics: false }));
    const url = `http://127.0.0.1:${running.port}`;
    const base = options.configText === undefined ? await autoCompleted(url, source, options.modelDir) : options.configJson;
    // Candidates live under their own directory names, so the user's `name` would not match; it goes back into the result.
    const { name: _name, ...nameless } = base as Record<string, unknown>;
    const userSetting = settingOf(base as Record<string, unknown>, effectiveInstances(base, workers));
    const stop: StopRule = { p99Ms: options.objective.kind === 'latency' ? options.objective.p99Ms : undefined, flatGain: options.minGain };
    const points: TunePoint[] = [];
    // Measured points by what the server runs (tune-space's effectKey): a candidate equal in effect to one measured is not measured again.
    const byEffect = new Map<string, TunePoint>();
    const defaults = { intraOpThreads: config.intraOpThreads };
    let counter = 0;

    const measure = async (setting: KnobSetting, phase: TunePoint['phase'], dimension: Dimension | undefined): Promise<TunePoint> => {
      const json = applySetting(nameless, setting, userSetting);
      const text = printConfig(json);
      const id = `c${counter++}`;
      const pointStarted = performance.now();
      const dir = path.join(source, id);
      await cp(options.modelDir, dir, { recursive: true });
      if (options.configText !== undefined || text !== '') await writeFile(path.join(dir, 'config.pbtxt'), text);
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
              stop,
            },
            () => undefined,
          );
          warnings.push(...run.warnings);
        } catch (err) {
          error = (err as Error).message;
        }
      }
      await post(`${url}/v2/repository/models/${id}/unload`).catch(() => undefined);
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
      points.push(point);
      if (phase !== 'confirm') byEffect.set(effectKey(setting, defaults), point);
      const at = point.at;
      options.progress(
        `tune: ${id} ${phase}${dimension ? ` (${dimension})` : ''}: ${describeSetting(setting)} → ${
          error
            ? `failed: ${error}`
            : at
              ? `${at.throughputRps.toFixed(1)} req/s at concurrency ${at.concurrency}, p99 ${at.p99Ms.toFixed(2)} ms`
              : 'no step met the objective'
        } [${(elapsed() / 1000).toFixed(0)}/${(options.budgetMs / 1000).toFixed(0)} s]`,
      );
      return point;
    };

    const userPoint = await measure(userSetting, 'default', undefined);
    if (userPoint.error !== undefined) throw new TuneError(`the package's own config could not be measured: ${userPoint.error}`);
    let best = userPoint;
    // What the next candidate may cost: the last one (the first also paid onnxruntime's and the workers' warm-up).
    const costEstimate = (): number => points[points.length - 1]!.durationMs;
    // Room for the confirmation (two runs), once there is a candidate to confirm.
    const reserve = (): number => (best === userPoint ? 0 : 2 * costEstimate());
    const affordable = (): boolean => elapsed() + costEstimate() + reserve() <= options.budgetMs;
    const beats = (p: TunePoint, q: TunePoint): boolean => p.error === undefined && p.score > q.score * (1 + options.minGain) && p.score > 0;

    const dimensions: { dimension: Dimension; outcome: string }[] = [];
    const space = searchSpace(userSetting, { workers, cores, cpu: true, maxBatchCap: 64 });
    let outOfBudget = false;
    for (const dim of space) {
      if (outOfBudget || !affordable()) {
        outOfBudget = true;
        dimensions.push({ dimension: dim.dimension, outcome: 'not explored: the budget ran out' });
        continue;
      }
      const start = best;
      const values = dim.values;
      let idx = values.findIndex((v) => printConfig(applySetting(nameless, withValue(best.setting, dim.dimension, v), userSetting)) === best.configText);
      const candidates = idx >= 0 ? values : [undefined, ...values];
      if (idx < 0) idx = 0;
      let tried = 0;
      let stoppedBy = 'every value tried';
      for (const direction of [1, -1]) {
        if (direction === -1 && best !== start) break; // going up paid: the other way will not
        for (let j = idx + direction; j >= 0 && j < candidates.length; j += direction) {
          const setting = withValue(best.setting, dim.dimension, candidates[j]);
          const text = printConfig(applySetting(nameless, setting, userSetting));
          if (text === best.configText || effectKey(setting, defaults) === effectKey(best.setting, defaults)) continue;
          let point = byEffect.get(effectKey(setting, defaults));
          if (point === undefined) {
            if (!affordable()) {
              outOfBudget = true;
              stoppedBy = 'the budget ran out';
              break;
            }
            point = await measure(setting, 'search', dim.dimension);
            tried++;
          }
          if (beats(point, best)) best = point;
          else {
            stoppedBy = 'stopped paying';
            break;
          }
        }
        if (outOfBudget) break;
      }
      dimensions.push({
        dimension: dim.dimension,
        outcome: `${tried} tried; ${best === start ? 'kept' : 'chose'} ${describeValue(best.setting, dim.dimension)} (${stoppedBy})`,
      });
    }

    // Confirmation: both again, back to back (up to CONFIRM_ROUNDS pairs while the budget allows), decided on the sums.
    let confirmation: TuneResult['confirmation'];
    let recommended = best;
    let keptUserConfig: string | undefined;
    if (best === userPoint) keptUserConfig = `no candidate beat the package's own config by more than ${(options.minGain * 100).toFixed(0)}%`;
    else {
      const pairs: { user: TunePoint; best: TunePoint }[] = [];
      while (
        pairs.length < CONFIRM_ROUNDS &&
        (pairs.length === 0 ? elapsed() + reserve() <= options.budgetMs * 1.1 : elapsed() + reserve() <= options.budgetMs)
      ) {
        const user = await measure(userSetting, 'confirm', undefined);
        pairs.push({ user, best: await measure(best.setting, 'confirm', undefined) });
      }
      if (pairs.length > 0) {
        const userSum = pairs.reduce((n, p) => n + p.user.score, 0);
        const bestSum = pairs.reduce((n, p) => n + p.best.score, 0);
        // The pair reported is a measured one, not an average: of those that agree with the decision (one does, as the
        // sums decide), the one whose ratio is closest to the sums'.
        const ratio = userSum > 0 ? bestSum / userSum : Number.POSITIVE_INFINITY;
        const agreeing = pairs.filter((p) => bestSum > userSum === p.best.score > p.user.score);
        const shown = [...(agreeing.length > 0 ? agreeing : pairs)].sort(
          (a, b) => Math.abs(a.best.score / (a.user.score || 1) - ratio) - Math.abs(b.best.score / (b.user.score || 1) - ratio),
        )[0]!;
        confirmation = {
          user: shown.user,
          recommended: shown.best,
          rounds: pairs.length,
          userMeanRps: userSum / pairs.length,
          recommendedMeanRps: bestSum / pairs.length,
        };
        if (!(bestSum > userSum)) {
          recommended = userPoint;
          keptUserConfig = `the best candidate (${describeSetting(best.setting)}) did not beat the package's own config when both were measured again back to back (${(bestSum / pairs.length).toFixed(1)} vs ${(userSum / pairs.length).toFixed(1)} req/s, ${pairs.length} round${pairs.length === 1 ? '' : 's'})`;
        }
      }
    }
    const recommendedJson = applySetting(base as Record<string, unknown>, recommended.setting, userSetting);
    return {
      objective: options.objective,
      points,
      userSetting,
      recommended: recommended.setting,
      recommendedText: printConfig(recommendedJson),
      userText: printConfig(base),
      confirmation,
      keptUserConfig,
      dimensions,
      elapsedMs: elapsed(),
      budgetMs: options.budgetMs,
      machine: `${os.hostname()}: ${cores} cores (${os.cpus()[0]?.model ?? 'unknown CPU'}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, ${workers} runtime workers`,
      workers,
    };
  } finally {
    await running?.shutdown('tune finished').catch(() => undefined);
    await rm(work, { recursive: true, force: true });
  }
}

/**
 * A package without config.pbtxt: the config the server auto-completes for
 * it (GET /v2/models/{m}/config, in config.pbtxt's JSON form), so the knobs
 * start from what the server actually does with it.
 */
async function autoCompleted(url: string, source: string, modelDir: string): Promise<Record<string, unknown>> {
  const id = 'auto';
  const dir = path.join(source, id);
  await cp(modelDir, dir, { recursive: true });
  try {
    const res = await fetch(`${url}/v2/models/${id}/config`, { signal: AbortSignal.timeout(300_000) });
    const text = await res.text();
    if (res.status !== 200) throw new TuneError(`the package (no config.pbtxt) does not load: ${text.slice(0, 300)}`);
    const { name: _name, ...json } = JSON.parse(text) as Record<string, unknown>;
    return json;
  } finally {
    await post(`${url}/v2/repository/models/${id}/unload`).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  }
}

function describeValue(s: KnobSetting, d: Dimension): string {
  switch (d) {
    case 'instances':
      return `${s.instances} instance${s.instances === 1 ? '' : 's'}`;
    case 'maxBatchSize':
      return `max_batch_size ${s.maxBatchSize}`;
    case 'delayUs':
      return s.delayUs === undefined ? 'no dynamic_batching block (delay 0)' : `max_queue_delay_microseconds ${s.delayUs}`;
    case 'preferred':
      return s.preferred.length === 0 ? 'no preferred_batch_size' : `preferred_batch_size [${s.preferred.join(', ')}]`;
    case 'intraOpThreads':
      return `intra_op_thread_count ${s.intraOpThreads ?? 'default'}`;
    case 'executionThread':
      return `execution_thread ${s.executionThread}`;
  }
}

/** The package cannot be tuned as given (its own config fails to load or measure). */
export class TuneError extends Error {
  override readonly name = 'TuneError';
}
