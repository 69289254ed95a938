#!/usr/bin/env node
/**
 * @module cli/onnx-mme
 * The `onnx-mme` command (package.json "bin"): a dispatcher over one module per
 * command, each loaded only when used (so `onnx-mme serve` loads no upload
 * code and `onnx-mme invoke` no onnxruntime). The commands share the server's
 * code: validation is the package loader, archives go through the server's
 * extractor, S3 settings are the server's settings.
 */
// First: onnxruntime's telemetry is decided before onnxruntime-node loads (config/ort-env.ts).
import '../config/ort-env.js';
import { ServingError } from '../errors.js';
import { didYouMean } from '../protocol/did-you-mean.js';
import { EXIT_FAILED, EXIT_OK, EXIT_USAGE, UsageError, write, type CliCommand, type CliIo } from './cli-support.js';
import { versionText } from './version.js';

/** Name → summary (for the overview, without loading the command) and loader. */
const COMMANDS: Readonly<Record<string, { readonly summary: string; load(): Promise<CliCommand> }>> = {
  validate: {
    summary: 'check a model directory, .tar.gz, or a whole source (directory or s3:// prefix) the way the server loads it',
    load: async () => (await import('./validate.js')).validateCommand,
  },
  pack: {
    summary: 'validate a model directory, then write a .tar.gz the server loads',
    load: async () => (await import('./pack.js')).packCommand,
  },
  push: {
    summary: 'validate a .tar.gz and upload it to s3://bucket/prefix/ (multipart, progress, ETag)',
    load: async () => (await import('./push.js')).pushCommand,
  },
  invoke: {
    summary: 'send one inference request (JSON, .npy or CSV) with the target-model header and print the answer',
    load: async () => (await import('./invoke.js')).invokeCommand,
  },
  perf: {
    summary: 'load-test an endpoint (KServe v2, SageMaker /invocations or InvokeEndpoint): throughput, latency percentiles, errors',
    load: async () => (await import('./perf.js')).perfCommand,
  },
  tune: {
    summary: 'measure a model package under load with candidate configs on this machine and write the best config.pbtxt',
    load: async () => (await import('./tune.js')).tuneCommand,
  },
  models: {
    summary: 'list every model a running server knows, with state, memory, last use and the reason one is not loaded',
    load: async () => (await import('./models.js')).modelsCommand,
  },
  serve: {
    summary: 'run the server (what SageMaker starts with `docker run IMAGE serve`)',
    load: async () => (await import('./serve.js')).serveCommand,
  },
};

const OVERVIEW = `Usage: onnx-mme <command> [options]
       onnx-mme --version

Commands:
${Object.entries(COMMANDS)
  .map(([name, c]) => `  ${name.padEnd(9)} ${c.summary}`)
  .join('\n')}

'onnx-mme <command> --help' describes a command. From a Triton-layout model
directory to a served model:
  onnx-mme validate mymodel/
  onnx-mme pack mymodel/ -o mymodel.tar.gz
  onnx-mme push mymodel.tar.gz s3://bucket/prefix/
  onnx-mme invoke --url http://localhost:8080 --target mymodel.tar.gz --json request.json
  onnx-mme models --url http://localhost:8080`;

/** Runs one command line; the exit code, or undefined when the command keeps the process (serve). */
async function runCli(argv: readonly string[], io: CliIo): Promise<number | undefined> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '-h' || name === '--help' || name === 'help') {
    write(name === undefined ? io.stderr : io.stdout, OVERVIEW);
    return name === undefined ? EXIT_USAGE : EXIT_OK;
  }
  if (name === '--version' || name === '-v' || name === 'version') {
    write(io.stdout, versionText());
    return EXIT_OK;
  }
  const entry = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!entry) {
    write(io.stderr, `onnx-mme: unknown command '${name}'${didYouMean(name, Object.keys(COMMANDS))}\n\n${OVERVIEW}`);
    return EXIT_USAGE;
  }
  const command = await entry.load();
  try {
    return await command.run(rest, io);
  } catch (err) {
    if (err instanceof UsageError) {
      write(io.stderr, `onnx-mme ${name}: ${err.message}\nRun 'onnx-mme ${name} --help' for usage.`);
      return EXIT_USAGE;
    }
    if (err instanceof ServingError) {
      write(io.stderr, `onnx-mme ${name}: [${err.code}] ${err.message}`);
      return EXIT_FAILED;
    }
    throw err;
  }
}

const io: CliIo = { stdout: process.stdout, stderr: process.stderr, env: process.env };
runCli(process.argv.slice(2), io).then(
  (code) => {
    if (code !== undefined) process.exit(code);
  },
  (err: unknown) => {
    process.stderr.write(`onnx-mme: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(EXIT_FAILED);
  },
);
