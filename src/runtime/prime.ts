/**
 * @module runtime/prime
 * onnxruntime's fixed costs, paid at start-up. The first session a thread
 * creates and runs costs a fixed amount that its release does not give back
 * (onnxruntime's per-thread state, MLAS kernels, the thread's malloc arena:
 * about 20 MB a thread, measured on a 12 MiB MatMul model). Paid while the
 * first model loads, it would be counted against that model and show as memory
 * an unload never returns; paid here, once per runtime worker and on the main
 * thread, it is part of the idle figure the memory promise starts from
 * (docs/memory-and-caching.md).
 */
// First: onnxruntime's telemetry is decided before onnxruntime-node loads (config/ort-env.ts).
import '../config/ort-env.js';
import * as ort from 'onnxruntime-node';
// Before any tensor is made: float16 data as Uint16Array on Node.js 24 too (runtime/ort-float16.ts).
import './ort-float16.js';

/**
 * A generated 8 → 8 MatMul + Relu (429 bytes, by examples/models/onnx-builder.ts):
 * small, but it goes through the same kernels, allocators and thread pools a real model does.
 */
const PRIME_MODEL = Buffer.from(
  'CAgSDG9ubngtbW1lLXpvbxoBMTIYb25ueC1tbWUgcnVudGltZSBwcmltaW5nOvcCCh0KAXgKAXcSAW0aCE1hdE11bF9tIgZNYXRNdWw6AAoWCgFtEgF5GgZSZWx1X3kiBFJlbHU6ABIFZ3JhcGgqjAIKAggIEAFCAXdKgAIAAAAAAAAAPgAAgD4AAMA+AAAAPwAAID8AAEA/AABgPwAAgD8AAAAAAAAAPgAAgD4AAMA+AAAAPwAAID8AAEA/AABgPwAAgD8AAAAAAAAAPgAAgD4AAMA+AAAAPwAAID8AAEA/AABgPwAAgD8AAAAAAAAAPgAAgD4AAMA+AAAAPwAAID8AAEA/AABgPwAAgD8AAAAAAAAAPgAAgD4AAMA+AAAAPwAAID8AAEA/AABgPwAAgD8AAAAAAAAAPgAAgD4AAMA+AAAAPwAAID8AAEA/AABgPwAAgD8AAAAAAAAAPgAAgD4AAMA+AAAAPwAAID8AAEA/AABgPwAAgD8AAAAAWhMKAXgSDgoMCAESCAoCCAEKAggIYhMKAXkSDgoMCAESCAoCCAEKAggIQgQKABAR',
  'base64',
);

/** Create, run and release one tiny session on the calling thread, with the intra-op threads real sessions get. */
export async function primeThread(intraOpThreads: number | undefined): Promise<void> {
  const session = await ort.InferenceSession.create(new Uint8Array(PRIME_MODEL), {
    executionProviders: ['cpu'],
    logSeverityLevel: 3,
    ...(intraOpThreads === undefined ? {} : { intraOpNumThreads: intraOpThreads }),
  });
  try {
    await session.run({ x: new ort.Tensor('float32', new Float32Array(8).fill(1), [1, 8]) });
  } finally {
    await session.release();
  }
}
