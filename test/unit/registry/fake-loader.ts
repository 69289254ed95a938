/**
 * @module test/unit/registry/fake-loader
 * What the registry and service unit tests build a ModelRegistry from without
 * a server, files or onnxruntime: a ModelLoader whose loads reserve in a real
 * MemoryManager and finish when the test says, packages whose one model
 * doubles INPUT0, and a ModelSource held in memory.
 */
import type { ModelConfig } from '../../../src/config/model-config-types.js';
import { singleModelPlan } from '../../../src/ensemble/execution-plan.js';
import { ServingError } from '../../../src/errors.js';
import { silentLogger } from '../../../src/observability/logger.js';
import { createMetrics, type Metrics } from '../../../src/observability/metrics.js';
import type { Tensor } from '../../../src/protocol/tensor.js';
import type { LoadedModel } from '../../../src/registry/loaded-model.js';
import { MemoryManager } from '../../../src/registry/memory-manager.js';
import type { LoadedModelPackage, ModelLoader } from '../../../src/registry/model-loader.js';
import { ModelRegistry, type RegistryOptions } from '../../../src/registry/model-registry.js';
import type { LoadedPackage, PackageLoadRequest } from '../../../src/registry/package-loader.js';
import type { ModelScheduler } from '../../../src/scheduler/model-scheduler.js';
import type { LocalModel, ModelSource, SourceEntry } from '../../../src/store/model-source.js';
import { batchingConfig, doubleInput } from '../scheduler/fakes.js';

export interface Deferred {
  readonly promise: Promise<void>;
  resolve(): void;
  reject(err: Error): void;
}

export function deferred(): Deferred {
  let resolve!: () => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

/** A scheduler that answers INPUT0 × 2, optionally after a gate the test opens. */
export class FakeScheduler implements ModelScheduler {
  runs = 0;
  gate: Promise<void> | undefined;

  async schedule(inputs: ReadonlyMap<string, Tensor>): Promise<Map<string, Tensor>> {
    this.runs++;
    if (this.gate) await this.gate;
    return doubleInput(inputs);
  }

  async close(): Promise<void> {}
}

export interface FakePackage extends LoadedPackage {
  readonly scheduler: FakeScheduler;
  readonly released: () => boolean;
}

/** A one-model package named after the request's label, served at version 1. */
export function fakePackage(request: PackageLoadRequest, config: ModelConfig = batchingConfig(8)): FakePackage {
  const scheduler = new FakeScheduler();
  const name = request.preferredEntry ?? request.fallbackName;
  const entry: LoadedModel = {
    name,
    dir: request.dir,
    config,
    versions: new Map([[1, { version: 1, session: undefined, sessions: [], executors: [], scheduler }]]),
  };
  let released = false;
  return {
    label: request.label,
    dir: request.dir,
    entry,
    models: new Map([[name, entry]]),
    plan: singleModelPlan(name, { config, version: 1, scheduler }),
    metrics: undefined,
    scheduler,
    released: () => released,
    release: async () => {
      released = true;
    },
  };
}

export interface LoadCall {
  readonly request: PackageLoadRequest;
  /** Opened by the test when the load should finish (all open by default: see FakeLoader.hold). */
  readonly gate: Deferred;
  readonly result: Promise<FakePackage>;
}

/**
 * Loads reserve `bytesOf(label)` in the real MemoryManager, then wait for
 * their gate (open at once unless `hold` is set), then return a fake package.
 * `fail` makes the next loads of a label throw.
 */
export class FakeLoader implements ModelLoader {
  readonly calls: LoadCall[] = [];
  hold = false;
  readonly failures = new Map<string, Error>();
  releasedBytes = 0;

  constructor(
    private readonly memory: MemoryManager,
    private readonly bytesOf: (label: string) => number = () => 10,
  ) {}

  load(request: PackageLoadRequest): Promise<LoadedModelPackage> {
    const gate = deferred();
    if (!this.hold) gate.resolve();
    let pkgPromise!: Promise<FakePackage>;
    const result = (async (): Promise<LoadedModelPackage> => {
      const reservation = await this.memory.reserve(request, this.bytesOf(request.label));
      try {
        await gate.promise;
        const failure = this.failures.get(request.label);
        if (failure) throw failure;
      } catch (err) {
        reservation.release();
        throw err;
      }
      const pkg = fakePackage(request);
      let released = false;
      return {
        pkg,
        measuredBytes: undefined,
        get bytes() {
          return reservation.bytes;
        },
        release: async () => {
          if (released) return;
          released = true;
          this.releasedBytes += reservation.bytes;
          await pkg.release();
          reservation.release();
        },
      };
    })();
    pkgPromise = result.then((r) => r.pkg as FakePackage);
    pkgPromise.catch(() => undefined);
    this.calls.push({ request, gate, result: pkgPromise });
    return result;
  }

  /** The loads of one label so far. */
  loadsOf(label: string): LoadCall[] {
    return this.calls.filter((c) => c.request.label === label);
  }
}

/** A model source in memory: targets with a version each; `unreachable` makes version checks throw. */
export class FakeSource implements ModelSource {
  readonly description = 'fake://models';
  readonly versions = new Map<string, string>();
  unreachable = false;
  localized = 0;
  releasedCopies: string[] = [];

  constructor(targets: readonly string[]) {
    for (const t of targets) this.versions.set(t, 'v1');
  }

  async localize(target: string): Promise<LocalModel> {
    const version = this.versions.get(target);
    if (version === undefined) throw new ServingError('MODEL_NOT_FOUND', `model '${target}' not found in ${this.description}`, { model: target });
    this.localized++;
    return {
      target,
      dir: `/fake/${target}/${version}`,
      version,
      release: () => void this.releasedCopies.push(`${target}@${version}`),
    };
  }

  async currentVersion(target: string): Promise<string | undefined> {
    if (this.unreachable) throw new Error('connection refused');
    return this.versions.get(target);
  }

  async list(): Promise<readonly SourceEntry[]> {
    return [...this.versions.keys()].map((target) => ({ target, sizeBytes: 1, lastModified: undefined, cached: true }));
  }
}

export interface RegistryFixture {
  readonly registry: ModelRegistry;
  readonly loader: FakeLoader;
  readonly source: FakeSource;
  readonly memory: MemoryManager;
  readonly metrics: Metrics;
}

/** A registry on fakes: each model reserves 10 bytes of a `budgetBytes` budget. */
export function registryFixture(
  options: {
    targets?: readonly string[];
    budgetBytes?: number;
    waitMs?: number;
    bytesOf?: (label: string) => number;
    registry?: Partial<RegistryOptions>;
  } = {},
): RegistryFixture {
  const logger = silentLogger();
  const metrics = createMetrics();
  const memory = new MemoryManager({ budgetBytes: options.budgetBytes ?? 1000, maxModels: undefined, waitMs: options.waitMs ?? 50, logger, metrics });
  const loader = new FakeLoader(memory, options.bytesOf);
  const source = new FakeSource(options.targets ?? ['a', 'b', 'c']);
  const registry = new ModelRegistry({
    source,
    defaultRoot: undefined,
    defaultModel: undefined,
    loader,
    memory,
    logger,
    metrics,
    ...options.registry,
  });
  return { registry, loader, source, memory, metrics };
}

/** Let promise chains run (two macrotask turns). */
export async function settle(): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
}
