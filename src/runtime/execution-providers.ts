/**
 * @module runtime/execution-providers
 * Which onnxruntime execution providers a model's sessions use, and how we
 * fall back when one is missing. Selection is a pure function of the model's
 * config, the server default and what this host has, so it is tested without a
 * GPU; detection reads the filesystem once.
 */
import { existsSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { ProviderName } from '../config/server-config.js';
import type { InstanceKind } from '../config/model-config-types.js';

/** What a model's config says about devices: instance_group kinds and gpus, GPU accelerators. */
export interface ProviderHints {
  readonly kinds: readonly InstanceKind[];
  readonly gpus: readonly number[];
  /** optimization.execution_accelerators.gpu_execution_accelerator names, e.g. "tensorrt". */
  readonly gpuAccelerators: readonly string[];
}

export interface HostCapabilities {
  /** Providers whose native library is installed next to onnxruntime-node's binding. */
  readonly installed: ReadonlySet<ProviderName>;
  /** Whether an NVIDIA GPU is visible to this process. */
  readonly gpuVisible: boolean;
}

export interface ProviderChoice {
  /** Ordered, always ending in 'cpu'. */
  readonly providers: readonly ProviderName[];
  /** Why a wanted provider was dropped; the caller logs each at warn. */
  readonly warnings: readonly string[];
  readonly deviceId: number;
}

const PROVIDER_LIBRARY: Record<Exclude<ProviderName, 'cpu'>, string> = {
  cuda: 'libonnxruntime_providers_cuda.so',
  tensorrt: 'libonnxruntime_providers_tensorrt.so',
};

/** Look at the installed onnxruntime-node binaries and the NVIDIA device nodes. */
export function detectHostCapabilities(): HostCapabilities {
  const installed = new Set<ProviderName>(['cpu']);
  try {
    const require = createRequire(import.meta.url);
    const pkgDir = path.dirname(require.resolve('onnxruntime-node/package.json'));
    const binDir = path.join(pkgDir, 'bin', 'napi-v6', process.platform, process.arch);
    for (const [name, lib] of Object.entries(PROVIDER_LIBRARY)) {
      if (existsSync(path.join(binDir, lib))) installed.add(name as ProviderName);
    }
  } catch {
    // onnxruntime-node not resolvable: only CPU can be claimed.
  }
  let gpuVisible = false;
  try {
    gpuVisible = existsSync('/dev/nvidiactl') || readdirSync('/dev').some((f) => /^nvidia\d+$/.test(f));
  } catch {
    gpuVisible = false;
  }
  return { installed, gpuVisible };
}

/** The provider order a model asks for, before looking at the host. */
export function wantedProviders(hints: ProviderHints, serverDefault: readonly ProviderName[] | undefined, host: HostCapabilities): ProviderName[] {
  const kinds = new Set(hints.kinds);
  const accelerators = hints.gpuAccelerators.map((a) => a.toLowerCase());
  const gpuFirst: ProviderName[] = accelerators.includes('tensorrt') ? ['tensorrt', 'cuda', 'cpu'] : ['cuda', 'cpu'];
  if (kinds.size > 0 && [...kinds].every((k) => k === 'KIND_CPU')) return ['cpu'];
  if (kinds.has('KIND_GPU')) return gpuFirst;
  if (serverDefault) {
    // An explicit TensorRT accelerator in the model config still goes first when the server allows GPUs.
    const list = [...serverDefault];
    if (accelerators.includes('tensorrt') && list.includes('cuda') && !list.includes('tensorrt')) list.unshift('tensorrt');
    return list;
  }
  // auto: GPU when the host has one and the CUDA provider is installed.
  return host.gpuVisible && host.installed.has('cuda') ? gpuFirst : ['cpu'];
}

/** Drop what the host cannot run, with a reason per drop; CPU is always the last resort. */
export function chooseProviders(hints: ProviderHints, serverDefault: readonly ProviderName[] | undefined, host: HostCapabilities): ProviderChoice {
  const warnings: string[] = [];
  const providers: ProviderName[] = [];
  for (const p of wantedProviders(hints, serverDefault, host)) {
    if (p === 'cpu') {
      providers.push(p);
      continue;
    }
    if (!host.installed.has(p)) {
      warnings.push(`execution provider '${p}' is not installed (set ONNXRUNTIME_NODE_INSTALL=cuda12 when building the image); falling back`);
    } else if (!host.gpuVisible) {
      warnings.push(`execution provider '${p}' needs a GPU but none is visible; falling back`);
    } else {
      providers.push(p);
    }
  }
  if (!providers.includes('cpu')) providers.push('cpu');
  return { providers, warnings, deviceId: hints.gpus[0] ?? 0 };
}

/** An error from session creation that means "this provider cannot be used here", so the next one is tried. */
export function isProviderLoadError(err: unknown): boolean {
  const msg = err instanceof Error ? err.message : String(err);
  return /Failed to load (shared )?library|providers_shared|cannot open shared object|CUDA driver|no CUDA-capable device|cudaErrorNoDevice|TensorRT EP|AppendExecutionProvider/i.test(
    msg,
  );
}
