/**
 * @module runtime/provider-options
 * The execution-provider options every session gets (used inside the runtime
 * workers; a separate module so it is testable without a worker).
 */
import type * as ort from 'onnxruntime-node';
import type { CreateSessionOptions } from './worker-protocol.js';

/**
 * CUDA: grow the arena by what is requested, not to the next power of two, so
 * a model's GPU footprint is what it needs (measured and budgeted) rather than
 * a hoard. TensorRT: engines and timing caches under the disk cache, so a
 * reload skips the build. Option names are onnxruntime-node's; a build that
 * does not know one ignores it.
 */
export function providerOption(name: string, deviceId: number, tensorrtCacheDir: string | undefined): ort.InferenceSession.ExecutionProviderConfig {
  if (name === 'cuda') return { name: 'cuda', deviceId, arenaExtendStrategy: 'kSameAsRequested' } as ort.InferenceSession.ExecutionProviderConfig;
  if (name === 'tensorrt') {
    const cache = tensorrtCacheDir === undefined ? {} : { trtEngineCacheEnable: true, trtEngineCachePath: tensorrtCacheDir, trtTimingCacheEnable: true, trtTimingCachePath: tensorrtCacheDir };
    return { name: 'tensorrt', deviceId, ...cache } as ort.InferenceSession.ExecutionProviderConfig;
  }
  return { name: 'cpu' };
}

/** onnxruntime's session options from ours: the same for a session in a runtime worker and one on the main thread. */
export function ortSessionOptions(o: CreateSessionOptions, tensorrtCacheDir: string | undefined): ort.InferenceSession.SessionOptions {
  return {
    executionProviders: o.providers.map((p) => providerOption(p, o.deviceId, tensorrtCacheDir)),
    graphOptimizationLevel: o.graphOptimizationLevel,
    logSeverityLevel: 3,
    ...(o.intraOpThreads === undefined ? {} : { intraOpNumThreads: o.intraOpThreads }),
    ...(o.interOpThreads === undefined ? {} : { interOpNumThreads: o.interOpThreads }),
  };
}
