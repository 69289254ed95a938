/**
 * @module cli/tune
 * `onnx-mme tune <model-package-dir> [--objective ...] [--budget-s N] -o <out-dir>`:
 * the package is opened read-only (an archive is extracted to a temporary
 * directory), the engine (src/tune/) measures candidate configs on this
 * machine, and the recommendation goes to <out-dir>, never into the package.
 */
import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { ModelConfigDescriptor } from '../config/model-config-schema.js';
import { parseTextFormat } from '../config/pbtxt/parser.js';
import { ServingError, withModel } from '../errors.js';
import { scanRepository, type RepositoryLayout } from '../registry/repository-layout.js';
import { parseSweep } from '../perf/sweep-spec.js';
import { runTune, TuneError, type Objective } from '../tune/tune-run.js';
import { writeTuneOutput } from '../tune/tune-report.js';
import {
  EXIT_FAILED,
  EXIT_OK,
  numberOption,
  parseCommandLine,
  readSettings,
  stringOption,
  UsageError,
  write,
  type CliCommand,
  type CliIo,
  type Parsed,
} from './cli-support.js';
import { openPackage, type PackageInput } from './package-input.js';

const HELP = `Usage: onnx-mme tune <model-package-dir> [--objective throughput|latency-p99-ms=N] [--budget-s N] -o <out-dir> [options]

Finds the config.pbtxt that serves this model best on this machine. It
starts the server in this process on a free loopback port, over a copy of
the package, and measures candidate configs under load (perf's engine, a
concurrency sweep per candidate): instance count, max_batch_size, the
dynamic batcher's delay and preferred batch sizes, onnxruntime intra-op
threads, and where the session runs (execution_thread). One knob at a time
from the best so far, stopping a knob once it stops paying; then your config
and the best are measured again back to back, and the best is recommended
only if it still wins. The package itself is never modified.

<model-package-dir> is a Triton model directory (config.pbtxt + 1/model.onnx)
or a .tar.gz the server loads; one model (not an ensemble).

Writes into <out-dir>:
  config.pbtxt   the recommended config (yours with the chosen knobs)
  config.diff    what changed, as a unified diff
  report.md      the recommendation, its measured gain over your config, every candidate
  pareto.svg     throughput vs p99 per candidate, the Pareto front, the chosen point
  memory.svg     model memory per candidate
  tune.json      the same figures for scripts
  server.log     the in-process server's log lines

Options:
  --objective O        throughput (default): the most req/s at any latency;
                       latency-p99-ms=N: the most req/s with p99 latency <= N ms
  --budget-s N         time for the whole run, confirmation included (default 300)
  -o, --output DIR     where to write (created; must not be inside the package)
  --concurrency SPEC   concurrencies each candidate is swept over, as for perf (default 1:64:x4)
  --window-s N         measurement window (default 0.5)
  --duration-s N       most time one concurrency step may take (default 5 windows)
  --min-gain-pct N     a change must add at least N% throughput to be kept (default 5)
  --stability-pct N    windows agree within N% (default 10)

The server reads the same environment as 'onnx-mme serve' (MME_RUNTIME_WORKERS,
MME_INTRA_OP_THREADS, ...), so run tune with the settings you deploy with.

Exit status: 0 a recommendation was written; 1 the package could not be loaded or
measured, or no config met the objective (the files are still written); 2 bad command line.`;

function parseObjective(raw: string | undefined): Objective {
  if (raw === undefined || raw === 'throughput') return { kind: 'throughput' };
  const m = /^latency-p99-ms=(.+)$/.exec(raw);
  const n = m ? Number(m[1]) : Number.NaN;
  if (!m || !Number.isFinite(n) || n <= 0) throw new UsageError(`--objective must be 'throughput' or 'latency-p99-ms=N' with N > 0, got '${raw}'`);
  return { kind: 'latency', p99Ms: n };
}

