/**
 * @module registry/default-model
 * The model `/invocations` serves when a request names none. Which model that
 * is gets decided once, at start-up (chooseDefaultModel), from the settings
 * and what the source holds, never from the error of a failed load:
 *  - MME_DEFAULT_MODEL naming a target of the source: that target (the same
 *    entry as requests naming it);
 *  - a local source root that is one model, or a repository with an entry
 *    model to choose (MME_DEFAULT_MODEL naming a model directory inside it,
 *    the single model, or the single ensemble): that repository, loaded as one
 *    package (Triton's single-model mode);
 *  - otherwise none, and a request without a target is answered 404 saying
 *    that the header is missing and why there is no default.
 */
import path from 'node:path';
import type { Cancellation } from '../cancellation.js';
import { ServingError } from '../errors.js';
import type { ModelSource } from '../store/model-source.js';
import { normalizeTarget } from '../store/target-path.js';
import { KeySpace, type Lease, type ModelLifecycle, type ResidentView } from './lifecycle.js';
import { loadAndRelease, residentReady, type ModelHandle } from './model-handle.js';
import { chooseEntryModel, scanRepository, type RepositoryLayout } from './repository-layout.js';
import type { SourceModels } from './source-models.js';

export type DefaultChoice =
  /** A target of the source (normalised). */
  | { readonly kind: 'target'; readonly target: string }
  /** The local source root as one package. */
  | { readonly kind: 'repository'; readonly dir: string; readonly label: string; readonly preferredEntry: string | undefined }
  /** No default model: what a request without a target is answered; `again` when the root was not there (a volume mounted later): decided anew next time. */
  | { readonly kind: 'none'; readonly error: ServingError; readonly again?: boolean };

export interface DefaultModelOptions {
  readonly source: ModelSource;
  /** Local directory treated as a repository for requests without a target; undefined for remote sources. */
  readonly defaultRoot: string | undefined;
  /** MME_DEFAULT_MODEL: a target of the source, or a model directory inside the root. */
  readonly defaultModel: string | undefined;
  readonly configMaxBytes?: number | undefined;
  /** False: the answer without a default model says how many models the root holds, not their names (model-repository is restricted). */
  readonly listNames?: boolean | undefined;
}

const HEADER = 'X-Amzn-SageMaker-Target-Model';

/** The default model, decided from the settings and the source's contents. */
export async function chooseDefaultModel(options: DefaultModelOptions): Promise<DefaultChoice> {
  const { source, defaultRoot, defaultModel } = options;
  const where = source.publicDescription ?? source.description;
  const missing = (why: string, again = false): DefaultChoice => ({
    kind: 'none',
    again,
    error: new ServingError(
      'MODEL_NOT_FOUND',
      `no target model: the ${HEADER} header is missing and ${where} has no default model (${why}); send the header naming a model of the source, or set MME_DEFAULT_MODEL`,
    ),
  });
  const notFound = (): DefaultChoice => ({
    kind: 'none',
    error: new ServingError('MODEL_NOT_FOUND', `default model '${defaultModel}' (MME_DEFAULT_MODEL) not found in ${where}`),
  });
  if (defaultModel !== undefined) {
    const target = targetOrUndefined(defaultModel);
    // A remote source has no root to look in: the target it is, and its load says 404 while it is missing.
    if (target !== undefined && defaultRoot === undefined) return { kind: 'target', target };
    if (target !== undefined && (await source.currentVersion(target).catch(() => undefined)) !== undefined) return { kind: 'target', target };
    if (defaultRoot === undefined) return notFound();
  }
  if (defaultRoot === undefined) return missing('a request without the header needs MME_DEFAULT_MODEL on an S3 source');
  const label = defaultModel ?? path.basename(defaultRoot);
  let layout: RepositoryLayout;
  try {
    layout = await scanRepository(defaultRoot, defaultModel ?? 'model', options.configMaxBytes === undefined ? {} : { configMaxBytes: options.configMaxBytes });
  } catch (err) {
    // No model in it, or not a directory; anything else (the root unreadable) is the request's error, decided again next time.
    if (!(err instanceof ServingError) || (err.code !== 'INVALID_MODEL' && err.code !== 'MODEL_NOT_FOUND')) throw err;
    // MODEL_NOT_FOUND: the root is not a directory (yet).
    return defaultModel === undefined
      ? missing(err.code === 'MODEL_NOT_FOUND' ? 'its root is not a directory' : 'it is not a model repository', err.code === 'MODEL_NOT_FOUND')
      : notFound();
  }
  const names = layout.models.map((m) => m.name);
  if (defaultModel !== undefined)
    return names.includes(defaultModel) ? { kind: 'repository', dir: defaultRoot, label, preferredEntry: defaultModel } : notFound();
  try {
    chooseEntryModel(layout);
  } catch (err) {
    if (!(err instanceof ServingError) || err.code !== 'INVALID_MODEL') throw err;
    const which = options.listNames === false ? '' : ` (${shortList(names)})`;
    return missing(`it holds ${names.length} models${which} and no single ensemble to choose`);
  }
  return { kind: 'repository', dir: defaultRoot, label, preferredEntry: undefined };
}

