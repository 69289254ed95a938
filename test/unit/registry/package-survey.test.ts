/**
 * The start-up model table of a local source (registry/package-survey.ts):
 * the session-free checks name each broken model's problem the way its load
 * would, an archive is listed without being opened, and the log stays bounded
 * for a source of thousands (a line per model up to FULL_TABLE_MAX, then the
 * broken ones only, then the counts).
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { addSub, writeModelDir, writeRepository } from '../../../examples/models/zoo.js';
import { createLogger } from '../../../src/observability/logger.js';
import { BROKEN_LINES_MAX, FULL_TABLE_MAX, logSurvey, ROOT_PACKAGE, surveyLocalSource, type SurveyRow } from '../../../src/registry/package-survey.js';
import { listModelTree } from '../../../src/store/local-source.js';
import { tempDir } from '../../support/temp-dir.js';

function capture(): { logger: ReturnType<typeof createLogger>; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  return { logger: createLogger('info', { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) }), lines };
}

describe('package survey', () => {
  it('each target of a source: ready to load, broken with the reason its load would give, archives listed as they are', async (t) => {
    const root = await tempDir(t);
    await writeModelDir(root, 'good', addSub());
    await writeModelDir(root, 'bad_field', { onnx: addSub().onnx, config: `${addSub().config!}max_batch_sise: 4\n` });
    await writeModelDir(root, 'no_file', { config: addSub().config! });
    await writeModelDir(root, 'python', { onnx: addSub().onnx, config: 'backend: "python"\n' });
    await writeRepository(path.join(root, 'two'), { a: addSub(), b: addSub() });
    await writeFile(path.join(root, 'packed.tar.gz'), 'not opened by the survey');
    const rows = await surveyLocalSource(root, await listModelTree(root));
    const by = new Map(rows.map((r) => [r.model, r]));
    assert.deepEqual([...by.keys()], ['bad_field', 'good', 'no_file', 'packed.tar.gz', 'python', 'two']);
    assert.equal(by.get('good')!.state, 'ready to load');
    assert.equal(by.get('packed.tar.gz')!.state, 'archive (checked when loaded)');
    assert.match(by.get('bad_field')!.reason!, /bad_field\/config\.pbtxt:\d+:\d+: .*max_batch_sise/);
    assert.match(by.get('no_file')!.reason!, /version 1 has no model\.onnx/);
    assert.match(by.get('python')!.reason!, /backend 'python' is not supported/);
    assert.match(by.get('two')!.reason!, /cannot choose the entry model/);
    for (const r of rows) assert.ok(!(r.reason ?? '').includes(root), 'no host path');
  });

  it('a source root that is one model: checked as the default model it is', async (t) => {
    const root = await tempDir(t);
    await writeModelDir(root, 'm', addSub());
    const one = path.join(root, 'm');
    assert.deepEqual(await surveyLocalSource(one, await listModelTree(one)), [{ model: ROOT_PACKAGE, state: 'ready to load' }]);
    await writeModelDir(root, 'n', { config: addSub().config! });
    const broken = await surveyLocalSource(path.join(root, 'n'), []);
    assert.equal(broken[0]!.state, 'broken');
    assert.match(broken[0]!.reason!, /has no model\.onnx/);
  });

  it('a source of 2,000: the broken ones named, the rest counted, a bounded log', () => {
    const rows: SurveyRow[] = Array.from({ length: 2000 }, (_, i) =>
      i % 500 === 7 ? { model: `m${i}`, state: 'broken', reason: `model 'm${i}': bad` } : { model: `m${i}`, state: 'ready to load' },
    );
    const { logger, lines } = capture();
    logSurvey(rows, logger);
    assert.deepEqual(
      lines.filter((l) => l['state'] === 'broken').map((l) => l['model']),
      ['m7', 'm507', 'm1007', 'm1507'],
    );
    assert.equal(lines.length, 5, 'four broken lines and the summary');
    const summary = lines.at(-1)!;
    assert.deepEqual([summary['models'], summary['readyToLoad'], summary['broken']], [2000, 1996, 4]);

    const manyBroken: SurveyRow[] = Array.from({ length: 1000 }, (_, i) => ({ model: `b${i}`, state: 'broken', reason: 'bad' }));
    const big = capture();
    logSurvey(manyBroken, big.logger);
    assert.equal(big.lines.length, BROKEN_LINES_MAX + 1);
    assert.equal(big.lines.at(-1)!['brokenNotListed'], 1000 - BROKEN_LINES_MAX);

    const small = capture();
    logSurvey(rows.slice(0, FULL_TABLE_MAX), small.logger);
    assert.equal(small.lines.length, FULL_TABLE_MAX + 1, 'a small source: a line per model');
  });
});
