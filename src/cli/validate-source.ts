/**
 * @module cli/validate-source
 * `onnx-mme validate <source dir>`: a directory the server would serve as
 * MME_MODEL_SOURCE (several model directories and archives, each a target)
 * is validated target by target, each the way `validate <package>` checks one
 * package (cli/validate.ts), and summed up in one table: name, ok or the
 * first error, inputs and outputs of its entry model, and the memory the
 * server reserves when it loads it. The targets are the ones the server's
 * local source lists (store/local-source.ts listModelTree). An s3:// prefix
 * is read by the server's own S3 source (store/s3-source.ts: its listing,
 * retries, download and safe extraction, into a temporary cache removed
 * afterwards), so each archive is checked as the server would fetch it.
 */
import { mkdtemp, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ServerConfig } from '../config/server-config.js';
import { S3ModelSource } from '../store/s3-source.js';
import { scanRepository, chooseEntryModel } from '../registry/repository-layout.js';
import { listModelTree } from '../store/local-source.js';
import { formatBytes } from './cli-support.js';
import type { ValidationReport } from './validate.js';

export interface SourceValidation {
  readonly source: string;
  readonly ok: boolean;
  readonly targets: readonly (ValidationReport & { readonly target: string })[];
}

/**
 * Whether `dir` is a model source rather than one package: it is not one
 * model, and either no entry model can be chosen among its models (several
 * models, no ensemble: the server serves each as its own target) or it holds
 * archives or nested targets beside them.
 */
export async function isSourceDirectory(dir: string, configMaxBytes: number): Promise<boolean> {
  if (
    !(await stat(dir).then(
      (s) => s.isDirectory(),
      () => false,
    ))
  )
    return false;
  const label = path.basename(path.resolve(dir));
  let layout;
  try {
    layout = await scanRepository(dir, label, { configMaxBytes });
  } catch {
    // No model at its top (e.g. only archives), or a config too large to read: a source if it lists targets.
    return (await listModelTree(dir).catch(() => [])).length > 0;
  }
  if (layout.singleModel) return false;
  try {
    chooseEntryModel(layout);
  } catch {
    return true;
  }
  const names = new Set(layout.models.map((m) => m.name));
  return (await listModelTree(dir)).some((t) => !names.has(t.target));
}

/** Validate every target of the source `dir` (one at a time: each loads real sessions). */
export async function validateSource(dir: string, validate: (input: string, target: string) => Promise<ValidationReport>): Promise<SourceValidation> {
  const targets: (ValidationReport & { target: string })[] = [];
  for (const t of await listModelTree(dir)) targets.push({ ...(await validate(path.join(dir, t.target), t.target)), target: t.target });
  return { source: dir, ok: targets.every((t) => t.ok), targets };
}

/** Validate every archive under an s3:// prefix, one at a time, each downloaded and extracted by the server's S3 source. */
export async function validateS3Prefix(
  uri: string,
  settings: Pick<ServerConfig, 'awsRegion' | 's3Endpoint' | 'archiveMaxBytes' | 'archiveMaxEntries' | 'archiveMaxRatio'>,
  validate: (dir: string, target: string) => Promise<ValidationReport>,
): Promise<SourceValidation> {
  const cacheDir = await mkdtemp(path.join(os.tmpdir(), 'onnx-mme-validate-s3-'));
  const source = new S3ModelSource({
    uri,
    cacheDir,
    limits: { maxBytes: settings.archiveMaxBytes, maxEntries: settings.archiveMaxEntries, maxRatio: settings.archiveMaxRatio },
    ...(settings.awsRegion === undefined ? {} : { region: settings.awsRegion }),
    ...(settings.s3Endpoint === undefined ? {} : { endpoint: settings.s3Endpoint }),
  });
  try {
    const targets: (ValidationReport & { target: string })[] = [];
    for (const t of await source.list()) {
      let report: ValidationReport;
      try {
        const local = await source.localize(t.target);
        try {
          report = await validate(local.dir, t.target);
        } finally {
          local.release();
        }
      } catch (err) {
        // A download or extraction the server would refuse (a hostile archive, a denied object): that target's problem.
        const code = (err as { code?: string }).code;
        report = failedReport(t.target, typeof code === 'string' ? code : 'INTERNAL', (err as Error).message);
      }
      targets.push({ ...report, target: t.target });
    }
    return { source: uri, ok: targets.every((t) => t.ok), targets };
  } finally {
    await rm(cacheDir, { recursive: true, force: true });
  }
}

function failedReport(target: string, code: string, message: string): ValidationReport {
  return {
    input: target,
    label: target,
    kind: 'archive',
    archiveBytes: undefined,
    root: undefined,
    singleModel: false,
    entry: undefined,
    models: [],
    problems: [{ model: undefined, code: code as ValidationReport['problems'][number]['code'], message }],
    notes: [],
    fileBytes: 0,
    predictedBytes: 0,
    peakResidentBytes: 0,
    ok: false,
  };
}

function tensorList(list: readonly { name: string; datatype: string; shape: readonly number[] }[]): string {
  return list.map((t) => `${t.name} ${t.datatype}[${t.shape.join(',')}]`).join(', ') || '-';
}

/** The table, then each broken target's problems in full. */
export function formatSourceReport(r: SourceValidation): string {
  const header = ['MODEL', 'RESULT', 'INPUTS', 'OUTPUTS', 'MEMORY'];
  const rows = r.targets.map((t) => {
    const entry = t.models.find((m) => m.name === t.entry);
    return [
      t.target,
      t.ok ? 'ok' : `error (${t.problems.length} problem${t.problems.length === 1 ? '' : 's'})`,
      entry ? tensorList(entry.inputs) : '-',
      entry ? tensorList(entry.outputs) : '-',
      t.models.length > 0 ? formatBytes(t.predictedBytes) : '-',
    ];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((c) => c[i]!.length)));
  const line = (c: readonly string[]): string =>
    c
      .map((v, i) => v.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  const lines = [`${r.source} (model source, ${r.targets.length} model${r.targets.length === 1 ? '' : 's'})`, line(header), ...rows.map(line)];
  const broken = r.targets.filter((t) => !t.ok);
  for (const t of broken) {
    lines.push(`${t.target}:`);
    for (const p of t.problems) lines.push(`  error [${p.code}]${p.model === undefined ? '' : ` ${p.model}`}: ${p.message}`);
  }
  lines.push(
    r.targets.length === 0
      ? 'INVALID: no model found in the source'
      : broken.length === 0
        ? `OK: the server will load ${r.targets.length === 1 ? 'its one model' : `each of the ${r.targets.length} models`}`
        : `INVALID: ${broken.length} of ${r.targets.length} models would be refused when loaded`,
  );
  return lines.join('\n');
}
