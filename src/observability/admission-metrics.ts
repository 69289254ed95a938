/**
 * @module observability/admission-metrics
 * The overload metrics: refusals by reason and model, and what admission
 * holds now (requests in flight, requests waiting for a turn, refused
 * connections held unread). The model label takes the first MAX_MODEL_LABELS
 * distinct names and `_other` past them: a refused request's model is the
 * name the client sent, which nobody bounds.
 */
import { Counter, Gauge, type Registry } from 'prom-client';

export const MAX_MODEL_LABELS = 256;
export const OTHER_MODEL_LABEL = '_other';

/** What the gauges read at scrape time. */
export interface AdmissionView {
  readonly requestsInFlight: number;
  readonly queued: number;
  readonly heldConnections: number;
}

export interface AdmissionMetrics {
  refused(reason: string, model: string): void;
}

export function createAdmissionMetrics(registry: Registry, view: () => AdmissionView): AdmissionMetrics {
  const refusals = new Counter({
    name: 'onnx_mme_admission_refusals_total',
    help: 'Inference requests refused for overload before their body was read, by reason (queue_full, inflight_requests, inflight_bytes, turn_queue_full) and model (the name the request used; _other past 256 names, empty when none applies)',
    labelNames: ['reason', 'model'] as const,
    registers: [registry],
  });
  new Gauge({
    name: 'onnx_mme_admission_inflight_requests',
    help: 'Inference requests admitted and not yet answered (what MME_MAX_INFLIGHT_REQUESTS bounds)',
    registers: [registry],
    collect() {
      this.set(view().requestsInFlight);
    },
  });
  new Gauge({
    name: 'onnx_mme_admission_turn_queue',
    help: 'Inference requests admitted and waiting for an event-loop turn to start (round robin across models)',
    registers: [registry],
    collect() {
      this.set(view().queued);
    },
  });
  new Gauge({
    name: 'onnx_mme_held_connections',
    help: 'Keep-alive connections refused for overload and held unread until a place frees for them or Retry-After passes',
    registers: [registry],
    collect() {
      this.set(view().heldConnections);
    },
  });
  const labels = new Set<string>();
  return {
    refused(reason, model) {
      let label = model;
      if (!labels.has(label)) {
        if (labels.size < MAX_MODEL_LABELS) labels.add(label);
        else label = OTHER_MODEL_LABEL;
      }
      refusals.inc({ reason, model: label });
    },
  };
}
