/**
 * @module ensemble/plan-runner
 * Executes an ExecutionPlan: a step starts as soon as all its input tensors
 * exist (independent steps run concurrently), each through its model's
 * scheduler; intermediate tensors stay typed arrays in memory. Only steps
 * needed for the requested outputs run, and each step is asked only for the
 * outputs someone consumes.
 */
import { ServingError, toServingError } from '../errors.js';
import type { Tensor } from '../protocol/tensor.js';
import type { ScheduleOptions } from '../scheduler/model-scheduler.js';
import type { ExecutionPlan, PlanStep } from './execution-plan.js';

/** What runPlan derives from a plan, computed once per plan (plans are immutable and live as long as their package). */
interface PlanIndex {
  readonly producerOf: ReadonlyMap<string, PlanStep>;
  /** neededSteps by request shape (given inputs + wanted outputs): clients send few distinct shapes. */
  readonly needed: Map<string, ReadonlyMap<PlanStep, readonly string[]>>;
}

const INDEX = new WeakMap<ExecutionPlan, PlanIndex>();
/** Distinct request shapes remembered per plan; beyond it, needed steps are computed per request. */
const MAX_SHAPES = 64;

function indexOf(plan: ExecutionPlan): PlanIndex {
  let index = INDEX.get(plan);
  if (!index) {
    const producerOf = new Map<string, PlanStep>();
    for (const s of plan.steps) for (const t of s.outputMap.values()) producerOf.set(t, s);
    index = { producerOf, needed: new Map() };
    INDEX.set(plan, index);
  }
  return index;
}

function neededFor(plan: ExecutionPlan, wanted: readonly string[], given: ReadonlySet<string>): ReadonlyMap<PlanStep, readonly string[]> {
  const index = indexOf(plan);
  const key = `${[...given].join('\u0000')}\u0001${wanted.join('\u0000')}`;
  let needed = index.needed.get(key);
  if (!needed) {
    needed = neededSteps(index.producerOf, wanted, given);
    if (index.needed.size < MAX_SHAPES) index.needed.set(key, needed);
  }
  return needed;
}

/** Steps (and per step, outputs) needed to produce `wanted`, by walking producers backwards. */
function neededSteps(producerOf: ReadonlyMap<string, PlanStep>, wanted: readonly string[], given: ReadonlySet<string>): Map<PlanStep, string[]> {
  const needed = new Map<PlanStep, Set<string>>();
  const stack = [...wanted];
  const seen = new Set<string>();
  while (stack.length > 0) {
    const tensor = stack.pop()!;
    if (seen.has(tensor) || given.has(tensor)) continue;
    seen.add(tensor);
    const step = producerOf.get(tensor);
    if (!step) continue; // validated at load; an optional input simply stays absent
    let outs = needed.get(step);
    if (!outs) {
      outs = new Set();
      needed.set(step, outs);
      stack.push(...step.inputMap.values());
    }
    for (const [modelOut, t] of step.outputMap) if (t === tensor) outs.add(modelOut);
  }
  return new Map([...needed].map(([s, outs]) => [s, [...outs]]));
}

function stepError(plan: ExecutionPlan, step: PlanStep, err: unknown): ServingError {
  const e = toServingError(err, step.modelName);
  if (plan.steps.length === 1) return e; // a single model: the error already names it
  return new ServingError(e.code, `ensemble '${plan.entry}' step ${step.index} (model '${step.modelName}'): ${e.message}`, {
    model: e.model ?? step.modelName,
    cause: e,
    ...(e.details ? { details: e.details } : {}),
  });
}

export async function runPlan(
  plan: ExecutionPlan,
  inputs: ReadonlyMap<string, Tensor>,
  wanted: readonly string[],
  signal?: AbortSignal,
  /** The request's priority and timeout; every step's scheduler gets them (Triton propagates both to steps). */
  options?: ScheduleOptions,
): Promise<Map<string, Tensor>> {
  const tensors = new Map(inputs);
  const { producerOf } = indexOf(plan);
  const todo = new Map(neededFor(plan, wanted, new Set(inputs.keys())));
  const running = new Map<PlanStep, Promise<void>>();

  const ready = (s: PlanStep): boolean => {
    for (const t of s.inputMap.values()) if (!tensors.has(t) && producerOf.has(t)) return false;
    return true;
  };
  const launch = (s: PlanStep, outputs: readonly string[]): Promise<void> => {
    const feeds = new Map<string, Tensor>();
    for (const [modelIn, t] of s.inputMap) {
      const v = tensors.get(t);
      if (v) feeds.set(modelIn, v);
    }
    // Through an async function, so a scheduler that throws synchronously is wrapped like any failure.
    return (async () => s.scheduler.schedule(feeds, outputs, signal, options))().then(
      (result) => {
        for (const [modelOut, t] of s.outputMap) {
          const v = result.get(modelOut);
          if (v) tensors.set(t, v);
        }
      },
      (err: unknown) => {
        throw stepError(plan, s, err);
      },
    );
  };

  // Settled wrappers: a step that fails while another is awaited must not become an unhandled rejection.
  let failure: ServingError | undefined;
  while ((todo.size > 0 || running.size > 0) && failure === undefined) {
    for (const [s, outputs] of todo) {
      if (ready(s)) {
        todo.delete(s);
        running.set(
          s,
          launch(s, outputs).then(
            () => void running.delete(s),
            (err: ServingError) => {
              running.delete(s);
              failure ??= err;
            },
          ),
        );
      }
    }
    if (running.size === 0) {
      if (todo.size === 0) break;
      // Nothing can start and nothing runs: only possible if validation missed a dependency.
      throw new ServingError('INTERNAL', `ensemble '${plan.entry}': steps ${[...todo.keys()].map((s) => s.index).join(', ')} can never run`);
    }
    await Promise.race(running.values());
  }
  if (failure) throw failure;

  const out = new Map<string, Tensor>();
  for (const name of wanted) {
    const t = tensors.get(name);
    if (!t) throw new ServingError('INTERNAL', `model '${plan.entry}': output '${name}' was not produced`);
    out.set(name, t);
  }
  return out;
}

