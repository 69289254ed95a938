/**
 * @module ensemble/ensemble-spec
 * A lenient EnsembleSpec read straight from an ensemble's parsed config.pbtxt
 * (the raw JSON form), used only when config validation refused the config:
 * the loader then still checks the steps against their models, so one load
 * error lists the config's own problems and the cross-model ones (datatypes,
 * shapes, max_batch_size, unknown models) together. Anything unreadable is
 * skipped here; config validation has already named it.
 */
import type { EnsembleStepConfig, TensorConfig } from '../config/model-config-types.js';
import { dataTypeFromConfigName } from '../protocol/tensor.js';
import type { EnsembleSpec } from './execution-plan.js';

type Json = Record<string, unknown>;

function list(v: unknown): Json[] {
  return Array.isArray(v) ? (v.filter((x) => x !== null && typeof x === 'object') as Json[]) : [];
}

function stringMap(v: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (v === null || typeof v !== 'object') return out;
  for (const [k, val] of Object.entries(v as Json)) if (typeof val === 'string') out[k] = val;
  return out;
}

function tensors(v: unknown): TensorConfig[] {
  const out: TensorConfig[] = [];
  for (const t of list(v)) {
    const dataType = typeof t['data_type'] === 'string' ? dataTypeFromConfigName(t['data_type']) : undefined;
    const dims = Array.isArray(t['dims']) ? t['dims'].map(Number) : [];
    if (typeof t['name'] !== 'string' || t['name'] === '' || !dataType || dims.some((d) => !Number.isInteger(d))) continue;
    out.push({
      name: t['name'],
      dataType,
      dims,
      reshape: undefined,
      format: 'FORMAT_NONE',
      optional: t['optional'] === true,
      allowRaggedBatch: false,
      labelFilename: undefined,
    });
  }
  return out;
}

export function ensembleSpecFromJson(raw: Readonly<Json>, directoryName: string): EnsembleSpec {
  const scheduling = raw['ensemble_scheduling'] as Json | undefined;
  const steps: EnsembleStepConfig[] = list(scheduling?.['step'])
    .filter((s) => typeof s['model_name'] === 'string' && s['model_name'] !== '')
    .map((s) => ({
      modelName: s['model_name'] as string,
      modelVersion: Number.isInteger(Number(s['model_version'])) ? Number(s['model_version']) : -1,
      inputMap: stringMap(s['input_map']),
      outputMap: stringMap(s['output_map']),
    }));
  const mbs = Number(raw['max_batch_size']);
  return {
    name: typeof raw['name'] === 'string' && raw['name'] !== '' ? raw['name'] : directoryName,
    maxBatchSize: Number.isInteger(mbs) && mbs > 0 ? mbs : 0,
    input: tensors(raw['input']),
    output: tensors(raw['output']),
    ensembleSteps: steps,
  };
}
