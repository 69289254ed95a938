/**
 * @module runtime/onnx-session
 * The only module that touches onnxruntime-node sessions and tensors. It turns
 * our Tensor into ort.Tensor and back, creates sessions with a provider
 * fallback chain, and maps native allocation failures to INSUFFICIENT_MEMORY.
 */
import * as ort from 'onnxruntime-node';
import { ServingError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { ProviderName } from '../config/server-config.js';
import type { DataType, Tensor, TensorData } from '../protocol/tensor.js';
import { isProviderLoadError, type ProviderChoice } from './execution-providers.js';

/** One input or output as the ONNX graph declares it. */
export interface OnnxIoInfo {
  readonly name: string;
  /** undefined when the graph uses a type we cannot serve (sequence, map, optional). */
  readonly datatype: DataType | undefined;
  /** Fixed dims as numbers, symbolic dims as -1; undefined when the graph gives no shape. */
  readonly shape: readonly number[] | undefined;
}

export interface ModelSession {
  readonly inputs: readonly OnnxIoInfo[];
  readonly outputs: readonly OnnxIoInfo[];
  readonly provider: ProviderName;
  run(feeds: ReadonlyMap<string, Tensor>, outputNames: readonly string[]): Promise<Map<string, Tensor>>;
  release(): Promise<void>;
}

export interface SessionOptions {
  readonly providerChoice: ProviderChoice;
  /** optimization.graph.level as Triton's ORT backend reads it. */
  readonly graphLevel: number;
  readonly intraOpThreads: number | undefined;
  readonly interOpThreads: number | undefined;
  readonly logger: Logger;
  /** Label for error messages. */
  readonly model: string;
}

const ORT_TO_DATATYPE: Readonly<Record<string, DataType>> = {
  bool: 'BOOL',
  uint8: 'UINT8',
  uint16: 'UINT16',
  uint32: 'UINT32',
  uint64: 'UINT64',
  int8: 'INT8',
  int16: 'INT16',
  int32: 'INT32',
  int64: 'INT64',
  float16: 'FP16',
  float32: 'FP32',
  float64: 'FP64',
  string: 'BYTES',
  bfloat16: 'BF16',
};

const DATATYPE_TO_ORT: Readonly<Record<DataType, ort.Tensor.Type | undefined>> = {
  BOOL: 'bool',
  UINT8: 'uint8',
  UINT16: 'uint16',
  UINT32: 'uint32',
  UINT64: 'uint64',
  INT8: 'int8',
  INT16: 'int16',
  INT32: 'int32',
  INT64: 'int64',
  FP16: 'float16',
  FP32: 'float32',
  FP64: 'float64',
  BYTES: 'string',
  BF16: undefined,
};

/** Memory trouble as onnxruntime (CPU or CUDA) reports it; Triton's list, matched at the runtime boundary only. */
const OOM_PATTERN =
  /out of memory|Out Of Memory|OutOfMemory|CUDA_OUT_OF_MEMORY|Failed to allocate memory|failed to allocate memory|bad_alloc|CUBLAS_STATUS_ALLOC_FAILED|CNMEM_STATUS_OUT_OF_MEMORY|No space left on device/;

export function isAllocationFailure(err: unknown): boolean {
  return OOM_PATTERN.test(err instanceof Error ? err.message : String(err));
}

const GRAPH_LEVELS: Readonly<Record<number, 'all' | 'basic' | 'extended' | 'disabled'>> = {
  0: 'all',
  [-1]: 'basic',
  1: 'extended',
  2: 'disabled',
};

function ioInfo(meta: ort.InferenceSession.ValueMetadata): OnnxIoInfo {
  if (!meta.isTensor) return { name: meta.name, datatype: undefined, shape: undefined };
  return {
    name: meta.name,
    datatype: ORT_TO_DATATYPE[meta.type],
    shape: meta.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : -1)),
  };
}

function toOrt(model: string, name: string, t: Tensor): ort.Tensor {
  const type = DATATYPE_TO_ORT[t.datatype];
  if (!type) throw new ServingError('INVALID_INPUT', `model '${model}': input '${name}': datatype ${t.datatype} is not supported by onnxruntime`, { model });
  // ort.Tensor's overloads are keyed by type; the data already has the matching array type.
  return new ort.Tensor(type, t.data as never, t.shape as number[]);
}

