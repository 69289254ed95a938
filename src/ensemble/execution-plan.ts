/**
 * @module ensemble/execution-plan
 * Every request runs a plan: a DAG of steps over named tensors. A single
 * model is a plan of one step whose maps are the identity; an ensemble's
 * `ensemble_scheduling` becomes a plan validated once, at load, with every
 * problem reported together.
 *
 * What is checked here needs the step models' configs (config.pbtxt
 * validation already checked the ensemble's own wiring on its own):
 * - each step names a model of the package (and an existing version);
 * - every required step input is mapped, every map key is a tensor of the step model;
 * - every consumed tensor has exactly one producer (an ensemble input or one step output);
 * - producer and consumer agree on datatype and on shape, compared as full
 *   shapes (a batching model's shape is `[-1, ...dims]`), `-1` matching anything,
 *   so a non-batching step may sit in a batching ensemble when its dims spell out
 *   the batch dim (Triton's rule);
 * - the ensemble's max_batch_size is ≤ that of each batching step (Triton:
 *   "ensemble X allows maximum batch size N, but it contains model Y which only
 *   allows maximum batch size to be M");
 * - ensemble inputs are used, ensemble outputs are written (with the declared
 *   datatype and shape), and the steps form no cycle.
 */
import type { EnsembleStepConfig, ModelConfig, TensorConfig } from '../config/model-config-types.js';
import { ServingError } from '../errors.js';
import { formatShape, type DataType } from '../protocol/tensor.js';
import type { ModelScheduler } from '../scheduler/model-scheduler.js';

export interface PlanStep {
  readonly index: number;
  readonly modelName: string;
  readonly version: number;
  readonly scheduler: ModelScheduler;
  /** step model input name → plan tensor name */
  readonly inputMap: ReadonlyMap<string, string>;
  /** step model output name → plan tensor name */
  readonly outputMap: ReadonlyMap<string, string>;
}

export interface ExecutionPlan {
  /** The model the client addressed (the ensemble, or the single model). */
  readonly entry: string;
  readonly steps: readonly PlanStep[];
}

/** What the plan builder needs to know about a step model. */
export interface StepModel {
  readonly config: ModelConfig;
  readonly version: number;
  readonly scheduler: ModelScheduler;
}

/** The parts of an ensemble config the plan is built from (a typed ModelConfig, or a lenient view of a config that failed validation). */
export type EnsembleSpec = Pick<ModelConfig, 'name' | 'maxBatchSize' | 'input' | 'output' | 'ensembleSteps'>;

function identity(tensors: readonly TensorConfig[]): Map<string, string> {
  return new Map(tensors.map((t) => [t.name, t.name]));
}

export function singleModelPlan(name: string, model: StepModel): ExecutionPlan {
  return Object.freeze({
    entry: name,
    steps: Object.freeze([
      Object.freeze({
        index: 0,
        modelName: name,
        version: model.version,
        scheduler: model.scheduler,
        inputMap: identity(model.config.input),
        outputMap: identity(model.config.output),
      }),
    ]),
  });
}

interface Producer {
  readonly dataType: DataType;
  /** Full shape: the batch dim (-1) first when the producer batches. */
  readonly shape: readonly number[];
  readonly what: string;
}

/** The shape a tensor has at run time: `[-1, ...dims]` for a batching model, `dims` otherwise. */
export function fullShape(dims: readonly number[], maxBatchSize: number): number[] {
  return maxBatchSize > 0 ? [-1, ...dims] : [...dims];
}

/** Same rank, and every dim equal or -1 on either side. */
export function shapesCompatible(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === -1 || b[i] === -1 || d === b[i]);
}

export interface PlanValidationOptions {
  /**
   * Also check the ensemble's own wiring (producers, cycles, unused inputs,
   * unwritten outputs). False when config.pbtxt validation already reported
   * wiring problems and only the checks that need the step models should be
   * added to them (so a problem is not reported twice in other words).
   */
  readonly wiring?: boolean;
}

