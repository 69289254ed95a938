/**
 * What the launcher (`./serve`, the image's `serve` and `onnx-mme`) gives
 * the server process before node starts, for the children that tests and
 * benchmarks start without it (bench/lib/onnx-mme-server.ts, the raw
 * onnxruntime-node reference of the density figures, the js step bench's
 * measuring process: bench/lib/launcher-process.ts), so they run the
 * settings users ship. test/integration/packaging.test.ts checks that the
 * launcher applies exactly these.
 */

/** glibc's allocator settings (docs/memory-and-caching.md). */
export const LAUNCHER_ENV: Readonly<Record<string, string>> = Object.freeze({
  MALLOC_ARENA_MAX: '2',
  MALLOC_MMAP_THRESHOLD_: '65536',
  MALLOC_TRIM_THRESHOLD_: '131072',
});

/** Node's command-line flags: V8's young generation capped (docs/memory-and-caching.md). */
export const LAUNCHER_NODE_FLAGS: readonly string[] = Object.freeze(['--max-semi-space-size=8']);

/** The launcher's environment for a node child: its allocator settings, and its flags in NODE_OPTIONS after `nodeOptions` (the child's own). */
export function launcherEnv(nodeOptions = ''): Record<string, string> {
  return { ...LAUNCHER_ENV, NODE_OPTIONS: [nodeOptions, ...LAUNCHER_NODE_FLAGS].filter(Boolean).join(' ') };
}
