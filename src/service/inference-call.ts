/**
 * @module service/inference-call
 * What an edge (HTTP's infer-route, gRPC's ModelInfer) resolved and validated
 * once, handed to InferenceService.infer as one value: the model's handle, the
 * decoded request (or a binder when the wire format needs the model's
 * config), the version asked for, the client's cancellation, the log, the
 * admission ticket's hand-off, what the answer's format allows, and the
 * request's stats. The service never
 * calls back into a transport: the body is decoded before the call.
 */
import type { Cancellation } from '../cancellation.js';
import type { ModelConfig } from '../config/model-config-types.js';
import type { Logger } from '../observability/logger.js';
import type { InferRequest } from '../protocol/infer-types.js';
import type { ModelHandle } from '../registry/model-registry.js';
import type { RequestTicket } from './admission.js';
import type { RequestStats } from './request-stats.js';

/**
 * A body that becomes a request only against the entry model's config (CSV,
 * .npy, TF Serving JSON, raw binary: input names and datatypes come from the
 * model). Its syntax was already checked at the edge, before anything was
 * loaded; it throws without naming the model (the service names it).
 */
export interface RequestBinder {
  bindToModel(config: ModelConfig): InferRequest;
}

export interface InferenceCall {
  readonly handle: ModelHandle;
  /** Decoded at the edge, before the model is leased (a malformed body never causes a load). */
  readonly request: InferRequest | RequestBinder;
  /** Run this version of the entry model (KServe v2 `/versions/{v}`); undefined: the highest loaded version. */
  readonly version: number | undefined;
  /** The client went away: queued work for the request is dropped. */
  readonly cancel: Cancellation | undefined;
  readonly log: Logger;
  /** Its admission: `arrived()` when the request joins its model's queue (the admission stops counting it as on its way: service/admission.ts). */
  readonly arrival: Pick<RequestTicket, 'arrived'> | undefined;
  /** The answer's media type when it carries one tensor (CSV, .npy): the request must get exactly one output (NOT_ACCEPTABLE). */
  readonly oneOutput: string | undefined;
  /** Started by the edge before the body was decoded. */
  readonly stats: RequestStats;
}