/** An ensemble being checked: the problems found so far, the steps that resolved, and who produces each tensor. */
interface PlanCheck {
  readonly ensemble: EnsembleSpec;
  readonly wiring: boolean;
  readonly problems: string[];
  readonly steps: PlanStep[];
  readonly models: Map<PlanStep, StepModel>;
  readonly producers: Map<string, Producer>;
}

/**
 * Every problem of an ensemble against its step models, in a stable order,
 * plus the steps that resolved. Never throws.
 */
export function ensembleProblems(
  ensemble: EnsembleSpec,
  resolve: (name: string, version: number) => StepModel | undefined,
  options: PlanValidationOptions = {},
): { problems: string[]; steps: PlanStep[] } {
  const check: PlanCheck = { ensemble, wiring: options.wiring ?? true, problems: [], steps: [], models: new Map(), producers: new Map() };
  for (const t of ensemble.input) {
    check.producers.set(t.name, { dataType: t.dataType, shape: fullShape(t.dims, ensemble.maxBatchSize), what: `ensemble input '${t.name}'` });
  }
  (ensemble.ensembleSteps ?? []).forEach((s, index) => checkStep(check, s, index, resolve));
  const consumed = checkConsumers(check);
  checkEnsembleOutputs(check);
  if (check.wiring) for (const t of ensemble.input) if (!consumed.has(t.name)) check.problems.push(`ensemble input '${t.name}' is not used by any step`);
  return { problems: check.problems, steps: check.steps };
}

/** One step: its model resolved, its maps against the model's tensors, its outputs registered as producers. */
function checkStep(check: PlanCheck, s: EnsembleStepConfig, index: number, resolve: (name: string, version: number) => StepModel | undefined): void {
  const { ensemble, problems, producers } = check;
  const where = `step ${index} (model '${s.modelName}')`;
  const model = resolve(s.modelName, s.modelVersion);
  if (!model) {
    problems.push(`${where}: the package has no model '${s.modelName}'${s.modelVersion > 0 ? ` version ${s.modelVersion}` : ''}`);
    return;
  }
  const cfg = model.config;
  if (cfg.maxBatchSize > 0 && ensemble.maxBatchSize > cfg.maxBatchSize) {
    problems.push(
      `${where}: ensemble '${ensemble.name}' allows max_batch_size ${ensemble.maxBatchSize}, but model '${s.modelName}' only allows ${cfg.maxBatchSize}`,
    );
  }
  const inputMap = new Map(Object.entries(s.inputMap));
  const outputMap = new Map(Object.entries(s.outputMap));
  for (const inp of cfg.input) {
    if (!inputMap.has(inp.name) && !inp.optional) problems.push(`${where}: input '${inp.name}' is not mapped to any ensemble tensor`);
  }
  for (const key of inputMap.keys()) {
    if (!cfg.input.some((t) => t.name === key)) problems.push(`${where}: input_map names '${key}', which is not an input of '${s.modelName}'`);
  }
  for (const [key, tensor] of outputMap) {
    const out = cfg.output.find((t) => t.name === key);
    if (!out) {
      problems.push(`${where}: output_map names '${key}', which is not an output of '${s.modelName}'`);
      continue;
    }
    const prev = producers.get(tensor);
    if (prev) {
      if (check.wiring) problems.push(`ensemble tensor '${tensor}' is produced twice: by ${prev.what} and by ${where}`);
    } else {
      producers.set(tensor, { dataType: out.dataType, shape: fullShape(out.dims, cfg.maxBatchSize), what: where });
    }
  }
  const step: PlanStep = { index, modelName: s.modelName, version: model.version, scheduler: model.scheduler, inputMap, outputMap };
  check.steps.push(step);
  check.models.set(step, model);
}

