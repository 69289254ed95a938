/**
 * @module registry/managed-records
 * What SageMaker loaded with POST /models: its list (GET /models), each
 * model's directory, target header and versions. A record outlives page-outs
 * of its sessions (the LRU may release them; the next invoke loads them
 * again from the directory), and goes only with DELETE /models/{name}. The
 * sessions themselves are entries of the lifecycle core (registry/lifecycle.ts),
 * made by registry/managed-models.ts.
 */
import { ServingError } from '../errors.js';
import { NON_PRINTABLE } from '../store/target-path.js';
import type { EntryState } from './lifecycle.js';
import { SortedNames } from './sorted-names.js';

export interface ManagedModelInfo {
  readonly modelName: string;
  readonly modelUrl: string;
  readonly targetModel: string | undefined;
  readonly state: EntryState;
  readonly entryModel: string | undefined;
  readonly loadedAt: string | undefined;
  /** Its share of the memory budget now; undefined while paged out. */
  readonly reservedBytes?: number | undefined;
  /** What its load was measured to add to the process; undefined while paged out or not measurable. */
  readonly measuredBytes?: number | undefined;
}

export interface ManagedRecord {
  readonly modelName: string;
  /** The url as SageMaker sent it (made absolute): GET /models' modelUrl. */
  readonly url: string;
  /** Its real path (registry/managed-url.ts): what is loaded, and paged back in from. */
  readonly dir: string;
  readonly targetHeader: string | undefined;
  readonly label: string;
  readonly loadedAt: Date;
  readonly entryModel: string;
  /** Versions of the entry model at the first load (for readiness while paged out). */
  readonly versions: readonly number[];
}

/**
 * The longest `model_name` (and X-Amzn-SageMaker-Target-Model value) taken:
 * SageMaker's own TargetModel limit. A name this long still fits in a request
 * line: 1024 UTF-16 units are at most 3 KiB of UTF-8, 9 KiB percent-encoded
 * in `/models/{name}/invoke`, well inside Node's 16 KiB header limit together
 * with a 1024-character target header. A longer name could be loaded but
 * never invoked, described or deleted.
 */
export const MAX_MODEL_NAME_LENGTH = 1024;

/** A short, quoted prefix of what a client sent, for a message (never the whole of a huge value). */
function shown(value: string): string {
  return JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}…` : value);
}

/**
 * Why `name` cannot be a SageMaker `model_name`, or undefined when it can:
 * 1–1024 characters, none of them control/format/unassigned code points
 * (they cannot travel in a URL unaltered, and make log lines lie), not
 * starting with whitespace (SageMaker's TargetModel pattern `\A\S`), and not
 * `.` or `..` (a URL's dot segments: clients remove them, so
 * `/models/../invoke` could never reach the model).
 */
export function modelNameProblem(name: string): string | undefined {
  if (name.length === 0) return 'model_name is empty';
  if (name.length > MAX_MODEL_NAME_LENGTH) return `model_name is ${name.length} characters long, over the limit of ${MAX_MODEL_NAME_LENGTH}`;
  if (NON_PRINTABLE.test(name)) return `model_name ${shown(name)} contains a control or non-printable character`;
  if (/^\s/u.test(name)) return `model_name ${shown(name)} starts with whitespace`;
  if (name === '.' || name === '..') return `model_name ${shown(name)} is a URL dot segment and could never be addressed in /models/{name}`;
  return undefined;
}

/** `name` when it can be a model_name; else INVALID_REQUEST naming the problem (and the limit). */
export function checkModelName(name: string): string {
  const problem = modelNameProblem(name);
  if (problem !== undefined) throw new ServingError('INVALID_REQUEST', problem);
  return name;
}

/**
 * The X-Amzn-SageMaker-Target-Model header recorded at load: SageMaker's
 * TargetModel rule (1–1024 printable characters, the first not whitespace).
 * It is logged with every request and compared on invoke and unload.
 */
export function checkTargetHeader(modelName: string, header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const problem =
    header.length > MAX_MODEL_NAME_LENGTH
      ? `is ${header.length} characters long, over the limit of ${MAX_MODEL_NAME_LENGTH}`
      : NON_PRINTABLE.test(header)
        ? 'contains a control or non-printable character'
        : /^\s/u.test(header)
          ? 'starts with whitespace'
          : undefined;
  if (problem !== undefined) {
    throw new ServingError('INVALID_REQUEST', `model '${modelName}': X-Amzn-SageMaker-Target-Model ${problem}`, { model: modelName });
  }
  return header;
}

/** One page of GET /models: the records after the cursor, and the work it took (registry/sorted-names.ts). */
export interface RecordPage {
  readonly records: readonly ManagedRecord[];
  readonly more: boolean;
  readonly visited: number;
}

export class ManagedRecords {
  private readonly records = new Map<string, ManagedRecord>();
  /** Their names in order, kept as they come and go: a page costs the page (GET /models), not the list. */
  private readonly order = new SortedNames();

  has(modelName: string): boolean {
    return this.records.has(modelName);
  }

  add(record: ManagedRecord): void {
    this.records.set(record.modelName, record);
    this.order.add(record.modelName);
  }

  delete(modelName: string): void {
    this.records.delete(modelName);
    this.order.delete(modelName);
  }

  clear(): void {
    this.records.clear();
    this.order.clear();
  }

  /** The record, checked against the request's target header; MODEL_NOT_FOUND or TARGET_MISMATCH otherwise. */
  require(modelName: string, targetHeader?: string): ManagedRecord {
    const record = this.records.get(modelName);
    if (!record) throw new ServingError('MODEL_NOT_FOUND', `model '${modelName}' is not loaded`, { model: modelName });
    if (targetHeader !== undefined && record.targetHeader !== undefined && targetHeader !== record.targetHeader) {
      throw new ServingError(
        'TARGET_MISMATCH',
        `X-Amzn-SageMaker-Target-Model header '${targetHeader}' does not match the model requested in the URL ('${record.modelName}' was loaded as '${record.targetHeader}')`,
        { model: record.modelName },
      );
    }
    return record;
  }

  versions(modelName: string): readonly number[] | undefined {
    return this.records.get(modelName)?.versions;
  }

  /** Up to `limit` records after the name `after` (the previous page's last), by name. */
  page(after: string | undefined, limit: number): RecordPage {
    const { names, more, visited } = this.order.page(after, limit);
    return { records: names.map((n) => this.records.get(n)!), more, visited };
  }

  /** Every record as SageMaker lists them, by name (no sort: the order is kept). */
  *all(): IterableIterator<ManagedRecord> {
    for (const name of this.order) yield this.records.get(name)!;
  }
}

export function info(r: ManagedRecord): ManagedModelInfo {
  return {
    modelName: r.modelName,
    modelUrl: r.url,
    targetModel: r.targetHeader,
    state: 'READY',
    entryModel: r.entryModel,
    loadedAt: r.loadedAt.toISOString(),
  };
}
