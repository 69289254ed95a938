/**
 * @module config/pbtxt/schema
 * A small type language for protobuf message descriptors: just enough of
 * proto3 to parse, check, default and print Triton's `inference.ModelConfig`
 * without shipping a protobuf runtime. Descriptors are plain frozen data built
 * with the helpers below, so a schema reads almost like the `.proto` it copies.
 *
 * Also here, because they are pure functions of a descriptor: the scalar
 * ranges and defaults, the JSON-form defaults (`withDefaults`) and the checked
 * decoding of a JSON-form message (`decodeJsonForm`).
 */
import { ServingError } from '../../errors.js';
import { didYouMean } from '../../protocol/did-you-mean.js';

export type ScalarType = 'string' | 'bool' | 'int32' | 'int64' | 'uint32' | 'uint64' | 'float' | 'double';
export type IntegerType = 'int32' | 'int64' | 'uint32' | 'uint64';
/** Types a proto map key may have (the subset of ScalarType that protobuf allows). */
export type MapKeyType = 'string' | 'bool' | IntegerType;

export interface EnumValue {
  readonly name: string;
  readonly number: number;
}

export interface EnumDescriptor {
  /** Dotted name inside the package, e.g. `ModelInstanceGroup.Kind`; used in errors. */
  readonly name: string;
  /** In declaration order; proto3 requires the first to be number 0 (the default). */
  readonly values: readonly EnumValue[];
}

export interface MessageDescriptor {
  /** Dotted name inside the package, e.g. `ModelWarmup.Input`; used in errors. */
  readonly name: string;
  /** In declaration order (the order the printer writes them). */
  readonly fields: readonly FieldDescriptor[];
  /** The synthetic `{ key value }` entry of a map field (integer keys are kept as exact strings). */
  readonly mapEntry?: boolean;
}

export type ValueKind =
  | { readonly type: 'scalar'; readonly scalar: ScalarType }
  | { readonly type: 'enum'; readonly enum: EnumDescriptor }
  | { readonly type: 'message'; readonly message: MessageDescriptor };

export type FieldKind = ValueKind | { readonly type: 'map'; readonly key: MapKeyType; readonly value: ValueKind };

export interface FieldDescriptor {
  /** The proto (snake_case) name: what the text format and Triton's JSON form use. */
  readonly name: string;
  readonly number: number;
  readonly kind: FieldKind;
  readonly repeated: boolean;
  /** Name of the oneof group this field belongs to, if any. */
  readonly oneof: string | undefined;
}

// ---- builders ---------------------------------------------------------------

export const scalar = (type: ScalarType): ValueKind => ({ type: 'scalar', scalar: type });
export const enumOf = (descriptor: EnumDescriptor): ValueKind => ({ type: 'enum', enum: descriptor });
export const messageOf = (descriptor: MessageDescriptor): ValueKind => ({ type: 'message', message: descriptor });
export const mapOf = (key: MapKeyType, value: ValueKind): FieldKind => ({ type: 'map', key, value });

export interface FieldOptions {
  readonly repeated?: boolean;
  readonly oneof?: string;
}

export function field(name: string, number: number, kind: FieldKind, options: FieldOptions = {}): FieldDescriptor {
  return Object.freeze({ name, number, kind, repeated: options.repeated ?? false, oneof: options.oneof });
}

/** Shorthand for a `repeated` field. */
export function repeated(name: string, number: number, kind: ValueKind): FieldDescriptor {
  return field(name, number, kind, { repeated: true });
}

export function defineEnum(name: string, values: Readonly<Record<string, number>>): EnumDescriptor {
  return Object.freeze({
    name,
    values: Object.freeze(Object.entries(values).map(([n, v]) => Object.freeze({ name: n, number: v }))),
  });
}

export function defineMessage(name: string, fields: readonly FieldDescriptor[], mapEntry = false): MessageDescriptor {
  const seen = new Set<string>();
  for (const f of fields) {
    // A typo here would silently shadow a field, so fail at module load.
    if (seen.has(f.name)) throw new Error(`duplicate field '${f.name}' in message ${name}`);
    seen.add(f.name);
  }
  return Object.freeze({ name, fields: Object.freeze([...fields]), ...(mapEntry ? { mapEntry } : {}) });
}

// ---- lookups ----------------------------------------------------------------

const fieldIndex = new WeakMap<MessageDescriptor, ReadonlyMap<string, FieldDescriptor>>();

/** The field called `name` (proto name) in `message`, or undefined. */
export function findField(message: MessageDescriptor, name: string): FieldDescriptor | undefined {
  let index = fieldIndex.get(message);
  if (index === undefined) {
    index = new Map(message.fields.map((f) => [f.name, f]));
    fieldIndex.set(message, index);
  }
  return index.get(name);
}