/** Consumers: every mapped tensor must be produced, with the datatype and a shape the consumer accepts. Returns the tensors consumed. */
function checkConsumers(check: PlanCheck): Set<string> {
  const { problems, producers } = check;
  const consumed = new Set<string>();
  for (const step of check.steps) {
    const cfg = check.models.get(step)!.config;
    for (const [key, tensor] of step.inputMap) {
      consumed.add(tensor);
      const p = producers.get(tensor);
      const want = cfg.input.find((t) => t.name === key);
      const consumer = `step ${step.index} (model '${step.modelName}') input '${key}'`;
      if (!p) {
        if (check.wiring) problems.push(`step ${step.index} (model '${step.modelName}'): ensemble tensor '${tensor}' has no producer`);
        continue;
      }
      if (!want) continue; // reported above
      if (p.dataType !== want.dataType) {
        problems.push(`ensemble tensor '${tensor}': inconsistent data type, ${p.what} gives ${p.dataType} but ${consumer} expects ${want.dataType}`);
      }
      const wantShape = fullShape(want.dims, cfg.maxBatchSize);
      if (!shapesCompatible(p.shape, wantShape)) {
        problems.push(
          `ensemble tensor '${tensor}': inconsistent shape, ${p.what} gives ${formatShape(p.shape)} but ${consumer} expects ${formatShape(wantShape)}`,
        );
      }
    }
  }
  return consumed;
}

/** Every ensemble output is written by a step, with the datatype and a shape it declares. */
function checkEnsembleOutputs(check: PlanCheck): void {
  const { ensemble, problems } = check;
  for (const t of ensemble.output) {
    const p = check.producers.get(t.name);
    const declared = fullShape(t.dims, ensemble.maxBatchSize);
    if (!p) {
      if (check.wiring) problems.push(`output '${t.name}' for ensemble '${ensemble.name}' is not written by any step`);
      continue;
    }
    if (p.dataType !== t.dataType) problems.push(`output '${t.name}': ${p.what} gives ${p.dataType} but the ensemble declares ${t.dataType}`);
    if (!shapesCompatible(p.shape, declared)) {
      problems.push(`output '${t.name}': inconsistent shape, ${p.what} gives ${formatShape(p.shape)} but the ensemble declares ${formatShape(declared)}`);
    }
  }
}

/**
 * Build and validate an ensemble plan. `resolve` returns the loaded step model
 * for a (name, version) or undefined when the package has no such model.
 * Throws INVALID_MODEL listing every problem.
 */
export function ensemblePlan(ensemble: EnsembleSpec, resolve: (name: string, version: number) => StepModel | undefined): ExecutionPlan {
  const { problems, steps } = ensembleProblems(ensemble, resolve);
  const order = problems.length === 0 ? topologicalOrder(steps, ensemble, problems) : steps;
  if (problems.length > 0) throw invalidEnsemble(ensemble.name, problems);
  return Object.freeze({ entry: ensemble.name, steps: Object.freeze(order) });
}

export function invalidEnsemble(ensembleName: string, problems: readonly string[]): ServingError {
  return new ServingError('INVALID_MODEL', `ensemble '${ensembleName}' is invalid: ${problems.join('; ')}`);
}

/** Kahn's algorithm over tensors; leftover steps form a cycle. */
function topologicalOrder(steps: readonly PlanStep[], ensemble: EnsembleSpec, problems: string[]): PlanStep[] {
  const available = new Set(ensemble.input.map((t) => t.name));
  const remaining = [...steps];
  const order: PlanStep[] = [];
  let progressed = true;
  while (remaining.length > 0 && progressed) {
    progressed = false;
    for (let i = 0; i < remaining.length; i++) {
      const s = remaining[i]!;
      if ([...s.inputMap.values()].every((t) => available.has(t))) {
        order.push(s);
        for (const t of s.outputMap.values()) available.add(t);
        remaining.splice(i, 1);
        i--;
        progressed = true;
      }
    }
  }
  if (remaining.length > 0) {
    problems.push(`steps ${remaining.map((s) => `${s.index} ('${s.modelName}')`).join(', ')} form a cycle`);
  }
  return order;
}
