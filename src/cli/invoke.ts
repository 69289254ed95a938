/**
 * @module cli/invoke
 * `onnx-mme invoke --target <name> --json|--npy|--csv <file>`: one request to a
 * running server (a local container, `npm start`, a port-forwarded pod), sent
 * the way SageMaker forwards InvokeEndpoint: POST /invocations with the
 * X-Amzn-SageMaker-Target-Model header and the body's content type. The answer
 * goes to stdout as received; an error answer goes to stderr with exit 1.
 */
import { readFile } from 'node:fs/promises';
import {
  EXIT_FAILED,
  EXIT_OK,
  noAnswerReason,
  numberOption,
  parseCommandLine,
  serverUrl,
  stringOption,
  UsageError,
  write,
  type CliCommand,
  type CliIo,
} from './cli-support.js';

/** Body formats and the content type each is sent with. */
const FORMATS = {
  json: 'application/json',
  npy: 'application/x-npy',
  csv: 'text/csv',
} as const;
type Format = keyof typeof FORMATS;

async function readBody(file: string): Promise<Buffer> {
  if (file === '-') {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }
  try {
    return await readFile(file);
  } catch (err) {
    throw new UsageError(`${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
  }
}

export const invokeCommand: CliCommand = {
  name: 'invoke',
  help: `Usage: onnx-mme invoke [--url <server>] [--target <name>] (--json <file> | --npy <file> | --csv <file>) [options]

Sends POST <url>/invocations with X-Amzn-SageMaker-Target-Model: <name> (as
SageMaker forwards InvokeEndpoint's TargetModel) and prints the answer on
stdout. Without --target the server's default model answers. With
--model-name the request goes to SageMaker's MME route
/models/<model-name>/invoke instead (a model loaded with POST /models).
A file of '-' is read from stdin.

Options:
  --url <url>            server address (default http://127.0.0.1:$SAGEMAKER_BIND_TO_PORT, i.e. :8080)
  --target <name>        target model, e.g. add_sub.tar.gz or team/b.tar.gz (a key under the server's MME_MODEL_SOURCE)
  --model-name <name>    use /models/<name>/invoke instead of /invocations
  --json <file>          KServe v2 JSON body          (Content-Type: application/json)
  --npy <file>           NumPy .npy body, one input   (Content-Type: application/x-npy)
  --csv <file>           CSV body, one row per item   (Content-Type: text/csv)
  --content-type <type>  override the content type
  --accept <type>        Accept header
  --timeout <seconds>    give up after this long (default 60, SageMaker's limit)
  -h, --help             this help

Environment (as the server): SAGEMAKER_BIND_TO_PORT sets the default --url port.

Exit status: 0 the server answered 2xx, 1 it answered an error or could not be reached, 2 bad command line.`,
  async run(argv: readonly string[], io: CliIo): Promise<number> {
    const parsed = parseCommandLine(
      argv,
      {
        url: { type: 'string' },
        target: { type: 'string' },
        'model-name': { type: 'string' },
        json: { type: 'string' },
        npy: { type: 'string' },
        csv: { type: 'string' },
        'content-type': { type: 'string' },
        accept: { type: 'string' },
        timeout: { type: 'string' },
      },
      { min: 0, max: 0, names: '' },
    );
    if (parsed.help) {
      write(io.stdout, this.help);
      return EXIT_OK;
    }
    const given = (Object.keys(FORMATS) as Format[]).filter((f) => stringOption(parsed, f) !== undefined);
    if (given.length !== 1)
      throw new UsageError(
        given.length === 0 ? 'give the request body with --json, --npy or --csv' : `give one body, not ${given.map((f) => `--${f}`).join(' and ')}`,
      );
    const format = given[0]!;
    const target = stringOption(parsed, 'target');
    const modelName = stringOption(parsed, 'model-name');
    const timeoutMs = numberOption(parsed, 'timeout', 60, 0.001) * 1000;
    const base = serverUrl(parsed, io.env);
    const url = modelName === undefined ? `${base}/invocations` : `${base}/models/${encodeURIComponent(modelName)}/invoke`;

    const body = await readBody(stringOption(parsed, format)!);
    const headers: Record<string, string> = { 'content-type': stringOption(parsed, 'content-type') ?? FORMATS[format] };
    if (target !== undefined) headers['x-amzn-sagemaker-target-model'] = target;
    const accept = stringOption(parsed, 'accept');
    if (accept !== undefined) headers['accept'] = accept;

    let res: Response;
    try {
      res = await fetch(url, { method: 'POST', headers, body, signal: AbortSignal.timeout(timeoutMs) });
    } catch (err) {
      write(io.stderr, `invoke: ${url}: ${noAnswerReason(err, timeoutMs)}`);
      return EXIT_FAILED;
    }
    const answer = Buffer.from(await res.arrayBuffer());
    if (!res.ok) {
      write(io.stderr, `invoke: HTTP ${res.status} from ${url}`);
      io.stderr.write(answer);
      if (answer.length > 0 && answer[answer.length - 1] !== 0x0a) io.stderr.write('\n');
      return EXIT_FAILED;
    }
    io.stdout.write(answer);
    const text = res.headers.get('content-type') ?? '';
    if (/json|text|csv/i.test(text) && answer.length > 0 && answer[answer.length - 1] !== 0x0a) io.stdout.write('\n');
    return EXIT_OK;
  },
};
