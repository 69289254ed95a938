/**
 * @module store/node-error
 * Reading facts off errors thrown by Node and libraries (errno codes such as
 * ENOSPC, messages) without trusting their shape.
 */

/** `err.code` when it is a string (ENOENT, ENOSPC, …). */
export function errorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  const code = (err as { code: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
