/**
 * @module config/serve-args
 * The server's command line: `--help`/`-h` and nothing else. Every setting is
 * an environment variable (the container contract: SageMaker runs `serve`
 * with no arguments), so an argument such as `--port 9000` is refused naming
 * the variable that does it, never ignored. Shared by `./serve` (main.ts) and
 * `onnx-mme serve` (cli/serve.ts).
 */

export const SERVE_HELP = `Usage: ./serve            (in the image: serve, or onnx-mme serve)

Runs the server: /ping, /invocations (X-Amzn-SageMaker-Target-Model), the
SageMaker MME API (/models), KServe v2 (/v2/...), /metrics. It takes no
arguments: every setting is an environment variable, exactly as in the
container. The main ones:

  SAGEMAKER_BIND_TO_PORT   port for every route (8080)
  MME_HOST                 address to listen on (0.0.0.0)
  MME_MODEL_SOURCE         a directory of models or s3://bucket/prefix/ (/opt/ml/model)
  MME_CACHE_DIR            where archives are extracted ($TMPDIR/onnx-mme-cache)
  MME_MEMORY_BUDGET_BYTES  memory resident models may use (70% of the container's)
  MME_LOG_LEVEL            info; debug for more
  MME_LOG_FORMAT           json (default) or pretty, for a terminal
  MME_GRPC_PORT            KServe v2 gRPC listener (none)
  MME_METRICS_PORT         a separate /metrics listener (none)

Every variable: docs/configuration.md. Example:
  SAGEMAKER_BIND_TO_PORT=9000 MME_MODEL_SOURCE=examples/demo/repository ./serve

Stops cleanly on SIGTERM/SIGINT (a second one skips the drain period).

Exit codes: 0 stopped by a signal, or --help; 2 a setting, argument, port,
model source or cache directory that cannot be used (one log line names the
setting to change); 1 an unexpected failure.

Options:
  -h, --help  this help`;

/** Options people try, and the variable that does what they mean. */
const SETTING_OF_OPTION: Readonly<Record<string, string>> = {
  '--port': 'SAGEMAKER_BIND_TO_PORT',
  '-p': 'SAGEMAKER_BIND_TO_PORT',
  '--host': 'MME_HOST',
  '--bind': 'MME_HOST',
  '--model-repository': 'MME_MODEL_SOURCE',
  '--model-store': 'MME_MODEL_SOURCE',
  '--models': 'MME_MODEL_SOURCE',
  '--source': 'MME_MODEL_SOURCE',
  '--log-level': 'MME_LOG_LEVEL',
  '--grpc-port': 'MME_GRPC_PORT',
  '--metrics-port': 'MME_METRICS_PORT',
};

export type ServeArgs =
  | { readonly kind: 'run' }
  | { readonly kind: 'help' }
  /** `setting`: the variable to set instead (or undefined when the argument means nothing known). */
  | { readonly kind: 'refused'; readonly message: string; readonly setting: string | undefined; readonly args: readonly string[] };

export function parseServeArgs(argv: readonly string[]): ServeArgs {
  if (argv.length === 0) return { kind: 'run' };
  if (argv.length === 1 && (argv[0] === '--help' || argv[0] === '-h')) return { kind: 'help' };
  for (let i = 0; i < argv.length; i++) {
    const [option, inline] = argv[i]!.split(/=(.*)/s, 2) as [string, string | undefined];
    const setting = SETTING_OF_OPTION[option];
    if (setting === undefined) continue;
    const value = inline ?? (argv[i + 1]?.startsWith('-') === false ? argv[i + 1] : undefined);
    return {
      kind: 'refused',
      setting,
      args: argv,
      message: `serve takes no arguments (got ${argv.map((a) => `'${a}'`).join(' ')}): set ${setting} instead, e.g. ${setting}=${value ?? '…'} ./serve (./serve --help lists the main settings)`,
    };
  }
  return {
    kind: 'refused',
    setting: undefined,
    args: argv,
    message: `serve takes no arguments (got ${argv.map((a) => `'${a}'`).join(' ')}): every setting is an environment variable; ./serve --help lists the main ones, docs/configuration.md all`,
  };
}
