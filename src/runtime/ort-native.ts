/**
 * @module runtime/ort-native
 * onnxruntime-node's own native session, run synchronously, for the sessions
 * that live on the main thread (runtime/main-thread-session.ts).
 *
 * Why: the public `InferenceSession.run` runs the same native call, but
 * inside a `setImmediate` wrapped in a promise, after checking its arguments
 * and wrapping every output in a new Tensor. On the main thread that costs a
 * whole event-loop turn per run: a request to a small model waits for every
 * other request the turn holds (a flood of another model's requests included)
 * before its run, then again for its answer; and the wrappers cost about as
 * much CPU as a 16→4 model's run (6-8 µs of 15 per run on the 2-core bench box).
 * Called directly, the run happens where the batch is dispatched, and the
 * answer is written in the same turn.
 *
 * The binding is onnxruntime-node's internal module (`dist/binding.js`,
 * what its backend.js calls), pinned by package-lock.json. Its shape is
 * checked once; when it is not what this module expects (another
 * onnxruntime-node), `nativeOrt()` returns undefined and main-thread
 * sessions use the public API, as every worker session does.
 */
// First: onnxruntime's telemetry is decided before onnxruntime-node loads (config/ort-env.ts).
import '../config/ort-env.js';
import { createRequire } from 'node:module';
import type * as ort from 'onnxruntime-node';

/** What the binding reports of an input or output. */
interface RawValueMetadata {
  readonly name: string;
  readonly isTensor: boolean;
  /** ONNX's TensorProto.DataType number. */
  readonly type: number;
  /** -1 for a symbolic dimension (named in symbolicDimensions). */
  readonly shape: readonly number[];
  readonly symbolicDimensions: readonly string[];
}

interface RawSession {
  loadModel(path: string, options: ort.InferenceSession.SessionOptions): void;
  readonly inputMetadata: readonly RawValueMetadata[];
  readonly outputMetadata: readonly RawValueMetadata[];
  /** Synchronous: outputs by name, as Tensors (or `{type, data, dims}` where the binding makes no Tensor). */
  run(feeds: Record<string, ort.Tensor>, fetches: Record<string, null>, options: object): Record<string, ort.Tensor>;
  dispose(): void;
}

interface Binding {
  readonly binding: { readonly InferenceSession: new () => RawSession };
  initOrt(): void;
}

/** A session loaded through the binding: metadata as the public API gives it, and a synchronous run. */
export interface NativeSession {
  readonly inputMetadata: readonly ort.InferenceSession.ValueMetadata[];
  readonly outputMetadata: readonly ort.InferenceSession.ValueMetadata[];
  runSync(feeds: Record<string, ort.Tensor>, outputNames: readonly string[]): Record<string, ort.Tensor>;
  release(): void;
}

/** ONNX TensorProto.DataType → onnxruntime-node's type name (backend.js's table; 14-20 are not served). */
const TYPE_NAMES: readonly (ort.Tensor.Type | undefined)[] = [
  undefined,
  'float32',
  'uint8',
  'int8',
  'uint16',
  'int16',
  'int32',
  'int64',
  'string',
  'bool',
  'float16',
  'float64',
  'uint32',
  'uint64',
  undefined,
  undefined,
  undefined,
  undefined,
  undefined,
  undefined,
  undefined,
  'uint4',
  'int4',
];

let loaded: Binding | null | undefined;

/** The binding when it has the shape this module uses, else undefined (then the public API serves). */
function binding(): Binding | undefined {
  if (loaded === undefined) {
    try {
      const b = createRequire(import.meta.url)('onnxruntime-node/dist/binding.js') as Partial<Binding>;
      const proto = (b.binding?.InferenceSession as { prototype?: Record<string, unknown> } | undefined)?.prototype;
      const fits = typeof b.initOrt === 'function' && ['loadModel', 'run', 'dispose'].every((m) => typeof proto?.[m] === 'function');
      loaded = fits ? (b as Binding) : null;
    } catch {
      loaded = null;
    }
  }
  return loaded ?? undefined;
}

/** Whether main-thread sessions run through the binding (false: another onnxruntime-node, the public API serves). */
export function nativeRunAvailable(): boolean {
  return binding() !== undefined;
}

function metadataOf(raw: readonly RawValueMetadata[]): ort.InferenceSession.ValueMetadata[] {
  return raw.map((m) => {
    if (!m.isTensor) return { name: m.name, isTensor: false };
    const type = TYPE_NAMES[m.type];
    if (type === undefined) throw new Error(`'${m.name}': onnxruntime-node has no tensor type for ONNX data type ${m.type}`);
    const shape = m.shape.map((d, i) => (d === -1 ? (m.symbolicDimensions[i] ?? '') : d));
    return { name: m.name, isTensor: true, type, shape };
  });
}

/** Load `path` through the binding; undefined when the binding is not usable (the caller uses the public API). */
export function loadNativeSession(path: string, options: ort.InferenceSession.SessionOptions): NativeSession | undefined {
  const b = binding();
  if (b === undefined) return undefined;
  b.initOrt();
  const raw = new b.binding.InferenceSession();
  let inputMetadata: ort.InferenceSession.ValueMetadata[];
  let outputMetadata: ort.InferenceSession.ValueMetadata[];
  // A load that throws leaves no session behind (the binding's dispose would say it is not initialized).
  raw.loadModel(path, options);
  try {
    inputMetadata = metadataOf(raw.inputMetadata);
    outputMetadata = metadataOf(raw.outputMetadata);
  } catch (err) {
    // A loaded session that cannot be described holds its weights until disposed.
    raw.dispose();
    throw err;
  }
  const noOptions = {};
  return {
    inputMetadata,
    outputMetadata,
    runSync(feeds, outputNames) {
      const fetches: Record<string, null> = {};
      for (const n of outputNames) fetches[n] = null;
      return raw.run(feeds, fetches, noOptions);
    },
    release() {
      raw.dispose();
    },
  };
}
