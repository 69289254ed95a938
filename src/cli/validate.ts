/**
 * @module cli/validate
 * `onnx-mme validate <dir|tar.gz>`: the checks the server runs when it loads a
 * package, run before upload. It goes through the server's own code
 * (registry/package-check.ts over the package loader): layout and entry
 * model, every config.pbtxt parsed, every ONNX model loaded in a real
 * onnxruntime session (on CPU) and compared with its config, processing steps
 * loaded by their backends, ensemble plans validated. Every problem is listed; the exit code is 1 when there is one.
 */
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { ProviderName } from '../config/server-config.js';
import { ServingError } from '../errors.js';
import { createLogger } from '../observability/logger.js';
import { checkPackage, type PackageCheck, type PackageProblem } from '../registry/package-check.js';
import type { HostCapabilities } from '../runtime/execution-providers.js';
import { RuntimePool } from '../runtime/runtime-pool.js';
import { DEFAULT_BATCHING } from '../scheduler/batch-policy.js';
import { EXIT_FAILED, EXIT_OK, formatBytes, parseCommandLine, readSettings, write, type CliCommand, type CliIo } from './cli-support.js';
import { openPackage, type PackageInput } from './package-input.js';
import { formatSourceReport, isSourceDirectory, validateS3Prefix, validateSource } from './validate-source.js';
import { isS3Uri } from '../config/s3-uri.js';

export interface ValidationReport extends PackageCheck {
  readonly input: string;
  readonly label: string;
  readonly kind: 'directory' | 'archive';
  readonly archiveBytes: number | undefined;
  /** Peak resident memory of this process after loading every model on CPU (onnxruntime itself included). */
  readonly peakResidentBytes: number;
  readonly ok: boolean;
}

/** Sessions are created on CPU whatever the config asks for: validation needs the graph, not the device. */
const CPU_ONLY: HostCapabilities = Object.freeze({ installed: new Set<ProviderName>(['cpu']), gpuVisible: false });

/** Collects the loader's warnings (pino JSON lines) so they can be shown as notes. */
function warningSink(): { stream: Writable; notes: string[] } {
  const notes: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line.trim()) continue;
        try {
          const rec = JSON.parse(line) as { model?: string; msg?: string; field?: string };
          if (rec.field !== undefined) continue; // an ignored config field: listed under its model
          const msg = rec.msg ?? line;
          notes.push(
            /^execution provider/.test(msg)
              ? `model '${rec.model ?? '?'}' asks for a GPU provider; validate checks it on CPU (the server chooses providers when it loads)`
              : `${rec.model ? `model '${rec.model}': ` : ''}${msg}`,
          );
        } catch {
          notes.push(line);
        }
      }
      cb();
    },
  });
  return { stream, notes };
}

/**
 * Validate the package at `input` (directory or .tar.gz) as the server would
 * load it. Throws UsageError when `input` does not exist; problems with the
 * package, a corrupt archive included, are in the report.
 */
export async function validatePackage(input: string, env: NodeJS.ProcessEnv, label?: string): Promise<ValidationReport> {
  const settings = readSettings(env, ['archiveMaxBytes', 'archiveMaxEntries', 'archiveMaxRatio', 'configMaxBytes', 'defaultMaxBatchSize']);
  let pkg: PackageInput;
  try {
    pkg = await openPackage(input, { maxBytes: settings.archiveMaxBytes, maxEntries: settings.archiveMaxEntries, maxRatio: settings.archiveMaxRatio });
  } catch (err) {
    if (!(err instanceof ServingError)) throw err;
    const problem: PackageProblem = { model: undefined, code: err.code, message: err.message };
    return {
      input,
      label: label ?? path.basename(input),
      kind: 'archive',
      archiveBytes: await stat(input).then(
        (s) => s.size,
        () => undefined,
      ),
      root: undefined,
      singleModel: false,
      entry: undefined,
      models: [],
      problems: [problem],
      notes: [],
      fileBytes: 0,
      predictedBytes: 0,
      peakResidentBytes: process.resourceUsage().maxRSS * 1024,
      ok: false,
    };
  }
  const sink = warningSink();
  const pool = new RuntimePool(1);
  try {
    const check = await checkPackage(
      { dir: pkg.dir, label: label ?? pkg.label, fallbackName: pkg.fallbackName },
      {
        pool,
        intraOpThreads: undefined,
        logger: createLogger('warn', sink.stream),
        host: CPU_ONLY,
        serverProviders: ['cpu'],
        configMaxBytes: settings.configMaxBytes,
        // A config completed from the graph is reported as the server would complete it.
        batching: { ...DEFAULT_BATCHING, autoCompleteMaxBatchSize: settings.defaultMaxBatchSize },
      },
    );
    return {
      ...check,
      notes: [...new Set([...check.notes, ...sink.notes])],
      input,
      label: label ?? pkg.label,
      kind: pkg.kind,
      archiveBytes: pkg.archiveBytes,
      peakResidentBytes: process.resourceUsage().maxRSS * 1024,
      ok: check.problems.length === 0,
    };
  } finally {
    await pool.close();
    await pkg.cleanup();
  }
}

function shape(s: readonly number[]): string {
  return `[${s.join(',')}]`;
}

