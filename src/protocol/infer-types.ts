/**
 * @module protocol/infer-types
 * Transport-free inference request and response, as every protocol decoder
 * produces them and the service consumes them (KServe v2 semantics).
 */
import type { Tensor } from './tensor.js';

export type ParameterValue = string | number | boolean;
export type Parameters = Readonly<Record<string, ParameterValue>>;

export interface RequestedOutput {
  readonly name: string;
  readonly parameters: Parameters;
}

export interface InferRequest {
  readonly id: string | undefined;
  /** Input tensors by name, in request order. */
  readonly inputs: ReadonlyMap<string, Tensor>;
  /** undefined = every output of the model. */
  readonly outputs: readonly RequestedOutput[] | undefined;
  readonly parameters: Parameters;
}

export interface InferResponse {
  readonly id: string | undefined;
  readonly modelName: string;
  readonly modelVersion: string;
  /** Output tensors by name, in the order they should be written. */
  readonly outputs: ReadonlyMap<string, Tensor>;
}