export function enumValueByName(descriptor: EnumDescriptor, name: string): EnumValue | undefined {
  return descriptor.values.find((v) => v.name === name);
}

export function enumValueByNumber(descriptor: EnumDescriptor, number: number): EnumValue | undefined {
  return descriptor.values.find((v) => v.number === number);
}

/** The synthetic `{ key, value }` message a map field is made of in the text format. */
const mapEntries = new WeakMap<FieldDescriptor, MessageDescriptor>();
export function mapEntryDescriptor(owner: MessageDescriptor, mapField: FieldDescriptor): MessageDescriptor {
  if (mapField.kind.type !== 'map') throw new Error(`field '${mapField.name}' is not a map`);
  let entry = mapEntries.get(mapField);
  if (entry === undefined) {
    entry = defineMessage(
      `${owner.name}.${pascalCase(mapField.name)}Entry`,
      [field('key', 1, scalar(mapField.kind.key)), field('value', 2, mapField.kind.value)],
      true,
    );
    mapEntries.set(mapField, entry);
  }
  return entry;
}

function pascalCase(name: string): string {
  return name.replace(/(^|_)([a-z])/g, (_m, _u: string, c: string) => c.toUpperCase());
}

/** lowerCamelCase JSON name of a proto field name (`max_batch_size` → `maxBatchSize`). */
export function jsonName(protoName: string): string {
  return protoName.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

export function describeKind(kind: FieldKind): string {
  switch (kind.type) {
    case 'scalar':
      return kind.scalar;
    case 'enum':
      return `enum ${kind.enum.name}`;
    case 'message':
      return `message ${kind.message.name}`;
    case 'map':
      return `map<${kind.key}, ${describeKind(kind.value)}>`;
  }
}

// ---- scalar ranges and defaults --------------------------------------------

export const INTEGER_RANGES: Readonly<Record<IntegerType, readonly [bigint, bigint]>> = {
  int32: [-(2n ** 31n), 2n ** 31n - 1n],
  uint32: [0n, 2n ** 32n - 1n],
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64: [0n, 2n ** 64n - 1n],
};

export function isIntegerType(type: ScalarType | MapKeyType): type is IntegerType {
  return type === 'int32' || type === 'int64' || type === 'uint32' || type === 'uint64';
}

/**
 * Why the exact integer `value` does not fit `type`, or undefined when it fits.
 * 64-bit values beyond 2^53 are accepted and become the nearest JS number, as
 * Triton's JSON form prints them (e.g. `priority_levels: 18446744073709551615`
 * in Triton's own tests); `printInteger` writes them back in range.
 */
export function integerProblem(value: bigint, type: IntegerType): string | undefined {
  const [min, max] = INTEGER_RANGES[type];
  return value < min || value > max ? `value ${value} is out of range [${min}, ${max}]` : undefined;
}

/** Same check for a JS number, which may be the rounded image of a 64-bit extreme (2^64-1 → 2^64). */
function numberFits(value: number, type: IntegerType): boolean {
  const [min, max] = INTEGER_RANGES[type];
  return Number.isInteger(value) && value >= Number(min) && value <= Number(max);
}

/** Decimal text of an integer field value, clamped into the type (undoes the rounding of 64-bit extremes). */
export function printInteger(value: number, type: IntegerType): string {
  const [min, max] = INTEGER_RANGES[type];
  const exact = BigInt(value);
  return String(exact > max ? max : exact < min ? min : exact);
}

/** Protobuf JSON spells non-finite floats as strings. */
export function jsonFloat(value: number): number | string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return 'Infinity';
  if (value === -Infinity) return '-Infinity';
  return value;
}

/** The proto3 default of a non-message value, in JSON form. */
export function defaultValue(kind: ValueKind): unknown {
  switch (kind.type) {
    case 'scalar':
      if (kind.scalar === 'string') return '';
      if (kind.scalar === 'bool') return false;
      return 0;
    case 'enum':
      return kind.enum.values[0]?.name ?? 0;
    case 'message':
      return withDefaults({}, kind.message);
  }
}

/**
 * A copy of `json` (a message in JSON form) with every field that has no
 * presence printed at its default, recursively: protobuf's JSON printer with
 * `always_print_primitive_fields`, as Triton prints configs. Scalars and enums
 * get their zero value, repeated fields `[]`, maps `{}`. Message fields and
 * oneof members stay absent when absent, because their presence means something.
 * Values are assumed already checked (see `decodeJsonForm`).
 */
