/**
 * @module cli/serve
 * `onnx-mme serve`: the server itself. It loads the server's entry module
 * (src/main.ts), which reads the environment, installs the SIGTERM/SIGINT
 * handlers and starts listening, so `onnx-mme serve`, `./serve` and the
 * image's `docker run IMAGE serve` are one code path, in this process (Node
 * stays PID 1 in a container and receives SageMaker's SIGTERM itself).
 */
import { parseServeArgs, SERVE_HELP } from '../config/serve-args.js';
import { EXIT_OK, EXIT_USAGE, write, type CliCommand, type CliIo } from './cli-support.js';

export const serveCommand: CliCommand = {
  name: 'serve',
  help: SERVE_HELP,
  async run(argv: readonly string[], io: CliIo): Promise<number | undefined> {
    // The same arguments as ./serve: --help, else none (a setting given as an option is refused naming its variable).
    const args = parseServeArgs(argv);
    if (args.kind === 'help') {
      write(io.stdout, this.help);
      return EXIT_OK;
    }
    if (args.kind === 'refused') {
      write(io.stderr, `onnx-mme serve: ${args.message}`);
      return EXIT_USAGE;
    }
    // Importing the entry module starts the server; it owns the process from here (exit codes included).
    await import('../main.js');
    return undefined;
  },
};
