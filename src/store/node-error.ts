/**
 * @module store/node-error
 * Reading facts off errors thrown by Node and libraries (errno codes such as
 * ENOSPC, messages) without trusting their shape.
 */
import { pathFreeMessage } from '../errors.js';

/** `err.code` when it is a string (ENOENT, ENOSPC, …). */
export function errorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  const code = (err as { code: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

/** The error's message, without the absolute paths of filesystem errors (they reach clients: errors.ts pathFreeMessage). */
export function messageOf(err: unknown): string {
  return pathFreeMessage(err);
}

/**
 * A filesystem error told without its path (`ENOSPC during write`): Node's
 * messages name host paths (the cache directory), which a client must not see.
 * Errors without an errno code keep their message.
 */
export function fsReason(err: unknown): string {
  const code = errorCode(err);
  if (code === undefined) return messageOf(err);
  const syscall = typeof err === 'object' && err !== null && 'syscall' in err ? (err as { syscall: unknown }).syscall : undefined;
  return typeof syscall === 'string' ? `${code} during ${syscall}` : code;
}