export function withDefaults(json: Readonly<Record<string, unknown>>, message: MessageDescriptor): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of message.fields) {
    const value = json[f.name];
    if (value === undefined) {
      if (f.oneof !== undefined) continue;
      if (f.kind.type === 'map') out[f.name] = {};
      else if (f.repeated) out[f.name] = [];
      else if (f.kind.type !== 'message') out[f.name] = defaultValue(f.kind);
      continue;
    }
    out[f.name] = defaultsInValue(value, f);
  }
  return out;
}

function defaultsInValue(value: unknown, f: FieldDescriptor): unknown {
  const kind = f.kind;
  if (kind.type === 'map') {
    if (kind.value.type !== 'message') return { ...(value as Record<string, unknown>) };
    const inner = kind.value.message;
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, withDefaults(v as Record<string, unknown>, inner)]));
  }
  if (kind.type === 'message') {
    const inner = kind.message;
    if (f.repeated) return (value as Record<string, unknown>[]).map((v) => withDefaults(v, inner));
    return withDefaults(value as Record<string, unknown>, inner);
  }
  return f.repeated ? [...(value as unknown[])] : value;
}

// ---- checked decoding of the JSON form --------------------------------------

/**
 * Checks `json` against `root` as protobuf's JSON parser does for Triton
 * (`JsonToModelConfig`: unknown fields are errors, enum names are
 * case-insensitive) and returns the canonical JSON form: proto field names
 * (lowerCamelCase names are accepted too), enums as names, 64-bit integers as
 * numbers (decimal strings accepted), `null` as absent, defaults printed.
 * Every problem is collected into one ServingError('INVALID_MODEL').
 */
export function decodeJsonForm(json: unknown, root: MessageDescriptor, sourceName: string): Record<string, unknown> {
  const problems: string[] = [];
  const decoded = decodeMessage(json, root, '', problems);
  if (problems.length > 0) throw new ServingError('INVALID_MODEL', `${sourceName}: ${problems.join('; ')}`);
  return withDefaults(decoded ?? {}, root);
}

const jsonNameIndex = new WeakMap<MessageDescriptor, ReadonlyMap<string, FieldDescriptor>>();

function findFieldByAnyName(message: MessageDescriptor, name: string): FieldDescriptor | undefined {
  const direct = findField(message, name);
  if (direct !== undefined) return direct;
  let index = jsonNameIndex.get(message);
  if (index === undefined) {
    index = new Map(message.fields.map((f) => [jsonName(f.name), f]));
    jsonNameIndex.set(message, index);
  }
  return index.get(name);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describeJson(value: unknown): string {
  if (Array.isArray(value)) return 'an array';
  if (value === null) return 'null';
  if (typeof value === 'object') return 'an object';
  const text = JSON.stringify(value) ?? String(value);
  return `${typeof value} ${text.length > 40 ? `${text.slice(0, 37)}...` : text}`;
}

const at = (path: string): string => (path === '' ? '' : `${path}: `);

function decodeMessage(value: unknown, message: MessageDescriptor, path: string, problems: string[]): Record<string, unknown> | undefined {
  if (!isPlainObject(value)) {
    problems.push(`${at(path)}expected an object (message ${message.name}), found ${describeJson(value)}`);
    return undefined;
  }
  const out: Record<string, unknown> = {};
  const oneofs = new Map<string, string>();
  for (const [key, raw] of Object.entries(value)) {
    const fieldPath = path === '' ? key : `${path}.${key}`;
    const f = findFieldByAnyName(message, key);
    if (f === undefined) {
      problems.push(`${fieldPath}: unknown field '${key}' in message ${message.name}${fieldHint(key, message)}`);
      continue;
    }
    // null is protobuf JSON's way of saying "not set".
    if (raw === null || raw === undefined) continue;
    if (f.name in out) {
      problems.push(`${fieldPath}: field '${f.name}' is given twice (as '${f.name}' and '${jsonName(f.name)}')`);
      continue;
    }
    if (f.oneof !== undefined) {
      const other = oneofs.get(f.oneof);
      if (other !== undefined) {
        problems.push(`${fieldPath}: field '${f.name}' is specified along with field '${other}', another member of oneof '${f.oneof}'`);
        continue;
      }
      oneofs.set(f.oneof, f.name);
    }
    const decoded = decodeField(raw, f, fieldPath, problems);
    if (decoded !== undefined) out[f.name] = decoded;
  }
  return out;
}

function decodeField(raw: unknown, f: FieldDescriptor, path: string, problems: string[]): unknown {
  const kind = f.kind;
  if (kind.type === 'map') {
    if (!isPlainObject(raw)) {
      problems.push(`${path}: expected an object (${describeKind(kind)}), found ${describeJson(raw)}`);
      return undefined;
    }
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(raw)) {
      const entryPath = `${path}[${JSON.stringify(k)}]`;
      const key = decodeMapKey(k, kind.key);
      if (key === undefined) {
        problems.push(`${entryPath}: map key ${JSON.stringify(k)} is not a valid ${kind.key}`);
        continue;
      }
      const value = v === null ? defaultValue(kind.value) : decodeValue(v, kind.value, entryPath, problems);
      if (value !== undefined) out[key] = value;
    }
    return out;
  }
  if (f.repeated) {
    if (!Array.isArray(raw)) {
      problems.push(`${path}: expected an array (repeated ${describeKind(kind)}), found ${describeJson(raw)}`);
      return undefined;
    }
    const out: unknown[] = [];
    raw.forEach((item: unknown, i) => {
      const value = decodeValue(item, kind, `${path}[${i}]`, problems);
      if (value !== undefined) out.push(value);
    });
    return out;
  }
  return decodeValue(raw, kind, path, problems);
}

