/**
 * @module config/model-config-draft
 * config.pbtxt as written, before the ONNX graph is known: the typed, frozen
 * answers the loader needs to create sessions (which file, which versions,
 * which providers, threads, graph level) and the field-support verdict
 * (config/field-support.ts), which refuses a config before any session is
 * created. Auto-complete needs the session, so the final ModelConfig is made
 * from the draft afterwards (`finishModelConfig`). This module and
 * model-config.ts are the only readers of the config's JSON form.
 */
import { ServingError } from '../errors.js';
import { autoCompleteConfig, type GraphTensor } from './auto-complete.js';
import { fieldFindings, refusalProblems, type FieldFinding } from './field-support.js';
import { modelConfigFromJson, toVersionPolicy, type ModelConfigOptions } from './model-config.js';
import { ModelConfigDescriptor } from './model-config-schema.js';
import type { InstanceKind, ModelConfig, VersionPolicy } from './model-config-types.js';
import { parseTextFormat } from './pbtxt/parser.js';
import { decodeJsonForm } from './pbtxt/schema.js';

export interface ModelConfigDraft {
  readonly options: ModelConfigOptions;
  /** The canonical JSON form as written ({} without a config.pbtxt): what auto-complete fills in. */
  readonly json: Readonly<Record<string, unknown>>;
  /** True when there was no config.pbtxt (or an empty one). */
  readonly empty: boolean;
  /** `name` as written ('' when not given). */
  readonly name: string;
  readonly platform: string;
  readonly backend: string;
  /** As written; '' = the platform's default. */
  readonly defaultModelFilename: string;
  readonly versionPolicy: VersionPolicy;
  readonly instanceGroups: readonly { readonly kind: InstanceKind; readonly gpus: readonly number[] }[];
  /** optimization.execution_accelerators.gpu_execution_accelerator names, e.g. "tensorrt". */
  readonly gpuAccelerators: readonly string[];
  /** optimization.graph.level as written (0 = all). */
  readonly graphLevel: number;
  /** `parameters` flattened to key → string_value. */
  readonly parameters: Readonly<Record<string, string>>;
  /** Whether the author wrote a dynamic_batching block (auto-complete's empty one does not count). */
  readonly dynamicBatchingWritten: boolean;
  /** Fields set in the config that the server ignores (logged at load, listed by validate). */
  readonly ignoredFields: readonly FieldFinding[];
}

type Json = Record<string, unknown>;

/**
 * Parses and checks config.pbtxt text (undefined = no file) into a draft.
 * Throws INVALID_MODEL for a syntax or schema error, and for any refused
 * field, naming each.
 */
export function readModelConfigDraft(text: string | undefined, options: ModelConfigOptions): ModelConfigDraft {
  const written = text === undefined ? {} : parseTextFormat(text, ModelConfigDescriptor, options.sourceName);
  return modelConfigDraftFromJson(written, options, text === undefined || text.trim() === '');
}

export function modelConfigDraftFromJson(written: Readonly<Json>, options: ModelConfigOptions, empty = false): ModelConfigDraft {
  const json = decodeJsonForm(written, ModelConfigDescriptor, options.sourceName);
  const findings = fieldFindings(json);
  const refusals = refusalProblems(findings);
  if (refusals.length > 0) {
    const name = typeof json['name'] === 'string' && json['name'] !== '' ? json['name'] : options.directoryName;
    throw new ServingError('INVALID_MODEL', `${options.sourceName}: ${refusals.join('; ')}`, name === undefined ? {} : { model: name });
  }
  const optimization = (json['optimization'] ?? {}) as Json;
  const accelerators = (optimization['execution_accelerators'] ?? {}) as Json;
  const params = (json['parameters'] ?? {}) as Record<string, Json>;
  const draft: ModelConfigDraft = {
    options,
    json,
    empty,
    name: json['name'] as string,
    platform: json['platform'] as string,
    backend: json['backend'] as string,
    defaultModelFilename: json['default_model_filename'] as string,
    versionPolicy: json['version_policy'] === undefined ? { kind: 'latest', numVersions: 1 } : toVersionPolicy(json['version_policy'] as Json),
    instanceGroups: ((json['instance_group'] ?? []) as Json[]).map((g) => ({ kind: g['kind'] as InstanceKind, gpus: g['gpus'] as number[] })),
    gpuAccelerators: ((accelerators['gpu_execution_accelerator'] ?? []) as Json[]).map((a) => a['name'] as string),
    graphLevel: ((optimization['graph'] as Json | undefined)?.['level'] as number | undefined) ?? 0,
    parameters: Object.fromEntries(Object.entries(params).map(([k, v]) => [k, v['string_value'] as string])),
    dynamicBatchingWritten: json['dynamic_batching'] !== undefined,
    ignoredFields: findings.filter((f) => f.status === 'ignored'),
  };
  return deepFreeze(draft);
}

/** A draft made in another thread (config/model-config-worker.ts): structured clone drops the freezing, so it is frozen again. */
export function adoptModelConfigDraft(draft: ModelConfigDraft): ModelConfigDraft {
  return deepFreeze(draft);
}

/** The final config of a model without a graph to complete from (ensembles, processing steps). */
export function finishModelConfig(draft: ModelConfigDraft): ModelConfig {
  return modelConfigFromJson(draft.json, draft.options);
}

/**
 * The final config of an ONNX model: completed from its graph where inputs or outputs are missing (Triton's auto-complete),
 * a model that can batch and sets no max_batch_size getting `defaultMaxBatchSize` (MME_DEFAULT_MAX_BATCH_SIZE).
 */
export function completeModelConfig(
  draft: ModelConfigDraft,
  graph: { readonly inputs: readonly GraphTensor[]; readonly outputs: readonly GraphTensor[] },
  defaultMaxBatchSize?: number,
): ModelConfig {
  return modelConfigFromJson(autoCompleteConfig(draft.json, graph, defaultMaxBatchSize), draft.options);
}

/**
 * Triton's onnxruntime backend thread keys, e.g.
 * `parameters { key: "intra_op_thread_count" value: { string_value: "2" } }`;
 * 0 (or absent) = onnxruntime's default, given as undefined.
 */
export function threadCountParameter(draft: ModelConfigDraft, key: 'intra_op_thread_count' | 'inter_op_thread_count'): number | undefined {
  const v = draft.parameters[key];
  if (v === undefined) return undefined;
  const n = Number(v);
  if (v.trim() === '' || !Number.isInteger(n) || n < 0) {
    throw new ServingError('INVALID_MODEL', `parameter ${key} must be a non-negative integer, got ${JSON.stringify(v)}`);
  }
  return n === 0 ? undefined : n;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
