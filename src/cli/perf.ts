/**
 * @module cli/perf
 * `onnx-mme perf <base-url> --model <name> ...`: perf_analyzer's job for
 * users, against any KServe v2 endpoint, SageMaker's /invocations route or a
 * real SageMaker endpoint. The engine is src/perf/; this file turns the
 * command line into its options and its run into stdout, files and an exit
 * code.
 */
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import { parseSweep } from '../perf/sweep-spec.js';
import { PerfSetupError, runPerf, type PerfOptions } from '../perf/perf-run.js';
import { runChart, runCsv, runJson, runTable } from '../perf/perf-report.js';
import {
  EXIT_FAILED,
  EXIT_OK,
  numberOption,
  parseCommandLine,
  stringOption,
  UsageError,
  write,
  type CliCommand,
  type CliIo,
  type Parsed,
} from './cli-support.js';
import { StatusLine } from './progress.js';

const HELP = `Usage: onnx-mme perf <base-url> --model <name> [--target-model <t>] [--concurrency 1:64:x2 | --rate N] [--duration-s N] [--binary] [--json FILE] [--csv FILE] [--chart FILE.svg] [options]

Measures an inference endpoint under load, as perf_analyzer does: for each
step of a concurrency sweep (closed loop: N requests always in flight) or of
request rates (open loop, Poisson arrivals), it sends requests until two
measurement windows agree within --stability-pct (or the step's time runs
out), then prints throughput, p50/p90/p95/p99 latency and errors by status.
Against onnx-mme (or Triton) it also prints the server's own split of each
request: queue, compute input/infer/output, and the batch size the dynamic
batcher formed.

Targets:
  <base-url> --model M                  KServe v2: POST <base-url>/v2/models/M/infer
  <base-url> --target-model T           SageMaker container route: POST <base-url>/invocations
                                        with X-Amzn-SageMaker-Target-Model: T (--model, if given,
                                        names the model whose metadata shapes the inputs)
  <base-url> --endpoint-name E [--target-model T]
                                        a SageMaker endpoint through the AWS SDK (InvokeEndpoint,
                                        retries off); <base-url> is the SageMaker Runtime URL, e.g.
                                        https://runtime.sagemaker.us-east-1.amazonaws.com; AWS
                                        credentials from the usual chain

Load:
  --concurrency SPEC     concurrency steps: N, start:end[:step] or start:end:xFACTOR (default 1:64:x2)
  --rate SPEC            request-rate steps (req/s), same forms, instead of --concurrency
  --duration-s N         most seconds one step may measure (default 10)
  --window-s N           measurement window (default duration/5)
  --stability-pct N      windows agree when throughput and mean latency differ by at most N% (default 10)
  --request-timeout-s N  a request without an answer after N s counts as 'timeout' (default 60)
  --max-inflight N       rate mode: most requests outstanding; later arrivals are dropped and counted (default 1024)

Requests:
  --input-data random|zero|FILE
                         random (default) or zero tensors shaped from the model's metadata
                         (GET <base-url>/v2/models/M), or real requests: a .jsonl file with
                         one KServe v2 JSON body a line, or a .npy file (one request); repeatable
  --shape NAME:D1,D2,..  the full shape of input NAME (repeatable); fills its -1 dims
  --batch-size N         a leading -1 dim (the batch) becomes N (default 1)
  --fill-dims N          every other -1 dim becomes N (default 1)
  --binary               send tensors with the binary extension (and ask for binary outputs)

Output (progress goes to stderr: a redrawn status line on a terminal, a line per window otherwise):
  --json FILE            one object per step: concurrency, throughput_rps, p50_ms, p90_ms, p95_ms,
                         p99_ms, requests, errors, errors_by_status, server {...}, ...
  --csv FILE             the same as CSV
  --chart FILE.svg       throughput vs latency (p50 and p99)
  --allow-errors         exit 0 even when some requests failed

Exit status: 0 measured with no failed request; 1 a request failed (the figures are still
printed and written), or the endpoint could not be measured; 2 bad command line.`;

