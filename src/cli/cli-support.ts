/**
 * @module cli/cli-support
 * What every `onnx-mme` command shares: argument parsing (node:util parseArgs,
 * strict, with --help), the exit-code convention, byte formatting, and reading
 * the server's own settings (SETTINGS in config/server-config.ts, same names,
 * aliases and checks) so a command honours the environment exactly as the
 * server does.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { SETTINGS, type ServerConfig } from '../config/server-config.js';

/** 0 success; 1 the work failed (invalid package, upload or request failed); 2 the command line or environment is wrong. */
export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

export interface CliIo {
  readonly stdout: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  readonly stderr: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  readonly env: NodeJS.ProcessEnv;
}

export interface CliCommand {
  readonly name: string;
  /** The full --help text. */
  readonly help: string;
  /** Exit code, or undefined when the command now owns the process (serve). */
  run(argv: readonly string[], io: CliIo): Promise<number | undefined>;
}

/** A mistake on the command line or in the environment: the message, then a pointer to --help. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

type Options = NonNullable<ParseArgsConfig['options']>;

export interface Parsed {
  readonly values: Record<string, string | boolean | undefined>;
  readonly positionals: readonly string[];
  readonly help: boolean;
}

/** parseArgs, strict, with `-h/--help` added; unknown options and missing values become UsageErrors. */
export function parseCommandLine(argv: readonly string[], options: Options, positionals: { min: number; max: number; names: string }): Parsed {
  let parsed;
  try {
    parsed = parseArgs({ args: [...argv], options: { ...options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;
  const help = values['help'] === true;
  if (!help) {
    const n = parsed.positionals.length;
    if (n < positionals.min) throw new UsageError(`missing ${positionals.names}`);
    if (n > positionals.max) throw new UsageError(`unexpected argument '${parsed.positionals[positionals.max]}'`);
  }
  return { values, positionals: parsed.positionals, help };
}

/** A string option, or undefined. */
export function stringOption(parsed: Parsed, name: string): string | undefined {
  const v = parsed.values[name];
  return typeof v === 'string' ? v : undefined;
}

/** A positive number option (e.g. MiB, seconds), or the default. */
export function numberOption(parsed: Parsed, name: string, fallback: number, min: number): number {
  const raw = stringOption(parsed, name);
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min) throw new UsageError(`--${name} must be a number >= ${min}, got '${raw}'`);
  return n;
}

/**
 * The server's settings `keys`, parsed from `env` by the server's own parsers
 * (same variable names and aliases). Only these are read, so an unrelated bad
 * variable does not stop a command that does not use it.
 */
export function readSettings<K extends keyof ServerConfig>(env: NodeJS.ProcessEnv, keys: readonly K[]): Pick<ServerConfig, K> {
  const out: Partial<Record<keyof ServerConfig, unknown>> = {};
  const problems: string[] = [];
  for (const setting of SETTINGS) {
    if (!(keys as readonly string[]).includes(setting.key)) continue;
    const name = setting.env.find((n) => env[n] !== undefined);
    try {
      out[setting.key] = setting.parse(name === undefined ? undefined : env[name], env);
    } catch (err) {
      problems.push((err as Error).message);
    }
  }
  if (problems.length > 0) throw new UsageError(`invalid environment: ${problems.join('; ')}`);
  return out as Pick<ServerConfig, K>;
}

/**
 * The address of the server a client command talks to: --url, else this
 * machine at the server's own port (SAGEMAKER_BIND_TO_PORT); an http(s) URL,
 * without a trailing slash.
 */
export function serverUrl(parsed: Parsed, env: NodeJS.ProcessEnv): string {
  const base = (stringOption(parsed, 'url') ?? `http://127.0.0.1:${readSettings(env, ['port']).port}`).replace(/\/+$/, '');
  if (!/^https?:\/\/[^\s]+$/i.test(base)) throw new UsageError(`--url must be an http(s) URL, got '${base}'`);
  return base;
}

/** Why a fetch of `timeoutMs` got no answer: the timeout, else the network error's own words (ECONNREFUSED, …). */
export function noAnswerReason(err: unknown, timeoutMs: number): string {
  const e = err as Error & { cause?: { message?: string } };
  return e.name === 'TimeoutError' ? `no answer within ${timeoutMs / 1000} s` : (e.cause?.message ?? e.message);
}

export { formatBytes } from '../observability/format-bytes.js';

export function write(stream: NodeJS.WritableStream, text: string): void {
  stream.write(text.endsWith('\n') ? text : `${text}\n`);
}
