/**
 * @module runtime/provider-options
 * The execution-provider options every session gets (used inside the runtime
 * workers; a separate module so it is testable without a worker).
 */
import type * as ort from 'onnxruntime-node';
import type { CreateSessionOptions } from './worker-protocol.js';

/**
 * onnxruntime-node (js/node/src/session_options_helper.cc, 1.2x-1.30) passes
 * the CUDA and TensorRT providers their `deviceId` and nothing else: options
 * such as `arenaExtendStrategy` or TensorRT's engine cache are dropped
 * without a word. So only the device is given here; what the binding does
 * forward is the session's config entries (`extra`, sessionConfig below).
 */
export function providerOption(name: string, deviceId: number): ort.InferenceSession.ExecutionProviderConfig {
  if (name === 'cuda' || name === 'tensorrt') return { name, deviceId } as ort.InferenceSession.ExecutionProviderConfig;
  return { name: 'cpu' };
}

/**
 * Session config entries (the binding forwards `extra` as AddConfigEntry):
 * initializers are allocated by the device allocator directly, not in the
 * arena, so a session holds its weights at their size (the arena rounds its
 * extensions up) and gives them back whole on release, on CPU and on CUDA.
 */
export const SESSION_CONFIG: Readonly<Record<string, Readonly<Record<string, string>>>> = Object.freeze({
  session: Object.freeze({ use_device_allocator_for_initializers: '1' }),
});

/**
 * TensorRT's engine and timing caches: the binding does not forward the
 * provider's options, but the provider reads these variables when it is
 * created. Set once per process, before any session, unless the operator set them.
 */
export function tensorrtCacheEnvironment(env: NodeJS.ProcessEnv, cacheDir: string): void {
  const wanted: Record<string, string> = {
    ORT_TENSORRT_ENGINE_CACHE_ENABLE: '1',
    ORT_TENSORRT_CACHE_PATH: cacheDir,
    ORT_TENSORRT_TIMING_CACHE_ENABLE: '1',
  };
  for (const [k, v] of Object.entries(wanted)) if (env[k] === undefined) env[k] = v;
}

/** onnxruntime's session options from ours: the same for a session in a runtime worker and one on the main thread. */
export function ortSessionOptions(o: CreateSessionOptions): ort.InferenceSession.SessionOptions {
  return {
    executionProviders: o.providers.map((p) => providerOption(p, o.deviceId)),
    extra: SESSION_CONFIG as Record<string, Record<string, string>>,
    graphOptimizationLevel: o.graphOptimizationLevel,
    logSeverityLevel: 3,
    ...(o.intraOpThreads === undefined ? {} : { intraOpNumThreads: o.intraOpThreads }),
    ...(o.interOpThreads === undefined ? {} : { interOpNumThreads: o.interOpThreads }),
  };
}
