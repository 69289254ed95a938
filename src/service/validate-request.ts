/**
 * @module service/validate-request
 * Checks a decoded request against the entry model's declared inputs and
 * outputs (config.pbtxt, after auto-complete): names, datatypes, shapes with
 * -1 wildcards, the batch dimension and max_batch_size. Triton's messages,
 * with the model and the tensor named.
 */
import type { ModelConfig, TensorConfig } from '../config/model-config-types.js';
import { ServingError } from '../errors.js';
import type { InferRequest } from '../protocol/infer-types.js';
import { formatShape, type Tensor } from '../protocol/tensor.js';

function bad(label: string, message: string): ServingError {
  return new ServingError('INVALID_INPUT', `model '${label}': ${message}`, { model: label });
}

function expectedShape(t: TensorConfig, config: ModelConfig): number[] {
  return config.maxBatchSize > 0 ? [-1, ...t.dims] : [...t.dims];
}

function checkShape(label: string, t: TensorConfig, tensor: Tensor, config: ModelConfig): void {
  const want = expectedShape(t, config);
  const got = tensor.shape;
  const ok = want.length === got.length && want.every((d, i) => d === -1 || d === got[i]);
  if (!ok) {
    throw bad(label, `unexpected shape for input '${t.name}'. Expected ${formatShape(want)}, got ${formatShape(got)}`);
  }
}

/** Returns the request's batch size (1 for models that do not batch). Throws INVALID_INPUT. */
export function validateRequest(request: InferRequest, config: ModelConfig, label: string): number {
  const declared = new Map(config.input.map((t) => [t.name, t]));
  for (const name of request.inputs.keys()) {
    if (!declared.has(name)) {
      throw bad(label, `unexpected inference input '${name}'; the model's inputs are ${config.input.map((t) => `'${t.name}'`).join(', ')}`);
    }
  }
  let batch: number | undefined;
  let batchFrom = '';
  for (const t of config.input) {
    const tensor = request.inputs.get(t.name);
    if (!tensor) {
      if (t.optional) continue;
      throw bad(label, `expected input '${t.name}' (${t.dataType} ${formatShape(expectedShape(t, config))}) but the request does not have it`);
    }
    if (tensor.datatype !== t.dataType) {
      throw bad(label, `inference input '${t.name}' data-type is '${tensor.datatype}', but the model expects '${t.dataType}'`);
    }
    checkShape(label, t, tensor, config);
    if (config.maxBatchSize > 0) {
      const b = tensor.shape[0]!;
      if (batch === undefined) {
        batch = b;
        batchFrom = t.name;
      } else if (b !== batch) {
        throw bad(label, `input '${t.name}' batch size ${b} does not match input '${batchFrom}' batch size ${batch}`);
      }
    }
  }
  if (batch !== undefined && (batch < 1 || batch > config.maxBatchSize)) {
    throw bad(label, `inference request batch-size must be between 1 and ${config.maxBatchSize}, got ${batch}`);
  }
  if (request.outputs) {
    const outputs = new Set(config.output.map((t) => t.name));
    for (const o of request.outputs) {
      if (!outputs.has(o.name)) {
        throw bad(label, `unexpected inference output '${o.name}'; the model's outputs are ${config.output.map((t) => `'${t.name}'`).join(', ')}`);
      }
    }
  }
  return batch ?? 1;
}
