/**
 * @module backends/js-step
 * `backend: "js"`: a step written in JavaScript, for what the built-in steps
 * do not cover. `<model>/<version>/model.mjs` (or `default_model_filename`)
 * runs in a process of its own, one per loaded version (js-step-host.ts,
 * sandboxed by js-step-sandbox.ts, supervised by js-step-worker.ts), and
 * exports
 *
 *   export async function initialize(args)   // optional, once per version at load
 *   export async function execute(batch)     // required, once per batch
 *   export async function finalize()         // optional, once at unload
 *
 * `args` = { config (the effective config.pbtxt, Triton's JSON form),
 * parameters, modelDir, versionDir, version, scratchDir (the one directory
 * it may write) }. `batch` = { inputs: { name:
 * { datatype, shape, data } }, outputs: [requested names], rows }, tensors
 * shaped as the config declares them (batch dim first when max_batch_size > 0)
 * with typed-array data (BigInt64Array for INT64, string[] for BYTES). It
 * returns { name: { datatype, shape, data } } (or a Map) with every requested
 * output, one row per input row; `data` may be a typed array of the declared
 * datatype or a plain array of numbers (converted).
 *
 * The returned tensors are checked against the config (datatype, shape,
 * element count, rows) here, on the main thread, before anything else sees
 * them. A throwing execute() fails its batch only (the batcher then re-runs
 * the requests one by one, so only the request that makes it throw fails);
 * an error with a `code` of 'INVALID_INPUT' becomes a 400, anything else a
 * 500 naming the model.
 *
 * Why a process: the step's faults and its code must not be the server's.
 * An exception thrown from a timer or an unhandled rejection would end the
 * server, an endless loop would freeze it (/ping included), and its code
 * could read the server's environment and memory, signal it, and read or
 * write other models' files. In its own process, the first ends that
 * process (the batch in flight fails with a 500 naming the
 * model and the error), the second is stopped by the call deadline
 * (`js_timeout_seconds` or MME_JS_STEP_TIMEOUT_SECONDS: 504, and the batch
 * is not re-run request by request, which would wait the deadline once per
 * request); either way a fresh worker is started (import + initialize()),
 * and a step that keeps failing is stopped (js-step-worker.ts); what it may
 * touch is limited by its sandbox (js-step-sandbox.ts). The cost is one
 * frame each way per batch over a socket pair, the tensors as raw bytes
 * (js-step-frames.ts; bench/js-step.bench.ts measures it).
 * MME_ALLOW_JS_BACKEND=false refuses every package that has a js step.
 */
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { TensorConfig } from '../config/model-config-types.js';
import { ERROR_CODES, inModel, ServingError, withModelSync, type ErrorCode } from '../errors.js';
import { DATA_TYPE_INFO, elementCount, formatShape, isDataType, type Tensor, type TensorData } from '../protocol/tensor.js';
import { describeError, type JsStepError } from './js-step-protocol.js';
import { DEFAULT_JS_HEAP_LIMIT_MB, prepareSandbox, SandboxError, type Sandbox } from './js-step-sandbox.js';
import { JsCallFailure, JsLoadFailure, JsStepWorker } from './js-step-worker.js';
import type { LoadedStep, StepLoadContext } from './step-backend.js';
import { configShape, fitsShape } from './step-support.js';

export const DEFAULT_JS_FILENAME = 'model.mjs';
/** The config `parameters` key that sets a step's call deadline in seconds (MME_JS_STEP_TIMEOUT_SECONDS otherwise). */
export const JS_TIMEOUT_PARAMETER = 'js_timeout_seconds';
/** The call deadline when neither the config nor the server sets one. */
export const DEFAULT_JS_TIMEOUT_SECONDS = 30;
export const MAX_JS_TIMEOUT_SECONDS = 3600;
/** The config `parameters` key that caps a step's heap in MiB, and sizes its memory bound (DEFAULT_JS_HEAP_LIMIT_MB otherwise). */
export const JS_HEAP_PARAMETER = 'js_heap_limit_mb';

