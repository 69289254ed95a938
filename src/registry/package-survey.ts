/**
 * @module registry/package-survey
 * The start-up model table of a local source, as Triton prints its own: every
 * target with its state, "ready to load" or "broken" with the reason, found
 * without creating a session (so it costs file reads, not onnxruntime loads).
 * A directory gets the load's own checks that need no session (layout scan,
 * entry-model choice, config.pbtxt parsing, platform, version files: the
 * package loader's preflightModel); an archive is listed as it is, since
 * looking inside means extracting it, which its first load does. The log is
 * bounded for a source of thousands: a line per model up to FULL_TABLE_MAX,
 * then only the broken ones (up to BROKEN_LINES_MAX), then one summary line
 * with the counts.
 */
import path from 'node:path';
import { inModel, withModel } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { SourceEntry } from '../store/model-source.js';
import { archiveStem } from '../store/target-path.js';
import { modelLabelOf, preflightModel, type PackageLoadRequest } from './package-loader.js';
import { chooseEntryModel, scanRepository, type ScanOptions } from './repository-layout.js';

export type SurveyState = 'ready to load' | 'broken' | 'archive (checked when loaded)';

export interface SurveyRow {
  readonly model: string;
  readonly state: SurveyState;
  /** Why it is broken: the error its load would give (names the model and the problem, never a host path). */
  readonly reason?: string;
}

/** A line per model up to this many models; beyond, the broken ones only. */
export const FULL_TABLE_MAX = 50;
/** Broken models named one line each at most; the summary counts the rest. */
export const BROKEN_LINES_MAX = 200;
/** Model directories checked at once (each a few file reads). */
const SURVEY_CONCURRENCY = 8;

/** The reason the package `pkg` would fail to load (without sessions), or undefined when it looks loadable. */
export async function preflightPackage(
  pkg: Pick<PackageLoadRequest, 'dir' | 'label' | 'fallbackName'>,
  options: ScanOptions = {},
): Promise<string | undefined> {
  try {
    const layout = await scanRepository(pkg.dir, pkg.fallbackName, options);
    chooseEntryModel(layout);
    for (const md of layout.models) await withModel(modelLabelOf(pkg, layout, md), () => preflightModel(layout, md));
    return undefined;
  } catch (err) {
    return err instanceof Error ? inModel(err, pkg.label).message : String(err);
  }
}

/** The name a source root that is itself one package (no targets inside) gets in the table: what answers requests without a target. */
export const ROOT_PACKAGE = '(the source root: the default model)';

/**
 * Every target of a local source under `root`, surveyed (`entries` from
 * ModelSource.list(), in its order); a root with no targets in it is checked
 * as the one package it then is (SageMaker's single-model /opt/ml/model).
 */
export async function surveyLocalSource(root: string, entries: readonly SourceEntry[], options: ScanOptions = {}): Promise<SurveyRow[]> {
  if (entries.length === 0) {
    const reason = await preflightPackage({ dir: root, label: 'default', fallbackName: 'model' }, options);
    return [reason === undefined ? { model: ROOT_PACKAGE, state: 'ready to load' } : { model: ROOT_PACKAGE, state: 'broken', reason }];
  }
  const rows: SurveyRow[] = new Array<SurveyRow>(entries.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < entries.length; i = next++) {
      const e = entries[i]!;
      // A directory target is listed without a size (store/local-source.ts); an archive with its file's.
      if (e.sizeBytes !== undefined) {
        rows[i] = { model: e.target, state: 'archive (checked when loaded)' };
        continue;
      }
      const reason = await preflightPackage(
        { dir: path.join(root, e.target), label: e.target, fallbackName: archiveStem(path.posix.basename(e.target)) },
        options,
      );
      rows[i] = reason === undefined ? { model: e.target, state: 'ready to load' } : { model: e.target, state: 'broken', reason };
    }
  };
  await Promise.all(Array.from({ length: Math.min(SURVEY_CONCURRENCY, entries.length) }, worker));
  return rows;
}

/** The table in the log: bounded (see the module comment), broken models always named up to BROKEN_LINES_MAX. */
export function logSurvey(rows: readonly SurveyRow[], logger: Logger): void {
  const full = rows.length <= FULL_TABLE_MAX;
  let brokenLines = 0;
  for (const r of rows) {
    if (r.state === 'broken') {
      if (brokenLines++ < BROKEN_LINES_MAX) logger.warn({ model: r.model, state: r.state, reason: r.reason }, 'model source: model is broken');
    } else if (full) {
      logger.info({ model: r.model, state: r.state }, 'model source: model');
    }
  }
  const count = (s: SurveyState): number => rows.filter((r) => r.state === s).length;
  const broken = count('broken');
  logger.info(
    {
      models: rows.length,
      readyToLoad: count('ready to load'),
      archives: count('archive (checked when loaded)'),
      broken,
      ...(broken > BROKEN_LINES_MAX ? { brokenNotListed: broken - BROKEN_LINES_MAX } : {}),
      ...(full ? {} : { listed: 'broken models only: more than ' + String(FULL_TABLE_MAX) + ' models' }),
    },
    broken === 0 ? 'model source surveyed: every model directory looks loadable' : `model source surveyed: ${broken} broken`,
  );
}
