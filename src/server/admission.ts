/**
 * @module server/admission
 * The admission every inference request passes (service/admission.ts), as
 * the server builds it from the config: its limits, the held connections of
 * the HTTP front (MME_HOLD_REFUSED_CONNECTIONS), the refusal metrics and the
 * refusal summary in the log.
 */
import type { ServerConfig } from '../config/server-config.js';
import { HeldConnections } from '../http/held-connections.js';
import { createAdmissionMetrics } from '../observability/admission-metrics.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { RefusalSummary } from '../observability/refusal-summary.js';
import { hostMemoryBytes } from '../runtime/memory-usage.js';
import { Admission } from '../service/admission.js';

/** Default MME_MAX_INFLIGHT_BYTES: this share of the container's memory (the model budget takes 70%). */
const INFLIGHT_MEMORY_SHARE = 0.1;

export interface ServerAdmission {
  readonly admission: Admission;
  /** Undefined when MME_HOLD_REFUSED_CONNECTIONS is false. */
  readonly held: HeldConnections | undefined;
}

/** A timer that never keeps the process alive (the refusal summary's window). */
const unrefTimer = {
  setTimer(delayUs: number, fn: () => void): () => void {
    const t = setTimeout(fn, delayUs / 1000);
    t.unref();
    return () => clearTimeout(t);
  },
};

export function buildAdmission(config: ServerConfig, metrics: Metrics, logger: Logger): ServerAdmission {
  const admission = new Admission({
    maxInflightBytes: config.maxInflightBytes ?? Math.max(4 * config.bodyLimitBytes, Math.floor(hostMemoryBytes() * INFLIGHT_MEMORY_SHARE)),
    maxQueued: config.maxInflightRequests,
    maxRequests: config.maxInflightRequests,
    sharedPerTurn: config.sharedTurnRequests,
  });
  const held = config.holdRefusedConnections ? new HeldConnections(admission) : undefined;
  if (held !== undefined) admission.countHeld(held);
  const counted = createAdmissionMetrics(metrics.registry, () => ({
    requestsInFlight: admission.requestsInFlight,
    queued: admission.queued,
    heldConnections: held?.size ?? 0,
  }));
  const summary = new RefusalSummary(logger, unrefTimer);
  admission.onRefusal((reason, model) => {
    counted.refused(reason, model);
    summary.note(reason, model);
  });
  // Each freed place reads the held connection refused longest ago for it.
  if (held !== undefined) admission.onFreed(held.wake);
  return { admission, held };
}