/** The human-readable report. */
export function formatReport(r: ValidationReport): string {
  const lines: string[] = [];
  const what = r.kind === 'archive' ? `archive, ${formatBytes(r.archiveBytes ?? 0)}` : 'directory';
  lines.push(`${r.input} (${what})`);
  if (r.entry !== undefined) lines.push(`  entry model: ${r.entry}`);
  for (const m of r.models) {
    const versions =
      m.platform === 'ensemble' ? `steps ${m.steps?.join(' -> ') ?? ''}` : `version${m.versions.length === 1 ? '' : 's'} ${m.versions.join(',')}`;
    lines.push(`  ${m.name}: ${m.platform}, ${versions}, max_batch_size ${m.maxBatchSize}${m.autoCompleted ? ', config completed from the ONNX graph' : ''}`);
    for (const t of m.inputs) lines.push(`    input  ${t.name} ${t.datatype} ${shape(t.shape)}`);
    for (const t of m.outputs) lines.push(`    output ${t.name} ${t.datatype} ${shape(t.shape)}`);
    for (const f of m.ignoredFields) lines.push(`    ignored: ${f.path} (${f.note})`);
    if (m.platform === 'onnxruntime_onnx') lines.push(`    model files: ${formatBytes(m.fileBytes)}`);
    else if (m.platform !== 'ensemble')
      lines.push(
        `    processing step: backend '${m.platform}', runs in the server process${m.fileBytes > 0 ? ` (version files: ${formatBytes(m.fileBytes)})` : ''}`,
      );
  }
  if (r.models.length > 0) {
    lines.push(
      `  memory: the server reserves ${formatBytes(r.predictedBytes)} of MME_MEMORY_BUDGET_BYTES when it loads this package ` +
        `(its files, ${formatBytes(r.fileBytes)} of them model files of the versions served, plus 1 MiB per ONNX session), ` +
        `then raises that to the footprint it measures after loading; this check peaked at ${formatBytes(r.peakResidentBytes)} resident ` +
        `with everything loaded on CPU, onnxruntime itself included`,
    );
  }
  for (const n of r.notes) lines.push(`  note: ${n}`);
  if (r.ok) {
    lines.push('OK: the server will load this package');
  } else {
    lines.push(`${r.problems.length} problem${r.problems.length === 1 ? '' : 's'}:`);
    for (const p of r.problems) lines.push(`  error [${p.code}]${p.model === undefined ? '' : ` ${p.model}`}: ${p.message}`);
    lines.push('INVALID: the server would refuse to load this package');
  }
  return lines.join('\n');
}

export const validateCommand: CliCommand = {
  name: 'validate',
  help: `Usage: onnx-mme validate <dir|model.tar.gz> [--json] [--package]
       onnx-mme validate <source dir|s3://bucket/prefix/> [--json]

Runs the checks the server runs when it loads the package, with the server's
own code: Triton layout and entry model, every config.pbtxt parsed, every ONNX
model loaded in a real onnxruntime session (on CPU) and compared with its
config (tensor names, datatypes, shapes), every processing step (image,
tokenizer, mean_pooling, l2_normalize, softmax, topk, argmax, js) loaded by its
backend (parameters, tokenizer.json, label files; a js step's model.mjs is
imported and its initialize() runs), ensemble steps and tensor wiring validated
(datatypes, shapes, max_batch_size). Every config.pbtxt field is judged by the
server's field table (docs/model-packages.md): a refused field is a problem, an
ignored one is listed under its model as "ignored: <field> (why)". An archive is extracted with the server's safe extractor and limits.
Every problem is listed, then the memory estimate.

A directory the server would serve as MME_MODEL_SOURCE (several models and no
ensemble to choose between them, or archives and model directories side by
side) is validated model by model, each as above, and summed up in a table:
model, ok or error, the entry model's inputs and outputs, memory reserved.
An s3:// prefix is listed, and each archive under it downloaded and
extracted by the server's own S3 source (into a temporary directory, removed
afterwards) and validated the same way.

Options:
  --json      print the report as JSON on stdout
  --package   check the directory as one package even when it looks like a source
  -h, --help  this help

Environment (as the server): MME_ARCHIVE_MAX_BYTES, MME_ARCHIVE_MAX_ENTRIES, MME_ARCHIVE_MAX_RATIO, MME_CONFIG_MAX_BYTES;
for s3://, AWS_REGION, AWS_ENDPOINT_URL_S3 and the AWS SDK's credential chain.

Exit status: 0 valid (every model of a source), 1 problems found, 2 bad command line or input not found.`,
  async run(argv: readonly string[], io: CliIo): Promise<number> {
    const parsed = parseCommandLine(
      argv,
      { json: { type: 'boolean' }, package: { type: 'boolean' } },
      { min: 1, max: 1, names: 'the package to validate (a directory or .tar.gz)' },
    );
    if (parsed.help) {
      write(io.stdout, this.help);
      return EXIT_OK;
    }
    const input = parsed.positionals[0]!;
    if (isS3Uri(input)) {
      const settings = readSettings(io.env, ['awsRegion', 's3Endpoint', 'archiveMaxBytes', 'archiveMaxEntries', 'archiveMaxRatio']);
      const source = await validateS3Prefix(input, settings, (dir, target) => validatePackage(dir, io.env, target));
      write(io.stdout, parsed.values['json'] === true ? JSON.stringify(source, null, 2) : formatSourceReport(source));
      return source.ok && source.targets.length > 0 ? EXIT_OK : EXIT_FAILED;
    }
    const { configMaxBytes } = readSettings(io.env, ['configMaxBytes']);
    if (parsed.values['package'] !== true && (await isSourceDirectory(input, configMaxBytes))) {
      const source = await validateSource(input, (dir, target) => validatePackage(dir, io.env, target));
      write(io.stdout, parsed.values['json'] === true ? JSON.stringify(source, null, 2) : formatSourceReport(source));
      return source.ok && source.targets.length > 0 ? EXIT_OK : EXIT_FAILED;
    }
    const report = await validatePackage(input, io.env);
    write(io.stdout, parsed.values['json'] === true ? JSON.stringify(report, null, 2) : formatReport(report));
    return report.ok ? EXIT_OK : EXIT_FAILED;
  },
};
