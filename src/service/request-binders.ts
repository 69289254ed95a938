/**
 * @module service/request-binders
 * Requests whose body becomes a request only against the entry model's config
 * (CSV, .npy, TF Serving JSON, Triton's raw binary: the input names and
 * datatypes come from the model). The edge decodes the body's syntax and
 * makes one of these; InferenceService binds it to the leased model. Their
 * own errors leave the model to InferenceService (errors.ts inModel);
 * `model` is what the protocol's codecs name.
 */
import type { ModelConfig } from '../config/model-config-types.js';
import { ServingError } from '../errors.js';
import { rawBinaryShape, decodeBinaryTensorData } from '../protocol/binary-tensor.js';
import { csvToTensor, type CsvTable } from '../protocol/csv-codec.js';
import type { InferRequest } from '../protocol/infer-types.js';
import { NPY_CONTENT_TYPE, type NpyArray } from '../protocol/npy-codec.js';
import type { Tensor } from '../protocol/tensor.js';
import { tfServingInputs, type TfStyle } from '../protocol/tfserving-codec.js';
import { exactRetry } from '../protocol/v2-json-codec.js';
import type { RequestBinder } from './inference-call.js';

function onlyInput(config: ModelConfig, format: string): ModelConfig['input'][number] {
  const [first, ...more] = config.input;
  if (!first || more.length > 0) {
    throw new ServingError(
      'INVALID_INPUT',
      `${format} needs a model with exactly one input; this one has ${config.input.map((t) => `'${t.name}'`).join(', ')} (send KServe v2 JSON instead)`,
    );
  }
  return first;
}

function plainRequest(inputs: ReadonlyMap<string, Tensor>, parameters: InferRequest['parameters'] = {}): InferRequest {
  return Object.freeze({ id: undefined, inputs, outputs: undefined, parameters });
}

/** The shape a CSV table takes for the model's one input. */
function csvShape(config: ModelConfig, dims: readonly number[], table: CsvTable): number[] {
  const fixed = dims.every((d) => d >= 0);
  const perRow = dims.reduce((a, b) => a * b, 1);
  if (config.maxBatchSize > 0) return fixed && dims.length > 1 && perRow === table.columns ? [table.rows, ...dims] : [table.rows, table.columns];
  if (dims.length !== 2 && table.rows === 1 && fixed && perRow === table.columns) return [...dims];
  return [table.rows, table.columns];
}

export function csvBinder(table: CsvTable, model: string): RequestBinder {
  return {
    bindToModel(config) {
      const input = onlyInput(config, 'text/csv');
      const tensor = csvToTensor(model, input.name, input.dataType, csvShape(config, input.dims, table), table);
      return plainRequest(new Map([[input.name, tensor]]));
    },
  };
}

export function npyBinder(array: NpyArray): RequestBinder {
  return {
    bindToModel(config) {
      const input = onlyInput(config, NPY_CONTENT_TYPE);
      return plainRequest(new Map([[input.name, Object.freeze({ datatype: array.datatype, shape: array.shape, data: array.data })]]));
    },
  };
}

/** `exact()` reads the body again with exact long integers, for when JSON.parse's reading may have rounded one (exactRetry). */
export function tfBinder(style: TfStyle, body: Record<string, unknown>, exact: () => Record<string, unknown>, model: string): RequestBinder {
  return {
    bindToModel: (config) =>
      plainRequest(
        exactRetry(
          () => tfServingInputs(model, style, body, config.input),
          () => tfServingInputs(model, style, exact(), config.input),
        ),
      ),
  };
}

/** Triton's raw binary request: no JSON, the body is the one input's bytes, batch 1, every output binary. */
export function rawBinder(body: Uint8Array, model: string): RequestBinder {
  return {
    bindToModel(config) {
      const input = onlyInput(config, 'a raw binary request (header length 0)');
      const dims = config.maxBatchSize > 0 ? [1, ...input.dims] : [...input.dims];
      const shape = rawBinaryShape(model, input.name, input.dataType, dims, body);
      const data = decodeBinaryTensorData(model, input.name, input.dataType, shape, body);
      return plainRequest(new Map([[input.name, Object.freeze({ datatype: input.dataType, shape: Object.freeze(shape), data })]]), {
        binary_data_output: true,
      });
    },
  };
}
