/**
 * @module registry/model-handle
 * A request's model, resolved once at the edge (HTTP or gRPC) into a handle
 * of the provenance it names: a model of the source (a target), a model
 * SageMaker loaded (POST /models), or the default model. The service works on
 * handles only and never asks which kind it holds.
 */
import type { Cancellation } from '../cancellation.js';
import type { Lease, ResidentView } from './lifecycle.js';
import { latestVersion } from './loaded-model.js';

/** What a request names, as the edge parsed it (data only; the registry resolves it into a handle). */
export type ModelRef =
  /** X-Amzn-SageMaker-Target-Model (or its custom-attributes form): a model of the source. */
  | { readonly kind: 'target'; readonly target: string }
  /** /models/{name}/invoke: a model SageMaker loaded; the target header, when sent, must match the one it was loaded with. */
  | { readonly kind: 'managed'; readonly name: string; readonly targetHeader: string | undefined }
  /** A KServe v2 or gRPC model name: the SageMaker-loaded model of that name when there is one, else a target of the source. */
  | { readonly kind: 'named'; readonly name: string }
  /** /invocations without a target. */
  | { readonly kind: 'default' };

export interface ModelHandle {
  /** The model's name for logs, metrics and messages. */
  readonly label: string;
  /** The same for every handle of the same model, distinct across provenances: the front counts requests on their way to a model by it (service/admission.ts). */
  readonly queueKey: string;
  /** A lease at once when the model is resident and ready, with no promise (the hot path); undefined: call acquire. */
  leaseNow(): Lease | undefined;
  /** Lease the model, loading it (or paging it back in) first when it is not resident. */
  acquire(cancel?: Cancellation): Promise<Lease>;
  /** Its state, package and memory while resident; never loads anything. */
  resident(): ResidentView | undefined;
  /** Whether it (and `version`) can serve without a load being asked for; never loads anything. */
  ready(version: number | undefined): boolean;
  /** An explicit load (the v2 repository API): loaded and kept resident, a remembered failure retried now. */
  load(cancel?: Cancellation): Promise<void>;
  /** An explicit unload, waiting for its requests; MODEL_NOT_FOUND when it is not loaded. */
  unload(): Promise<void>;
}

/** Whether a resident package is READY and serves `version` (its highest when undefined). */
export function residentReady(view: ResidentView | undefined, version: number | undefined): boolean {
  if (view?.state !== 'READY' || view.pkg === undefined) return false;
  if (version === undefined) return true;
  const entry = view.pkg.entry;
  return entry.versions.has(version) || (entry.versions.size === 0 && version === (latestVersion(entry)?.version ?? 1));
}

/** Lease, then release at once: an explicit load that keeps the model resident. */
export async function loadAndRelease(handle: ModelHandle, cancel: Cancellation | undefined): Promise<void> {
  (await handle.acquire(cancel)).release();
}
