/**
 * @module backends/step-support
 * What every processing step shares: reading `parameters` with every problem
 * collected (unknown keys included, so a typo is a load error rather than a
 * silently ignored setting), the load error that lists them, and small tensor
 * helpers (row counts, numeric views, output checks).
 */
import type { ModelConfig, TensorConfig } from '../config/model-config-types.js';
import { ServingError } from '../errors.js';
import { didYouMean } from '../protocol/did-you-mean.js';
import { DATA_TYPE_INFO, formatShape, type DataType, type NumericArray, type Tensor } from '../protocol/tensor.js';

/** Reads `parameters { key: "k" value: { string_value: "v" } }`, collecting problems instead of throwing. */
export class StepParameters {
  readonly problems: string[] = [];
  private readonly read = new Set<string>();

  constructor(
    private readonly values: Readonly<Record<string, string>>,
    private readonly backend: string,
  ) {}

  private raw(key: string): string | undefined {
    this.read.add(key);
    const v = this.values[key];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  }

  has(key: string): boolean {
    return this.raw(key) !== undefined;
  }

  string(key: string, fallback: string): string;
  string(key: string): string | undefined;
  string(key: string, fallback?: string): string | undefined {
    return this.raw(key) ?? fallback;
  }

  choice<T extends string>(key: string, allowed: readonly T[], fallback: T): T {
    const v = this.raw(key);
    if (v === undefined) return fallback;
    const hit = allowed.find((a) => a.toLowerCase() === v.toLowerCase());
    if (hit === undefined) this.problems.push(`parameter ${key} must be one of ${allowed.join(', ')}, got '${v}'${didYouMean(v, allowed)}`);
    return hit ?? fallback;
  }

  int(key: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
    const v = this.raw(key);
    if (v === undefined) return fallback;
    const n = Number(v);
    if (!/^[+-]?\d+$/.test(v) || !Number.isSafeInteger(n) || n < min || n > max) {
      this.problems.push(`parameter ${key} must be an integer in [${min}, ${max}], got '${v}'`);
      return fallback;
    }
    return n;
  }

  number(key: string, fallback: number, check: (n: number) => boolean = () => true, what = 'a finite number'): number {
    const v = this.raw(key);
    if (v === undefined) return fallback;
    const n = Number(v);
    if (!Number.isFinite(n) || !check(n)) {
      this.problems.push(`parameter ${key} must be ${what}, got '${v}'`);
      return fallback;
    }
    return n;
  }

  /** Comma-separated numbers, e.g. `mean: "0.485,0.456,0.406"`. */
  numbers(key: string, fallback: readonly number[]): readonly number[] {
    const v = this.raw(key);
    if (v === undefined) return fallback;
    const parts = v
      .split(/[\s,]+/)
      .filter(Boolean)
      .map(Number);
    if (parts.length === 0 || parts.some((n) => !Number.isFinite(n))) {
      this.problems.push(`parameter ${key} must be a comma-separated list of numbers, got '${v}'`);
      return fallback;
    }
    return parts;
  }

  bool(key: string, fallback: boolean): boolean {
    const v = this.raw(key);
    if (v === undefined) return fallback;
    if (/^(true|1|yes)$/i.test(v)) return true;
    if (/^(false|0|no)$/i.test(v)) return false;
    this.problems.push(`parameter ${key} must be true or false, got '${v}'`);
    return fallback;
  }

  /** Call after every read: a key nobody read is a typo or a parameter of another backend. */
  checkUnknown(): void {
    for (const key of Object.keys(this.values)) {
      if (!this.read.has(key)) {
        const known = [...this.read].sort();
        this.problems.push(`unknown parameter '${key}' for backend '${this.backend}'${didYouMean(key, known)} (known: ${known.join(', ') || 'none'})`);
      }
    }
  }
}

/** The load error of a step: every problem, one message. */
/** The load error of a step: every problem, one message (loadStep names the model). */
export function stepConfigError(backend: string, problems: readonly string[]): ServingError {
  return new ServingError('INVALID_MODEL', `backend '${backend}': ${problems.join('; ')}`);
}

export function throwIfProblems(backend: string, problems: readonly string[]): void {
  if (problems.length > 0) throw stepConfigError(backend, problems);
}

/** A batch the step cannot take (loadStep's executor names the model). */
export function invalidInput(message: string): ServingError {
  return new ServingError('INVALID_INPUT', message);
}

/** Full shape of a config tensor: the batch dim (-1) first when the model batches. */
export function configShape(t: TensorConfig, config: ModelConfig): number[] {
  return config.maxBatchSize > 0 ? [-1, ...t.dims] : [...t.dims];
}

/** Does a run-time shape fit the config's full shape (-1 = any)? */
export function fitsShape(shape: readonly number[], want: readonly number[]): boolean {
  return shape.length === want.length && shape.every((d, i) => want[i] === -1 || want[i] === d);
}

/** The tensor named `name` from a batch, or INVALID_INPUT naming it. */
export function requireInput(inputs: ReadonlyMap<string, Tensor>, name: string): Tensor {
  const t = inputs.get(name);
  if (!t) throw invalidInput(`input '${name}' is missing`);
  return t;
}

export const FLOAT_TYPES: readonly DataType[] = ['FP32', 'FP64'];
export const INDEX_TYPES: readonly DataType[] = ['INT64', 'INT32'];
export const MASK_TYPES: readonly DataType[] = ['INT64', 'INT32', 'FP32', 'FP64', 'BOOL', 'UINT8', 'INT8'];

/** Element i of a numeric tensor as a JS number (BigInt arrays converted). */
export function numberAt(data: NumericArray, i: number): number {
  const v = data[i]!;
  return typeof v === 'bigint' ? Number(v) : v;
}

/** A typed array of `datatype` holding `values` (numbers; INT64 via BigInt). */
export function typedArrayOf(datatype: DataType, length: number): NumericArray {
  const Ctor = DATA_TYPE_INFO[datatype].arrayType;
  if (!Ctor) throw new Error(`datatype ${datatype} has no typed array`);
  return new Ctor(length);
}

export function setNumber(data: NumericArray, i: number, v: number): void {
  if (data instanceof BigInt64Array || data instanceof BigUint64Array) data[i] = BigInt(Math.trunc(v));
  else data[i] = v;
}

/** Output `name` when the caller asked for it (the batcher asks for the union of its requests' outputs). */
export function wanted(outputNames: readonly string[], name: string | undefined): name is string {
  return name !== undefined && outputNames.includes(name);
}

export function describeTensor(t: TensorConfig, config: ModelConfig): string {
  return `${t.dataType} ${formatShape(configShape(t, config))}`;
}
