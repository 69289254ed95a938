/**
 * @module registry/package-check
 * The package loader in collecting mode, for `onnx-mme validate` and `pack`:
 * the steps the server runs at load (layout scan, entry-model choice,
 * config.pbtxt parsing, sessions in runtime workers, config ↔ graph check,
 * processing steps loaded by their backends (tokenizer.json read, label files
 * found, a JS step's model.mjs imported and initialized), ensemble plan
 * validation) through the same PackageBuilder, except that every
 * model of the package is checked and every problem is listed instead of
 * stopping at the first. Nothing stays loaded: every scheduler is stopped and
 * every session released before it returns.
 */
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { ignoredParameterKeys } from '../config/field-support.js';
import type { ModelConfig, TensorConfig } from '../config/model-config-types.js';
import { inModel, ServingError, withModelSync, type ErrorCode } from '../errors.js';
import type { DataType } from '../protocol/tensor.js';
import type { LoadedModel } from './loaded-model.js';
import { PackageBuilder, type PackageLoadDeps, type PackageLoadRequest } from './package-loader.js';
import { predictPackageBytes } from './package-size.js';
import { chooseEntryModel, scanRepository, type ModelDirectory, type RepositoryLayout } from './repository-layout.js';

export interface PackageProblem {
  /** The model directory the problem is about; undefined for package-wide problems (layout, entry choice). */
  readonly model: string | undefined;
  readonly code: ErrorCode;
  readonly message: string;
}

export interface CheckedTensor {
  readonly name: string;
  readonly datatype: DataType;
  /** As a request sends it: the batch dimension (-1) first when the model batches. */
  readonly shape: readonly number[];
}

export interface CheckedModel {
  readonly name: string;
  /** `onnxruntime_onnx`, `ensemble`, or a processing step's backend (`image`, `tokenizer`, `mean_pooling`, `js`, ...). */
  readonly platform: string;
  readonly maxBatchSize: number;
  /** Versions the server would load (after the version policy). Empty for ensembles. */
  readonly versions: readonly number[];
  readonly inputs: readonly CheckedTensor[];
  readonly outputs: readonly CheckedTensor[];
  /** Bytes of the loaded versions' files (model.onnx and any external data beside it; a JS step's model.mjs). */
  readonly fileBytes: number;
  /** True when there is no config.pbtxt and the config was completed from the graph. */
  readonly autoCompleted: boolean;
  /** Ensembles: the step models in order. */
  readonly steps: readonly string[] | undefined;
  /** Config fields set here that the server accepts and ignores (config/field-support.ts), with why; it logs each at load. */
  readonly ignoredFields: readonly { readonly path: string; readonly note: string }[];
}

export interface PackageCheck {
  /** Where the models were found (the package root, or the directory it wraps). */
  readonly root: string | undefined;
  /** True when `root` itself is one model directory (config.pbtxt or version directories at its top). */
  readonly singleModel: boolean;
  /** What a request runs; undefined when it cannot be chosen. */
  readonly entry: string | undefined;
  /** Models that loaded (problems name the others). */
  readonly models: readonly CheckedModel[];
  readonly problems: readonly PackageProblem[];
  /** Facts that are not errors (e.g. a model the entry does not use: the server will not load it). */
  readonly notes: readonly string[];
  /** Sum of `fileBytes`: a floor for the memory the package takes once loaded. */
  readonly fileBytes: number;
  /** What the server reserves against MME_MEMORY_BUDGET_BYTES when it starts loading this package (registry/package-size.ts). */
  readonly predictedBytes: number;
}

/** An ordering hint only (ensembles after the models they use, so a step's own error is reported as its own). */
const ENSEMBLE_PLATFORM = /platform\s*:\s*["']ensemble["']/;

function problemOf(err: unknown, model: string | undefined): PackageProblem {
  if (err instanceof ServingError) return { model, code: err.code, message: err.message };
  return { model, code: 'INTERNAL', message: err instanceof Error ? err.message : String(err) };
}

function tensors(list: readonly TensorConfig[], maxBatchSize: number): CheckedTensor[] {
  return list.map((t) => ({ name: t.name, datatype: t.dataType, shape: maxBatchSize > 0 ? [-1, ...t.dims] : [...t.dims] }));
}

/** Bytes of every regular file under `dir` (a version directory: model.onnx plus external data). */
async function treeBytes(dir: string): Promise<number> {
  let total = 0;
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) total += await treeBytes(p);
    else if (e.isFile() || e.isSymbolicLink())
      total += await stat(p).then(
        (s) => (s.isFile() ? s.size : 0),
        () => 0,
      );
  }
  return total;
}

