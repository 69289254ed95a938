/**
 * @module backends/step-backend
 * Processing steps: models whose config.pbtxt names a `backend` other than
 * onnxruntime and that run in this process instead of in an onnxruntime
 * session (image decoding, tokenization, pooling, top-k; a user's JavaScript
 * in a process of its own, js-step.ts).
 * The registry loads them like any model: one LoadedStep per served version,
 * wrapped in the same DynamicBatcher, wired into ensemble plans the same way.
 *
 * A backend receives the batch as the scheduler forms it (tensors shaped as
 * config.pbtxt declares them, batch dim first when max_batch_size > 0) and
 * returns every requested output with one row per input row, so the batcher
 * can split the rows back to their requests.
 *
 * This layer sits beside runtime/ (registry → backends), so it knows nothing
 * about schedulers: StepExecutor is structurally the scheduler's ModelExecutor.
 */
import type { ModelConfig } from '../config/model-config-types.js';
import { ServingError, withModel } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Tensor } from '../protocol/tensor.js';
import { loadImageStep } from './image-step.js';
import { loadJsStep } from './js-step.js';
import { loadTensorStep, TENSOR_STEP_BACKENDS } from './tensor-steps.js';
import { loadTokenizerStep } from './tokenizer-step.js';

export interface StepExecutor {
  execute(inputs: ReadonlyMap<string, Tensor>, outputNames: readonly string[]): Promise<Map<string, Tensor>>;
}

export interface LoadedStep extends StepExecutor {
  /** Give back what the step holds (a JS step's finalize()); called once, after the scheduler stopped. */
  release(): Promise<void>;
  /** True once the step is stopped for good (a JS step that kept crashing): an explicit load replaces it. */
  readonly stopped?: () => boolean;
}

export interface StepLoadContext {
  /** The validated config (backend, parameters, inputs, outputs). */
  readonly config: ModelConfig;
  /** `<model>/`: where label files and tokenizer.json live. */
  readonly modelDir: string;
  /** `<model>/<version>/`: where model.mjs lives. */
  readonly versionDir: string;
  readonly version: number;
  /** The model as messages name it. */
  readonly label: string;
  readonly logger: Logger;
  /** MME_ALLOW_JS_BACKEND. */
  readonly allowJs: boolean;
  /** MME_JS_STEP_TIMEOUT_SECONDS: a js step's call deadline where its config sets none (js-step.ts's default when undefined). */
  readonly jsTimeoutSeconds?: number;
  /** MME_JS_STEP_USER: the uid and gid a js step runs as when the server runs as root (js-step-sandbox.ts's default when undefined). */
  readonly jsStepUser?: { readonly uid: number; readonly gid: number };
}

export const IMAGE_BACKEND = 'image';
export const TOKENIZER_BACKEND = 'tokenizer';
export const JS_BACKEND = 'js';

/** Every processing-step backend name, as config.pbtxt's `backend` spells it. */
export const STEP_BACKENDS: readonly string[] = Object.freeze([IMAGE_BACKEND, TOKENIZER_BACKEND, ...TENSOR_STEP_BACKENDS, JS_BACKEND]);

export function isStepBackend(name: string): boolean {
  return STEP_BACKENDS.includes(name);
}

/**
 * Check the step's config and files and prepare it; throws INVALID_MODEL listing every problem (UNSUPPORTED for a disabled JS backend).
 * This is where a step's errors get its model's name (ctx.label), at load and on every batch: the backends throw without it.
 */
export async function loadStep(ctx: StepLoadContext): Promise<LoadedStep> {
  const step = await withModel(ctx.label, () => loadBackend(ctx));
  const { label } = ctx;
  return {
    execute: (inputs, outputNames) => withModel(label, () => step.execute(inputs, outputNames)),
    release: () => step.release(),
    ...(step.stopped === undefined ? {} : { stopped: () => step.stopped!() }),
  };
}

function loadBackend(ctx: StepLoadContext): Promise<LoadedStep> {
  const backend = ctx.config.backend;
  if (backend === IMAGE_BACKEND) return loadImageStep(ctx);
  if (backend === TOKENIZER_BACKEND) return loadTokenizerStep(ctx);
  if (backend === JS_BACKEND) return loadJsStep(ctx);
  if (TENSOR_STEP_BACKENDS.includes(backend)) return loadTensorStep(ctx);
  throw new ServingError('INVALID_MODEL', `backend '${backend}' is not a processing step (known: ${STEP_BACKENDS.join(', ')})`);
}
