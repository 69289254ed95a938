/**
 * @module registry/warmup
 * Runs each freshly loaded session before it takes traffic, so the first
 * request does not pay onnxruntime's lazy allocations (arena growth, kernel
 * selection, CUDA/TensorRT initialisation) and the memory measured after the
 * load includes them.
 *
 * With `model_warmup` in config.pbtxt, Triton's semantics: each sample's inputs
 * (`zero_data`, `random_data`, or `input_data_file` read from the model's
 * `warmup/` directory, raw little-endian, BYTES as 4-byte length + bytes), with
 * `batch_size` as the batch dimension when the model batches, run `count`
 * times (at least once); a failing sample fails the load, naming it. Without
 * it, one implicit run with zeros (dynamic dims as 1) whose failure is only
 * logged: some models cannot take zeros, and that is not a load error.
 */
import { readModelFile } from '../store/small-io.js';
import path from 'node:path';
import type { ModelConfig, WarmupConfig, WarmupInputConfig } from '../config/model-config-types.js';
import { pathFreeMessage, ServingError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import { DATA_TYPE_INFO, type Tensor } from '../protocol/tensor.js';
import type { LoadedModel } from './loaded-model.js';

/** Largest warm-up tensor we build (elements); a sample beyond it is refused rather than allocated. */
const MAX_WARMUP_ELEMENTS = 64 * 1024 * 1024;

/**
 * Run every version's warm-up (config model_warmup, else one implicit run of zeros). A failed model_warmup is
 * INVALID_MODEL without the model's name (the load names it); `logger` is the model's own (its lines carry the model).
 */
export async function warmUpModel(model: LoadedModel, logger: Logger): Promise<void> {
  const config = model.config;
  if (config.platform === 'ensemble') return;
  const outputs = config.output.map((o) => o.name);
  for (const version of model.versions.values()) {
    // Every instance: each is its own session with its own lazy allocations.
    for (const executor of version.executors) {
      if (config.modelWarmup.length === 0) {
        // The implicit run is for onnxruntime's lazy allocations; a processing step (backends/) has none, and zeros are no image or text.
        if (version.sessions.length === 0) continue;
        try {
          await executor.execute(zeroFeeds(config, 1), outputs);
        } catch (err) {
          logger.debug({ version: version.version, err: (err as Error).message }, 'implicit warm-up skipped: the model did not take zero inputs');
        }
        continue;
      }
      for (const sample of config.modelWarmup) {
        try {
          const feeds = await sampleFeeds(sample, config, model.dir);
          for (let i = 0; i < Math.max(1, sample.count); i++) await executor.execute(feeds, outputs);
        } catch (err) {
          const message = err instanceof Error ? err.message : String(err);
          throw new ServingError('INVALID_MODEL', `version ${version.version}: model_warmup '${sample.name}' failed: ${message}`, { cause: err });
        }
      }
    }
  }
}

/**
 * Zeros for every required input, `rows` as the batch dimension when the
 * model batches and variable dims as 1: the implicit warm-up (1 row) and the
 * session-placement probe (max_batch_size rows) both run these.
 */
export function zeroFeeds(config: ModelConfig, rows: number): Map<string, Tensor> {
  const feeds = new Map<string, Tensor>();
  for (const input of config.input) {
    if (input.optional) continue;
    const dims = input.dims.map((d) => (d < 0 ? 1 : d));
    const shape = config.maxBatchSize > 0 ? [rows, ...dims] : dims;
    feeds.set(input.name, filled(input.dataType, shape, 'zero'));
  }
  addSequenceZeros(config, rows, feeds);
  return feeds;
}

/**
 * A stateful model's control inputs and implicit state (sequence_batching),
 * which the sequence batcher normally supplies: zeros where a warm-up or
 * probe run has none, so the model can run at all.
 */
function addSequenceZeros(config: ModelConfig, rows: number, feeds: Map<string, Tensor>): void {
  const sequence = config.sequenceBatching;
  if (sequence === undefined) return;
  const batched = (dims: readonly number[]): number[] => (config.maxBatchSize > 0 ? [rows, ...dims] : [...dims]);
  for (const c of sequence.controls) if (!feeds.has(c.inputName)) feeds.set(c.inputName, filled(c.dataType, batched([1]), 'zero'));
  for (const st of sequence.states) {
    if (feeds.has(st.inputName)) continue;
    feeds.set(st.inputName, filled(st.dataType, batched((st.initialState?.dims ?? st.dims).map((d) => (d < 0 ? 1 : d))), 'zero'));
  }
}

async function sampleFeeds(sample: WarmupConfig, config: ModelConfig, modelDir: string): Promise<Map<string, Tensor>> {
  const feeds = new Map<string, Tensor>();
  for (const [name, spec] of Object.entries(sample.inputs)) {
    const shape = config.maxBatchSize > 0 ? [Math.max(1, sample.batchSize), ...spec.dims] : [...spec.dims];
    if (shape.some((d) => !Number.isInteger(d) || d < 0)) throw new Error(`input '${name}' has dims ${JSON.stringify(spec.dims)}: warm-up dims must be fixed`);
    feeds.set(
      name,
      spec.source.kind === 'file'
        ? await fromFile(spec, shape, path.join(modelDir, 'warmup', spec.source.file))
        : filled(spec.dataType, shape, spec.source.kind),
    );
  }
  addSequenceZeros(config, Math.max(1, sample.batchSize), feeds);
  return feeds;
}

function count(shape: readonly number[]): number {
  const n = shape.reduce((a, b) => a * b, 1);
  if (n > MAX_WARMUP_ELEMENTS) throw new Error(`a warm-up tensor of shape ${JSON.stringify(shape)} is larger than ${MAX_WARMUP_ELEMENTS} elements`);
  return n;
}

function filled(datatype: WarmupInputConfig['dataType'], shape: number[], kind: 'zero' | 'random'): Tensor {
  const n = count(shape);
  if (datatype === 'BYTES') return { datatype, shape, data: Array.from({ length: n }, () => (kind === 'zero' ? '' : Math.random().toString(36).slice(2))) };
  const ArrayType = DATA_TYPE_INFO[datatype].arrayType;
  if (!ArrayType) throw new Error(`datatype ${datatype} cannot be warmed up`);
  const data = new ArrayType(n);
  if (kind === 'random') {
    for (let i = 0; i < n; i++) {
      if (data instanceof BigInt64Array || data instanceof BigUint64Array) data[i] = BigInt(Math.floor(Math.random() * 100));
      else if (datatype === 'BOOL') data[i] = Math.random() < 0.5 ? 0 : 1;
      else if (datatype === 'FP16')
        data[i] = 0x3c00; // 1.0: random bit patterns could be NaN
      else (data as Float32Array)[i] = datatype.startsWith('FP') ? Math.random() : Math.floor(Math.random() * 100);
    }
  }
  return { datatype, shape, data };
}

async function fromFile(spec: WarmupInputConfig, shape: number[], file: string): Promise<Tensor> {
  const bytes = await readModelFile(file).catch((err: unknown) => {
    // Named within the package (warmup/<file>), never by its host path.
    throw new Error(`cannot read warm-up data warmup/${path.basename(file)}: ${pathFreeMessage(err)}`);
  });
  const n = count(shape);
  if (spec.dataType === 'BYTES') {
    const data: string[] = [];
    let offset = 0;
    while (data.length < n) {
      if (offset + 4 > bytes.length) throw new Error(`${file} holds fewer than ${n} BYTES elements`);
      const len = bytes.readUInt32LE(offset);
      offset += 4;
      if (offset + len > bytes.length) throw new Error(`${file}: element ${data.length} runs past the end of the file`);
      data.push(bytes.subarray(offset, offset + len).toString('utf8'));
      offset += len;
    }
    return { datatype: 'BYTES', shape, data };
  }
  const info = DATA_TYPE_INFO[spec.dataType];
  if (!info.arrayType) throw new Error(`datatype ${spec.dataType} cannot be read from a file`);
  if (bytes.length !== n * info.byteSize)
    throw new Error(`warmup/${path.basename(file)} is ${bytes.length} bytes; shape ${JSON.stringify(shape)} of ${spec.dataType} needs ${n * info.byteSize}`);
  // Copy into an aligned buffer: the file's Buffer may start at any offset of a pooled ArrayBuffer.
  const aligned = new Uint8Array(bytes.length);
  aligned.set(bytes);
  return { datatype: spec.dataType, shape, data: new info.arrayType(aligned.buffer, 0, n) };
}