function inside(child: string, parent: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/** The command line, checked: where to read and write, the objective and the sweep. */
interface TuneArgs {
  readonly parsed: Parsed;
  readonly input: string;
  readonly out: string;
  readonly objective: Objective;
  readonly budgetS: number;
  readonly windowS: number;
  readonly durationS: number;
  readonly concurrency: number[];
}

type TuneModel = RepositoryLayout['models'][number];

export const tuneCommand: CliCommand = {
  name: 'tune',
  help: HELP,
  async run(argv: readonly string[], io: CliIo): Promise<number> {
    const args = parseTuneArgs(argv);
    if (args === 'help') {
      write(io.stdout, HELP);
      return EXIT_OK;
    }
    const limits = readSettings(io.env, ['archiveMaxBytes', 'archiveMaxEntries', 'archiveMaxRatio']);
    const pkg = await openPackage(args.input, { maxBytes: limits.archiveMaxBytes, maxEntries: limits.archiveMaxEntries, maxRatio: limits.archiveMaxRatio });
    try {
      const found = await singleModel(pkg, args.input, io);
      if (typeof found === 'number') return found;
      return await tuneModel(args, found.model, found.configJson, io);
    } finally {
      await pkg.cleanup();
    }
  },
};

function parseTuneArgs(argv: readonly string[]): TuneArgs | 'help' {
  const parsed = parseCommandLine(
    argv,
    {
      objective: { type: 'string' },
      'budget-s': { type: 'string' },
      output: { type: 'string', short: 'o' },
      concurrency: { type: 'string' },
      'window-s': { type: 'string' },
      'duration-s': { type: 'string' },
      'min-gain-pct': { type: 'string' },
      'stability-pct': { type: 'string' },
    },
    { min: 1, max: 1, names: '<model-package-dir>' },
  );
  if (parsed.help) return 'help';
  const outDir = stringOption(parsed, 'output');
  if (outDir === undefined) throw new UsageError('give the output directory with -o <out-dir>');
  const objective = parseObjective(stringOption(parsed, 'objective'));
  const budgetS = numberOption(parsed, 'budget-s', 300, 1);
  const windowS = numberOption(parsed, 'window-s', 0.5, 0.01);
  const durationS = numberOption(parsed, 'duration-s', windowS * 5, windowS);
  let concurrency: number[];
  try {
    concurrency = parseSweep(stringOption(parsed, 'concurrency') ?? '1:64:x4', '--concurrency', { integer: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const input = parsed.positionals[0]!;
  const out = path.resolve(outDir);
  const full = path.resolve(input);
  if (inside(out, full)) throw new UsageError(`-o ${outDir} is inside the package ${input}: tune never writes into the package; choose another directory`);
  return { parsed, input, out, objective, budgetS, windowS, durationS, concurrency };
}

/** The package's one model and its config's JSON form, or the exit status when it holds several, an ensemble, or a config that does not parse. */
async function singleModel(pkg: PackageInput, input: string, io: CliIo): Promise<{ model: TuneModel; configJson: Record<string, unknown> } | number> {
  const layout = await withModel(pkg.label, () => scanRepository(pkg.dir, pkg.fallbackName));
  if (layout.models.length !== 1) {
    write(
      io.stderr,
      `tune: ${input} holds ${layout.models.length} models (${layout.models.map((m) => m.name).join(', ')}); tune takes one model's package (tune each step model on its own)`,
    );
    return EXIT_FAILED;
  }
  const model = layout.models[0]!;
  let configJson: Record<string, unknown> = {};
  if (model.configText !== undefined) {
    try {
      configJson = parseTextFormat(model.configText, ModelConfigDescriptor, `${pkg.label}/config.pbtxt`);
    } catch (err) {
      write(io.stderr, `tune: ${(err as Error).message}`);
      return EXIT_FAILED;
    }
    if (configJson['platform'] === 'ensemble') {
      write(io.stderr, `tune: ${input} is an ensemble; tune its step models one by one`);
      return EXIT_FAILED;
    }
  }
  return { model, configJson };
}

/** Runs the engine on the model and writes its output; the server's log goes to <out-dir>/server.log. */
async function tuneModel(args: TuneArgs, model: TuneModel, configJson: Record<string, unknown>, io: CliIo): Promise<number> {
  const { parsed, out, objective, budgetS } = args;
  await mkdir(out, { recursive: true });
  const serverLog = createWriteStream(path.join(out, 'server.log'));
  write(
    io.stderr,
    `tune: ${model.name} from ${args.input}; objective ${objective.kind === 'throughput' ? 'throughput' : `p99 <= ${objective.p99Ms} ms`}; budget ${budgetS} s`,
  );
  try {
    const result = await runTune({
      modelDir: model.dir,
      configText: model.configText,
      configJson,
      objective,
      budgetMs: budgetS * 1000,
      concurrency: args.concurrency,
      windowMs: args.windowS * 1000,
      maxStepMs: args.durationS * 1000,
      tolerance: numberOption(parsed, 'stability-pct', 10, 0.1) / 100,
      minGain: numberOption(parsed, 'min-gain-pct', 5, 0) / 100,
      env: io.env,
      serverLog,
      progress: (line) => write(io.stderr, line),
    });
    const { summary, met } = await writeTuneOutput(result, out, model.name);
    write(io.stdout, summary);
    return met ? EXIT_OK : EXIT_FAILED;
  } catch (err) {
    if (err instanceof TuneError || err instanceof ServingError) {
      write(io.stderr, `tune: ${err.message}`);
      return EXIT_FAILED;
    }
    throw err;
  } finally {
    await new Promise<void>((resolve) => serverLog.end(() => resolve()));
  }
}
