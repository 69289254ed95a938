/**
 * @module config/restricted-api
 * Triton's restricted-API syntax (`--http-restricted-api`,
 * `--grpc-restricted-protocol`), read from MME_HTTP_RESTRICTED_API and
 * MME_GRPC_RESTRICTED_PROTOCOL: `<API>[,<API>...]:<header>=<value>`, several
 * separated by `;`. Each API group named is then answered only to callers
 * that send the header with that value. The value itself is never kept: only
 * its SHA-256 digest (hex), so a config dump or a log of it cannot leak it;
 * service/access-policy.ts compares digests in constant time.
 */
import { createHash } from 'node:crypto';

/** Triton's groups, in its words. */
export const TRITON_API_GROUPS = [
  'health',
  'metadata',
  'inference',
  'shared-memory',
  'model-config',
  'model-repository',
  'statistics',
  'trace',
  'logging',
] as const;

/** Ours beside Triton's: `/metrics` (Triton serves metrics on a port of their own, unrestricted). HTTP only. */
export const METRICS_GROUP = 'metrics';

export type ApiGroup = (typeof TRITON_API_GROUPS)[number] | typeof METRICS_GROUP;

export interface Restriction {
  readonly groups: readonly ApiGroup[];
  /** The header (HTTP) or metadata key (gRPC), lower case. */
  readonly header: string;
  /** SHA-256 of the value, hex: the value itself is not kept. */
  readonly valueDigest: string;
}

/** A header name as HTTP allows one (RFC 9110 token), which gRPC metadata keys also satisfy when lower case. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;

/**
 * A value a client can send byte for byte: HTTP header values reach node as
 * latin1 and gRPC metadata values must be printable ASCII, so a value with
 * any other character would only match some other byte sequence than the
 * one configured.
 */
const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;

export function digestOf(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

/**
 * `raw` parsed; throws naming `name` and the problem (never the value).
 * `allowed` is the set of group names this protocol has.
 */
export function parseRestrictions(name: string, raw: string, allowed: readonly ApiGroup[]): readonly Restriction[] {
  const out: Restriction[] = [];
  const seen = new Set<string>();
  for (const [i, part] of raw.split(';').entries()) {
    const item = part.trim();
    if (item === '') continue;
    const colon = item.indexOf(':');
    const eq = item.indexOf('=', colon + 1);
    if (colon <= 0 || eq < 0) throw new Error(`${name}: item ${i + 1} is not '<API>[,<API>...]:<header>=<value>'`);
    const groups = item
      .slice(0, colon)
      .split(',')
      .map((g) => g.trim().toLowerCase());
    const unknown = groups.filter((g) => !(allowed as readonly string[]).includes(g));
    if (unknown.length > 0) {
      throw new Error(
        `${name}: unknown API group${unknown.length > 1 ? 's' : ''} ${unknown.map((g) => `'${g.slice(0, 40)}'`).join(', ')}; known: ${allowed.join(', ')}`,
      );
    }
    const repeated = groups.filter((g) => seen.has(g));
    if (repeated.length > 0) throw new Error(`${name}: API group '${repeated[0]}' is named twice (one header guards each group)`);
    for (const g of groups) seen.add(g);
    const header = item
      .slice(colon + 1, eq)
      .trim()
      .toLowerCase();
    if (!TOKEN.test(header)) throw new Error(`${name}: item ${i + 1}: '${header.slice(0, 60)}' is not a header name`);
    const value = item.slice(eq + 1).trim();
    if (value === '') throw new Error(`${name}: item ${i + 1}: the value of header '${header}' is empty`);
    if (!PRINTABLE_ASCII.test(value)) {
      throw new Error(
        `${name}: item ${i + 1}: the value of header '${header}' has a character outside printable ASCII, which no client could send as it is written here`,
      );
    }
    out.push(Object.freeze({ groups: Object.freeze(groups as ApiGroup[]), header, valueDigest: digestOf(value) }));
  }
  return Object.freeze(out);
}
