/**
 * @module registry/version-policy
 * Which version directories to load: Triton's latest/all/specific policy,
 * default latest { num_versions: 1 } (config/model-config-draft reads the
 * policy; an empty `version_policy {}` is all, as Triton's VersionsToLoad).
 */
import type { VersionPolicy } from '../config/model-config-types.js';
import { ServingError } from '../errors.js';

/** The versions `policy` serves out of `available`; INVALID_MODEL when it names one the package lacks, or leaves none (the load names the model). */
export function selectVersions(available: readonly number[], policy: VersionPolicy): number[] {
  const sorted = [...available].sort((a, b) => a - b);
  let chosen: number[];
  if (policy.kind === 'all') {
    chosen = sorted;
  } else if (policy.kind === 'specific') {
    const missing = policy.versions.filter((v) => !sorted.includes(v));
    if (missing.length > 0) {
      throw new ServingError('INVALID_MODEL', `version_policy asks for version(s) ${missing.join(', ')} but the package has ${sorted.join(', ') || 'none'}`);
    }
    chosen = sorted.filter((v) => policy.versions.includes(v));
  } else {
    chosen = sorted.slice(-Math.max(1, policy.numVersions));
  }
  if (chosen.length === 0) {
    throw new ServingError(
      'INVALID_MODEL',
      'at least one version must be available under the version policy; add a numeric version directory such as 1/model.onnx',
    );
  }
  return chosen;
}