/** What the step's own code threw or reported, as an error (its code where it chose one of ours); the caller names the model (inModel). */
function failure(what: string, err: JsStepError | undefined, fallback: ErrorCode, cause?: unknown): ServingError {
  const chosen: ErrorCode = err?.code !== undefined && (ERROR_CODES as readonly string[]).includes(err.code) ? (err.code as ErrorCode) : fallback;
  return new ServingError(chosen, `${what}${err ? `: ${err.message}` : ''}`, { cause });
}

/**
 * The error with every mention of the model's directory on this host cut
 * away, so files are named within the package (`1/model.mjs`): node's
 * import and filesystem errors carry absolute paths and file URLs of the
 * cache, and messages reach clients.
 */
function withinPackage(err: ServingError, ...modelDirs: string[]): ServingError {
  let message = err.message;
  for (const modelDir of modelDirs) {
    const dir = modelDir.replace(/\/+$/, '');
    const url = pathToFileURL(dir).href;
    for (const prefix of [`${url}/`, `${dir}/`]) message = message.split(prefix).join('');
    for (const whole of [url, dir]) message = message.split(whole).join('.');
  }
  if (message === err.message) return err;
  return new ServingError(err.code, message, {
    cause: err.cause ?? err,
    ...(err.model === undefined ? {} : { model: err.model }),
    ...(err.details === undefined ? {} : { details: err.details }),
  });
}

/** The step's call deadline in ms: its config's `js_timeout_seconds`, else the server's. */
function timeoutMs(ctx: StepLoadContext): number {
  const raw = ctx.config.parameters[JS_TIMEOUT_PARAMETER];
  if (raw === undefined) return (ctx.jsTimeoutSeconds ?? DEFAULT_JS_TIMEOUT_SECONDS) * 1000;
  const value = raw.trim() === '' ? Number.NaN : Number(raw);
  if (!(value > 0 && value <= MAX_JS_TIMEOUT_SECONDS)) {
    throw new ServingError(
      'INVALID_MODEL',
      `model '${ctx.label}': parameter ${JS_TIMEOUT_PARAMETER} must be a number of seconds above 0 and at most ${MAX_JS_TIMEOUT_SECONDS}, got '${raw}'`,
      {
        model: ctx.label,
      },
    );
  }
  return value * 1000;
}

/** `js_heap_limit_mb`: the step's old-generation heap limit, DEFAULT_JS_HEAP_LIMIT_MB when the config sets none. */
function heapLimitMb(ctx: StepLoadContext): number {
  const raw = ctx.config.parameters[JS_HEAP_PARAMETER];
  if (raw === undefined) return DEFAULT_JS_HEAP_LIMIT_MB;
  const value = /^\s*\d+\s*$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(value >= 16 && value <= 1 << 20)) {
    throw new ServingError('INVALID_MODEL', `model '${ctx.label}': parameter ${JS_HEAP_PARAMETER} must be a whole number of MiB from 16, got '${raw}'`, {
      model: ctx.label,
    });
  }
  return value;
}

/** The step's file name in its version directory (`default_model_filename` or model.mjs); refused when it leaves it. */
function stepFileName(ctx: StepLoadContext): string {
  const { config, label } = ctx;
  const fileName = config.defaultModelFilename || DEFAULT_JS_FILENAME;
  if (path.relative(ctx.versionDir, path.join(ctx.versionDir, fileName)).startsWith('..')) {
    throw new ServingError('INVALID_MODEL', `model '${label}': default_model_filename '${fileName}' leaves the version directory`, { model: label });
  }
  return fileName;
}

async function requireFile(ctx: StepLoadContext, fileName: string): Promise<void> {
  const isFile = await stat(path.join(ctx.versionDir, fileName)).then(
    (s) => s.isFile(),
    () => false,
  );
  if (!isFile) throw new ServingError('INVALID_MODEL', `model '${ctx.label}': version ${ctx.version} has no ${fileName}`, { model: ctx.label });
}