function decodeMapKey(key: string, type: MapKeyType): string | undefined {
  if (type === 'string') return key;
  if (type === 'bool') return key === 'true' || key === 'false' ? key : undefined;
  if (!/^-?[0-9]+$/.test(key)) return undefined;
  const value = BigInt(key);
  return integerProblem(value, type) === undefined ? String(value) : undefined;
}

function decodeValue(raw: unknown, kind: ValueKind, path: string, problems: string[]): unknown {
  if (kind.type === 'message') return decodeMessage(raw, kind.message, path, problems);
  if (kind.type === 'enum') {
    const found = decodeEnum(raw, kind.enum);
    if (found === undefined) {
      const hint = typeof raw === 'string' ? enumHint(raw, kind.enum) : ` (expected one of ${kind.enum.values.map((v) => v.name).join(', ')})`;
      problems.push(`${path}: ${describeJson(raw)} is not a value of enum ${kind.enum.name}${hint}`);
    }
    return found;
  }
  const value = decodeScalar(raw, kind.scalar);
  if (typeof value === 'object') {
    problems.push(`${path}: ${value.problem}`);
    return undefined;
  }
  return value;
}

/** Enum by exact name, by name ignoring case (Triton's case_insensitive_enum_parsing), or by number. */
function decodeEnum(raw: unknown, descriptor: EnumDescriptor): string | undefined {
  if (typeof raw === 'string') {
    return (enumValueByName(descriptor, raw) ?? descriptor.values.find((v) => v.name.toUpperCase() === raw.toUpperCase()))?.name;
  }
  if (typeof raw === 'number' && Number.isInteger(raw)) return enumValueByNumber(descriptor, raw)?.name;
  return undefined;
}

function decodeScalar(raw: unknown, type: ScalarType): string | number | boolean | { problem: string } {
  switch (type) {
    case 'string':
      return typeof raw === 'string' ? raw : { problem: `expected a string, found ${describeJson(raw)}` };
    case 'bool':
      return typeof raw === 'boolean' ? raw : { problem: `expected a boolean, found ${describeJson(raw)}` };
    case 'float':
    case 'double': {
      if (typeof raw === 'number') return raw;
      if (raw === 'NaN' || raw === 'Infinity' || raw === '-Infinity') return raw;
      if (typeof raw === 'string' && raw.trim() !== '' && Number.isFinite(Number(raw))) return Number(raw);
      return { problem: `expected a number, found ${describeJson(raw)}` };
    }
    default: {
      if (typeof raw === 'number' && Number.isInteger(raw)) {
        return numberFits(raw, type) ? raw : { problem: `value ${raw} is out of range for ${type}` };
      }
      if (typeof raw === 'string' && /^-?[0-9]+$/.test(raw)) {
        const problem = integerProblem(BigInt(raw), type);
        return problem === undefined ? Number(raw) : { problem: `${problem} for ${type}` };
      }
      return { problem: `expected an integer (${type}), found ${describeJson(raw)}` };
    }
  }
}

/** `; did you mean 'max_batch_size'?` for a misspelt field (the fields are too many to list). */
export function fieldHint(name: string, message: MessageDescriptor): string {
  return didYouMean(
    name,
    message.fields.map((f) => f.name),
  );
}

/** `; did you mean 'TYPE_FP32'? (expected one of …)` for an unknown enum name. */
export function enumHint(name: string, descriptor: EnumDescriptor): string {
  return didYouMean(
    name,
    descriptor.values.map((v) => v.name),
    { list: true },
  );
}
