/**
 * @module registry/model-registry
 * What is loaded, under which key, and who is using it. Two kinds of entry
 * share one mechanism:
 *  - self-managed, keyed by target (X-Amzn-SageMaker-Target-Model on
 *    /invocations): loaded from the model source on first use;
 *  - SageMaker-managed, keyed by `model_name` (POST /models): SageMaker owns
 *    the list, and only it loads and unloads them.
 * Loads are single-flight per key (concurrent requests await one promise) and
 * run in parallel across keys. A lease pins an entry: it is never released
 * while a request holds it, and an unload waits for the last lease.
 */
import path from 'node:path';
import { ServingError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { ModelSource } from '../store/model-source.js';
import { normalizeTarget } from '../store/target-path.js';
import { loadPackage, type LoadedPackage, type PackageLoadDeps, type PackageLoadRequest } from './package-loader.js';

export type EntryKind = 'target' | 'managed' | 'default';
export type EntryState = 'LOADING' | 'READY' | 'UNLOADING';

export interface Lease {
  readonly pkg: LoadedPackage;
  /** Name for logs and metrics: the target, or the managed model's target header / name. */
  readonly label: string;
  release(): void;
}

export interface ManagedModelInfo {
  readonly modelName: string;
  readonly modelUrl: string;
  readonly targetModel: string | undefined;
  readonly state: EntryState;
  readonly entryModel: string | undefined;
  readonly loadedAt: string | undefined;
}

interface Entry {
  readonly key: string;
  readonly kind: EntryKind;
  readonly label: string;
  readonly url: string | undefined;
  readonly targetHeader: string | undefined;
  state: EntryState;
  readonly ready: Promise<LoadedPackage>;
  pkg: LoadedPackage | undefined;
  inflight: number;
  idle: (() => void) | undefined;
  loadedAt: Date | undefined;
}

export interface RegistryOptions {
  readonly source: ModelSource;
  /** Local directory treated as a repository for requests without a target (single-model mode); undefined for remote sources. */
  readonly defaultRoot: string | undefined;
  readonly defaultModel: string | undefined;
  readonly loadDeps: PackageLoadDeps;
  readonly logger: Logger;
  readonly metrics: Metrics;
}

const FORBIDDEN_URL_ROOTS = ['/dev', '/proc', '/sys'];

function archiveBaseName(target: string): string {
  return path.posix.basename(target).replace(/\.(tar\.gz|tgz)$/i, '') || target;
}

export class ModelRegistry {
  private readonly entries = new Map<string, Entry>();
  private closing = false;

  constructor(private readonly options: RegistryOptions) {}

  // ------------------------------------------------------------ self-managed

  /** Lease the package for a target, loading it from the source on first use. */
  async acquireTarget(rawTarget: string, signal?: AbortSignal): Promise<Lease> {
    const target = normalizeTarget(rawTarget);
    return this.acquireOrLoad(`target:${target}`, 'target', target, async () => {
      const local = await this.options.source.localize(target, signal);
      return this.load({ dir: local.dir, label: target, fallbackName: archiveBaseName(target) });
    });
  }

  /** Lease the default model (requests without a target header). */
  async acquireDefault(signal?: AbortSignal): Promise<Lease> {
    const { defaultModel, defaultRoot, source } = this.options;
    if (defaultModel !== undefined) {
      try {
        return await this.acquireTarget(defaultModel, signal);
      } catch (err) {
        if (!(err instanceof ServingError) || (err.code !== 'MODEL_NOT_FOUND' && err.code !== 'INVALID_TARGET')) throw err;
        // Not a target of the source: it names a model directory inside the source root (Triton's single-model mode).
      }
    }
    if (defaultRoot === undefined) {
      throw new ServingError(
        'MODEL_NOT_FOUND',
        defaultModel === undefined
          ? `no default model: send the X-Amzn-SageMaker-Target-Model header naming an archive in ${source.description}, or set MME_DEFAULT_MODEL`
          : `default model '${defaultModel}' not found in ${source.description}`,
      );
    }
    const label = defaultModel ?? path.basename(defaultRoot);
    return this.acquireOrLoad('default', 'default', label, async () => {
      try {
        return await this.load({
          dir: defaultRoot,
          label,
          fallbackName: defaultModel ?? 'model',
          ...(defaultModel === undefined ? {} : { preferredEntry: defaultModel }),
        });
      } catch (err) {
        if (err instanceof ServingError && (err.code === 'INVALID_MODEL' || err.code === 'MODEL_NOT_FOUND') && /no model found|not a directory/.test(err.message)) {
          throw new ServingError(
            'MODEL_NOT_FOUND',
            `no default model: ${source.description} is not a model repository; send the X-Amzn-SageMaker-Target-Model header (e.g. one of the archives in the source) or set MME_DEFAULT_MODEL`,
          );
        }
        throw err;
      }
    });
  }

  // ------------------------------------------------------- SageMaker-managed

  async loadManaged(modelName: string, url: string, targetHeader: string | undefined): Promise<ManagedModelInfo> {
    if (this.closing) throw new ServingError('SHUTTING_DOWN', 'the server is shutting down');
    const key = `managed:${modelName}`;
    if (this.entries.has(key)) {
      throw new ServingError('MODEL_ALREADY_LOADED', `model '${modelName}' is already loaded`, { model: modelName });
    }
    const dir = path.resolve(url);
    if (!path.isAbsolute(url) || url.split(/[\\/]/).includes('..') || FORBIDDEN_URL_ROOTS.some((r) => dir === r || dir.startsWith(`${r}/`))) {
      throw new ServingError('INVALID_REQUEST', `model '${modelName}': url must be an absolute path to the extracted model directory, got '${url}'`, {
        model: modelName,
      });
    }
    const label = targetHeader ?? modelName;
    const entry = this.startLoad(key, 'managed', label, { url: dir, targetHeader }, () =>
      this.load({ dir, label, fallbackName: targetHeader ? archiveBaseName(targetHeader) : modelName }),
    );
    await entry.ready;
    return this.info(entry);
  }

  async acquireManaged(modelName: string, targetHeader: string | undefined): Promise<Lease> {
    const entry = this.entries.get(`managed:${modelName}`);
    if (!entry || entry.state === 'UNLOADING') {
      throw new ServingError('MODEL_NOT_FOUND', `model '${modelName}' is not loaded`, { model: modelName });
    }
    this.checkHeader(entry, modelName, targetHeader);
    return this.lease(entry, await entry.ready);
  }

  /** Unload and free memory before returning; waits for requests that hold the model. */
  async unloadManaged(modelName: string, targetHeader: string | undefined): Promise<void> {
    const entry = this.entries.get(`managed:${modelName}`);
    if (!entry || entry.state === 'UNLOADING') {
      throw new ServingError('MODEL_NOT_FOUND', `model '${modelName}' is not loaded`, { model: modelName });
    }
    this.checkHeader(entry, modelName, targetHeader);
    await this.unload(entry);
  }

  listManaged(): ManagedModelInfo[] {
    return [...this.entries.values()]
      .filter((e) => e.kind === 'managed' && e.state === 'READY')
      .map((e) => this.info(e))
      .sort((a, b) => (a.modelName < b.modelName ? -1 : a.modelName > b.modelName ? 1 : 0));
  }

  describeManaged(modelName: string): ManagedModelInfo {
    const entry = this.entries.get(`managed:${modelName}`);
    if (!entry || entry.state !== 'READY') throw new ServingError('MODEL_NOT_FOUND', `model '${modelName}' is not loaded`, { model: modelName });
    return this.info(entry);
  }

  /** Packages currently resident (self-managed and managed). */
  loadedCount(): number {
    return [...this.entries.values()].filter((e) => e.state === 'READY').length;
  }

  /** Release every session, waiting for requests that still hold one. */
  async close(): Promise<void> {
    this.closing = true;
    await Promise.allSettled([...this.entries.values()].map((e) => this.unload(e)));
  }

  // ---------------------------------------------------------------- internals

  private checkHeader(entry: Entry, modelName: string, header: string | undefined): void {
    if (header !== undefined && entry.targetHeader !== undefined && header !== entry.targetHeader) {
      throw new ServingError(
        'TARGET_MISMATCH',
        `X-Amzn-SageMaker-Target-Model header '${header}' does not match the model requested in the URL ('${modelName}' was loaded as '${entry.targetHeader}')`,
        { model: modelName },
      );
    }
  }

  private info(e: Entry): ManagedModelInfo {
    return {
      modelName: e.key.slice('managed:'.length),
      modelUrl: e.url ?? '',
      targetModel: e.targetHeader,
      state: e.state,
      entryModel: e.pkg?.entry.name,
      loadedAt: e.loadedAt?.toISOString(),
    };
  }

  private async load(request: PackageLoadRequest): Promise<LoadedPackage> {
    const started = process.hrtime.bigint();
    try {
      const pkg = await loadPackage(request, this.options.loadDeps);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      this.options.metrics.modelLoadDuration.observe({ outcome: 'success' }, seconds);
      this.options.logger.info(
        { model: request.label, entryModel: pkg.entry.name, models: [...pkg.models.keys()], durationMs: Math.round(seconds * 1000) },
        'model loaded',
      );
      return pkg;
    } catch (err) {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      this.options.metrics.modelLoadDuration.observe({ outcome: 'failure' }, seconds);
      this.options.logger.warn({ model: request.label, err: (err as Error).message, durationMs: Math.round(seconds * 1000) }, 'model load failed');
      throw err;
    }
  }

  private startLoad(
    key: string,
    kind: EntryKind,
    label: string,
    extra: { url: string | undefined; targetHeader: string | undefined },
    loader: () => Promise<LoadedPackage>,
  ): Entry {
    const entry: Entry = {
      key,
      kind,
      label,
      url: extra.url,
      targetHeader: extra.targetHeader,
      state: 'LOADING',
      ready: loader(),
      pkg: undefined,
      inflight: 0,
      idle: undefined,
      loadedAt: undefined,
    };
    this.entries.set(key, entry);
    entry.ready.then(
      (pkg) => {
        entry.pkg = pkg;
        entry.loadedAt = new Date();
        if (entry.state === 'LOADING') entry.state = 'READY';
        this.options.metrics.loadedModels.set(this.loadedCount());
      },
      () => {
        // A failed load leaves nothing behind; the next request tries again.
        if (this.entries.get(key) === entry) this.entries.delete(key);
      },
    );
    return entry;
  }

  private async acquireOrLoad(key: string, kind: EntryKind, label: string, loader: () => Promise<LoadedPackage>): Promise<Lease> {
    if (this.closing) throw new ServingError('SHUTTING_DOWN', 'the server is shutting down');
    let entry = this.entries.get(key);
    if (entry?.state === 'UNLOADING') {
      await entry.ready.catch(() => undefined);
      entry = undefined;
    }
    entry ??= this.startLoad(key, kind, label, { url: undefined, targetHeader: undefined }, loader);
    const pkg = await entry.ready;
    if (entry.state === 'UNLOADING') throw new ServingError('MODEL_NOT_FOUND', `model '${label}' was unloaded`, { model: label });
    return this.lease(entry, pkg);
  }

  private lease(entry: Entry, pkg: LoadedPackage): Lease {
    entry.inflight++;
    let released = false;
    return {
      pkg,
      label: entry.label,
      release: () => {
        if (released) return;
        released = true;
        entry.inflight--;
        if (entry.inflight === 0) entry.idle?.();
      },
    };
  }

  private async unload(entry: Entry): Promise<void> {
    entry.state = 'UNLOADING';
    const started = process.hrtime.bigint();
    const pkg = await entry.ready.catch(() => undefined);
    if (entry.inflight > 0) {
      await new Promise<void>((resolve) => {
        entry.idle = resolve;
      });
    }
    await pkg?.release();
    if (this.entries.get(entry.key) === entry) this.entries.delete(entry.key);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    this.options.metrics.modelUnloadDuration.observe(seconds);
    this.options.metrics.loadedModels.set(this.loadedCount());
    if (pkg) this.options.logger.info({ model: entry.label, durationMs: Math.round(seconds * 1000) }, 'model unloaded');
  }
}