const OPTIONS = {
  model: { type: 'string' },
  'target-model': { type: 'string' },
  'endpoint-name': { type: 'string' },
  region: { type: 'string' },
  concurrency: { type: 'string' },
  rate: { type: 'string' },
  'duration-s': { type: 'string' },
  'window-s': { type: 'string' },
  'stability-pct': { type: 'string' },
  'request-timeout-s': { type: 'string' },
  'max-inflight': { type: 'string' },
  'input-data': { type: 'string', multiple: true },
  shape: { type: 'string', multiple: true },
  'batch-size': { type: 'string' },
  'fill-dims': { type: 'string' },
  binary: { type: 'boolean' },
  json: { type: 'string' },
  csv: { type: 'string' },
  chart: { type: 'string' },
  'allow-errors': { type: 'boolean' },
} as const;

function list(parsed: Parsed, name: string): string[] {
  const v = (parsed.values as Record<string, unknown>)[name];
  return Array.isArray(v) ? (v as string[]) : typeof v === 'string' ? [v] : [];
}

function intOption(parsed: Parsed, name: string, fallback: number, min: number): number {
  const n = numberOption(parsed, name, fallback, min);
  if (!Number.isInteger(n)) throw new UsageError(`--${name} must be an integer, got '${stringOption(parsed, name)}'`);
  return n;
}

function parseShapes(specs: readonly string[]): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const spec of specs) {
    const at = spec.lastIndexOf(':');
    const dims =
      at > 0
        ? spec
            .slice(at + 1)
            .split(',')
            .map((d) => Number(d.trim()))
        : [];
    if (at <= 0 || dims.length === 0 || dims.some((d) => !Number.isInteger(d) || d < 0))
      throw new UsageError(`--shape must be NAME:D1,D2,... with non-negative integer dims, got '${spec}'`);
    out.set(spec.slice(0, at), dims);
  }
  return out;
}

/** The region the SDK signs for: --region, the environment, or the SageMaker Runtime URL's own. */
function regionOf(parsed: Parsed, env: NodeJS.ProcessEnv, baseUrl: string): string {
  const fromUrl = /runtime\.sagemaker\.([a-z0-9-]+)\.amazonaws\.com/i.exec(baseUrl)?.[1];
  return stringOption(parsed, 'region') ?? env['AWS_REGION'] ?? env['AWS_DEFAULT_REGION'] ?? fromUrl ?? 'us-east-1';
}

