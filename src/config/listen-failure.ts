/**
 * @module config/listen-failure
 * A listener that cannot bind, as the setting to change: a port in use or
 * privileged names the listener's port setting, an address this host does not
 * have names MME_HOST. One home for the mapping, for the HTTP, metrics and
 * gRPC listeners alike.
 */
import { StartupError } from '../errors.js';

/** The errno of a listen failure: node's `err.code`, or the code gRPC folds into its message. */
function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string') return code;
  return /\b(EADDRINUSE|EACCES|EADDRNOTAVAIL|ENOTFOUND|EAI_AGAIN|EPERM)\b/.exec(err instanceof Error ? err.message : String(err))?.[1];
}

/**
 * `what`: the listener (`HTTP`, `metrics`, `gRPC`); `setting`: its port's variable. Unknown failures
 * still name the port's setting, with the cause's own message.
 */
export function listenFailure(err: unknown, what: string, setting: string, host: string, port: number): StartupError {
  const code = codeOf(err);
  const where = `${host}:${port}`;
  switch (code) {
    case 'EADDRINUSE':
      return new StartupError(
        setting,
        `the ${what} port ${port} is already in use (${where}, EADDRINUSE): set ${setting} to a free port, or stop what listens there`,
        {
          cause: err,
        },
      );
    case 'EACCES':
    case 'EPERM':
      return new StartupError(setting, `the ${what} port ${port} needs privileges this process lacks (${code}): set ${setting} to a port above 1023`, {
        cause: err,
      });
    case 'EADDRNOTAVAIL':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new StartupError(
        'MME_HOST',
        `cannot listen on ${host} (${code}): set MME_HOST to an address of this host (0.0.0.0 for all, 127.0.0.1 for this host only)`,
        {
          cause: err,
        },
      );
    default:
      return new StartupError(setting, `the ${what} listener on ${where} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}