async function describe(model: LoadedModel): Promise<CheckedModel> {
  const config: ModelConfig = model.config;
  const versions = [...model.versions.keys()].sort((a, b) => a - b);
  let fileBytes = 0;
  for (const v of versions) fileBytes += await treeBytes(path.join(model.dir, String(v)));
  return {
    name: model.name,
    platform:
      config.platform === 'ensemble'
        ? 'ensemble'
        : config.platform || (config.backend && config.backend !== 'onnxruntime' ? config.backend : 'onnxruntime_onnx'),
    maxBatchSize: config.maxBatchSize,
    versions,
    inputs: tensors(config.input, config.maxBatchSize),
    outputs: tensors(config.output, config.maxBatchSize),
    fileBytes,
    autoCompleted: false,
    steps: config.ensembleSteps?.map((s) => s.modelName),
    ignoredFields: [
      ...config.ignoredFields.map((f) => ({ path: f.path, note: f.note })),
      ...(config.platform === 'onnxruntime_onnx'
        ? ignoredParameterKeys(config.parameters).map((k) => ({
            path: `parameters.${k}`,
            note: 'onnx-mme reads only intra_op_thread_count, inter_op_thread_count and execution_thread for an ONNX model',
          }))
        : []),
    ],
  };
}

/** Models the entry needs: itself and, for an ensemble, its steps (recursively). */
function usedBy(entry: string, loaded: ReadonlyMap<string, LoadedModel>): Set<string> {
  const used = new Set<string>();
  const visit = (name: string): void => {
    if (used.has(name)) return;
    used.add(name);
    for (const step of loaded.get(name)?.config.ensembleSteps ?? []) visit(step.modelName);
  };
  visit(entry);
  return used;
}

/**
 * Check the package in `request.dir` the way the server would load it, model
 * by model. Never throws for a problem with the package: problems are listed
 * in the result (an empty list means the server will load it).
 */
export async function checkPackage(request: PackageLoadRequest, deps: PackageLoadDeps): Promise<PackageCheck> {
  const problems: PackageProblem[] = [];
  const notes: string[] = [];
  let layout: RepositoryLayout;
  try {
    layout = await scanRepository(request.dir, request.fallbackName, deps.configMaxBytes === undefined ? {} : { configMaxBytes: deps.configMaxBytes });
  } catch (err) {
    const problem = problemOf(inModel(err, request.label), undefined);
    return { root: undefined, singleModel: false, entry: undefined, models: [], problems: [problem], notes, fileBytes: 0, predictedBytes: 0 };
  }

  let entry: ModelDirectory | undefined;
  try {
    entry = chooseEntryModel(layout, request.preferredEntry);
  } catch (err) {
    problems.push(problemOf(inModel(err, request.label), undefined));
  }

  const builder = new PackageBuilder(layout, request, deps);
  const failed = new Set<string>();
  const models: CheckedModel[] = [];
  try {
    const ordered = [
      ...layout.models.filter((m) => m.configText === undefined || !ENSEMBLE_PLATFORM.test(m.configText)),
      ...layout.models.filter((m) => m.configText !== undefined && ENSEMBLE_PLATFORM.test(m.configText)),
    ];
    for (const md of ordered) {
      if (builder.loaded.has(md.name) || failed.has(md.name)) continue;
      try {
        const model = await builder.load(md);
        // Ensemble plan validation, every problem at once; named for the package, as the load names it.
        if (model.config.platform === 'ensemble') withModelSync(request.label, () => builder.plan(model));
      } catch (err) {
        failed.add(md.name);
        const problem = problemOf(err, md.name);
        // An ensemble loads its steps first: a step's own error comes back again. Say so once, not twice.
        const earlier = problems.find((p) => p.message === problem.message && p.model !== md.name);
        problems.push(
          earlier
            ? {
                model: md.name,
                code: problem.code,
                message: `model '${request.label}': '${md.name}' not checked further: its step model '${earlier.model}' failed to load (above)`,
              }
            : problem,
        );
      }
    }
    for (const md of layout.models) {
      const model = builder.loaded.get(md.name);
      if (model && !failed.has(md.name)) models.push({ ...(await describe(model)), autoCompleted: md.configText === undefined });
    }
    if (entry && builder.loaded.has(entry.name)) {
      const used = usedBy(entry.name, builder.loaded);
      for (const md of layout.models) {
        if (!used.has(md.name)) notes.push(`model '${md.name}' is not used by the entry model '${entry.name}': the server will not load it`);
      }
    }
  } finally {
    await builder.releaseAll();
  }
  return {
    root: layout.root,
    singleModel: layout.singleModel,
    entry: entry?.name,
    models,
    problems,
    notes,
    fileBytes: models.reduce((a, m) => a + m.fileBytes, 0),
    predictedBytes: await predictPackageBytes(request.dir),
  };
}