/** The command line as engine options (UsageError on anything wrong). */
export function perfOptions(parsed: Parsed, io: CliIo): PerfOptions & { readonly allowErrors: boolean } {
  const baseUrl = parsed.positionals[0]!;
  if (!/^https?:\/\/[^\s/]+/i.test(baseUrl)) throw new UsageError(`<base-url> must be an http(s) URL such as http://127.0.0.1:8080, got '${baseUrl}'`);
  const model = stringOption(parsed, 'model');
  const targetModel = stringOption(parsed, 'target-model');
  const endpointName = stringOption(parsed, 'endpoint-name');
  const inputData = list(parsed, 'input-data');
  if (
    model === undefined &&
    targetModel === undefined &&
    !(endpointName !== undefined && inputData.length > 0 && inputData.every((f) => f !== 'random' && f !== 'zero'))
  ) {
    throw new UsageError('give --model <name> (KServe) or --target-model <name> (SageMaker)');
  }
  const concurrency = stringOption(parsed, 'concurrency');
  const rate = stringOption(parsed, 'rate');
  if (concurrency !== undefined && rate !== undefined) throw new UsageError('give --concurrency or --rate, not both');
  let values: number[];
  try {
    values = rate !== undefined ? parseSweep(rate, '--rate', { integer: false }) : parseSweep(concurrency ?? '1:64:x2', '--concurrency', { integer: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const durationS = numberOption(parsed, 'duration-s', 10, 0.05);
  const windowS = numberOption(parsed, 'window-s', durationS / 5, 0.01);
  if (windowS > durationS) throw new UsageError(`--window-s ${windowS} is longer than --duration-s ${durationS}`);
  const special = inputData.filter((f) => f === 'random' || f === 'zero');
  if (special.length > 0 && inputData.length > 1) throw new UsageError(`--input-data ${special[0]} cannot be combined with other --input-data`);
  return {
    baseUrl,
    ...(model === undefined ? {} : { model }),
    ...(targetModel === undefined ? {} : { targetModel }),
    ...(endpointName === undefined ? {} : { endpointName, region: regionOf(parsed, io.env, baseUrl) }),
    mode: rate !== undefined ? 'rate' : 'concurrency',
    values,
    windowMs: windowS * 1000,
    maxStepMs: durationS * 1000,
    tolerance: numberOption(parsed, 'stability-pct', 10, 0.1) / 100,
    requestTimeoutMs: numberOption(parsed, 'request-timeout-s', 60, 0.001) * 1000,
    maxInflight: intOption(parsed, 'max-inflight', 1024, 1),
    binary: parsed.values['binary'] === true,
    inputData:
      inputData.length === 0 ? { kind: 'random' } : special.length === 1 ? { kind: special[0] as 'random' | 'zero' } : { kind: 'files', files: inputData },
    shape: { shapes: parseShapes(list(parsed, 'shape')), batchSize: intOption(parsed, 'batch-size', 1, 1), fillDims: intOption(parsed, 'fill-dims', 1, 0) },
    progress: perfProgress(io, values.length),
    allowErrors: parsed.values['allow-errors'] === true,
  };
}

/**
 * perf-run's progress lines: the indented window lines become the status line
 * (a bar of the steps done on a terminal; plain periodic lines elsewhere, one
 * per window), every other line stays.
 */
function perfProgress(io: CliIo, steps: number): (line: string) => void {
  const status = new StatusLine(io.stderr);
  let done = 0;
  return (line) => {
    if (line.startsWith('  ')) {
      status.status(done, steps, line);
      return;
    }
    if (/^perf: (concurrency|rate) /.test(line)) done++;
    status.log(line);
  };
}

/** Writes `render()` to `file` when the option was given (rendered only then). */
async function writeOutput(file: string | undefined, render: () => string, what: string, io: CliIo): Promise<void> {
  if (file === undefined) return;
  try {
    await writeFile(file, render());
    write(io.stderr, `perf: wrote ${what} to ${file}`);
  } catch (err) {
    throw new UsageError(`cannot write ${what} to ${file}: ${(err as Error).message}`);
  }
}

export const perfCommand: CliCommand = {
  name: 'perf',
  help: HELP,
  async run(argv: readonly string[], io: CliIo): Promise<number> {
    const parsed = parseCommandLine(argv, OPTIONS, { min: 1, max: 1, names: '<base-url>' });
    if (parsed.help) {
      write(io.stdout, HELP);
      return EXIT_OK;
    }
    const options = perfOptions(parsed, io);
    let run;
    try {
      run = await runPerf(options);
    } catch (err) {
      if (err instanceof PerfSetupError) {
        write(io.stderr, `perf: ${err.message}`);
        return EXIT_FAILED;
      }
      throw err;
    }
    io.stdout.write(runTable(run));
    const subtitle = `onnx-mme perf, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, client ${os.hostname()} (${os.availableParallelism()} cores)`;
    await writeOutput(stringOption(parsed, 'json'), () => runJson(run), 'JSON', io);
    await writeOutput(stringOption(parsed, 'csv'), () => runCsv(run), 'CSV', io);
    await writeOutput(stringOption(parsed, 'chart'), () => runChart(run, subtitle), 'the chart', io);
    const noAnswer = run.steps.filter((s) => s.latency.count === 0);
    const failed = run.steps.reduce((n, s) => n + s.errors, 0);
    if (noAnswer.length > 0) {
      write(io.stderr, `perf: ${noAnswer.length} step(s) got no successful answer`);
      return EXIT_FAILED;
    }
    if (failed > 0 && !options.allowErrors) {
      write(io.stderr, `perf: ${failed} request(s) failed in the measured windows (--allow-errors accepts that)`);
      return EXIT_FAILED;
    }
    return EXIT_OK;
  },
};
