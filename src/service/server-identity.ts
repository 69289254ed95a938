/**
 * @module service/server-identity
 * What the server says about itself on every KServe v2 transport (HTTP
 * `GET /v2`, gRPC ServerMetadata), and how those transports read a model
 * version: one answer for HTTP and gRPC alike.
 */
import { ServingError } from '../errors.js';

/** Server metadata. Kept equal to package.json's version by a unit test. */
export const SERVER_NAME = 'onnx-mme';
export const SERVER_VERSION = '0.1.0';
/** Only what this server implements (Triton lists more; shared memory, statistics and tracing are not here). */
export const V2_EXTENSIONS = [
  'binary_tensor_data',
  'classification',
  'model_configuration',
  'model_repository',
  'model_repository(unload_dependents)',
  'statistics',
];

/** A model version as a path parameter or a gRPC `version` string: a positive integer, or undefined when none is given. */
export function parseVersion(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const v = /^\d{1,15}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(v) || v < 1) {
    throw new ServingError('INVALID_REQUEST', `model version must be a positive integer, got '${raw.slice(0, 40)}'`);
  }
  return v;
}