function fromOrt(t: ort.Tensor): Tensor {
  const datatype = ORT_TO_DATATYPE[t.type];
  if (!datatype) throw new ServingError('INTERNAL', `onnxruntime returned an unsupported tensor type '${t.type}'`);
  // Node 20 has no Float16Array, so float16 data arrives as Uint16Array bits already.
  return { datatype, shape: t.dims.slice(), data: t.data as TensorData };
}

function wrapRunError(model: string, err: unknown): ServingError {
  const msg = err instanceof Error ? err.message : String(err);
  if (err instanceof ServingError) return err;
  if (isAllocationFailure(err)) {
    return new ServingError('INSUFFICIENT_MEMORY', `model '${model}': out of memory while running: ${msg}`, { model, cause: err });
  }
  return new ServingError('INTERNAL', `model '${model}': onnxruntime failed: ${msg}`, { model, cause: err });
}

class OrtModelSession implements ModelSession {
  readonly inputs: readonly OnnxIoInfo[];
  readonly outputs: readonly OnnxIoInfo[];
  private released = false;

  constructor(
    private readonly session: ort.InferenceSession,
    readonly provider: ProviderName,
    private readonly model: string,
  ) {
    this.inputs = Object.freeze(session.inputMetadata.map(ioInfo));
    this.outputs = Object.freeze(session.outputMetadata.map(ioInfo));
  }

  async run(feeds: ReadonlyMap<string, Tensor>, outputNames: readonly string[]): Promise<Map<string, Tensor>> {
    if (this.released) throw new ServingError('INTERNAL', `model '${this.model}': session used after release`);
    const ortFeeds: Record<string, ort.Tensor> = {};
    for (const [name, t] of feeds) ortFeeds[name] = toOrt(this.model, name, t);
    let result: ort.InferenceSession.ReturnType;
    try {
      result = await this.session.run(ortFeeds, outputNames as string[]);
    } catch (err) {
      throw wrapRunError(this.model, err);
    }
    const out = new Map<string, Tensor>();
    for (const name of outputNames) {
      const t = result[name];
      if (!t) throw new ServingError('INTERNAL', `model '${this.model}': onnxruntime returned no output '${name}'`);
      out.set(name, fromOrt(t));
    }
    return out;
  }

  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    await this.session.release();
  }
}

function providerOption(name: ProviderName, deviceId: number): ort.InferenceSession.ExecutionProviderConfig {
  switch (name) {
    case 'cuda':
      return { name: 'cuda', deviceId };
    case 'tensorrt':
      return { name: 'tensorrt', deviceId };
    case 'cpu':
      return { name: 'cpu' };
  }
}

/**
 * Create a session from a model file, trying the chosen providers in order: if
 * a provider's library cannot be loaded, it is dropped with a warning and the
 * next list is tried, ending with CPU alone.
 */
export async function createModelSession(modelPath: string, options: SessionOptions): Promise<ModelSession> {
  const { providerChoice, logger, model } = options;
  let providers = [...providerChoice.providers];
  for (;;) {
    const sessionOptions: ort.InferenceSession.SessionOptions = {
      executionProviders: providers.map((p) => providerOption(p, providerChoice.deviceId)),
      graphOptimizationLevel: GRAPH_LEVELS[options.graphLevel] ?? 'all',
      // Mem pattern and arena are ORT defaults; keep logs quiet unless errors.
      logSeverityLevel: 3,
      ...(options.intraOpThreads === undefined ? {} : { intraOpNumThreads: options.intraOpThreads }),
      ...(options.interOpThreads === undefined ? {} : { interOpNumThreads: options.interOpThreads }),
    };
    try {
      const session = await ort.InferenceSession.create(modelPath, sessionOptions);
      return new OrtModelSession(session, providers[0] ?? 'cpu', model);
    } catch (err) {
      const first = providers[0];
      if (first && first !== 'cpu' && isProviderLoadError(err)) {
        logger.warn({ model, provider: first, err: (err as Error).message }, 'execution provider unavailable; falling back to the next one');
        providers = providers.slice(1);
        continue;
      }
      const msg = err instanceof Error ? err.message : String(err);
      if (isAllocationFailure(err)) {
        throw new ServingError('INSUFFICIENT_MEMORY', `model '${model}': out of memory while creating the session: ${msg}`, { model, cause: err });
      }
      throw new ServingError('INVALID_MODEL', `model '${model}': onnxruntime cannot load ${modelPath}: ${msg}`, { model, cause: err });
    }
  }
}