/** The step's sandbox, or the load's error (a SandboxError's message, else a pointer to the log: no host path). */
async function sandboxFor(ctx: StepLoadContext, heapMb: number): Promise<Sandbox> {
  const { label } = ctx;
  try {
    return await prepareSandbox({ modelDir: ctx.modelDir, heapLimitMb: heapMb, ...(ctx.jsStepUser ? { user: ctx.jsStepUser } : {}) });
  } catch (err) {
    ctx.logger.error({ model: label, err: (err as Error).message }, 'js step sandbox could not be prepared');
    const why = err instanceof SandboxError ? err.message : 'its sandbox could not be prepared (the server log says why)';
    throw new ServingError('INVALID_MODEL', `model '${label}': ${why}`, { model: label, cause: err });
  }
}

/** The step's worker, started (import + initialize() done), or the load's error with the sandbox removed. */
interface WorkerPlan {
  readonly fileName: string;
  readonly deadlineMs: number;
  readonly heapMb: number;
  /** The directories messages must not name (withinPackage). */
  readonly dirs: readonly string[];
}

async function startWorker(ctx: StepLoadContext, sandbox: Sandbox, plan: WorkerPlan): Promise<JsStepWorker> {
  const { fileName, heapMb, dirs } = plan;
  const { config, label } = ctx;
  const inSandbox = path.join(sandbox.modelDir, path.relative(ctx.modelDir, ctx.versionDir));
  const worker = new JsStepWorker({
    label,
    timeoutMs: plan.deadlineMs,
    heapLimitMb: heapMb,
    sandbox,
    logger: ctx.logger,
    hostData: {
      url: pathToFileURL(path.join(inSandbox, fileName)).href,
      fileName,
      initArgs: {
        config: config.json,
        parameters: { ...config.parameters },
        modelDir: sandbox.modelDir,
        versionDir: inSandbox,
        version: ctx.version,
        scratchDir: sandbox.scratchDir,
      },
    },
  });
  try {
    await worker.started();
    return worker;
  } catch (err) {
    await sandbox.remove();
    if (err instanceof JsLoadFailure) throw withinPackage(inModel(failure(err.what, err.error, 'INVALID_MODEL', err), label), ...dirs);
    // It crashed while loading (an exception from a timer in initialize(), …): the package's fault.
    throw withinPackage(new ServingError('INVALID_MODEL', `${(err as Error).message} (while loading)`, { model: label, cause: err }), ...dirs);
  }
}

export async function loadJsStep(ctx: StepLoadContext): Promise<LoadedStep> {
  const { config, label } = ctx;
  if (!ctx.allowJs) {
    throw new ServingError('UNSUPPORTED', `model '${label}': the js backend is disabled on this server (MME_ALLOW_JS_BACKEND=false)`, { model: label });
  }
  const fileName = stepFileName(ctx);
  const deadlineMs = timeoutMs(ctx);
  const heapMb = heapLimitMb(ctx);
  await requireFile(ctx, fileName);
  const sandbox = await sandboxFor(ctx, heapMb);
  const dirs = [sandbox.modelDir, ctx.modelDir, sandbox.scratchDir];
  const worker = await startWorker(ctx, sandbox, { fileName, deadlineMs, heapMb, dirs });
  const outputs = new Map(config.output.map((o) => [o.name, o]));
  const batching = config.maxBatchSize > 0;
  let released: Promise<void> | undefined;

  return {
    release: () => (released ??= worker.close().finally(() => sandbox.remove())),
    stopped: () => worker.stopped,
    execute: async (inputs, outputNames) => {
      const rows = batching ? (inputs.values().next().value?.shape[0] ?? 0) : 1;
      // Written to the step as they are (a request's tensors are never changed: a failed batch re-runs each request alone).
      const batchInputs: Record<string, Tensor> = {};
      for (const [name, t] of inputs) batchInputs[name] = { datatype: t.datatype, shape: t.shape, data: t.data };
      let returned: unknown;
      try {
        returned = await worker.execute({ inputs: batchInputs, outputs: [...outputNames], rows });
      } catch (err) {
        if (err instanceof JsCallFailure) throw withinPackage(inModel(failure(err.what, err.error, 'INTERNAL', err), label), ...dirs);
        if (err instanceof ServingError) throw withinPackage(err, ...dirs);
        throw withinPackage(inModel(failure('execute() failed', describeError(err), 'INTERNAL', err), label), ...dirs);
      }
      // The output checks throw without the model's name; it is added here, once.
      return withModelSync(label, () => checkOutputs(returned, outputNames, outputs, config, batching ? rows : undefined));
    },
  };
}

