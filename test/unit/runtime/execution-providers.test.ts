/**
 * @module test/unit/runtime/execution-providers
 * Provider selection as a pure function of the model's hints, the server
 * default and the host, for every combination; the fallback warnings; the
 * classification of real onnxruntime provider-load errors; and detection on
 * this (CPU-only) machine.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ProviderName } from '../../../src/config/server-config.js';
import {
  chooseProviders,
  detectHostCapabilities,
  isProviderLoadError,
  wantedProviders,
  type HostCapabilities,
  type ProviderHints,
} from '../../../src/runtime/execution-providers.js';
import type { InstanceKind } from '../../../src/config/model-config-types.js';

function hints(kinds: InstanceKind[] = [], gpuAccelerators: string[] = [], gpus: number[] = []): ProviderHints {
  return { kinds, gpus, gpuAccelerators };
}

function host(installed: ProviderName[], gpuVisible: boolean): HostCapabilities {
  return { installed: new Set<ProviderName>(['cpu', ...installed]), gpuVisible };
}

const CPU_HOST = host([], false);
const GPU_HOST = host(['cuda', 'tensorrt'], true);
const CUDA_ONLY_HOST = host(['cuda'], true);
const CUDA_LIB_NO_GPU = host(['cuda', 'tensorrt'], false);
const GPU_NO_LIB = host([], true);
const ALL_HOSTS = [CPU_HOST, GPU_HOST, CUDA_ONLY_HOST, CUDA_LIB_NO_GPU, GPU_NO_LIB];

const NOT_INSTALLED = (p: string): string =>
  `execution provider '${p}' is not installed (set ONNXRUNTIME_NODE_INSTALL=cuda12 when building the image); falling back`;
const NO_GPU = (p: string): string => `execution provider '${p}' needs a GPU but none is visible; falling back`;

describe('wantedProviders', () => {
  test('KIND_CPU only → cpu, whatever the host, server default or accelerators', () => {
    for (const h of ALL_HOSTS) {
      assert.deepEqual(wantedProviders(hints(['KIND_CPU']), undefined, h), ['cpu']);
      assert.deepEqual(wantedProviders(hints(['KIND_CPU', 'KIND_CPU'], ['tensorrt']), ['tensorrt', 'cuda', 'cpu'], h), ['cpu']);
    }
  });

  test('KIND_GPU → cuda, cpu, whatever the host and server default', () => {
    for (const h of ALL_HOSTS) {
      assert.deepEqual(wantedProviders(hints(['KIND_GPU']), undefined, h), ['cuda', 'cpu']);
      assert.deepEqual(wantedProviders(hints(['KIND_GPU']), ['cpu'], h), ['cuda', 'cpu']);
    }
  });

  test('a KIND_GPU group next to a KIND_CPU group still asks for the GPU', () => {
    assert.deepEqual(wantedProviders(hints(['KIND_CPU', 'KIND_GPU']), undefined, CPU_HOST), ['cuda', 'cpu']);
  });

  test('KIND_GPU with a tensorrt accelerator (any case) → tensorrt, cuda, cpu', () => {
    assert.deepEqual(wantedProviders(hints(['KIND_GPU'], ['tensorrt']), undefined, CPU_HOST), ['tensorrt', 'cuda', 'cpu']);
    assert.deepEqual(wantedProviders(hints(['KIND_GPU'], ['TensorRT']), undefined, GPU_HOST), ['tensorrt', 'cuda', 'cpu']);
    // Other accelerators do not change the order.
    assert.deepEqual(wantedProviders(hints(['KIND_GPU'], ['cuda']), undefined, GPU_HOST), ['cuda', 'cpu']);
  });

  test('no groups / KIND_AUTO / KIND_MODEL use the server default list as given', () => {
    for (const kinds of [[], ['KIND_AUTO'], ['KIND_MODEL']] as InstanceKind[][]) {
      assert.deepEqual(wantedProviders(hints(kinds), ['cuda', 'cpu'], CPU_HOST), ['cuda', 'cpu']);
      assert.deepEqual(wantedProviders(hints(kinds), ['cpu'], GPU_HOST), ['cpu']);
      assert.deepEqual(wantedProviders(hints(kinds), ['tensorrt', 'cuda', 'cpu'], CPU_HOST), ['tensorrt', 'cuda', 'cpu']);
      assert.deepEqual(wantedProviders(hints(kinds), ['cuda'], CPU_HOST), ['cuda']);
    }
  });

  test('server default + tensorrt accelerator: tensorrt goes first only when the default allows cuda', () => {
    assert.deepEqual(wantedProviders(hints([], ['tensorrt']), ['cuda', 'cpu'], CPU_HOST), ['tensorrt', 'cuda', 'cpu']);
    assert.deepEqual(wantedProviders(hints([], ['tensorrt']), ['cpu'], GPU_HOST), ['cpu']);
    assert.deepEqual(wantedProviders(hints([], ['tensorrt']), ['tensorrt', 'cuda', 'cpu'], GPU_HOST), ['tensorrt', 'cuda', 'cpu']);
    assert.deepEqual(wantedProviders(hints([], ['tensorrt']), ['cpu', 'cuda'], GPU_HOST), ['tensorrt', 'cpu', 'cuda']);
  });

  test('the server default list is not modified', () => {
    const serverDefault: ProviderName[] = ['cuda', 'cpu'];
    const result = wantedProviders(hints([], ['tensorrt']), serverDefault, GPU_HOST);
    assert.deepEqual(serverDefault, ['cuda', 'cpu']);
    assert.notEqual(result, serverDefault);
  });

  test('auto: cuda when the host has a GPU and the CUDA library, else cpu', () => {
    assert.deepEqual(wantedProviders(hints(), undefined, GPU_HOST), ['cuda', 'cpu']);
    assert.deepEqual(wantedProviders(hints(), undefined, CUDA_ONLY_HOST), ['cuda', 'cpu']);
    assert.deepEqual(wantedProviders(hints(['KIND_AUTO']), undefined, GPU_HOST), ['cuda', 'cpu']);
    assert.deepEqual(wantedProviders(hints(), undefined, CUDA_LIB_NO_GPU), ['cpu']);
    assert.deepEqual(wantedProviders(hints(), undefined, GPU_NO_LIB), ['cpu']);
    assert.deepEqual(wantedProviders(hints(), undefined, CPU_HOST), ['cpu']);
  });

  test('auto with a tensorrt accelerator: tensorrt, cuda, cpu on a GPU host; cpu otherwise', () => {
    assert.deepEqual(wantedProviders(hints([], ['tensorrt']), undefined, GPU_HOST), ['tensorrt', 'cuda', 'cpu']);
    assert.deepEqual(wantedProviders(hints([], ['tensorrt']), undefined, CPU_HOST), ['cpu']);
  });
});

describe('chooseProviders', () => {
  test('KIND_CPU → cpu with no warnings', () => {
    assert.deepEqual(chooseProviders(hints(['KIND_CPU']), undefined, GPU_HOST), { providers: ['cpu'], warnings: [], deviceId: 0 });
  });

  test('KIND_GPU on a GPU host with CUDA → cuda, cpu, no warnings', () => {
    assert.deepEqual(chooseProviders(hints(['KIND_GPU']), undefined, GPU_HOST), { providers: ['cuda', 'cpu'], warnings: [], deviceId: 0 });
  });

  test('KIND_GPU on a CPU-only host → cpu with a "not installed" warning', () => {
    assert.deepEqual(chooseProviders(hints(['KIND_GPU']), undefined, CPU_HOST), { providers: ['cpu'], warnings: [NOT_INSTALLED('cuda')], deviceId: 0 });
  });

  test('KIND_GPU with the CUDA library but no GPU → cpu with a "no GPU" warning', () => {
    assert.deepEqual(chooseProviders(hints(['KIND_GPU']), undefined, CUDA_LIB_NO_GPU), { providers: ['cpu'], warnings: [NO_GPU('cuda')], deviceId: 0 });
  });

  test('tensorrt accelerator: a missing tensorrt library falls back to cuda with one warning', () => {
    assert.deepEqual(chooseProviders(hints(['KIND_GPU'], ['tensorrt']), undefined, CUDA_ONLY_HOST), {
      providers: ['cuda', 'cpu'],
      warnings: [NOT_INSTALLED('tensorrt')],
      deviceId: 0,
    });
    assert.deepEqual(chooseProviders(hints(['KIND_GPU'], ['tensorrt']), undefined, GPU_HOST).providers, ['tensorrt', 'cuda', 'cpu']);
  });

  test('tensorrt accelerator on a CPU-only host: one warning per dropped provider, in order', () => {
    assert.deepEqual(chooseProviders(hints(['KIND_GPU'], ['tensorrt']), undefined, CPU_HOST), {
      providers: ['cpu'],
      warnings: [NOT_INSTALLED('tensorrt'), NOT_INSTALLED('cuda')],
      deviceId: 0,
    });
    assert.deepEqual(chooseProviders(hints(['KIND_GPU'], ['tensorrt']), undefined, CUDA_LIB_NO_GPU).warnings, [NO_GPU('tensorrt'), NO_GPU('cuda')]);
  });

  test('server default without cpu: cpu is appended as the last resort', () => {
    assert.deepEqual(chooseProviders(hints(), ['cuda'], GPU_HOST).providers, ['cuda', 'cpu']);
    assert.deepEqual(chooseProviders(hints(), ['tensorrt'], CPU_HOST), { providers: ['cpu'], warnings: [NOT_INSTALLED('tensorrt')], deviceId: 0 });
  });

  test('server default cpu, cuda keeps the given order', () => {
    assert.deepEqual(chooseProviders(hints(), ['cpu', 'cuda'], GPU_HOST).providers, ['cpu', 'cuda']);
  });

  test('auto on a CPU-only host → cpu with no warnings (nothing was asked for)', () => {
    assert.deepEqual(chooseProviders(hints(), undefined, CPU_HOST), { providers: ['cpu'], warnings: [], deviceId: 0 });
    assert.deepEqual(chooseProviders(hints(), undefined, GPU_NO_LIB), { providers: ['cpu'], warnings: [], deviceId: 0 });
  });

  test('deviceId is the first listed gpu, 0 when none', () => {
    assert.equal(chooseProviders(hints(['KIND_GPU'], [], [2, 3]), undefined, GPU_HOST).deviceId, 2);
    assert.equal(chooseProviders(hints(['KIND_GPU'], [], [0]), undefined, GPU_HOST).deviceId, 0);
    assert.equal(chooseProviders(hints(['KIND_GPU'], [], []), undefined, GPU_HOST).deviceId, 0);
    assert.equal(chooseProviders(hints(['KIND_CPU'], [], [1]), undefined, GPU_HOST).deviceId, 1);
  });
});

describe('isProviderLoadError', () => {
  test('real onnxruntime provider-load failures are recognised (Error or string)', () => {
    const messages = [
      'Failed to load library libonnxruntime_providers_shared.so with error: libonnxruntime_providers_shared.so: cannot open shared object file: No such file or directory',
      // What onnxruntime-node 1.30 (CPU build) says when asked for CUDA or TensorRT on this machine:
      'OrtSessionOptionsAppendExecutionProvider_Cuda: Failed to load shared library',
      'OrtSessionOptionsAppendExecutionProvider_TensorRT: Failed to load shared library',
      '/onnxruntime_src/onnxruntime/core/session/provider_bridge_ort.cc:1988 onnxruntime::Provider& onnxruntime::ProviderLibrary::Get() [ONNXRuntimeError] : 1 : FAIL : Failed to load library /x/libonnxruntime_providers_cuda.so with error: libcublasLt.so.12: cannot open shared object file: No such file or directory',
      '/onnxruntime_src/onnxruntime/core/providers/cuda/cuda_call.cc:129 CUDA failure 100: no CUDA-capable device is detected ; GPU=0 ; hostname=h ; file=/onnxruntime_src/onnxruntime/core/providers/cuda/cuda_execution_provider.cc ; line=282 ; expr=cudaSetDevice(info_.device_id);',
      'CUDA failure 35: CUDA driver version is insufficient for CUDA runtime version',
      'cudaErrorNoDevice',
      '[ONNXRuntimeError] : 1 : FAIL : TensorRT EP failed to create engine from network',
    ];
    for (const m of messages) {
      assert.equal(isProviderLoadError(new Error(m)), true, m);
      assert.equal(isProviderLoadError(m), true, m);
    }
  });

  test('model, runtime and memory errors are not provider-load errors', () => {
    const messages = [
      'Failed to load model because protobuf parsing failed.',
      'Load model from /tmp/m.onnx failed:Protobuf parsing failed.',
      "Non-zero status code returned while running Add node. Name:'add' Status Message: shape mismatch",
      '[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Failed to allocate memory for requested buffer of size 1024',
      "input 'x' is missing",
      '',
    ];
    for (const m of messages) assert.equal(isProviderLoadError(new Error(m)), false, m);
    assert.equal(isProviderLoadError(undefined), false);
    assert.equal(isProviderLoadError(42), false);
  });
});

describe('detectHostCapabilities', () => {
  test('on this machine (no GPU, CPU-only onnxruntime-node): installed = {cpu}, gpuVisible = false', () => {
    const caps = detectHostCapabilities();
    assert.deepEqual([...caps.installed], ['cpu']);
    assert.equal(caps.gpuVisible, false);
  });

  test('on this machine (no GPU) auto selection therefore picks cpu alone, without warnings', () => {
    assert.deepEqual(chooseProviders(hints(), undefined, detectHostCapabilities()), { providers: ['cpu'], warnings: [], deviceId: 0 });
  });
});