function targetOrUndefined(name: string): string | undefined {
  try {
    return normalizeTarget(name);
  } catch {
    return undefined;
  }
}

function shortList(names: readonly string[]): string {
  return names.length <= 5 ? names.join(', ') : `${names.slice(0, 5).join(', ')}, …`;
}

/** The default model's provenance: its choice, made once, and its handle. */
export class DefaultModel {
  private readonly keys = new KeySpace('default');
  private readonly key = this.keys.key('');
  private choosing: Promise<DefaultChoice> | undefined;
  private chosen: DefaultChoice | undefined;
  readonly handle: ModelHandle;

  constructor(
    private readonly lifecycle: ModelLifecycle,
    private readonly sources: SourceModels,
    private readonly options: DefaultModelOptions,
  ) {
    this.handle = new DefaultHandle(this);
  }

  /** The choice, made on the first call (the server makes it at start-up) and kept. */
  choice(): Promise<DefaultChoice> {
    this.choosing ??= chooseDefaultModel(this.options).then(
      (c) => {
        if (c.kind === 'none' && c.again === true) this.choosing = undefined;
        return (this.chosen = c);
      },
      (err: unknown) => {
        // An unexpected failure (the root unreadable): decided again on the next request.
        this.choosing = undefined;
        throw err;
      },
    );
    return this.choosing;
  }

  leaseNow(): Lease | undefined {
    const c = this.chosen;
    if (c?.kind === 'target') return this.sources.leaseNow(c.target);
    if (c?.kind === 'repository') return this.lifecycle.tryLease(this.lifecycle.find(this.key));
    return undefined;
  }

  async acquire(cancel: Cancellation | undefined): Promise<Lease> {
    const c = await this.choice();
    switch (c.kind) {
      case 'target':
        return this.sources.acquire(c.target, cancel);
      case 'repository':
        return this.lifecycle.acquire(this.keys.id('', c.label), cancel, (ctx) =>
          this.sources.trackLoad(ctx.entry, cancel?.requestId, (onPhase) =>
            ctx.load({
              dir: c.dir,
              label: c.label,
              fallbackName: c.preferredEntry ?? 'model',
              seriesTarget: c.label,
              onPhase,
              ...(c.preferredEntry === undefined ? {} : { preferredEntry: c.preferredEntry }),
            }),
          ),
        );
      case 'none':
        throw c.error;
    }
  }

  resident(): ResidentView | undefined {
    const c = this.chosen;
    if (c?.kind === 'target') return this.sources.resident(c.target);
    if (c?.kind === 'repository') return this.lifecycle.view(this.key);
    return undefined;
  }
}

class DefaultHandle implements ModelHandle {
  readonly label = 'default';
  readonly queueKey = 'default';

  constructor(private readonly model: DefaultModel) {}

  leaseNow(): Lease | undefined {
    return this.model.leaseNow();
  }

  acquire(cancel?: Cancellation): Promise<Lease> {
    return this.model.acquire(cancel);
  }

  resident(): ResidentView | undefined {
    return this.model.resident();
  }

  ready(version: number | undefined): boolean {
    return residentReady(this.resident(), version);
  }

  load(cancel?: Cancellation): Promise<void> {
    return loadAndRelease(this, cancel);
  }

  unload(): Promise<void> {
    return Promise.reject(new ServingError('UNSUPPORTED', 'the default model cannot be unloaded by name'));
  }
}
