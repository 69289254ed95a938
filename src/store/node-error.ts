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
