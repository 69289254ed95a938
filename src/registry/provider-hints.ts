/**
 * @module registry/provider-hints
 * Reads the device-related parts of a config in its JSON form, so providers
 * can be chosen before the session exists (auto-complete needs the session).
 */
import type { InstanceKind } from '../config/model-config-types.js';
import type { ProviderHints } from '../runtime/execution-providers.js';

type Json = Record<string, unknown>;

const KINDS: readonly InstanceKind[] = ['KIND_AUTO', 'KIND_GPU', 'KIND_CPU', 'KIND_MODEL'];

function asList(v: unknown): Json[] {
  return Array.isArray(v) ? (v.filter((x) => typeof x === 'object' && x !== null) as Json[]) : [];
}

export function providerHintsFromJson(raw: Json): ProviderHints {
  const groups = asList(raw['instance_group']);
  const kinds = groups.map((g) => (KINDS.includes(g['kind'] as InstanceKind) ? (g['kind'] as InstanceKind) : 'KIND_AUTO'));
  const gpus = groups.flatMap((g) => (Array.isArray(g['gpus']) ? (g['gpus'] as unknown[]).filter((x): x is number => typeof x === 'number') : []));
  const optimization = (raw['optimization'] ?? {}) as Json;
  const accelerators = (optimization['execution_accelerators'] ?? {}) as Json;
  const gpuAccelerators = asList(accelerators['gpu_execution_accelerator'])
    .map((a) => a['name'])
    .filter((n): n is string => typeof n === 'string');
  return { kinds, gpus, gpuAccelerators };
}
