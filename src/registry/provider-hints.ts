/**
 * @module registry/provider-hints
 * The device-related parts of a config draft (before the session exists:
 * auto-complete needs the session), as the provider choice reads them.
 */
import type { ModelConfigDraft } from '../config/model-config-draft.js';
import type { ProviderHints } from '../runtime/execution-providers.js';

export function providerHintsOf(draft: ModelConfigDraft): ProviderHints {
  return {
    kinds: draft.instanceGroups.map((g) => g.kind),
    gpus: draft.instanceGroups.flatMap((g) => g.gpus),
    gpuAccelerators: draft.gpuAccelerators,
  };
}
