/**
 * @module registry/managed-records
 * What SageMaker loaded with POST /models: its list (GET /models), each
 * model's directory, target header and versions. A record outlives page-outs
 * of its sessions (the LRU may release them; the next invoke loads them
 * again from the directory), and goes only with DELETE /models/{name}. The
 * sessions themselves are entries of the registry (registry/model-registry.ts).
 */
import path from 'node:path';
import { ServingError } from '../errors.js';
import type { EntryState } from './model-registry.js';

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
  readonly dir: string;
  readonly targetHeader: string | undefined;
  readonly label: string;
  readonly loadedAt: Date;
  readonly entryModel: string;
  /** Versions of the entry model at the first load (for readiness while paged out). */
  readonly versions: readonly number[];
}

/** Never model directories, whatever SageMaker sends. */
const FORBIDDEN_URL_ROOTS = ['/dev', '/proc', '/sys'];

/** The directory a POST /models `url` names, or INVALID_REQUEST naming the model. */
export function managedModelDir(modelName: string, url: string): string {
  const dir = path.resolve(url);
  if (!path.isAbsolute(url) || url.split(/[\\/]/).includes('..') || FORBIDDEN_URL_ROOTS.some((r) => dir === r || dir.startsWith(`${r}/`))) {
    throw new ServingError('INVALID_REQUEST', `model '${modelName}': url must be an absolute path to the extracted model directory, got '${url}'`, {
      model: modelName,
    });
  }
  return dir;
}

export class ManagedRecords {
  private readonly records = new Map<string, ManagedRecord>();

  has(modelName: string): boolean {
    return this.records.has(modelName);
  }

  add(record: ManagedRecord): void {
    this.records.set(record.modelName, record);
  }

  delete(modelName: string): void {
    this.records.delete(modelName);
  }

  clear(): void {
    this.records.clear();
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

  /** Every record as SageMaker lists them, by name. */
  list(): ManagedModelInfo[] {
    return [...this.records.values()].map(info).sort((a, b) => (a.modelName < b.modelName ? -1 : a.modelName > b.modelName ? 1 : 0));
  }
}

export function info(r: ManagedRecord): ManagedModelInfo {
  return {
    modelName: r.modelName,
    modelUrl: r.dir,
    targetModel: r.targetHeader,
    state: 'READY',
    entryModel: r.entryModel,
    loadedAt: r.loadedAt.toISOString(),
  };
}
