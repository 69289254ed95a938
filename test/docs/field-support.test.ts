/**
 * docs/model-packages.md's config.pbtxt field table is the server's own
 * (config/field-support.ts): the rows between the markers must equal what
 * fieldSupportMarkdown() prints, so the page and the server cannot disagree.
 * To update the page after changing the table: `node dist/test/docs/field-support.test.js --write`.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { fieldSupportMarkdown } from '../../src/config/field-support.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const page = path.join(repoRoot, 'docs', 'model-packages.md');
const START = '<!-- field-support-table:start -->\n';
const END = '\n<!-- field-support-table:end -->';

function withTable(text: string, table: string): string {
  const a = text.indexOf(START);
  const b = text.indexOf(END);
  assert.ok(a >= 0 && b > a, 'docs/model-packages.md has the field-support-table markers');
  return text.slice(0, a + START.length) + table + text.slice(b);
}

if (process.argv.includes('--write')) writeFileSync(page, withTable(readFileSync(page, 'utf8'), fieldSupportMarkdown()));

describe('docs/model-packages.md field support table', () => {
  it('is exactly the server table (src/config/field-support.ts)', () => {
    const text = readFileSync(page, 'utf8');
    assert.equal(text, withTable(text, fieldSupportMarkdown()), 'run: node dist/test/docs/field-support.test.js --write');
  });
});