/** What execute() returned, checked against the config: the requested outputs in the server's representation. */
function checkOutputs(
  returned: unknown,
  outputNames: readonly string[],
  outputs: ReadonlyMap<string, TensorConfig>,
  config: StepLoadContext['config'],
  rows: number | undefined,
): Map<string, Tensor> {
  const entries =
    returned instanceof Map
      ? [...(returned as Map<string, unknown>)]
      : returned !== null && typeof returned === 'object'
        ? Object.entries(returned)
        : undefined;
  if (!entries) throw new ServingError('INTERNAL', `execute() must return an object of output tensors, got ${returned === null ? 'null' : typeof returned}`);
  const byName = new Map(entries);
  const result = new Map<string, Tensor>();
  for (const name of outputNames) {
    const cfg = outputs.get(name);
    if (!cfg) continue;
    if (!byName.has(name)) throw new ServingError('INTERNAL', `execute() did not return output '${name}'`);
    result.set(name, checkOutput(byName.get(name), cfg, configShape(cfg, config), rows));
  }
  return result;
}

/** A returned tensor, checked against its config and converted to the server's representation. */
function checkOutput(value: unknown, cfg: TensorConfig, want: readonly number[], rows: number | undefined): Tensor {
  const bad = (why: string): ServingError => new ServingError('INTERNAL', `execute() returned output '${cfg.name}' ${why}`);
  if (value === null || typeof value !== 'object') throw bad(`as ${typeof value}, not { datatype, shape, data }`);
  const t = value as { datatype?: unknown; shape?: unknown; data?: unknown };
  const datatype = t.datatype ?? cfg.dataType;
  if (!isDataType(datatype) || datatype !== cfg.dataType) throw bad(`with datatype ${String(datatype)}, but the config declares ${cfg.dataType}`);
  if (!Array.isArray(t.shape) || t.shape.some((d) => !Number.isSafeInteger(d) || d < 0)) throw bad('without a valid shape (an array of non-negative integers)');
  const shape = t.shape as number[];
  if (!fitsShape(shape, want)) throw bad(`with shape ${formatShape(shape)}, but the config declares ${formatShape(want)}`);
  if (rows !== undefined && shape[0] !== rows) throw bad(`with ${shape[0]} rows for a batch of ${rows}`);
  const count = elementCount(shape);
  const data = toData(t.data, datatype);
  if (!data)
    throw bad(
      `with data that is neither a ${datatype === 'BYTES' ? 'string array' : `${DATA_TYPE_INFO[datatype].arrayType?.name ?? 'typed array'} nor an array of numbers`}`,
    );
  if (data.length !== count) throw bad(`with ${data.length} elements for shape ${formatShape(shape)} (${count})`);
  return { datatype, shape, data };
}

function toData(data: unknown, datatype: Tensor['datatype']): TensorData | undefined {
  const Ctor = DATA_TYPE_INFO[datatype].arrayType;
  if (!Ctor) return Array.isArray(data) && data.every((s) => typeof s === 'string') ? (data as string[]) : undefined;
  if (data instanceof Ctor) return data;
  if (!Array.isArray(data)) return undefined;
  const out = new Ctor(data.length);
  const big = out instanceof BigInt64Array || out instanceof BigUint64Array;
  for (let i = 0; i < data.length; i++) {
    const v: unknown = data[i];
    if (typeof v !== 'bigint' && typeof v !== 'number' && typeof v !== 'boolean') return undefined;
    if (big) {
      if (typeof v !== 'bigint' && !Number.isFinite(Number(v))) return undefined;
      (out as BigInt64Array | BigUint64Array)[i] = typeof v === 'bigint' ? v : BigInt(Math.trunc(Number(v)));
    } else {
      (out as Float64Array)[i] = Number(v);
    }
  }
  return out;
}
