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
import { cp, mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { loadServerConfig, type ServerConfig } from '../config/server-config.js';
import { createLogger } from '../observability/logger.js';
import { createMetrics } from '../observability/metrics.js';
import { startServer, type RunningServer } from '../server.js';
import { CandidateBench, post, printConfig } from './tune-candidates.js';
import {
  applySetting,
  describeSetting,
  searchSpace,
  settingOf,
  withValue,
  type Dimension,
  type DimensionSpace,
  type KnobSetting,
  type ServerDefaults,
} from './tune-space.js';

export { scoreOf } from './tune-candidates.js';

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

/** The instance count the server loads for a config (instance_group's count, CPU default 2 for count 0, 1 without a group; at most one per worker). */
function effectiveInstances(json: Readonly<Record<string, unknown>>, workers: number): number {
  const groups = Array.isArray(json['instance_group']) ? (json['instance_group'] as Record<string, unknown>[]) : [];
  if (groups.length === 0) return 1;
  const total = groups.reduce((n, g) => n + (Number(g['count'] ?? 0) > 0 ? Number(g['count']) : 2), 0);
  return Math.max(1, Math.min(workers, total));
}

/** Settings tune owns on its loopback server; the user's other server settings (workers, threads, memory budget) apply. */
const TUNE_OWNED_SETTINGS = [
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
];

/** The loopback server's config: the user's settings, with tune's own address, source, cache and model control. */
function tuneServerConfig(userEnv: NodeJS.ProcessEnv, work: string, source: string): ServerConfig {
  const env: NodeJS.ProcessEnv = { ...userEnv };
  for (const owned of TUNE_OWNED_SETTINGS) delete env[owned];
  return loadServerConfig({
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
}

export async function runTune(options: TuneOptions): Promise<TuneResult> {
  const started = performance.now();
  const elapsed = (): number => performance.now() - started;
  const work = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-tune-'));
  const source = path.join(work, 'source');
  await mkdir(source, { recursive: true });
  const config = tuneServerConfig(options.env, work, source);
  let running: RunningServer | undefined;
  try {
    running = await startServer(config, createLogger(config.logLevel, options.serverLog), createMetrics({ collectProcessMetrics: false }));
    const url = `http://127.0.0.1:${running.port}`;
    const base = options.configText === undefined ? await autoCompleted(url, source, options.modelDir) : options.configJson;
    const defaults = { intraOpThreads: config.intraOpThreads };
    return await tuneOnServer({ options, url, source, base, workers: config.runtimeWorkers, defaults, elapsed });
  } finally {
    await running?.shutdown('tune finished').catch(() => undefined);
    await rm(work, { recursive: true, force: true });
  }
}

/** Tune's loopback server, started over the scratch source, and what the search needs from it. */
interface TuneServer {
  readonly options: TuneOptions;
  readonly url: string;
  readonly source: string;
  /** The package's config (the user's, or the server's auto-completed one), raw JSON form. */
  readonly base: Readonly<Record<string, unknown>>;
  readonly workers: number;
  readonly defaults: ServerDefaults;
  readonly elapsed: () => number;
}

/** The user's config measured, the dimensions walked, the best confirmed, and the result assembled. */
async function tuneOnServer(server: TuneServer): Promise<TuneResult> {
  const { options, base, workers, elapsed } = server;
  const cores = os.availableParallelism();
  // Candidates live under their own directory names, so the user's `name` would not match; it goes back into the result.
  const { name: _name, ...nameless } = base as Record<string, unknown>;
  const userSetting = settingOf(base as Record<string, unknown>, effectiveInstances(base, workers));
  const bench = new CandidateBench({ options, url: server.url, source: server.source, nameless, userSetting, defaults: server.defaults, elapsed });
  const userPoint = await bench.measure(userSetting, 'default', undefined);
  if (userPoint.error !== undefined) throw new TuneError(`the package's own config could not be measured: ${userPoint.error}`);
  const search: SearchState = { bench, options, elapsed, userPoint, best: userPoint, outOfBudget: false };
  const dimensions = await searchDimensions(search, searchSpace(userSetting, { workers, cores, cpu: true, maxBatchCap: 64 }));
  const { confirmation, recommended, keptUserConfig } = await confirmBest(search);
  const recommendedJson = applySetting(base as Record<string, unknown>, recommended.setting, userSetting);
  return {
    objective: options.objective,
    points: bench.points,
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
}

/** Where the search stands: the best point so far, and whether the budget has run out. */
interface SearchState {
  readonly bench: CandidateBench;
  readonly options: TuneOptions;
  readonly elapsed: () => number;
  readonly userPoint: TunePoint;
  best: TunePoint;
  /** Set once a candidate could not be afforded: the dimensions left are not explored. */
  outOfBudget: boolean;
}

/** What the next candidate may cost: the last one (the first also paid onnxruntime's and the workers' warm-up). */
function costEstimate(s: SearchState): number {
  const points = s.bench.points;
  return points[points.length - 1]!.durationMs;
}

/** Room for the confirmation (two runs), once there is a candidate to confirm. */
function reserve(s: SearchState): number {
  return s.best === s.userPoint ? 0 : 2 * costEstimate(s);
}

function affordable(s: SearchState): boolean {
  return s.elapsed() + costEstimate(s) + reserve(s) <= s.options.budgetMs;
}

function beats(p: TunePoint, q: TunePoint, minGain: number): boolean {
  return p.error === undefined && p.score > q.score * (1 + minGain) && p.score > 0;
}

/** Walks each dimension in turn from the best setting so far; says how each ended. */
async function searchDimensions(s: SearchState, space: readonly DimensionSpace[]): Promise<TuneResult['dimensions']> {
  const dimensions: { dimension: Dimension; outcome: string }[] = [];
  for (const dim of space) {
    if (s.outOfBudget || !affordable(s)) {
      s.outOfBudget = true;
      dimensions.push({ dimension: dim.dimension, outcome: 'not explored: the budget ran out' });
      continue;
    }
    const start = s.best;
    const { tried, stoppedBy } = await walkDimension(s, dim);
    dimensions.push({
      dimension: dim.dimension,
      outcome: `${tried} tried; ${s.best === start ? 'kept' : 'chose'} ${describeValue(s.best.setting, dim.dimension)} (${stoppedBy})`,
    });
  }
  return dimensions;
}

/**
 * One dimension: values are tried walking up from the best setting's, then
 * down unless going up paid, each walk stopping at the first value that does
 * not beat the best by `minGain` (or that the budget cannot afford).
 */
async function walkDimension(s: SearchState, dim: DimensionSpace): Promise<{ tried: number; stoppedBy: string }> {
  const bench = s.bench;
  const start = s.best;
  const values = dim.values;
  let idx = values.findIndex((v) => bench.textOf(withValue(s.best.setting, dim.dimension, v)) === s.best.configText);
  const candidates = idx >= 0 ? values : [undefined, ...values];
  if (idx < 0) idx = 0;
  let tried = 0;
  let stoppedBy = 'every value tried';
  for (const direction of [1, -1]) {
    if (direction === -1 && s.best !== start) break; // going up paid: the other way will not
    for (let j = idx + direction; j >= 0 && j < candidates.length; j += direction) {
      const setting = withValue(s.best.setting, dim.dimension, candidates[j]);
      if (bench.textOf(setting) === s.best.configText || bench.sameEffect(setting, s.best.setting)) continue;
      let point = bench.measuredLike(setting);
      if (point === undefined) {
        if (!affordable(s)) {
          s.outOfBudget = true;
          stoppedBy = 'the budget ran out';
          break;
        }
        point = await bench.measure(setting, 'search', dim.dimension);
        tried++;
      }
      if (beats(point, s.best, s.options.minGain)) s.best = point;
      else {
        stoppedBy = 'stopped paying';
        break;
      }
    }
    if (s.outOfBudget) break;
  }
  return { tried, stoppedBy };
}

interface ConfirmPair {
  readonly user: TunePoint;
  readonly best: TunePoint;
}

/** The recommendation: the best candidate if it beats the user's config again when both are measured back to back. */
async function confirmBest(s: SearchState): Promise<{ confirmation: TuneResult['confirmation']; recommended: TunePoint; keptUserConfig: string | undefined }> {
  const { best, userPoint } = s;
  if (best === userPoint) {
    const keptUserConfig = `no candidate beat the package's own config by more than ${(s.options.minGain * 100).toFixed(0)}%`;
    return { confirmation: undefined, recommended: best, keptUserConfig };
  }
  const pairs = await measurePairs(s);
  if (pairs.length === 0) return { confirmation: undefined, recommended: best, keptUserConfig: undefined };
  const userSum = pairs.reduce((n, p) => n + p.user.score, 0);
  const bestSum = pairs.reduce((n, p) => n + p.best.score, 0);
  const shown = shownPair(pairs, userSum, bestSum);
  const confirmation = {
    user: shown.user,
    recommended: shown.best,
    rounds: pairs.length,
    userMeanRps: userSum / pairs.length,
    recommendedMeanRps: bestSum / pairs.length,
  };
  if (bestSum > userSum) return { confirmation, recommended: best, keptUserConfig: undefined };
  const keptUserConfig = `the best candidate (${describeSetting(best.setting)}) did not beat the package's own config when both were measured again back to back (${(bestSum / pairs.length).toFixed(1)} vs ${(userSum / pairs.length).toFixed(1)} req/s, ${pairs.length} round${pairs.length === 1 ? '' : 's'})`;
  return { confirmation, recommended: userPoint, keptUserConfig };
}

/** Both again, back to back: up to CONFIRM_ROUNDS pairs while the budget allows (the first pair may overrun it by a tenth). */
async function measurePairs(s: SearchState): Promise<ConfirmPair[]> {
  const pairs: ConfirmPair[] = [];
  while (
    pairs.length < CONFIRM_ROUNDS &&
    (pairs.length === 0 ? s.elapsed() + reserve(s) <= s.options.budgetMs * 1.1 : s.elapsed() + reserve(s) <= s.options.budgetMs)
  ) {
    const user = await s.bench.measure(s.userPoint.setting, 'confirm', undefined);
    pairs.push({ user, best: await s.bench.measure(s.best.setting, 'confirm', undefined) });
  }
  return pairs;
}

/**
 * The pair reported is a measured one, not an average: of those that agree
 * with the decision (one does, as the sums decide), the one whose ratio is
 * closest to the sums'.
 */
function shownPair(pairs: readonly ConfirmPair[], userSum: number, bestSum: number): ConfirmPair {
  const ratio = userSum > 0 ? bestSum / userSum : Number.POSITIVE_INFINITY;
  const agreeing = pairs.filter((p) => bestSum > userSum === p.best.score > p.user.score);
  return [...(agreeing.length > 0 ? agreeing : pairs)].sort(
    (a, b) => Math.abs(a.best.score / (a.user.score || 1) - ratio) - Math.abs(b.best.score / (b.user.score || 1) - ratio),
  )[0]!;
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
