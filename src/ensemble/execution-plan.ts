/**
 * @module ensemble/execution-plan
 * Every request runs a plan: a DAG of steps over named tensors. A single
 * model is a plan of one step whose maps are the identity; an ensemble's
 * `ensemble_scheduling` becomes a plan validated once, at load, with every
 * problem reported together.
 */
import type { ModelConfig, TensorConfig } from '../config/model-config-types.js';
import { ServingError } from '../errors.js';
import type { DataType } from '../protocol/tensor.js';
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
  readonly what: string;
}

/**
 * Build and validate an ensemble plan. `resolve` returns the loaded step model
 * for a (name, version) or undefined when the package has no such model.
 */
export function ensemblePlan(ensemble: ModelConfig, label: string, resolve: (name: string, version: number) => StepModel | undefined): ExecutionPlan {
  const problems: string[] = [];
  const steps: PlanStep[] = [];
  const producers = new Map<string, Producer>();
  for (const t of ensemble.input) producers.set(t.name, { dataType: t.dataType, what: `ensemble input '${t.name}'` });

  (ensemble.ensembleSteps ?? []).forEach((s, index) => {
    const where = `step ${index} (model '${s.modelName}')`;
    const model = resolve(s.modelName, s.modelVersion);
    if (!model) {
      problems.push(`${where}: the package has no model '${s.modelName}'${s.modelVersion >= 0 ? ` version ${s.modelVersion}` : ''}`);
      return;
    }
    const inputMap = new Map(Object.entries(s.inputMap));
    const outputMap = new Map(Object.entries(s.outputMap));
    for (const inp of model.config.input) {
      if (!inputMap.has(inp.name) && !inp.optional) problems.push(`${where}: input '${inp.name}' is not mapped to any ensemble tensor`);
    }
    for (const key of inputMap.keys()) {
      if (!model.config.input.some((t) => t.name === key)) problems.push(`${where}: input_map names '${key}', which is not an input of '${s.modelName}'`);
    }
    for (const [key, tensor] of outputMap) {
      const out = model.config.output.find((t) => t.name === key);
      if (!out) {
        problems.push(`${where}: output_map names '${key}', which is not an output of '${s.modelName}'`);
        continue;
      }
      const prev = producers.get(tensor);
      if (prev) problems.push(`ensemble tensor '${tensor}' is produced twice: by ${prev.what} and by ${where}`);
      else producers.set(tensor, { dataType: out.dataType, what: where });
    }
    steps.push({ index, modelName: s.modelName, version: model.version, scheduler: model.scheduler, inputMap, outputMap });
  });

  // Consumers: every mapped tensor must be produced with the right datatype.
  const consumed = new Set<string>();
  for (const step of steps) {
    const model = resolve(step.modelName, step.version)!;
    for (const [key, tensor] of step.inputMap) {
      consumed.add(tensor);
      const p = producers.get(tensor);
      const want = model.config.input.find((t) => t.name === key);
      if (!p) problems.push(`step ${step.index} (model '${step.modelName}'): ensemble tensor '${tensor}' has no producer`);
      else if (want && p.dataType !== want.dataType) {
        problems.push(`ensemble tensor '${tensor}': inconsistent data type, ${p.what} gives ${p.dataType} but step ${step.index} (model '${step.modelName}') input '${key}' expects ${want.dataType}`);
      }
    }
  }
  for (const t of ensemble.output) {
    const p = producers.get(t.name);
    if (!p) problems.push(`output '${t.name}' for ensemble '${ensemble.name}' is not written by any step`);
    else if (p.dataType !== t.dataType) problems.push(`output '${t.name}': ${p.what} gives ${p.dataType} but the ensemble declares ${t.dataType}`);
  }
  for (const t of ensemble.input) if (!consumed.has(t.name)) problems.push(`ensemble input '${t.name}' is not used by any step`);

  const order = problems.length === 0 ? topologicalOrder(steps, ensemble, problems) : steps;
  if (problems.length > 0) {
    throw new ServingError('INVALID_MODEL', `model '${label}': ensemble '${ensemble.name}' is invalid: ${problems.join('; ')}`, { model: label });
  }
  return Object.freeze({ entry: ensemble.name, steps: Object.freeze(order) });
}

/** Kahn's algorithm over tensors; leftover steps form a cycle. */
function topologicalOrder(steps: readonly PlanStep[], ensemble: ModelConfig, problems: string[]): PlanStep[] {
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
