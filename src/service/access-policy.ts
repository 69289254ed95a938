/**
 * @module service/access-policy
 * Who may call what: the one place that decides, for every entrance (the lean
 * inference path, the express routes, the metrics listener, gRPC and the
 * ModelMesh SPI). Each entrance names the API group of what it serves (the
 * HTTP route table declares one per route; the gRPC handlers one per RPC) and
 * whether it loads or unloads models, and passes a way to read the caller's
 * headers (or call metadata); the policy answers with the refusal or nothing.
 *
 * Two walls, in Triton's order: a restricted group (MME_HTTP_RESTRICTED_API,
 * MME_GRPC_RESTRICTED_PROTOCOL) needs its header with the right value
 * (compared as SHA-256 digests with crypto.timingSafeEqual, so the time taken
 * says nothing about the value; the value is never logged or echoed); then a
 * load or unload needs MME_MODEL_CONTROL=explicit.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { ModelControl } from '../config/server-config.js';
import type { ApiGroup, Restriction } from '../config/restricted-api.js';
import { ServingError } from '../errors.js';

export type { ApiGroup } from '../config/restricted-api.js';

/** What an entrance serves: its group (`open`: never restricted, e.g. /ping) and whether it loads or unloads models. */
export interface AccessTarget {
  readonly group: ApiGroup | 'open';
  readonly controls?: boolean;
}

/** A header (HTTP) or metadata (gRPC) value by lower-case name; undefined when absent. */
export type HeaderReader = (name: string) => string | undefined;

export interface AccessPolicyOptions {
  readonly modelControl: ModelControl;
  readonly restrictions: readonly Restriction[];
  /** The setting the restrictions came from, named in refusals. */
  readonly setting: 'MME_HTTP_RESTRICTED_API' | 'MME_GRPC_RESTRICTED_PROTOCOL';
  /** Other names the same key may arrive under (gRPC: Triton's `triton-grpc-protocol-<header>`). */
  readonly aliases?: (header: string) => readonly string[];
}

interface Guard {
  readonly header: string;
  readonly names: readonly string[];
  readonly digest: Buffer;
}

function sha256(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

export class AccessPolicy {
  private readonly guards = new Map<ApiGroup, Guard>();

  constructor(private readonly options: AccessPolicyOptions) {
    for (const r of options.restrictions) {
      const guard: Guard = { header: r.header, names: [r.header, ...(options.aliases?.(r.header) ?? [])], digest: Buffer.from(r.valueDigest, 'hex') };
      for (const g of r.groups) this.guards.set(g, guard);
    }
  }

  get modelControl(): ModelControl {
    return this.options.modelControl;
  }

  /** The groups that need a header (for the start-up log: names only). */
  get restrictedGroups(): readonly ApiGroup[] {
    return [...this.guards.keys()];
  }

  /** False when nothing about `target` depends on the caller (no key, no model control): the check is then skipped. */
  restricts(target: AccessTarget): boolean {
    if (target.group === 'open') return false;
    return this.guards.has(target.group) || (target.controls === true && this.options.modelControl.mode !== 'explicit');
  }

  /** The refusal for this caller, or undefined when it may go on. */
  refusal(target: AccessTarget, header: HeaderReader): ServingError | undefined {
    if (target.group !== 'open' && !this.admits(target.group, header)) {
      const guard = this.guards.get(target.group)!;
      return new ServingError(
        'API_RESTRICTED',
        // Triton's words (HTTP: 'This API is restricted', gRPC: 'This protocol is restricted'), which its clients' users search for.
        `This ${this.options.setting === 'MME_HTTP_RESTRICTED_API' ? 'API' : 'protocol'} is restricted, expecting header '${guard.header}' (${this.options.setting} guards the '${target.group}' group)`,
      );
    }
    if (target.controls === true && this.options.modelControl.mode !== 'explicit') {
      return new ServingError(
        'MODEL_CONTROL_DISABLED',
        `loading and unloading models through the API is off: MME_MODEL_CONTROL is 'none' (${this.options.modelControl.reason}); models of MME_MODEL_SOURCE load on first use. Set MME_MODEL_CONTROL=explicit and MME_MODEL_URL_ROOTS to allow it`,
      );
    }
    return undefined;
  }

  /** True when the caller may use `group`: unrestricted, or with the right header. */
  admits(group: ApiGroup, header: HeaderReader): boolean {
    const guard = this.guards.get(group);
    if (guard === undefined) return true;
    let ok = false;
    for (const name of guard.names) {
      const given = header(name);
      // Every candidate is compared (no early exit), each in constant time over equal-length digests.
      if (given !== undefined && timingSafeEqual(sha256(given), guard.digest)) ok = true;
    }
    return ok;
  }
}
