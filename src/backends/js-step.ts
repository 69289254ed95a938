/**
 * @module backends/js-step
 * `backend: "js"`: a step written in JavaScript, for what the built-in steps
 * do not cover. `<model>/<version>/model.mjs` (or `default_model_filename`)
 * is imported into this process and exports
 *
 *   export async function initialize(args)   // optional, once per version at load
 *   export async function execute(batch)     // required, once per batch
 *   export async function finalize()         // optional, once at unload
 *
 * `args` = { config (the effective config.pbtxt, Triton's JSON form),
 * parameters, modelDir, versionDir, version }. `batch` = { inputs: { name:
 * { datatype, shape, data } }, outputs: [requested names], rows }, tensors
 * shaped as the config declares them (batch dim first when max_batch_size > 0)
 * with typed-array data (BigInt64Array for INT64, string[] for BYTES). It
 * returns { name: { datatype, shape, data } } (or a Map) with every requested
 * output, one row per input row; `data` may be a typed array of the declared
 * datatype or a plain array of numbers (converted).
 *
 * The returned tensors are checked against the config (datatype, shape,
 * element count, rows) before anything else sees them. A throwing execute()
 * fails its batch only (the batcher then re-runs the requests one by one, so
 * only the request that makes it throw fails); an error with a `code` of
 * 'INVALID_INPUT' becomes a 400, anything else a 500 naming the model.
 *
 * Security: the code runs in the server process with the container's rights
 * (files, network, environment, other models' data). MME_ALLOW_JS_BACKEND=false
 * refuses every package that has a js step.
 */
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { TensorConfig } from '../config/model-config-types.js';
import { ERROR_CODES, ServingError, type ErrorCode } from '../errors.js';
import { DATA_TYPE_INFO, elementCount, formatShape, isDataType, type Tensor, type TensorData } from '../protocol/tensor.js';
import type { LoadedStep, StepLoadContext } from './step-backend.js';
import { configShape, fitsShape } from './step-support.js';

export const DEFAULT_JS_FILENAME = 'model.mjs';

interface JsModule {
  readonly initialize?: (args: unknown) => unknown;
  readonly execute?: (batch: unknown) => unknown;
  readonly finalize?: () => unknown;
}

/** Each load imports a fresh module instance: a reloaded model never sees its predecessor's module state. */
let loadCounter = 0;

function failure(label: string, what: string, err: unknown, fallback: ErrorCode): ServingError {
  const message = err instanceof Error ? err.message : String(err);
  const code = (err as { code?: unknown } | null)?.code;
  const chosen: ErrorCode = typeof code === 'string' && (ERROR_CODES as readonly string[]).includes(code) ? (code as ErrorCode) : fallback;
  return new ServingError(chosen, `model '${label}': ${what}: ${message}`, { model: label, cause: err });
}

export async function loadJsStep(ctx: StepLoadContext): Promise<LoadedStep> {
  const { config, label } = ctx;
  if (!ctx.allowJs) {
    throw new ServingError('UNSUPPORTED', `model '${label}': the js backend is disabled on this server (MME_ALLOW_JS_BACKEND=false)`, { model: label });
  }
  const fileName = config.defaultModelFilename || DEFAULT_JS_FILENAME;
  const file = path.join(ctx.versionDir, fileName);
  if (path.relative(ctx.versionDir, file).startsWith('..')) {
    throw new ServingError('INVALID_MODEL', `model '${label}': default_model_filename '${fileName}' leaves the version directory`, { model: label });
  }
  const isFile = await stat(file).then((s) => s.isFile(), () => false);
  if (!isFile) throw new ServingError('INVALID_MODEL', `model '${label}': version ${ctx.version} has no ${fileName}`, { model: label });
  let mod: JsModule;
  try {
    mod = (await import(`${pathToFileURL(file).href}?load=${++loadCounter}`)) as JsModule;
  } catch (err) {
    throw failure(label, `${fileName} cannot be imported`, err, 'INVALID_MODEL');
  }
  if (typeof mod.execute !== 'function') throw new ServingError('INVALID_MODEL', `model '${label}': ${fileName} does not export an execute(batch) function`, { model: label });
  for (const name of ['initialize', 'finalize'] as const) {
    if (mod[name] !== undefined && typeof mod[name] !== 'function') {
      throw new ServingError('INVALID_MODEL', `model '${label}': ${fileName} exports ${name} but it is not a function`, { model: label });
    }
  }
  if (mod.initialize) {
    try {
      await mod.initialize({
        config: structuredClone(config.json),
        parameters: { ...config.parameters },
        modelDir: ctx.modelDir,
        versionDir: ctx.versionDir,
        version: ctx.version,
      });
    } catch (err) {
      throw failure(label, 'initialize() failed', err, 'INVALID_MODEL');
    }
  }
  const execute = mod.execute.bind(mod);
  const outputs = new Map(config.output.map((o) => [o.name, o]));
  const batching = config.maxBatchSize > 0;
  let released: Promise<void> | undefined;

  return {
    release: () =>
      (released ??= (async () => {
        try {
          await mod.finalize?.();
        } catch (err) {
          ctx.logger.warn({ model: label, err: (err as Error).message }, 'js step finalize() failed');
        }
      })()),
    execute: async (inputs, outputNames) => {
      const rows = batching ? (inputs.values().next().value?.shape[0] ?? 0) : 1;
      const batch = { inputs: Object.fromEntries(inputs), outputs: [...outputNames], rows };
      let returned: unknown;
      try {
        returned = await execute(batch);
      } catch (err) {
        throw failure(label, 'execute() failed', err, 'INTERNAL');
      }
      const entries = returned instanceof Map ? [...(returned as Map<string, unknown>)] : returned !== null && typeof returned === 'object' ? Object.entries(returned) : undefined;
      if (!entries) throw new ServingError('INTERNAL', `model '${label}': execute() must return an object of output tensors, got ${returned === null ? 'null' : typeof returned}`, { model: label });
      const byName = new Map(entries);
      const result = new Map<string, Tensor>();
      for (const name of outputNames) {
        const cfg = outputs.get(name);
        if (!cfg) continue;
        if (!byName.has(name)) throw new ServingError('INTERNAL', `model '${label}': execute() did not return output '${name}'`, { model: label });
        result.set(name, checkOutput(byName.get(name), cfg, configShape(cfg, config), batching ? rows : undefined, label));
      }
      return result;
    },
  };
}

/** A returned tensor, checked against its config and converted to the server's representation. */
function checkOutput(value: unknown, cfg: TensorConfig, want: readonly number[], rows: number | undefined, label: string): Tensor {
  const bad = (why: string): ServingError => new ServingError('INTERNAL', `model '${label}': execute() returned output '${cfg.name}' ${why}`, { model: label });
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
  if (!data) throw bad(`with data that is neither a ${datatype === 'BYTES' ? 'string array' : `${DATA_TYPE_INFO[datatype].arrayType?.name ?? 'typed array'} nor an array of numbers`}`);
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
