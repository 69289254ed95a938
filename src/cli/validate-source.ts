/**
 * @module cli/validate-source
 * `onnx-mme validate <source dir>`: a directory the server would serve as
 * MME_MODEL_SOURCE (several model directories and archives, each a target)
 * is validated target by target, each the way `validate <package>` checks one
 * package (cli/validate.ts), and summed up in one table: name, ok or the
 * first error, inputs and outputs of its entry model, and the memory the
 * server reserves when it loads it. The targets are the ones the server's
 * local source lists (store/local-source.ts listModelTree).
 */
import { stat } from 'node:fs/promises';
import path from 'node:path';
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
    layout = await scanRepository(dir, label, label, { configMaxBytes });
  } catch {
    // No model at its top (e.g. only archives), or a config too large to read: a source if it lists targets.
    return (await listModelTree(dir).catch(() => [])).length > 0;
  }
  if (layout.singleModel) return false;
  try {
    chooseEntryModel(layout, label);
  } catch {
    return true;
  }
  const names = new Set(layout.models.map((m) => m.name));
  return (await listModelTree(dir)).some((t) => !names.has(t.target));
}

/** Validate every target of the source `dir` (one at a time: each loads real sessions). */
export async function validateSource(dir: string, validate: (input: string, label: string) => Promise<ValidationReport>): Promise<SourceValidation> {
  const targets: (ValidationReport & { target: string })[] = [];
  for (const t of await listModelTree(dir)) targets.push({ ...(await validate(path.join(dir, t.target), t.target)), target: t.target });
  return { source: dir, ok: targets.every((t) => t.ok), targets };
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
        ? `OK: the server will load each of the ${r.targets.length} models`
        : `INVALID: ${broken.length} of ${r.targets.length} models would be refused when loaded`,
  );
  return lines.join('\n');
}
