/**
 * @module ensemble/plan-runner
 * Executes an ExecutionPlan: a step starts as soon as all its input tensors
 * exist (independent steps run concurrently), each through its model's
 * scheduler; intermediate tensors stay typed arrays in memory. Only steps
 * needed for the requested outputs run, and each step is asked only for the
 * outputs someone consumes.
 */
import type { Cancellation } from '../cancellation.js';
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

/** A one-step plan whose maps are the identity (a single model): the request goes straight to its scheduler. */
function directStep(plan: ExecutionPlan): PlanStep | undefined {
  if (plan.steps.length !== 1) return undefined;
  const step = plan.steps[0]!;
  for (const [k, v] of step.inputMap) if (k !== v) return undefined;
  for (const [k, v] of step.outputMap) if (k !== v) return undefined;
  return step;
}

const DIRECT = new WeakMap<ExecutionPlan, PlanStep | null>();

/**
 * Not `async`: a single model's request waits on its scheduler's promise
 * alone. Each async frame a request is suspended in is a generator, a
 * context and a promise kept alive for as long as it waits, and under a
 * flood thousands wait long enough to be copied by every scavenge
 * (bench/README.md, "overload.bench").
 */
export function runPlan(
  plan: ExecutionPlan,
  inputs: ReadonlyMap<string, Tensor>,
  wanted: readonly string[],
  cancel?: Cancellation,
  /** The request's priority and timeout; every step's scheduler gets them (Triton propagates both to steps). */
  options?: ScheduleOptions,
): Promise<Map<string, Tensor>> {
  let direct = DIRECT.get(plan);
  if (direct === undefined) DIRECT.set(plan, (direct = directStep(plan) ?? null));
  // An ensemble; the common case, every single-model request, goes straight to its scheduler with no tensor bookkeeping.
  if (direct === null) return runSteps(plan, inputs, wanted, cancel, options);
  const step = direct;
  let pending: Promise<Map<string, Tensor>>;
  try {
    pending = step.scheduler.schedule(inputs, wanted, cancel, options);
  } catch (err) {
    return Promise.reject(stepError(plan, step, err));
  }
  return pending.then(
    (result) => collect(plan, result, wanted),
    (err: unknown) => {
      throw stepError(plan, step, err);
    },
  );
}

/** An ensemble's steps, each launched once its inputs exist. */
async function runSteps(
  plan: ExecutionPlan,
  inputs: ReadonlyMap<string, Tensor>,
  wanted: readonly string[],
  cancel: Cancellation | undefined,
  options: ScheduleOptions | undefined,
): Promise<Map<string, Tensor>> {
  const tensors = new Map(inputs);
  const { producerOf } = indexOf(plan);
  const todo = new Map(neededFor(plan, wanted, new Set(inputs.keys())));
  const ready = (s: PlanStep): boolean => {
    for (const t of s.inputMap.values()) if (!tensors.has(t) && producerOf.has(t)) return false;
    return true;
  };
  // Event-driven: a finished step launches the steps it completes; the first failure ends the request
  // (steps still running finish, their results unused).
  await new Promise<void>((resolve, reject) => {
    let running = 0;
    let failed = false;
    const launchReady = (): void => {
      for (const [s, outputs] of todo) if (ready(s)) launch(s, outputs);
      if (running > 0 || failed) return;
      if (todo.size === 0) resolve();
      // Nothing can start and nothing runs: only possible if validation missed a dependency.
      else reject(new ServingError('INTERNAL', `ensemble '${plan.entry}': steps ${[...todo.keys()].map((s) => s.index).join(', ')} can never run`));
    };
    const launch = (s: PlanStep, outputs: readonly string[]): void => {
      todo.delete(s);
      running++;
      const feeds = new Map<string, Tensor>();
      for (const [modelIn, t] of s.inputMap) {
        const v = tensors.get(t);
        if (v) feeds.set(modelIn, v);
      }
      let pending: Promise<Map<string, Tensor>>;
      try {
        pending = s.scheduler.schedule(feeds, outputs, cancel, options);
      } catch (err) {
        pending = Promise.reject(err); // a scheduler that throws synchronously fails like any step
      }
      pending.then(
        (result) => {
          running--;
          if (failed) return;
          for (const [modelOut, t] of s.outputMap) {
            const v = result.get(modelOut);
            if (v) tensors.set(t, v);
          }
          launchReady();
        },
        (err: unknown) => {
          running--;
          if (failed) return;
          failed = true;
          reject(stepError(plan, s, err));
        },
      );
    };
    launchReady();
  });
  return collect(plan, tensors, wanted);
}

function collect(plan: ExecutionPlan, tensors: ReadonlyMap<string, Tensor>, wanted: readonly string[]): Map<string, Tensor> {
  // A batcher's answer to a single model already is exactly `wanted`, in order: no copy.
  if (tensors instanceof Map && tensors.size === wanted.length) {
    let i = 0;
    let same = true;
    for (const name of tensors.keys()) if (name !== wanted[i++]) same = false;
    if (same) return tensors as Map<string, Tensor>;
  }
  const out = new Map<string, Tensor>();
  for (const name of wanted) {
    const t = tensors.get(name);
    if (!t) throw new ServingError('INTERNAL', `model '${plan.entry}': output '${name}' was not produced`);
    out.set(name, t);
  }
  return out;
}
