/**
 * @module service/validate-request
 * Checks a decoded request against the entry model's declared inputs and
 * outputs (config.pbtxt, after auto-complete): names, datatypes, shapes with
 * -1 wildcards, the batch dimension and max_batch_size. Triton's messages,
 * with the tensor named; the caller names the model.
 */
import type { ModelConfig, TensorConfig } from '../config/model-config-types.js';
import { ServingError } from '../errors.js';
import type { InferRequest } from '../protocol/infer-types.js';
import { formatShape, type Tensor } from '../protocol/tensor.js';

/** Thrown without the model: InferenceService names it (errors.ts inModel). */
function bad(message: string): ServingError {
  return new ServingError('INVALID_INPUT', message);
}

function expectedShape(t: TensorConfig, config: ModelConfig): number[] {
  return config.maxBatchSize > 0 ? [-1, ...t.dims] : [...t.dims];
}

/** What every request to a model is checked against, built once per config (configs are frozen; this runs per request). */
interface ConfigIndex {
  readonly inputs: ReadonlyMap<string, TensorConfig>;
  readonly shapes: ReadonlyMap<string, readonly number[]>;
  readonly outputs: ReadonlySet<string>;
}

const INDEX = new WeakMap<ModelConfig, ConfigIndex>();

function indexOf(config: ModelConfig): ConfigIndex {
  let index = INDEX.get(config);
  if (index === undefined) {
    index = {
      inputs: new Map(config.input.map((t) => [t.name, t])),
      shapes: new Map(config.input.map((t) => [t.name, expectedShape(t, config)])),
      outputs: new Set(config.output.map((t) => t.name)),
    };
    INDEX.set(config, index);
  }
  return index;
}

function checkShape(t: TensorConfig, tensor: Tensor, want: readonly number[]): void {
  const got = tensor.shape;
  let ok = want.length === got.length;
  for (let i = 0; ok && i < want.length; i++) ok = want[i] === -1 || want[i] === got[i];
  if (!ok) {
    throw bad(`unexpected shape for input '${t.name}'. Expected ${formatShape(want)}, got ${formatShape(got)}`);
  }
}

/** Returns the request's batch size (1 for models that do not batch). Throws INVALID_INPUT. */
export function validateRequest(request: InferRequest, config: ModelConfig): number {
  const index = indexOf(config);
  const declared = index.inputs;
  for (const name of request.inputs.keys()) {
    if (!declared.has(name)) {
      const inputs =
        config.input.length === 0
          ? 'the model declares no inputs (send "inputs": [])'
          : `the model's inputs are ${config.input.map((t) => `'${t.name}'`).join(', ')}`;
      throw bad(`unexpected inference input '${name}'; ${inputs}`);
    }
  }
  let batch: number | undefined;
  let batchFrom = '';
  for (const t of config.input) {
    const tensor = request.inputs.get(t.name);
    if (!tensor) {
      if (t.optional) continue;
      throw bad(`expected input '${t.name}' (${t.dataType} ${formatShape(expectedShape(t, config))}) but the request does not have it`);
    }
    if (tensor.datatype !== t.dataType) {
      throw bad(`inference input '${t.name}' data-type is '${tensor.datatype}', but the model expects '${t.dataType}'`);
    }
    checkShape(t, tensor, index.shapes.get(t.name)!);
    if (config.maxBatchSize > 0) {
      const b = tensor.shape[0]!;
      if (batch === undefined) {
        batch = b;
        batchFrom = t.name;
      } else if (b !== batch) {
        throw bad(`input '${t.name}' batch size ${b} does not match input '${batchFrom}' batch size ${batch}`);
      }
    }
  }
  if (batch !== undefined && (batch < 1 || batch > config.maxBatchSize)) {
    throw bad(`inference request batch-size must be between 1 and ${config.maxBatchSize}, got ${batch}`);
  }
  if (request.outputs) {
    for (const o of request.outputs) {
      if (!index.outputs.has(o.name)) {
        throw bad(`unexpected inference output '${o.name}'; the model's outputs are ${config.output.map((t) => `'${t.name}'`).join(', ')}`);
      }
    }
  }
  return batch ?? 1;
}
