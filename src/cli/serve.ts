/**
 * @module cli/serve
 * `onnx-mme serve`: the server itself. It loads the server's entry module
 * (src/main.ts), which reads the environment, installs the SIGTERM/SIGINT
 * handlers and starts listening, so `onnx-mme serve`, `./serve` and the
 * image's `docker run IMAGE serve` are one code path, in this process (Node
 * stays PID 1 in a container and receives SageMaker's SIGTERM itself).
 */
import { EXIT_OK, parseCommandLine, write, type CliCommand, type CliIo } from './cli-support.js';

export const serveCommand: CliCommand = {
  name: 'serve',
  help: `Usage: onnx-mme serve

Runs the server: /ping, /invocations (X-Amzn-SageMaker-Target-Model), the
SageMaker MME API (/models), /metrics. Configured only by the environment,
exactly as the container: SAGEMAKER_BIND_TO_PORT (8080), MME_MODEL_SOURCE
(/opt/ml/model, a directory or s3://bucket/prefix/), MME_CACHE_DIR,
AWS_REGION, AWS_ENDPOINT_URL_S3, ... (docs/configuration.md lists
every variable). Stops cleanly on SIGTERM/SIGINT.

Options:
  -h, --help  this help`,
  async run(argv: readonly string[], io: CliIo): Promise<number | undefined> {
    const parsed = parseCommandLine(argv, {}, { min: 0, max: 0, names: '' });
    if (parsed.help) {
      write(io.stdout, this.help);
      return EXIT_OK;
    }
    // Importing the entry module starts the server; it owns the process from here (exit codes included).
    await import('../main.js');
    return undefined;
  },
};
