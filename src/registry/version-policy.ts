/**
 * @module registry/version-policy
 * Which version directories to load: Triton's latest/all/specific policy,
 * default latest { num_versions: 1 }.
 */
import { ServingError } from '../errors.js';

type Json = Record<string, unknown>;

export function selectVersions(available: readonly number[], policy: unknown, label: string): number[] {
  const sorted = [...available].sort((a, b) => a - b);
  // Absent → latest 1 (Triton's normalisation); present but with no choice set → all (Triton's VersionsToLoad).
  const p = (policy ?? { latest: {} }) as Json;
  const none = p['all'] === undefined && p['specific'] === undefined && p['latest'] === undefined;
  let chosen: number[];
  if (p['all'] !== undefined || none) {
    chosen = sorted;
  } else if (p['specific'] !== undefined) {
    const wanted = ((p['specific'] as Json)['versions'] as number[] | undefined) ?? [];
    const missing = wanted.filter((v) => !sorted.includes(v));
    if (missing.length > 0) {
      throw new ServingError('INVALID_MODEL', `model '${label}': version_policy asks for version(s) ${missing.join(', ')} but the package has ${sorted.join(', ') || 'none'}`, {
        model: label,
      });
    }
    chosen = sorted.filter((v) => wanted.includes(v));
  } else {
    const latest = (p['latest'] ?? {}) as Json;
    const n = typeof latest['num_versions'] === 'number' && latest['num_versions'] > 0 ? latest['num_versions'] : 1;
    chosen = sorted.slice(-n);
  }
  if (chosen.length === 0) {
    throw new ServingError(
      'INVALID_MODEL',
      `model '${label}': at least one version must be available under the version policy; add a numeric version directory such as 1/model.onnx`,
      { model: label },
    );
  }
  return chosen;
}
